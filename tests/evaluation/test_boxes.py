"""Box conversions round-trip; IoU and GIoU equal their formulas written out for one pair at a
time; identical, disjoint and degenerate boxes give the known values and finite gradients."""

from __future__ import annotations

import pytest
import torch

from transformer.evaluation.boxes import (
    box_area,
    box_iou,
    cxcywh_to_xyxy,
    generalized_box_iou,
    xyxy_to_cxcywh,
)


def random_xyxy(n, generator):
    """n valid boxes in [0, 1]^2, float64."""
    corners = torch.rand(n, 2, 2, generator=generator, dtype=torch.float64)  # (n, corner, xy)
    low, high = corners.min(dim=1).values, corners.max(dim=1).values  # (n, 2)
    return torch.cat([low, high], dim=-1)


def iou_and_giou_by_hand(a, b):
    """The formulas for one pair of xyxy boxes, in Python floats."""
    ax0, ay0, ax1, ay1 = a
    bx0, by0, bx1, by1 = b
    inter = max(0.0, min(ax1, bx1) - max(ax0, bx0)) * max(0.0, min(ay1, by1) - max(ay0, by0))
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    enclosing = (max(ax1, bx1) - min(ax0, bx0)) * (max(ay1, by1) - min(ay0, by0))
    iou = inter / union
    return iou, iou - (enclosing - union) / enclosing


def test_conversions_round_trip_and_area():
    g = torch.Generator().manual_seed(0)
    xyxy = random_xyxy(50, g)
    assert torch.allclose(cxcywh_to_xyxy(xyxy_to_cxcywh(xyxy)), xyxy, atol=1e-12)
    cxcywh = torch.rand(3, 7, 4, generator=g, dtype=torch.float64)  # any leading shape
    assert torch.allclose(xyxy_to_cxcywh(cxcywh_to_xyxy(cxcywh)), cxcywh, atol=1e-12)
    box = torch.tensor([0.5, 0.5, 0.2, 0.4])
    assert cxcywh_to_xyxy(box).tolist() == pytest.approx([0.4, 0.3, 0.6, 0.7])
    assert float(box_area(cxcywh_to_xyxy(box))) == pytest.approx(0.08)


@pytest.mark.parametrize("seed", range(5))
def test_iou_and_giou_equal_the_formula_pair_by_pair(seed):
    g = torch.Generator().manual_seed(seed)
    a, b = random_xyxy(7, g), random_xyxy(5, g)
    iou, union = box_iou(a, b)
    giou = generalized_box_iou(a, b)
    assert iou.shape == union.shape == giou.shape == (7, 5)
    for i in range(7):
        for j in range(5):
            want_iou, want_giou = iou_and_giou_by_hand(a[i].tolist(), b[j].tolist())
            assert float(iou[i, j]) == pytest.approx(want_iou, abs=1e-12)
            assert float(giou[i, j]) == pytest.approx(want_giou, abs=1e-12)
    assert ((giou >= -1) & (giou <= iou) & (iou <= 1)).all()


def test_known_cases():
    boxes = torch.tensor([[0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 3.0, 3.0], [5.0, 0.0, 6.0, 1.0]])
    iou, _ = box_iou(boxes, boxes)
    giou = generalized_box_iou(boxes, boxes)
    assert torch.allclose(iou.diagonal(), torch.ones(3)) and torch.allclose(
        giou.diagonal(), torch.ones(3)
    )
    assert float(iou[0, 1]) == pytest.approx(1 / 7)  # overlap 1, union 4 + 4 - 1
    assert float(giou[0, 1]) == pytest.approx(1 / 7 - (9 - 7) / 9)
    assert float(iou[0, 2]) == 0 and float(giou[0, 2]) == pytest.approx(0 - (12 - 5) / 12)
    far = torch.tensor([[1e3, 1e3, 1e3 + 1e-3, 1e3 + 1e-3]])  # tiny and far: GIoU tends to -1
    assert -1 <= float(generalized_box_iou(boxes[:1], far)) < -0.999


def test_gradients_are_finite_for_identical_and_degenerate_boxes():
    pairs = [
        ([0.1, 0.2, 0.5, 0.6], [0.1, 0.2, 0.5, 0.6]),  # identical
        ([0.3, 0.3, 0.3, 0.3], [0.3, 0.3, 0.3, 0.3]),  # the same point
        ([0.3, 0.3, 0.3, 0.3], [0.6, 0.7, 0.6, 0.7]),  # two points
        ([0.2, 0.2, 0.2, 0.8], [0.2, 0.2, 0.2, 0.8]),  # the same line
        ([0.2, 0.2, 0.2, 0.8], [0.1, 0.1, 0.4, 0.4]),  # a line across a box
    ]
    for a, b in pairs:
        for dtype in (torch.float32, torch.float64):
            ta = torch.tensor([a], dtype=dtype, requires_grad=True)
            tb = torch.tensor([b], dtype=dtype, requires_grad=True)
            giou = generalized_box_iou(ta, tb)
            iou, _ = box_iou(ta, tb)
            (giou.sum() + iou.sum()).backward()
            assert torch.isfinite(giou).all() and torch.isfinite(iou).all(), (a, b)
            assert torch.isfinite(ta.grad).all() and torch.isfinite(tb.grad).all(), (a, b)
            assert -1 <= giou.item() <= 1 and 0 <= iou.item() <= 1
    # the same through cxcywh, as DETR computes it: zero-size predictions
    pred = torch.tensor([[0.5, 0.5, 0.0, 0.0]], requires_grad=True)
    giou = generalized_box_iou(cxcywh_to_xyxy(pred), cxcywh_to_xyxy(pred.detach()))
    giou.sum().backward()
    assert torch.isfinite(pred.grad).all() and giou.item() == 0.0
