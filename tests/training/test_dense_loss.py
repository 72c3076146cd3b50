"""Co-DETR's dense loss (CenterNet's targets and focal loss, DETR's box terms at the centre cells):
the heatmap's Gaussians, the focal loss against its formula, a zero box loss for exact boxes,
gradients."""

import math

import torch

from transformer.training.objectives.detection.dense_loss import (
    dense_loss,
    dense_targets,
    focal_loss,
)


def test_heatmap_is_one_at_each_centre_cell_and_gaussian_around_it():
    """Two images: a 0.25 x 0.5 box of class 1 centred in cell (column 2, row 5) of an 8 x 8 grid,
    and none; sigma = (w, h) in cells / 6."""
    boxes = [torch.tensor([[2.5 / 8, 5.5 / 8, 0.25, 0.5]]), torch.zeros(0, 4)]
    labels = [torch.tensor([1]), torch.zeros(0, dtype=torch.long)]
    heat, image, cell, box = dense_targets(boxes, labels, n_classes=3, grid=8)
    assert heat.shape == (2, 3, 8, 8)
    assert image.tolist() == [0] and cell.tolist() == [[2, 5]] and torch.equal(box, boxes[0])
    assert heat[0, 1, 5, 2] == 1 and int(heat.eq(1).sum()) == 1
    sx, sy = 0.25 * 8 / 6, 0.5 * 8 / 6
    rows, cols = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    gaussian = torch.exp(-((cols - 2) ** 2) / (2 * sx**2) - (rows - 5) ** 2 / (2 * sy**2))
    torch.testing.assert_close(heat[0, 1], gaussian)
    assert heat[0, [0, 2]].abs().sum() == 0 and heat[1].abs().sum() == 0


def test_overlapping_gaussians_of_one_class_take_the_maximum():
    boxes = [torch.tensor([[0.1, 0.1, 0.5, 0.5], [0.3, 0.1, 0.5, 0.5]])]
    labels = [torch.tensor([0, 0])]
    heat, _, cell, _ = dense_targets(boxes, labels, n_classes=1, grid=10)
    one = [dense_targets([b[None]], [torch.tensor([0])], 1, 10)[0] for b in boxes[0]]
    torch.testing.assert_close(heat, torch.maximum(*one))
    assert cell.tolist() == [[1, 1], [3, 1]] and int(heat.eq(1).sum()) == 2


def test_focal_loss_matches_its_formula():
    """CornerNet eq. 1 written out, cell by cell, on a 1 x 1 x 2 x 2 case, before the division by
    the objects."""
    logits = torch.tensor([[[[0.5, -1.0], [2.0, 0.0]]]])
    target = torch.tensor([[[[1.0, 0.3], [0.0, 0.8]]]])
    expected = 0.0
    for x, y in zip(logits.flatten().tolist(), target.flatten().tolist(), strict=True):
        p = 1 / (1 + math.exp(-x))
        if y == 1:
            expected += -((1 - p) ** 2) * math.log(p)
        else:
            expected += -((1 - y) ** 4) * p**2 * math.log(1 - p)
    torch.testing.assert_close(focal_loss(logits, target), torch.tensor(expected))


def test_exact_predictions_cost_almost_nothing():
    """Heatmap logits of +-20 (+ on the centre cells) and, at those cells, the objects' boxes."""
    targets = [
        (torch.tensor([0, 2]), torch.tensor([[0.2, 0.3, 0.2, 0.4], [0.7, 0.6, 0.3, 0.2]])),
        (torch.tensor([1]), torch.tensor([[0.5, 0.5, 0.6, 0.6]])),
    ]
    heat, image, cell, box = dense_targets([b for _, b in targets], [y for y, _ in targets], 3, 6)
    logits = torch.where(heat.eq(1), 20.0, -20.0)  # (B, K, G, G)
    boxes = torch.full((2, 6, 6, 4), 0.5)  # (B, G, G, 4)
    boxes[image, cell[:, 1], cell[:, 0]] = box
    loss, n = dense_loss(logits, boxes, targets)
    assert n == 3 and 0 <= float(loss) < 1e-6  # the focal part ~ 2e-9^2 per cell
    assert torch.equal(loss, focal_loss(logits, heat))  # the box part exactly 0


def test_a_batch_without_objects_still_teaches_the_background():
    logits = torch.zeros(2, 3, 4, 4)
    empty = (torch.zeros(0, dtype=torch.long), torch.zeros(0, 4))
    loss, n = dense_loss(logits, torch.full((2, 4, 4, 4), 0.5), [empty, empty])
    assert n == 0
    torch.testing.assert_close(loss, 2 * 3 * 16 * 0.25 * torch.tensor(math.log(2)))


def test_gradients_reach_the_heatmap_and_the_boxes_at_the_centre_cells():
    torch.manual_seed(0)
    targets = [(torch.tensor([1]), torch.tensor([[0.3, 0.6, 0.2, 0.2]]))]
    logits = torch.randn(1, 2, 5, 5, requires_grad=True)
    raw = torch.rand(1, 5, 5, 4, requires_grad=True)
    loss, _ = dense_loss(logits, raw, targets)
    loss.backward()
    assert logits.grad.abs().min() > 0  # every cell is taught: the focal loss is dense
    grad_cells = raw.grad.abs().sum(-1)[0].nonzero().tolist()
    assert grad_cells == [[3, 1]]  # (row, column) of the centre: boxes only at the object's cell
