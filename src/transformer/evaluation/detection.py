"""COCO's box detection metrics (mAP@[.5:.95], AP50, AP75, AP by object size, AR@100) on plain
arrays: our own implementation of pycocotools' COCOeval for iouType="bbox", number for number
(tests/evaluation/test_detection_map.py checks it against COCOeval).

Legend (model/__init__.py): n_gt ground-truth boxes and n_dt detections of one image and
category, I IoU thresholds, R recall points, M categories, A area ranges. Boxes are
(x, y, w, h) in pixels, as COCO's.

Rules (COCOeval's, in the order it applies them):
- Categories: those with a ground-truth box. Detections of other categories change nothing.
  Everything below is per image and category unless it says otherwise.
- Detections: sorted by score, highest first, with a stable sort (mergesort: ties keep the
  order given), and only the first 100 kept (maxDets 100, per image and category).
- IoU: intersection / union; for a crowd box (iscrowd) intersection / detection area.
- Ignored ground truth: crowd boxes, and boxes whose area is outside the area range evaluated
  (all: up to 1e5²; small: up to 32²; medium: 32² to 96²; large: 96² to 1e5²; bounds inclusive,
  as COCO's: an area of exactly 32² is small and medium). The area is the box's w * h unless
  the ground truth gives "area" (COCO's annotations hold the segmentation's area there: give it
  to reproduce COCO's own numbers).
- Matching, for each IoU threshold t in 0.5, 0.55, ..., 0.95 (np.linspace(.5, .95, 10)): the
  ground truth is ordered with the ignored boxes last (stably); each detection in score order
  takes, among the boxes not yet matched (a crowd box can be matched many times) with IoU >= t,
  the one of highest IoU (the last such on a tie), looking at the ignored boxes only when no
  other qualifies. A detection matched to an ignored box is ignored; so is an unmatched one whose
  own area is outside the range.
- Accumulation, per category, area range and threshold, over all images (in the order given):
  the detections are merged and stably sorted by score; ignored ones count neither as true nor
  false positives; recall = TP / (ground truth not ignored), precision = TP / (TP + FP + 2^-52).
  Precision is made non-increasing from the right (each value the largest at that recall or
  after), then read at the 101 recalls 0, 0.01, ..., 1 (the first point whose recall reaches
  each, np.searchsorted(side="left"); 0 past the last). Recall (for AR) is the final recall.
  A category with no ground truth left in the range (none, or all ignored) gets -1.
- Summary: the mean of every (threshold, recall point, category) value that is not -1, so a
  category without ground truth is left out; -1 when none is left (e.g. map_small with no small
  objects).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
"""T = 10 IoU thresholds, 0.5:0.05:0.95, as COCOeval builds them (np.arange drifts)."""
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
"""R = 101 recall points at which precision is read."""
MAX_DETECTIONS = 100
"""Detections kept per image and category."""
AREA_RANGES = {
    "all": (0.0, 1e5**2),
    "small": (0.0, 32.0**2),
    "medium": (32.0**2, 96.0**2),
    "large": (96.0**2, 1e5**2),
}
"""A = 4 ranges of object area in pixels², (low, high), both inclusive."""


def _boxes(boxes) -> np.ndarray:
    return np.asarray(boxes, dtype=np.float64).reshape(-1, 4)


def _image(gt: Mapping, pred: Mapping, k: int) -> tuple[dict, dict]:
    """One image's ground truth and predictions as float64 / int64 / bool arrays, checked."""
    g = {"boxes": _boxes(gt["boxes"]), "labels": np.asarray(gt["labels"], np.int64).reshape(-1)}
    crowd = gt.get("iscrowd")
    g["crowd"] = np.zeros(len(g["boxes"]), bool) if crowd is None else np.asarray(crowd, bool)
    area = gt.get("area")
    g["area"] = g["boxes"][:, 2] * g["boxes"][:, 3] if area is None else np.asarray(area, float)
    p = {"boxes": _boxes(pred["boxes"]), "labels": np.asarray(pred["labels"], np.int64)}
    p["scores"] = np.asarray(pred["scores"], np.float64).reshape(-1)
    p["labels"] = p["labels"].reshape(-1)
    for name, parts in (("ground truth", g), ("predictions", p)):
        sizes = {key: len(value) for key, value in parts.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"image {k}'s {name} have {sizes}: give one of each per box")
    return g, p


def coco_iou(detections: np.ndarray, gt: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """COCO's box IoU (pycocotools' bbIou, the same float operations): detections (n_dt, 4)
    xywh, gt (n_gt, 4) xywh, crowd (n_gt,) bool -> (n_dt, n_gt); intersection / detection area
    for crowd boxes."""
    d, g = detections[:, None, :], gt[None, :, :]  # (n_dt, 1, 4), (1, n_gt, 4)
    w = np.minimum(d[..., 2] + d[..., 0], g[..., 2] + g[..., 0]) - np.maximum(d[..., 0], g[..., 0])
    h = np.minimum(d[..., 3] + d[..., 1], g[..., 3] + g[..., 1]) - np.maximum(d[..., 1], g[..., 1])
    inter = w * h  # (n_dt, n_gt)
    area_d, area_g = d[..., 2] * d[..., 3], g[..., 2] * g[..., 3]  # (n_dt, 1), (1, n_gt)
    union = np.where(crowd[None, :], area_d, area_d + area_g - inter)  # (n_dt, n_gt)
    overlap = (w > 0) & (h > 0)
    return np.divide(inter, union, out=np.zeros_like(inter), where=overlap)


def _match(ious: np.ndarray, gt_ignore: np.ndarray, crowd: np.ndarray) -> np.ndarray:
    """COCOeval's greedy matching at every threshold: ious (n_dt, n_gt), gt_ignore (n_gt,) and
    crowd (n_gt,) with the ignored boxes last -> (I, n_dt) index of the matched ground truth, -1
    for none."""
    n_thresholds, (n_dt, n_gt) = len(IOU_THRESHOLDS), ious.shape
    thresholds = np.minimum(IOU_THRESHOLDS, 1 - 1e-10)[:, None]  # (I, 1)
    n_regular = int(np.count_nonzero(~gt_ignore))
    taken = np.zeros((n_thresholds, n_gt), bool)  # (I, n_gt)
    matched = np.full((n_thresholds, n_dt), -1)  # (I, n_dt)
    if n_gt == 0:
        return matched
    rows = np.arange(n_thresholds)
    for d in np.flatnonzero(ious.max(axis=1) >= thresholds[0, 0]):  # the others match nothing
        candidate = (~taken | crowd) & (ious[d] >= thresholds)  # (I, n_gt)
        choice = np.full(n_thresholds, -1)  # (I,)
        for start, stop in ((n_regular, n_gt), (0, n_regular)):  # the regular boxes win
            part = candidate[:, start:stop]  # (I, width)
            if part.shape[1] == 0:
                continue
            values = np.where(part, ious[d, start:stop], -np.inf)  # (I, width)
            last_best = part.shape[1] - 1 - np.argmax(values[:, ::-1], axis=1)  # (I,)
            choice = np.where(part.any(axis=1), start + last_best, choice)
        found = choice >= 0
        taken[rows[found], choice[found]] = True
        matched[:, d] = choice
    return matched


def _evaluate(gt: dict, pred: dict, area_range: tuple[float, float]) -> dict:
    """One image and category in one area range: gt and pred hold its boxes, pred sorted and
    cut to MAX_DETECTIONS, pred["ious"] (n_dt, n_gt) -> scores (n_dt,), matched / ignored
    (I, n_dt) bool, and the count of ground truth not ignored."""
    low, high = area_range
    ignore = gt["crowd"] | (gt["area"] < low) | (gt["area"] > high)  # (n_gt,)
    order = np.argsort(ignore, kind="mergesort")  # ignored last
    match = _match(pred["ious"][:, order], ignore[order], gt["crowd"][order])  # (I, n_dt)
    matched = match >= 0
    ignored = np.zeros_like(matched)
    ignored[matched] = ignore[order][match[matched]]
    area = pred["boxes"][:, 2] * pred["boxes"][:, 3]  # (n_dt,)
    ignored |= ~matched & ((area < low) | (area > high))[None, :]
    return {
        "scores": pred["scores"],
        "matched": matched,
        "ignored": ignored,
        "n_gt": int(np.count_nonzero(~ignore)),
    }


def _accumulate(evaluated: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """One category and area range over all images -> (precision (I, R), recall (I,)); -1 where
    there is no ground truth to find."""
    n_gt = sum(e["n_gt"] for e in evaluated)
    if n_gt == 0:
        return -np.ones((len(IOU_THRESHOLDS), len(RECALL_POINTS))), -np.ones(len(IOU_THRESHOLDS))
    scores = np.concatenate([e["scores"] for e in evaluated])  # (n_dt,) all images
    order = np.argsort(-scores, kind="mergesort")
    matched = np.concatenate([e["matched"] for e in evaluated], axis=1)[:, order]  # (I, n_dt)
    ignored = np.concatenate([e["ignored"] for e in evaluated], axis=1)[:, order]  # (I, n_dt)
    tp = np.cumsum(matched & ~ignored, axis=1).astype(float)  # (I, n_dt)
    fp = np.cumsum(~matched & ~ignored, axis=1).astype(float)  # (I, n_dt)
    n_dt = len(scores)
    recall_curve = tp / n_gt  # (I, n_dt)
    precision_curve = tp / (fp + tp + np.spacing(1))  # (I, n_dt)
    precision_curve = np.maximum.accumulate(precision_curve[:, ::-1], axis=1)[:, ::-1]
    precision = np.zeros((len(IOU_THRESHOLDS), len(RECALL_POINTS)))  # (I, R)
    for t in range(len(IOU_THRESHOLDS)):
        at = np.searchsorted(recall_curve[t], RECALL_POINTS, side="left")  # (R,)
        reached = at < n_dt
        precision[t, reached] = precision_curve[t, at[reached]]
    recall = recall_curve[:, -1] if n_dt else np.zeros(len(IOU_THRESHOLDS))
    return precision, recall


def _mean(values: np.ndarray) -> float:
    """The mean of the values that are not -1 (COCO's "absent"); -1 when none is left."""
    present = values[values > -1]
    return float(np.mean(present)) if present.size else -1.0


def coco_map(ground_truth: Sequence[Mapping], predictions: Sequence[Mapping]) -> dict[str, float]:
    """COCO's bbox metrics (COCOeval.stats 0-5 and 8) over a set of images (module rules).

    ground_truth: per image {"boxes": (n, 4) xywh pixels, "labels": (n,) ints, "iscrowd":
    optional (n,) bools, "area": optional (n,) pixels² (default w * h)}; predictions: per image,
    in the same order, {"boxes": (m, 4) xywh, "scores": (m,), "labels": (m,)} -> {"map",
    "ap50", "ap75", "map_small", "map_medium", "map_large", "mar_100"}, each in [0, 1] or -1
    when there is nothing to measure.
    """
    if len(ground_truth) != len(predictions):
        raise ValueError(
            f"{len(ground_truth):,} images of ground truth but {len(predictions):,} of "
            "predictions: give one entry per image in each, empty for an image without any"
        )
    images = [
        _image(g, p, k) for k, (g, p) in enumerate(zip(ground_truth, predictions, strict=True))
    ]
    categories = sorted({int(c) for g, _ in images for c in g["labels"]})
    n_t, n_r, n_k, n_a = len(IOU_THRESHOLDS), len(RECALL_POINTS), len(categories), len(AREA_RANGES)
    precision = -np.ones((n_t, n_r, n_k, n_a))  # (I, R, M, A)
    recall = -np.ones((n_t, n_k, n_a))  # (I, M, A)
    for k, category in enumerate(categories):
        pairs = []  # (gt, pred) of each image with boxes of this category
        for g, p in images:
            gk = {key: value[g["labels"] == category] for key, value in g.items()}
            pk = {key: value[p["labels"] == category] for key, value in p.items()}
            if len(gk["boxes"]) == 0 and len(pk["boxes"]) == 0:
                continue
            keep = np.argsort(-pk["scores"], kind="mergesort")[:MAX_DETECTIONS]
            pk = {key: value[keep] for key, value in pk.items()}
            pk["ious"] = coco_iou(pk["boxes"], gk["boxes"], gk["crowd"])  # (n_dt, n_gt)
            pairs.append((gk, pk))
        for a, area_range in enumerate(AREA_RANGES.values()):
            evaluated = [_evaluate(gk, pk, area_range) for gk, pk in pairs]
            precision[:, :, k, a], recall[:, k, a] = _accumulate(evaluated)
    return {
        "map": _mean(precision[..., 0]),
        "ap50": _mean(precision[0, ..., 0]),
        "ap75": _mean(precision[5, ..., 0]),
        "map_small": _mean(precision[..., 1]),
        "map_medium": _mean(precision[..., 2]),
        "map_large": _mean(precision[..., 3]),
        "mar_100": _mean(recall[..., 0]),
    }
