"""DETR's set prediction loss (Carion et al. 2020, §3.1): a Hungarian matching of queries to
target boxes, then a classification loss on every query and box losses on the matched ones.

Legend (model/__init__.py): B batch (images), Q object queries, M classes (+1: class index M is
"no object"), n_b target boxes of image b, n matched pairs in the batch (the sum of the n_b).

Boxes are (cx, cy, w, h) normalised by the image size to [0, 1], as the model predicts them.

Rules:
- Matching (§3.1, eq. 1; DETR's HungarianMatcher): per image, the assignment of its targets to
  distinct queries of least total cost, with
      cost(query i, target j) = -cost_class * softmax(logits_i)[label_j]
                                + cost_box * ||box_i - box_j||_1
                                - cost_giou * GIoU(box_i, box_j)
  (the class probability, not its log, as DETR). No gradient flows through the matching. An
  image needs at least as many queries as targets; one without targets matches nothing.
- Sums, not means: the trainer divides a step's summed loss by its summed units, and the units
  are target boxes (n). Each term is so built that, divided by n, it is DETR's:
      class  n * (cross entropy of every query's class, averaged over the B * Q queries with
             weight 1 for a class and no_object_weight for "no object", as
             F.cross_entropy(weight=...) does): DETR's loss_ce * n. With n = 0 the factor is 1:
             the batch still teaches "no object", and a trainer that divides by max(n, 1) (as
             DETR clamps its num_boxes) gets DETR's loss_ce.
      l1     sum over matched pairs of |box_i - box_j|, its 4 coordinates summed: loss_bbox * n
      giou   sum over matched pairs of 1 - GIoU(box_i, box_j): loss_giou * n
      loss = class_weight * class + box_weight * l1 + giou_weight * giou
  Departure: DETR's class term is a mean over its (per-GPU) batch, not a sum; a step that
  accumulates several batches here weights each batch's mean by its boxes (the same for one).
- Auxiliary losses (§3.2): with aux, every decoder layer's predictions (through the shared
  heads) are matched and scored on their own, and the layers' sums are added; the units stay n.
- Denoising queries (denoise_loss; model.denoise): each against its own object, no matching, the
  same box terms and a plain cross entropy, divided by the groups: a sum over objects as well.
- Focal (model.detection.class_loss = "focal"; Deformable DETR, DINO): the class head has no "no
  object" output; each class is a yes / no through a sigmoid, scored by the focal loss (Lin et al.
  2017; alpha 0.25, gamma 2) summed over every query and class, in the matching cost too, both
  weighted 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ....evaluation.boxes import cxcywh_to_xyxy, generalized_box_iou
from ....model.denoise import DenoiseQueries

Target = tuple[torch.Tensor, torch.Tensor]
"""An image's targets: labels (n_b,) long in [0, M), boxes (n_b, 4) cxcywh in [0, 1]."""

Match = tuple[torch.Tensor, torch.Tensor]
"""An image's matching: query_idx (n_b,) long, target_idx (n_b,) long; pair k is (query_idx[k],
target_idx[k]), sorted by query."""


@dataclass
class SetLoss:
    """Sums over the target boxes of a batch (see the module's rules)."""

    loss: torch.Tensor
    """() class_weight * class_nll + box_weight * l1 + giou_weight * giou (with gradient)."""
    class_nll: torch.Tensor
    """() the class term: n * weighted mean cross entropy over the queries (no gradient)."""
    l1: torch.Tensor
    """() L1 distance of the matched boxes, summed (no gradient)."""
    giou: torch.Tensor
    """() 1 - GIoU of the matched boxes, summed (no gradient)."""
    n_boxes: int
    """Target boxes in the batch: the units to divide by."""
    last: SetLoss | None = None
    """From detr_loss: the last decoder layer's own terms (to report); None from set_loss."""


def _targets(targets: Sequence[Target], batch: int) -> list[Target]:
    if len(targets) != batch:
        raise ValueError(
            f"{batch} images of predictions but {len(targets)} targets: give one (labels, boxes) "
            "pair per image, empty tensors for an image without objects"
        )
    return [(labels.reshape(-1).long(), boxes.reshape(-1, 4)) for labels, boxes in targets]


def _check_labels(labels: torch.Tensor, outputs: int, focal: bool) -> None:
    """Labels must be object classes: 0 to M - 1 of the class head's `outputs` (M + 1 with
    softmax, M "no object", or M with focal)."""
    m = outputs if focal else outputs - 1
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < m:
        no_object = "" if focal else f'; {m} is "no object"'
        raise ValueError(
            f"target labels run from {int(labels.min())} to {int(labels.max())} but the model has "
            f"{m} classes (0 to {m - 1}{no_object}): number the classes from 0, or give the model "
            "more"
        )


FOCAL_ALPHA, FOCAL_GAMMA, FOCAL_WEIGHT = 0.25, 2.0, 2.0
"""The focal class loss's alpha and gamma (Lin et al. 2017) and its weight in both the matching
cost and the loss (Deformable DETR's set_cost_class and cls_loss_coef with focal: 2)."""


def sigmoid_focal_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The focal loss of each logit against its 0 / 1 target (RetinaNet, Lin et al. 2017, eq. 5):
    alpha_t (1 - p_t)^gamma BCE, elementwise, with alpha FOCAL_ALPHA and gamma FOCAL_GAMMA."""
    p = logits.sigmoid()
    bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    alpha_t = FOCAL_ALPHA * targets + (1 - FOCAL_ALPHA) * (1 - targets)
    return alpha_t * (1 - p_t) ** FOCAL_GAMMA * bce


@torch.no_grad()
def hungarian_match(
    class_logits: torch.Tensor,
    boxes: torch.Tensor,
    targets: Sequence[Target],
    cost_class: float = 1.0,
    cost_box: float = 5.0,
    cost_giou: float = 2.0,
    focal: bool = False,
) -> list[Match]:
    """The least-cost assignment of each image's targets to distinct queries (§3.1, eq. 1).

    class_logits (B, Q, M + 1), boxes (B, Q, 4) cxcywh in [0, 1], targets: B (labels (n_b,),
    boxes (n_b, 4) cxcywh) -> B (query_idx (n_b,), target_idx (n_b,)) long tensors on the CPU.
    With focal, class_logits are (B, Q, M) and the class cost is the focal loss's at the target
    class less its loss as a negative (Deformable DETR's), in place of -p(class).
    """
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError as e:
        raise ImportError("install scipy: pip install scipy") from e
    batch, n_queries, _ = class_logits.shape
    targets = _targets(targets, batch)
    for b, (labels, _) in enumerate(targets):
        if len(labels) > n_queries:
            raise ValueError(
                f"image {b} has {len(labels)} target boxes but the model has {n_queries} "
                "queries: use more queries than the most objects in an image"
            )
    sizes = [len(labels) for labels, _ in targets]
    if sum(sizes) == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return [(empty, empty) for _ in targets]
    labels = torch.cat([labels for labels, _ in targets])  # (n,)
    _check_labels(labels.cpu(), class_logits.shape[-1], focal)
    # one (B * Q, n) cost matrix for the batch, as DETR: one transfer to the CPU, then per image
    dtype = torch.promote_types(boxes.dtype, torch.float32)  # float32 under autocast
    pred = boxes.flatten(0, 1).to(dtype)  # (B * Q, 4)
    labels = labels.to(pred.device)
    if focal:
        p = class_logits.flatten(0, 1).to(dtype).sigmoid()[:, labels]  # (B * Q, n)
        positive = FOCAL_ALPHA * (1 - p) ** FOCAL_GAMMA * -(p + 1e-8).log()
        negative = (1 - FOCAL_ALPHA) * p**FOCAL_GAMMA * -(1 - p + 1e-8).log()
        class_cost = positive - negative
    else:
        class_cost = -class_logits.flatten(0, 1).to(dtype).softmax(-1)[:, labels]  # (B * Q, n)
    target_boxes = torch.cat([boxes for _, boxes in targets]).to(pred)  # (n, 4)
    cost = (
        cost_class * class_cost
        + cost_box * torch.cdist(pred, target_boxes, p=1)
        - cost_giou * generalized_box_iou(cxcywh_to_xyxy(pred), cxcywh_to_xyxy(target_boxes))
    )  # (B * Q, n)
    cost = cost.view(batch, n_queries, -1).cpu()  # (B, Q, n)
    if not torch.isfinite(cost).all():
        raise ValueError(
            "the matching cost is not finite: the predicted logits or boxes hold NaN or inf "
            "(has training diverged? lower the learning rate or clip gradients)"
        )
    matches = []
    for b, part in enumerate(cost.split(sizes, dim=-1)):  # part: (B, Q, n_b)
        query_idx, target_idx = linear_sum_assignment(part[b].numpy())
        matches.append(
            (
                torch.as_tensor(query_idx, dtype=torch.long),
                torch.as_tensor(target_idx, dtype=torch.long),
            )
        )
    return matches


def set_loss(
    class_logits: torch.Tensor,
    boxes: torch.Tensor,
    targets: Sequence[Target],
    matches: Sequence[Match],
    no_object_weight: float = 0.1,
    class_weight: float = 1.0,
    box_weight: float = 5.0,
    giou_weight: float = 2.0,
    focal: bool = False,
) -> SetLoss:
    """The summed set loss of one layer's predictions under a given matching (module rules).

    class_logits (B, Q, M + 1), boxes (B, Q, 4) cxcywh, targets and matches: B each (as
    hungarian_match) -> SetLoss. With focal, class_logits are (B, Q, M) and the class term is
    the focal loss summed over every query and class (each class a yes / no; a matched query's
    class is its one yes), as Deformable DETR's loss_ce times its num_boxes.
    """
    batch, n_queries, n_classes = class_logits.shape  # M + 1 (softmax) or M (focal)
    targets = _targets(targets, batch)
    device = class_logits.device
    dtype = torch.promote_types(boxes.dtype, torch.float32)  # float32 under autocast
    n_boxes = sum(len(labels) for labels, _ in targets)
    if len(matches) != batch:
        raise ValueError(f"{batch} images but {len(matches)} matches: give one per image")
    image_idx, query_idx, matched_labels, matched_targets = [], [], [], []
    for b, ((labels, target_boxes), (queries, target_idx)) in enumerate(
        zip(targets, matches, strict=True)
    ):
        image_idx.append(torch.full_like(queries, b))
        query_idx.append(queries)
        matched_labels.append(labels[target_idx.to(labels.device)].to(device))
        matched_targets.append(target_boxes[target_idx.to(target_boxes.device)].to(device))
    image_idx = torch.cat(image_idx).to(device)  # (n,)
    query_idx = torch.cat(query_idx).to(device)  # (n,)
    matched_labels = torch.cat(matched_labels)  # (n,)
    matched_targets = torch.cat(matched_targets).to(dtype)  # (n, 4)

    if focal:  # every (query, class) a yes / no: a matched query's class is its one yes
        yes = torch.zeros(batch, n_queries, n_classes, dtype=dtype, device=device)
        yes[image_idx, query_idx, matched_labels] = 1.0
        class_term = sigmoid_focal_loss(class_logits.to(dtype), yes).sum()
    else:  # class: every query; "no object" (index M) unless matched
        target_classes = torch.full(
            (batch, n_queries), n_classes - 1, dtype=torch.long, device=device
        )  # (B, Q)
        target_classes[image_idx, query_idx] = matched_labels
        weight = torch.ones(n_classes, device=device)
        weight[-1] = no_object_weight
        cross_entropy = F.cross_entropy(
            class_logits.flatten(0, 1).to(dtype), target_classes.flatten(), weight=weight.to(dtype)
        )  # () weighted mean over the B * Q queries
        class_term = cross_entropy * max(n_boxes, 1)

    # boxes: the matched pairs only
    matched_boxes = boxes[image_idx, query_idx].to(dtype)  # (n, 4)
    l1 = (matched_boxes - matched_targets).abs().sum()
    giou_pairs = generalized_box_iou(
        cxcywh_to_xyxy(matched_boxes), cxcywh_to_xyxy(matched_targets)
    ).diagonal()  # (n,): pair k against pair k, as DETR
    giou = (1 - giou_pairs).sum()

    loss = class_weight * class_term + box_weight * l1 + giou_weight * giou
    return SetLoss(loss, class_term.detach(), l1.detach(), giou.detach(), n_boxes)


def detr_loss(
    layers: Sequence[tuple[torch.Tensor, torch.Tensor]],
    targets: Sequence[Target],
    aux: bool = True,
    cost_class: float = 1.0,
    cost_box: float = 5.0,
    cost_giou: float = 2.0,
    no_object_weight: float = 0.1,
    class_weight: float = 1.0,
    box_weight: float = 5.0,
    giou_weight: float = 2.0,
    focal: bool = False,
) -> SetLoss:
    """DETR's loss (§3.1, with §3.2's auxiliary losses when aux): each layer matched and scored on
    its own, the sums added. With focal, class costs and terms are focal (hungarian_match,
    set_loss) and weighted FOCAL_WEIGHT in place of cost_class and class_weight.

    layers: (class_logits (B, Q, M + 1), boxes (B, Q, 4)) of each decoder layer, the last one
    last; targets: B (labels (n_b,), boxes (n_b, 4)) -> SetLoss of the summed terms (n_boxes
    counted once), with .last the last layer's own terms.
    """
    if not layers:
        raise ValueError("no decoder layers' predictions to score: give at least the last layer")
    scored = layers if aux else layers[-1:]
    if focal:
        cost_class = class_weight = FOCAL_WEIGHT
    parts = []
    for class_logits, boxes in scored:
        matches = hungarian_match(
            class_logits, boxes, targets, cost_class, cost_box, cost_giou, focal
        )
        parts.append(
            set_loss(
                class_logits,
                boxes,
                targets,
                matches,
                no_object_weight,
                class_weight,
                box_weight,
                giou_weight,
                focal,
            )
        )
    return SetLoss(
        loss=sum(p.loss for p in parts),
        class_nll=sum(p.class_nll for p in parts),
        l1=sum(p.l1 for p in parts),
        giou=sum(p.giou for p in parts),
        n_boxes=parts[-1].n_boxes,
        last=parts[-1],
    )


def denoise_loss(
    logits: torch.Tensor,
    boxes: torch.Tensor,
    denoise: DenoiseQueries,
    aux: bool = True,
    class_weight: float = 1.0,
    box_weight: float = 5.0,
    giou_weight: float = 2.0,
    focal: bool = False,
) -> torch.Tensor:
    """The denoising queries' loss (DN-DETR; model.denoise): each real query against its own
    object, no matching: cross entropy of its class + box_weight x L1 + giou_weight x (1 - GIoU),
    summed over the real queries of every layer (the last only without aux) and divided by the
    groups, so that each object counts once a layer, as in the set loss (a sum over objects).
    With focal: the focal loss over the query's classes (its object's the one yes), weighted
    FOCAL_WEIGHT, in place of the cross entropy.

    logits (n_layers, B, D, M + 1) (focal: M), boxes (n_layers, B, D, 4) cxcywh -> () with
    gradient."""
    real = denoise.real  # (B, D)
    labels = denoise.target_labels[real]  # (n * G,)
    target = denoise.target_boxes[real].float()  # (n * G, 4)
    total = logits.new_zeros((), dtype=torch.float32)
    if focal:
        class_weight = FOCAL_WEIGHT
        yes = F.one_hot(labels, logits.shape[-1]).float()  # (n * G, M)
    for layer in range(logits.shape[0]) if aux else (logits.shape[0] - 1,):
        predicted = boxes[layer][real].float()  # (n * G, 4)
        chosen = logits[layer][real].float()  # (n * G, M + 1) or (n * G, M)
        if focal:
            cross_entropy = sigmoid_focal_loss(chosen, yes).sum()
        else:
            cross_entropy = F.cross_entropy(chosen, labels, reduction="sum")
        l1 = (predicted - target).abs().sum()
        giou = generalized_box_iou(cxcywh_to_xyxy(predicted), cxcywh_to_xyxy(target)).diagonal()
        total = (
            total + class_weight * cross_entropy + box_weight * l1 + giou_weight * (1 - giou).sum()
        )
    return total / denoise.groups
