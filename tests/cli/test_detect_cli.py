"""`transformer detect` and `transformer evaluate --detection` end to end on a tiny detector whose
answer is known: every query says "cat" (its class bias +8) with the box (8, 8, 24, 24) of a 32 x 32
image (the box head outputs zeros: sigmoid(0) = 1/2 for cx, cy, w and h)."""

import json

import pytest
import torch

from tests.cli.common import run
from tests.viz.detector import LABELS, tiny_detector
from transformer.model_dir import load_model, save_model


@pytest.fixture
def detector(tmp_path):
    path = tiny_detector(tmp_path / "detr", bias={0: 8.0})
    model = load_model(path)
    with torch.no_grad():
        model.box_head.layers[-1].weight.zero_()
        model.box_head.layers[-1].bias.zero_()
    return save_model(model, path, labels=LABELS)


def image(path, size=(32, 32)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("L", size, 40).save(path)
    return path


def coco_folder(folder, category_id):
    """A COCO folder of one 32 x 32 image whose one object, of the given category, is the box
    (8, 8) to (24, 24); returns its annotations."""
    image(folder / "images" / "x.png")
    coco = {
        "images": [{"id": 1, "file_name": "images/x.png", "width": 32, "height": 32}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": category_id, "bbox": [8, 8, 16, 16]}
        ],
        "categories": [{"id": i + 1, "name": name} for i, name in enumerate(LABELS)],
    }
    (folder / "annotations.json").write_text(json.dumps(coco))
    return coco


def test_detect_prints_and_draws_each_images_objects(detector, tmp_path, capsys):
    a, b = image(tmp_path / "in" / "a.png"), image(tmp_path / "other" / "a.png", (64, 48))
    rc, out, err = run(["detect", detector, a, b, "--out", tmp_path / "drawn"], capsys)
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["file"] for r in lines] == [str(a), str(b)]
    first = lines[0]["objects"]
    assert len(first) == 5 and {o["label"] for o in first} == {"cat"}
    assert all(o["box"] == pytest.approx([8, 8, 24, 24], abs=1e-4) for o in first)
    scores = [o["score"] for o in first]
    assert scores == sorted(scores, reverse=True) and min(scores) > 0.99
    assert lines[1]["objects"][0]["box"] == pytest.approx([16, 12, 48, 36], abs=1e-4)  # its pixels
    for name in ("a.png", "a.json", "a-2.png", "a-2.json"):  # two files of one name, both kept
        assert (tmp_path / "drawn" / name).is_file()
    rc, out, _ = run(["detect", detector, a, "--threshold", "1"], capsys)
    assert rc == 0 and json.loads(out.splitlines()[0])["objects"] == []


def test_detect_refuses_bad_input_in_one_line(detector, tmp_path, capsys):
    for argv, phrase in (
        (["detect", detector, tmp_path / "missing.png"], "missing.png not found"),
        (["detect", detector, image(tmp_path / "a.png"), "--threshold", "1.5"], "--threshold"),
    ):
        rc, out, err = run(argv, capsys)
        assert rc == 2 and phrase in err and len(err.strip().splitlines()) == 1, err


def test_evaluate_detection_scores_the_known_answer(detector, tmp_path, capsys):
    """One image whose one object is the box every query gives: the most likely query is right at
    every IoU threshold, the other four rank after it, so COCO's AP is exactly 1."""
    coco = coco_folder(tmp_path / "coco", category_id=1)
    rc, out, err = run(["evaluate", detector, "--detection", tmp_path / "coco"], capsys)
    assert rc == 0, err
    assert "1 image, 1 objects" in out and "mAP@[.5:.95] = 1.0000" in out and "AP75 = 1.0000" in out
    assert "the 15 most likely (query, class) pairs" in out
    coco["categories"][0]["name"] = "lion"
    (tmp_path / "coco" / "annotations.json").write_text(json.dumps(coco))
    rc, _, err = run(["evaluate", detector, "--detection", tmp_path / "coco"], capsys)
    assert rc == 2 and "the model detects" in err


def test_evaluate_detection_ranks_every_class_of_a_query_unless_per_query(tmp_path, capsys):
    """Every query says cat 0.55, dog 0.45 (class weights zero) with the same box, and the one
    object is a dog: ranked (query, class) pairs find it (AP 1), one class per query does not."""
    path = tiny_detector(tmp_path / "detr")
    model = load_model(path)
    with torch.no_grad():
        model.box_head.layers[-1].weight.zero_()
        model.box_head.layers[-1].bias.zero_()
        model.class_head.weight.zero_()
        model.class_head.bias.copy_(torch.tensor([0.55, 0.45, 1e-9, 1e-9]).log())
    detector = save_model(model, path, labels=LABELS)
    coco_folder(tmp_path / "coco", category_id=2)
    rc, out, err = run(["evaluate", detector, "--detection", tmp_path / "coco"], capsys)
    assert rc == 0 and "mAP@[.5:.95] = 1.0000" in out, err
    argv = ["evaluate", detector, "--detection", tmp_path / "coco", "--per-query"]
    rc, out, err = run(argv, capsys)
    assert rc == 0 and "mAP@[.5:.95] = 0.0000" in out, err
    assert "each of the 5 queries' most likely class" in out
    rc, _, err = run(["evaluate", detector, "--text", "x.txt", "--per-query"], capsys)
    assert rc == 2 and "goes with --detection" in err
