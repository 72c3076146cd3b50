"""coco_map gives pycocotools' COCOeval numbers (stats 0-5 and 8) on random scenes with crowd
regions, every object size, jittered and duplicate detections, false positives, misses, score
ties and IoUs exactly at a threshold; perfect predictions score 1 and none score 0."""

from __future__ import annotations

import contextlib
import io
import random

import numpy as np
import pytest

from transformer.evaluation.detection import coco_iou, coco_map

pytest.importorskip("pycocotools")
from pycocotools.coco import COCO  # noqa: E402
from pycocotools.cocoeval import COCOeval  # noqa: E402

KEYS = {"map": 0, "ap50": 1, "ap75": 2, "map_small": 3, "map_medium": 4, "map_large": 5}
KEYS["mar_100"] = 8
N_CATEGORIES = 5  # label 4 is only ever predicted; label 3 is mostly crowd


def cocoeval_stats(ground_truth, predictions):
    """COCOeval.stats for the same data, built in memory (gt area: "area" if given, else w * h,
    as coco_map's)."""
    images = [{"id": i + 1, "width": 640, "height": 480} for i in range(len(ground_truth))]
    annotations = []
    for i, gt in enumerate(ground_truth):
        offset = len(annotations)
        for box, label, crowd in zip(gt["boxes"], gt["labels"], gt["iscrowd"], strict=True):
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": int(label) + 1,
                    "bbox": [float(x) for x in box],
                    "area": float(gt["area"][len(annotations) - offset])
                    if "area" in gt
                    else float(box[2] * box[3]),
                    "iscrowd": int(crowd),
                }
            )
    results = [
        {
            "image_id": i + 1,
            "category_id": int(label) + 1,
            "bbox": [float(x) for x in box],
            "score": float(score),
        }
        for i, p in enumerate(predictions)
        for box, label, score in zip(p["boxes"], p["labels"], p["scores"], strict=True)
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = {
            "images": images,
            "annotations": annotations,
            "categories": [{"id": c + 1, "name": str(c)} for c in range(N_CATEGORIES)],
        }
        coco_gt.createIndex()
        evaluation = COCOeval(coco_gt, coco_gt.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def random_box(rng, size):
    """x, y, w, h in multiples of 1/4 pixel (exact in binary, so that IoUs of 0.5 are exact)."""
    w, h = size * rng.uniform(0.5, 2), size * rng.uniform(0.5, 2)
    box = [rng.uniform(0, 640 - w), rng.uniform(0, 480 - h), w, h]
    return [max(round(4 * v) / 4, 0.25) for v in box]


def predict(pred, rng, box, label):
    """Adds a detection, its score often on a coarse grid (ties within and across images)."""
    pred["boxes"].append(box)
    pred["labels"].append(label)
    pred["scores"].append(rng.choice([0.2, 0.5, 0.9]) if rng.random() < 0.4 else rng.random())


def random_scene(seed, n_images=8):
    """Ground truth of every size (areas around 32² and 96² included) with crowd regions, and
    predictions: jittered true boxes (some with the wrong label), duplicates, boxes at IoU
    exactly 0.5 or 0.75, false positives, misses, score ties, an image with more than 100
    detections of a category, and an image with none."""
    rng = random.Random(seed)
    ground_truth, predictions = [], []
    for image in range(n_images):
        boxes, labels, crowd = [], [], []
        for _ in range(rng.randint(0, 9)):
            boxes.append(random_box(rng, rng.choice([8, 20, 32, 50, 96, 150])))
            labels.append(rng.choice([0, 1, 2, 2, 3]))
            crowd.append(labels[-1] == 3 and rng.random() < 0.7 or rng.random() < 0.08)
        pred = {"boxes": [], "labels": [], "scores": []}
        for box, label in zip(boxes, labels, strict=True):
            if rng.random() < 0.2:
                continue  # missed
            noise = rng.choice([0.02, 0.1, 0.3])
            x, y, w, h = box
            jitter = [x + noise * w * rng.gauss(0, 1), y + noise * h * rng.gauss(0, 1)]
            jitter += [w * np.exp(noise * rng.gauss(0, 1)), h * np.exp(noise * rng.gauss(0, 1))]
            predict(pred, rng, jitter, label if rng.random() < 0.9 else rng.randrange(N_CATEGORIES))
            if rng.random() < 0.2:
                predict(pred, rng, box, label)  # a duplicate, exact
            if rng.random() < 0.3:
                cut = [x, y, rng.choice([0.5, 0.75]) * w, h]  # IoU exactly 0.5 or 0.75
                predict(pred, rng, cut, label)
        for _ in range(rng.randint(0, 4)):
            box = random_box(rng, rng.choice([10, 40, 120]))
            predict(pred, rng, box, rng.randrange(N_CATEGORIES))
        if image == 0 and seed % 3 == 0:
            for _ in range(110):  # past maxDets
                predict(pred, rng, random_box(rng, 30), 1)
        if image == 1:
            pred = {"boxes": [], "labels": [], "scores": []}  # nothing predicted
        ground_truth.append(
            {"boxes": np.array(boxes).reshape(-1, 4), "labels": labels, "iscrowd": crowd}
        )
        pred["boxes"] = np.array(pred["boxes"]).reshape(-1, 4)
        predictions.append(pred)
    return ground_truth, predictions


@pytest.mark.parametrize("seed", range(10))
def test_equals_cocoeval_on_random_scenes(seed):
    ground_truth, predictions = random_scene(seed)
    ours = coco_map(ground_truth, predictions)
    stats = cocoeval_stats(ground_truth, predictions)
    assert set(ours) == set(KEYS)
    for name, index in KEYS.items():
        assert ours[name] == pytest.approx(stats[index], abs=1e-9), name
    assert all(0 < ours[name] < 1 for name in ("map", "ap50", "ap75", "mar_100"))


def test_given_ground_truth_areas_are_used():
    """COCO's annotations carry the segmentation's area: given, it decides the size ranges."""
    ground_truth, predictions = random_scene(11)
    rng = random.Random(11)
    for gt in ground_truth:
        gt["area"] = [w * h * rng.uniform(0.3, 1) for _, _, w, h in gt["boxes"]]
    ours = coco_map(ground_truth, predictions)
    stats = cocoeval_stats(ground_truth, predictions)
    assert all(ours[name] == pytest.approx(stats[i], abs=1e-9) for name, i in KEYS.items())
    for gt in ground_truth:
        del gt["area"]
    assert coco_map(ground_truth, predictions)["map_small"] != ours["map_small"]


def test_crowd_iou_and_a_detection_on_a_crowd_region_is_ignored():
    gt = {"boxes": [[0, 0, 10, 10], [100, 100, 50, 50]], "labels": [0, 0], "iscrowd": [0, 1]}
    inside = [110, 110, 10, 10]  # wholly inside the crowd region: crowd IoU 1
    pred = {"boxes": [[0, 0, 10, 10], inside], "labels": [0, 0], "scores": [0.5, 0.9]}
    ious = coco_iou(
        np.array(pred["boxes"], float), np.array(gt["boxes"], float), np.array([0, 1], bool)
    )
    assert ious.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    ours = coco_map([gt], [pred])
    assert ours["map"] == pytest.approx(1.0)  # not a false positive ranked first
    stats = cocoeval_stats([gt], [pred])
    assert all(ours[name] == pytest.approx(stats[index], abs=1e-9) for name, index in KEYS.items())


def test_ties_go_to_the_last_box_and_regular_boxes_win_over_ignored_ones():
    """COCOeval's matching rules that random scenes seldom reach, by construction."""
    # the first detection is as close (IoU 0.82) to both boxes: it takes the last one, so the
    # second detection (on that box) is left with IoU 0.67 to the other; recall 1 at t <= 0.65,
    # 0.5 above: AR = (4 * 1 + 6 * 0.5) / 10 (taking the first box would give 0.85)
    gt = {"boxes": [[0, 0, 10, 10], [2, 0, 10, 10]], "labels": [0, 0], "iscrowd": [0, 0]}
    pred = {"boxes": [[1, 0, 10, 10], [2, 0, 10, 10]], "labels": [0, 0], "scores": [0.9, 0.8]}
    cases = [(gt, pred, {"mar_100": 0.7, "ap50": 1.0})]
    # a detection on a box (IoU 0.95) and on a crowd region around it (crowd IoU 1): the box
    # takes it, though the region's IoU is higher
    gt = {"boxes": [[0, 0, 10, 10], [0, 0, 10, 12]], "labels": [0, 0], "iscrowd": [0, 1]}
    pred = {"boxes": [[0, 0, 10, 10.5]], "labels": [0], "scores": [0.9]}
    cases.append((gt, pred, {"map": 1.0, "mar_100": 1.0}))
    for gt, pred, known in cases:
        ours = coco_map([gt], [pred])
        assert all(ours[name] == pytest.approx(value) for name, value in known.items()), ours
        stats = cocoeval_stats([gt], [pred])
        assert all(ours[name] == pytest.approx(stats[i], abs=1e-9) for name, i in KEYS.items())


def test_perfect_predictions_score_one_and_none_score_zero():
    ground_truth, _ = random_scene(3)
    perfect = []
    for gt in ground_truth:
        real = ~np.array(gt["iscrowd"], bool)
        perfect.append(
            {
                "boxes": gt["boxes"][real],
                "labels": np.array(gt["labels"])[real],
                "scores": np.ones(int(real.sum())),
            }
        )
    ours = coco_map(ground_truth, perfect)
    for name in KEYS:
        assert ours[name] == pytest.approx(1.0, abs=1e-12), name
    nothing = [{"boxes": np.zeros((0, 4)), "labels": [], "scores": []} for _ in ground_truth]
    ours = coco_map(ground_truth, nothing)
    assert ours == dict.fromkeys(KEYS, 0.0)
    no_small = [{"boxes": [[0, 0, 100, 100]], "labels": [0]}]  # no small or medium objects
    ours = coco_map(no_small, [{"boxes": [[0, 0, 100, 100]], "labels": [0], "scores": [1.0]}])
    assert ours["map_small"] == ours["map_medium"] == -1 and ours["map"] == pytest.approx(1.0)


def test_misaligned_inputs_are_a_clear_error():
    with pytest.raises(ValueError, match="2 images of ground truth but 1 of predictions"):
        coco_map([{"boxes": [], "labels": []}] * 2, [{"boxes": [], "labels": [], "scores": []}])
    with pytest.raises(ValueError, match="image 0's predictions have"):
        coco_map(
            [{"boxes": [], "labels": []}], [{"boxes": [[0, 0, 1, 1]], "labels": [0], "scores": []}]
        )
