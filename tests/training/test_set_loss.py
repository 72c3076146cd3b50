"""DETR's set loss: the Hungarian matching finds the least-cost assignment (against brute force),
recovers a known permutation, and the loss terms follow the stated sums (the class term over
n_boxes is F.cross_entropy with the no-object weight); aux sums the layers."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch
import torch.nn.functional as F

from transformer.training.objectives.detection.set_loss import (
    detr_loss,
    hungarian_match,
    set_loss,
    sigmoid_focal_loss,
)

pytest.importorskip("scipy")


def random_boxes(n, generator):
    """n cxcywh boxes inside [0, 1]^2, float64."""
    wh = 0.05 + 0.4 * torch.rand(n, 2, generator=generator, dtype=torch.float64)
    centre = wh / 2 + (1 - wh) * torch.rand(n, 2, generator=generator, dtype=torch.float64)
    return torch.cat([centre, wh], dim=-1)


def pair_cost(logits, box, label, target_box, cost_class, cost_box, cost_giou, focal=False):
    """DETR's matching cost of one query and one target, written out in Python floats; with
    focal, the class cost is Deformable DETR's: the focal loss of the class as a yes less its loss
    as a no."""
    if focal:
        p = 1 / (1 + math.exp(-logits[label].item()))
        class_cost = 0.25 * (1 - p) ** 2 * -math.log(p + 1e-8) - 0.75 * p**2 * -math.log(1 - p + 1e-8)
    else:
        class_cost = -torch.softmax(logits, -1)[label].item()
    l1 = sum(abs(p - t) for p, t in zip(box.tolist(), target_box.tolist(), strict=True))

    def xyxy(b):
        cx, cy, w, h = b.tolist()
        return cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2

    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = xyxy(box), xyxy(target_box)
    inter = max(0, min(ax1, bx1) - max(ax0, bx0)) * max(0, min(ay1, by1) - max(ay0, by0))
    union = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter
    hull = (max(ax1, bx1) - min(ax0, bx0)) * (max(ay1, by1) - min(ay0, by0))
    giou = inter / union - (hull - union) / hull
    return cost_class * class_cost + cost_box * l1 - cost_giou * giou


@pytest.mark.parametrize("focal", [False, True], ids=["softmax", "focal"])
def test_matching_equals_brute_force_on_small_random_cases(focal):
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    n_classes = 4
    for case in range(20):
        n_queries = rng.randint(1, 5)
        sizes = [rng.randint(0, min(3, n_queries)) for _ in range(2)]
        costs = {
            "cost_class": rng.choice([0.0, 1.0, 3.0]),
            "cost_box": rng.choice([0.0, 5.0, 1.0]),
            "cost_giou": rng.choice([2.0, 0.5]),
        }
        outputs = n_classes if focal else n_classes + 1  # focal: no "no object" output
        logits = 3 * torch.randn(2, n_queries, outputs, generator=g, dtype=torch.float64)
        boxes = random_boxes(2 * n_queries, g).view(2, n_queries, 4)
        targets = [(torch.randint(n_classes, (n,), generator=g), random_boxes(n, g)) for n in sizes]
        matches = hungarian_match(logits, boxes, targets, **costs, focal=focal)
        for b, ((labels, target_boxes), (query_idx, target_idx)) in enumerate(
            zip(targets, matches, strict=True)
        ):
            n = len(labels)
            assert query_idx.dtype == target_idx.dtype == torch.long
            assert sorted(target_idx.tolist()) == list(range(n))  # each target once
            assert len(set(query_idx.tolist())) == n  # to distinct queries
            cost = [
                [
                    pair_cost(logits[b, i], boxes[b, i], labels[j], target_boxes[j], **costs, focal=focal)
                    for j in range(n)
                ]
                for i in range(n_queries)
            ]
            chosen = sum(
                cost[i][j] for i, j in zip(query_idx.tolist(), target_idx.tolist(), strict=True)
            )
            best = min(
                (
                    sum(cost[q][j] for j, q in enumerate(queries))
                    for queries in itertools.permutations(range(n_queries), n)
                ),
                default=0.0,
            )
            assert chosen == pytest.approx(best, abs=1e-9), (case, b)


def test_a_known_permutation_is_recovered_and_its_box_terms_are_zero():
    g = torch.Generator().manual_seed(1)
    n_queries, n_classes = 6, 3
    target_boxes = random_boxes(4, g)
    labels = torch.tensor([2, 0, 1, 2])
    permutation = [4, 0, 5, 2]  # target j is at query permutation[j]
    boxes = random_boxes(n_queries, g)
    class_logits = torch.full((n_queries, n_classes + 1), -10.0, dtype=torch.float64)
    class_logits[:, -1] = 10.0  # the other queries say "no object"
    for j, q in enumerate(permutation):
        boxes[q] = target_boxes[j]
        class_logits[q] = -10.0
        class_logits[q, labels[j]] = 10.0
    targets = [(labels, target_boxes)]
    [(query_idx, target_idx)] = hungarian_match(class_logits[None], boxes[None], targets)
    assert dict(zip(target_idx.tolist(), query_idx.tolist(), strict=True)) == dict(
        enumerate(permutation)
    )
    assert query_idx.tolist() == sorted(query_idx.tolist())
    parts = set_loss(class_logits[None], boxes[None], targets, [(query_idx, target_idx)])
    assert parts.n_boxes == 4 and parts.l1.item() == 0.0
    assert parts.giou.item() == pytest.approx(0.0, abs=1e-12)
    assert 0 < parts.class_nll.item() < 1e-6  # every query's class right, with confidence


def test_class_term_over_n_boxes_is_weighted_cross_entropy():
    g = torch.Generator().manual_seed(2)
    n_classes = 5
    logits = torch.randn(2, 4, n_classes + 1, generator=g)
    boxes = random_boxes(8, g).float().view(2, 4, 4)
    targets = [
        (torch.tensor([3, 1]), random_boxes(2, g).float()),
        (torch.tensor([0]), random_boxes(1, g).float()),
    ]
    matches = [
        (torch.tensor([0, 2]), torch.tensor([1, 0])),  # query 0 <- target 1, query 2 <- target 0
        (torch.tensor([3]), torch.tensor([0])),
    ]
    classes = torch.tensor([[1, 5, 3, 5], [5, 5, 5, 0]])  # by hand; 5 is "no object"
    weight = torch.tensor([1.0, 1, 1, 1, 1, 0.25])
    want = F.cross_entropy(logits.flatten(0, 1), classes.flatten(), weight=weight)
    parts = set_loss(
        logits, boxes, targets, matches, no_object_weight=0.25, box_weight=0, giou_weight=0
    )
    assert parts.n_boxes == 3 and parts.last is None
    assert (parts.class_nll / 3).item() == pytest.approx(want.item(), rel=1e-6)
    assert parts.loss.item() == pytest.approx(parts.class_nll.item(), rel=1e-6)
    # the box terms, by hand: pairs (image 0, query 0, target 1), (0, 2, 0), (1, 3, 0)
    pairs = [(boxes[0, 0], targets[0][1][1]), (boxes[0, 2], targets[0][1][0])]
    pairs.append((boxes[1, 3], targets[1][1][0]))
    l1 = sum((p - t).abs().sum().item() for p, t in pairs)
    giou = sum(
        1 - pair_cost(torch.zeros(2), p, 0, t, cost_class=0, cost_box=0, cost_giou=-1)
        for p, t in pairs
    )
    assert parts.l1.item() == pytest.approx(l1, rel=1e-5)
    assert parts.giou.item() == pytest.approx(giou, rel=1e-5)
    full = set_loss(logits, boxes, targets, matches, no_object_weight=0.25)
    assert full.loss.item() == pytest.approx(want.item() * 3 + 5 * l1 + 2 * giou, rel=1e-5)


def test_images_without_targets():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 3, 4, generator=g)
    boxes = random_boxes(6, g).float().view(2, 3, 4)
    empty = (torch.zeros(0, dtype=torch.long), torch.zeros(0, 4))
    one = (torch.tensor([1]), random_boxes(1, g).float())
    matches = hungarian_match(logits, boxes, [empty, one])
    assert [len(q) for q, _ in matches] == [0, 1] and len(matches[0][1]) == 0
    parts = set_loss(logits, boxes, [empty, one], matches)
    assert parts.n_boxes == 1 and torch.isfinite(parts.loss)
    # no targets at all: nothing matched, the class term with factor 1 (all "no object")
    none = hungarian_match(logits, boxes, [empty, empty])
    parts = set_loss(logits, boxes, [empty, empty], none, no_object_weight=0.1)
    want = F.cross_entropy(logits.flatten(0, 1), torch.full((6,), 3))  # one weight: a plain mean
    assert parts.n_boxes == 0 and parts.l1.item() == 0 and parts.giou.item() == 0
    assert parts.loss.item() == pytest.approx(want.item(), rel=1e-6)


def test_gradients_flow_to_logits_and_boxes():
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 5, 4, generator=g, requires_grad=True)
    raw = torch.randn(2, 5, 4, generator=g, requires_grad=True)
    boxes = raw.sigmoid()  # as the model's box head
    targets = [
        (torch.tensor([0, 2]), random_boxes(2, g).float()),
        (torch.tensor([1]), random_boxes(1, g).float()),
    ]
    result = detr_loss([(logits, boxes)], targets)
    result.loss.backward()
    assert torch.isfinite(logits.grad).all() and logits.grad.abs().sum() > 0
    assert torch.isfinite(raw.grad).all() and raw.grad.abs().sum() > 0
    assert raw.grad[0].abs().sum(-1).gt(0).sum() == 2  # boxes get gradient only where matched
    assert not result.class_nll.requires_grad and not result.l1.requires_grad


def test_aux_sums_every_layer_matched_on_its_own():
    g = torch.Generator().manual_seed(5)
    layers = [
        (torch.randn(2, 4, 3, generator=g), random_boxes(8, g).float().view(2, 4, 4))
        for _ in range(3)
    ]
    targets = [
        (torch.tensor([0, 1]), random_boxes(2, g).float()),
        (torch.tensor([1]), random_boxes(1, g).float()),
    ]
    weights = {"no_object_weight": 0.2, "class_weight": 2.0, "box_weight": 3.0, "giou_weight": 1.5}
    costs = {"cost_class": 2.0, "cost_box": 1.0, "cost_giou": 1.0}
    separate = [
        set_loss(
            logits, boxes, targets, hungarian_match(logits, boxes, targets, **costs), **weights
        )
        for logits, boxes in layers
    ]
    total = detr_loss(layers, targets, aux=True, **costs, **weights)
    assert total.n_boxes == 3 and total.last is not None
    for name in ("loss", "class_nll", "l1", "giou"):
        want = sum(getattr(s, name).item() for s in separate)
        assert getattr(total, name).item() == pytest.approx(want, rel=1e-6), name
        assert getattr(total.last, name).item() == pytest.approx(getattr(separate[-1], name).item())
    last_only = detr_loss(layers, targets, aux=False, **costs, **weights)
    assert last_only.loss.item() == pytest.approx(separate[-1].loss.item())


def test_user_errors_say_what_to_do():
    logits, boxes = torch.randn(1, 2, 3), torch.rand(1, 2, 4)
    three = (torch.tensor([0, 1, 0]), torch.rand(3, 4))
    with pytest.raises(ValueError, match="3 target boxes but the model has 2 queries"):
        hungarian_match(logits, boxes, [three])
    with pytest.raises(ValueError, match='2 classes .0 to 1; 2 is "no object".'):
        hungarian_match(logits, boxes, [(torch.tensor([2]), torch.rand(1, 4))])
    with pytest.raises(ValueError, match="1 images of predictions but 2 targets"):
        hungarian_match(logits, boxes, [three, three])
    with pytest.raises(ValueError, match="not finite"):
        hungarian_match(logits, boxes * float("nan"), [(torch.tensor([0]), torch.rand(1, 4))])


def test_the_focal_loss_is_retinanets_formula_and_torchvisions():
    """alpha_t (1 - p_t)^gamma BCE per element (alpha 0.25, gamma 2), in Python floats; and
    torchvision's sigmoid_focal_loss where it is installed."""
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(3, 5, generator=g, dtype=torch.float64) * 3
    targets = (torch.rand(3, 5, generator=g) < 0.3).double()
    got = sigmoid_focal_loss(logits, targets)
    for x, t, value in zip(logits.flatten().tolist(), targets.flatten().tolist(), got.flatten().tolist(), strict=True):
        p = 1 / (1 + math.exp(-x))
        p_t, alpha_t = (p, 0.25) if t else (1 - p, 0.75)
        assert value == pytest.approx(alpha_t * (1 - p_t) ** 2 * -math.log(p_t), rel=1e-9)
    try:
        from torchvision.ops import sigmoid_focal_loss as reference
    except ImportError:
        return
    torch.testing.assert_close(got, reference(logits, targets, alpha=0.25, gamma=2.0, reduction="none"))


def test_the_focal_class_term_sums_every_query_and_class():
    """With focal, the class term is the focal loss of every (query, class) against yes for a
    matched query's class and no elsewhere, summed; detr_loss weights it 2."""
    g = torch.Generator().manual_seed(7)
    logits = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)  # 3 classes, no "no object"
    boxes = random_boxes(8, g).view(2, 4, 4)
    targets = [(torch.tensor([2, 0]), random_boxes(2, g)), (torch.tensor([1]), random_boxes(1, g))]
    matches = [(torch.tensor([1, 3]), torch.tensor([0, 1])), (torch.tensor([0]), torch.tensor([0]))]
    parts = set_loss(logits, boxes, targets, matches, box_weight=0, giou_weight=0, focal=True)
    yes = {(0, 1, 2), (0, 3, 0), (1, 0, 1)}
    want = 0.0
    for b in range(2):
        for q in range(4):
            for c in range(3):
                p = 1 / (1 + math.exp(-logits[b, q, c].item()))
                p_t, alpha_t = (p, 0.25) if (b, q, c) in yes else (1 - p, 0.75)
                want += alpha_t * (1 - p_t) ** 2 * -math.log(p_t)
    assert parts.class_nll.item() == pytest.approx(want, rel=1e-9)
    whole = detr_loss([(logits, boxes)], targets, focal=True, box_weight=0, giou_weight=0)
    assert whole.loss.item() == pytest.approx(2 * (whole.class_nll.item()), rel=1e-9)
    with pytest.raises(ValueError, match=r"the model has 3 classes \(0 to 2\): number"):
        hungarian_match(logits, boxes, [(torch.tensor([3]), random_boxes(1, g)), targets[1]], focal=True)
