"""DETR's denoising queries (model/denoise.py): the attention mask against a brute-force
construction, the noise within its bounds, the matching queries' outputs untouched by them and the
groups apart from each other, and their loss against a query-by-query computation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.model.test_detection_model import detector_config
from transformer.evaluation.boxes import cxcywh_to_xyxy, generalized_box_iou
from transformer.model.build import build_model
from transformer.model.denoise import DenoiseQueries, denoise_mask, denoise_queries
from transformer.training.objectives.detection.set_loss import denoise_loss


def _targets(counts: list[int], seed: int = 0, n_classes: int = 3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in counts:
        centres = torch.rand(n, 2, generator=g) * 0.6 + 0.2
        sides = torch.rand(n, 2, generator=g) * 0.3 + 0.1
        out.append((torch.randint(0, n_classes, (n,), generator=g), torch.cat([centres, sides], 1)))
    return out


def _brute_mask(n_match: int, groups: int, per: int, real: torch.Tensor) -> torch.Tensor:
    """The rules one pair at a time: matching sees matching; a denoising query sees the matching
    queries, the real queries of its group and itself."""
    batch, total = real.shape[0], n_match + groups * per
    mask = torch.zeros(batch, 1, total, total, dtype=torch.bool)
    for b in range(batch):
        for i in range(total):
            for j in range(total):
                if i == j:
                    allowed = True
                elif i < n_match:
                    allowed = j < n_match
                elif j < n_match:
                    allowed = True
                else:
                    same = (i - n_match) // per == (j - n_match) // per
                    allowed = same and bool(real[b, j - n_match])
                mask[b, 0, i, j] = allowed
    return mask


@pytest.mark.parametrize("n_match,groups,counts", [(4, 2, [3, 1, 0]), (5, 3, [2, 2]), (3, 1, [1])])
def test_the_mask_is_the_rules_pair_by_pair(n_match, groups, counts):
    dn = denoise_queries(_targets(counts), groups, 3, 0.4, 0.2, torch.Generator().manual_seed(1))
    assert dn.group_size == max(counts) and dn.labels.shape == (len(counts), groups * max(counts))
    mask = denoise_mask(n_match, dn)
    assert torch.equal(mask, _brute_mask(n_match, groups, max(counts), dn.real))


def test_the_noise_stays_within_its_bounds_and_groups_repeat_the_objects():
    targets = _targets([6, 2], seed=3)
    dn = denoise_queries(targets, 4, 3, 0.4, 0.5, torch.Generator().manual_seed(0))
    for b, (labels, boxes) in enumerate(targets):
        for g in range(4):
            rows = slice(g * 6, g * 6 + len(labels))
            assert torch.equal(dn.target_labels[b, rows], labels)
            assert torch.equal(dn.target_boxes[b, rows], boxes)
            assert dn.real[b, rows].all() and not dn.real[b, g * 6 + len(labels) : (g + 1) * 6].any()
    real = dn.real
    truth, noised = dn.target_boxes[real], dn.boxes[real]
    assert ((noised[:, 0] - truth[:, 0]).abs() <= 0.2 * truth[:, 2] + 1e-6).all()
    assert ((noised[:, 1] - truth[:, 1]).abs() <= 0.2 * truth[:, 3] + 1e-6).all()
    ratio = noised[:, 2:] / truth[:, 2:]
    assert ((ratio >= 0.6 - 1e-6) & (ratio <= 1.4 + 1e-6)).all() and not torch.equal(noised, truth)
    changed = (dn.labels[real] != dn.target_labels[real]).float().mean()
    assert 0.15 < changed < 0.55  # half drawn anew, a third of those the same class again
    exact = denoise_queries(targets, 2, 3, 0.0, 0.0, torch.Generator().manual_seed(0))
    assert torch.equal(exact.boxes, exact.target_boxes) and torch.equal(exact.labels, exact.target_labels)
    assert denoise_queries(_targets([0, 0]), 2, 3, 0.4, 0.2, torch.Generator()) is None


@pytest.mark.parametrize("queries", ["learned", "anchors", "dense"])
def test_matching_queries_are_untouched_and_groups_apart(queries):
    extra = {"dense_aux": True} if queries == "dense" else {}
    torch.manual_seed(0)
    model = build_model(detector_config(queries=queries, denoise_groups=3, **extra)).eval()
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    dn = denoise_queries(_targets([3, 1]), 3, 3, 0.4, 0.2, torch.Generator().manual_seed(2))
    with torch.no_grad():
        plain_logits, plain_boxes = model(pixels, all_layers=True)
        logits, boxes, (dn_logits, dn_boxes) = model(pixels, all_layers=True, denoise=dn)
        torch.testing.assert_close(logits, plain_logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(boxes, plain_boxes, rtol=1e-5, atol=1e-5)
        assert dn_logits.shape == (2, 2, 9, 4) and dn_boxes.shape == (2, 2, 9, 4)
        # group 2 and every padding query changed: group 0 and 1's real queries answer the same
        other = DenoiseQueries(dn.labels.clone(), dn.boxes.clone(), dn.target_labels, dn.target_boxes, dn.real, 3)
        other.labels[:, 6:] = (other.labels[:, 6:] + 1) % 3
        other.boxes[:, 6:] = other.boxes[:, 6:].flip(-1)
        other.labels[~dn.real] = 2
        other.boxes[~dn.real] = 0.9
        _, _, (again_logits, again_boxes) = model(pixels, all_layers=True, denoise=other)
        kept = dn.real.clone()
        kept[:, 6:] = False
        torch.testing.assert_close(again_logits[:, kept], dn_logits[:, kept], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(again_boxes[:, kept], dn_boxes[:, kept], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(again_logits[:, :, 6:], dn_logits[:, :, 6:])


def test_a_detector_without_denoising_queries_refuses_them():
    model = build_model(detector_config()).eval()
    dn = denoise_queries(_targets([1]), 1, 3, 0.4, 0.2, torch.Generator())
    with pytest.raises(ValueError, match="build it with model.detection.denoise_groups > 0"):
        model(torch.zeros(1, 1, 32, 32), denoise=dn)


@pytest.mark.parametrize("aux,focal", [(True, False), (False, False), (True, True)])
def test_the_loss_is_each_query_against_its_object(aux, focal):
    dn = denoise_queries(_targets([3, 1, 2]), 2, 3, 0.4, 0.2, torch.Generator().manual_seed(4))
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 3, 6, 3 if focal else 4, generator=g)  # focal: no "no object"
    boxes = torch.rand(2, 3, 6, 4, generator=g) * 0.5 + 0.25
    expect = 0.0
    for layer in range(2) if aux else (1,):
        for b in range(3):
            for q in range(6):
                if not dn.real[b, q]:
                    continue
                label, target = dn.target_labels[b, q], dn.target_boxes[b, q]
                box = boxes[layer, b, q]
                giou = generalized_box_iou(cxcywh_to_xyxy(box[None]), cxcywh_to_xyxy(target[None]))[0, 0]
                if focal:  # each class a yes / no, weighted 2
                    p = logits[layer, b, q].sigmoid()
                    yes = F.one_hot(label, 3).float()
                    p_t, alpha_t = p * yes + (1 - p) * (1 - yes), 0.25 * yes + 0.75 * (1 - yes)
                    classes = 2 * (alpha_t * (1 - p_t) ** 2 * -p_t.log()).sum()
                else:
                    classes = F.cross_entropy(logits[layer, b, q][None], label[None])
                expect += classes + 5 * (box - target).abs().sum() + 2 * (1 - giou)
    torch.testing.assert_close(denoise_loss(logits, boxes, dn, aux=aux, focal=focal), expect / 2)
