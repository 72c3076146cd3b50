"""A detector without a Transformer: the baseline row beside DETR, so DETR's mAP means something.

On the canvases of `transformer data detection` (DIR/{train,valid,test}), COCO's mAP@[.5:.95],
AP50 and AP75 (transformer.evaluation.detection.coco_map, our COCOeval) of a dense one-stage
detector in the style of CenterNet ("Objects as Points", Zhou et al. 2019) and FCOS, in plain
PyTorch (benchmark-only code):

- backbone: DETR's own (transformer.model.detection.ConvBackbone: --stages stride-2 stages of
  --width channels, doubling, then a 1x1 convolution to --d-model), so the two rows differ only
  in what comes after the feature map; (B, 1, 96, 96) -> a 12 x 12 map at the defaults, as
  configs/detection.toml;
- head, per feature-map position, no attention: two 3x3 convolutions (GroupNorm, ReLU), then
  1x1 convolutions to (a) n_classes heatmap logits and (b) 4 box numbers: the centre's offset
  within the cell and the box's (w, h) relative to the image, each through a sigmoid
  (transformer.model.detection.DenseHead, which DETR also trains on its encoder with
  model.detection.dense_aux, as Co-DETR);
- targets: an object belongs to the cell holding its centre; its class's heatmap gets a
  Gaussian peaked at 1 on that cell with sigma = the box's (w, h) in cells / 6 (TTFNet's
  elliptical Gaussian, Liu et al. 2020; CenterNet's radius rule gives almost none at this grid),
  overlapping Gaussians of one class taking the maximum;
- loss: CenterNet's focal loss on the heatmap (alpha 2, beta 4, over the number of objects),
  plus DETR's box losses at each object's cell: 5 x L1 + 2 x (1 - GIoU) on relative (cx, cy, w, h)
  (transformer.evaluation.boxes), averaged over the objects (the targets and the losses are
  transformer.training.objectives.detection.dense_loss's);
- decoding, no NMS (CenterNet's): sigmoid heatmap, peaks = positions equal to their 3x3
  max-pool, the top 100 peaks of an image over all classes scored by their probability, each with
  the box its cell predicts;
- training as configs/detection.toml trains DETR where it applies: pixels in [-1, 1]
  (to_pixels), horizontal flips of image and boxes with probability 1/2, AdamW (weight decay 1e-4),
  --warmup linear steps to --lr then a cosine to 1e-5 ending on the clock when --minutes run out
  (validation time included, as the trainer's max_minutes), gradient norm clipped to 1, fp32.
  DIR/valid is scored every --valid-every steps and at the end; the best of those models is the
  one scored on DIR/test (DETR's best/).

    transformer data detection --out data/detection
    python benchmarks/detection_baseline.py --data data/detection --minutes 60 [--batch 32]
        [--lr 1e-3] [--warmup 300] [--width 32] [--stages 3] [--d-model 128] [--image-size 96]
        [--valid-every 500] [--seed 0] [--out results.json]

    python benchmarks/detection_baseline.py --data data/detection --dense-head-of runs/detection/best

The second form trains nothing: it scores a trained DETR's dense head (model.detection.dense_aux,
the same DenseHead on DETR's encoder) as this baseline is scored, without DETR's decoder.

Read it as: the test mAP a convolutional detector reaches on this CPU in the same minutes as
DETR (compare at equal --minutes on the same machine: the budget is wall clock, so run it alone);
images/s counts training steps only. Both see 12 x 12 feature maps: this one answers at each
cell, DETR with 10 queries attending to all of them.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from transformer.data.coco import load_detection
from transformer.data.image_tensors import to_pixels
from transformer.evaluation.detection import coco_map
from transformer.evaluation.detector import relative_to_xywh
from transformer.model.detection import ConvBackbone, DenseHead
from transformer.runtime.measure_cache import cpu_name
from transformer.training.objectives.detection.dense_loss import dense_loss
from transformer.training.objectives.detection.objective import flip_boxes
from transformer.training.schedule import warmup_cosine

# Legend: B batch, K classes, G grid (feature-map positions along a side), P = G * G, C d_model,
# N objects in a batch, Q detections kept per image.


class CenterDetector(nn.Module):
    """ConvBackbone + a dense head (transformer.model.detection.DenseHead, the head DETR trains on
    its encoder with model.detection.dense_aux): (B, channels, S, S) -> heatmap logits
    (B, K, G, G) and boxes (B, G, G, 4) relative (cx, cy, w, h), one per cell."""

    def __init__(self, channels: int, width: int, stages: int, d_model: int, n_classes: int):
        super().__init__()
        self.backbone = ConvBackbone(channels, width, stages, d_model)
        self.head = DenseHead(d_model, n_classes)

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.backbone(pixels))  # (B, P, C), row-major -> the head's two


class DetrDenseHead(nn.Module):
    """A trained DETR's encoder and its dense head (model.detection.dense_aux), read as this
    baseline reads its CNN: (B, channels, S, S) -> (heatmap logits, boxes), no decoder. Scoring it
    beside DETR's own answers tells whether DETR's encoder or its set decoder costs the mAP."""

    def __init__(self, detr: nn.Module):
        super().__init__()
        self.detr = detr

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        heat, boxes = self.detr.dense_head(self.detr.encode(pixels))
        return heat.float(), boxes.float()


def loss(model: CenterDetector, pixels, boxes, labels) -> torch.Tensor:
    """Focal loss + 5 x L1 + 2 x (1 - GIoU) of the boxes at the objects' cells, over the objects
    (transformer.training.objectives.detection.dense_loss, whose targets and losses these are)."""
    heat_logits, pred = model(pixels)  # (B, K, G, G), (B, G, G, 4)
    total, n = dense_loss(heat_logits, pred, list(zip(labels, boxes, strict=True)))
    return total / max(1, n)


@torch.no_grad()
def detect(model: CenterDetector, images: torch.Tensor, top: int = 100, batch: int = 100):
    """uint8 images (N, channels, S, S) -> per image (scores (Q,), classes (Q,), boxes (Q, 4)
    relative (cx, cy, w, h)): the top peaks of the heatmap, no NMS."""
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(images), batch):
        logits, boxes = model(
            to_pixels(images[start : start + batch])
        )  # (B, K, G, G), (B, G, G, 4)
        heat = logits.sigmoid()
        heat = heat * (heat == F.max_pool2d(heat, 3, stride=1, padding=1))  # peaks only
        p = heat.shape[2] * heat.shape[3]
        scores, index = heat.flatten(1).topk(min(top, heat[0].numel()))  # (B, Q) over K * P
        cells = (index % p)[..., None].expand(-1, -1, 4)  # (B, Q, 4)
        picked = boxes.flatten(1, 2).gather(1, cells)  # (B, Q, 4)
        for s, k, b in zip(scores, index // p, picked, strict=True):
            keep = s > 0  # a class with fewer peaks than Q leaves zeros
            out.append((s[keep], k[keep], b[keep]))
    model.train(was_training)
    return out


def evaluate(model: CenterDetector, data) -> dict:
    """COCO's metrics (coco_map) of the model on a DetectionSet, boxes in original pixels."""
    truth, predictions = [], []
    for (scores, classes, boxes), gold, y, (w, h) in zip(
        detect(model, data.images), data.boxes, data.labels, data.sizes, strict=True
    ):
        truth.append({"boxes": relative_to_xywh(gold, w, h), "labels": y.numpy()})
        predictions.append(
            {
                "boxes": relative_to_xywh(boxes, w, h),
                "scores": scores.numpy().astype(np.float64),
                "labels": classes.numpy(),
            }
        )
    return coco_map(truth, predictions)


def train(args, train_set, valid_set) -> tuple[CenterDetector, dict]:
    """Train for args.minutes of wall clock; the model with the best valid mAP and a record."""
    torch.manual_seed(args.seed)
    g = torch.Generator().manual_seed(args.seed)
    k = len(train_set.names)
    model = CenterDetector(train_set.images.shape[1], args.width, args.stages, args.d_model, k)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    budget, n = args.minutes * 60, len(train_set.labels)
    if n < args.batch:
        raise SystemExit(f"{args.data}/train has {n} images, fewer than --batch {args.batch}")
    start = time.monotonic()
    step, warmup_end, valid_s, best, best_state, history = 0, None, 0.0, -1.0, None, []

    def validate() -> None:
        nonlocal valid_s, best, best_state
        began = time.monotonic()
        scores = evaluate(model, valid_set)
        valid_s += time.monotonic() - began
        minutes = (time.monotonic() - start) / 60
        history.append(
            {"step": step, "minutes": minutes, "map": scores["map"], "ap50": scores["ap50"]}
        )
        print(
            f"step {step:,}  {minutes:.1f} min  valid mAP "
            f"{scores['map']:.4f}  AP50 {scores['ap50']:.4f}  AP75 {scores['ap75']:.4f}",
            flush=True,
        )
        if scores["map"] > best:
            best, best_state = (
                scores["map"],
                {name: t.clone() for name, t in model.state_dict().items()},
            )

    while time.monotonic() - start < budget:
        order = torch.randperm(n, generator=g)
        for i in range(n // args.batch):  # whole batches only
            elapsed = time.monotonic() - start
            if elapsed >= budget:
                break
            index = order[i * args.batch : (i + 1) * args.batch]
            flip = torch.rand(len(index), generator=g) < 0.5
            images = train_set.images[index]
            images = torch.where(flip[:, None, None, None], images.flip(-1), images)
            boxes = [
                flip_boxes(train_set.boxes[j]) if f else train_set.boxes[j]
                for j, f in zip(index.tolist(), flip.tolist(), strict=True)
            ]
            labels = [train_set.labels[j] for j in index.tolist()]
            if step == args.warmup:
                warmup_end = elapsed
            progress = (
                0.0
                if warmup_end is None
                else (elapsed - warmup_end) / max(budget - warmup_end, 1e-9)
            )
            for group in optimizer.param_groups:
                group["lr"] = warmup_cosine(step + 1, args.lr, args.warmup, 10**9, 1e-5, progress)
            value = loss(model, to_pixels(images), boxes, labels)
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % 100 == 0:
                print(f"step {step:,}  loss {value.item():.3f}", flush=True)
            if step % args.valid_every == 0:
                validate()
    if not history or history[-1]["step"] != step:
        validate()
    seconds = time.monotonic() - start
    model.load_state_dict(best_state)
    record = {
        "steps": step,
        "seconds": seconds,
        "images_per_s": step * args.batch / max(seconds - valid_s, 1e-9),
        "valid": history,
    }
    return model, record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder of `transformer data detection`")
    parser.add_argument("--minutes", type=float, help="wall-clock training budget")
    parser.add_argument(
        "--dense-head-of",
        metavar="MODEL",
        help="train nothing: score this trained DETR's dense head (dense_aux) on DIR/test as the "
        "baseline is scored, no decoder",
    )
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=300, help="linear warmup steps")
    parser.add_argument(
        "--width", type=int, default=32, help="backbone channels of the first stage"
    )
    parser.add_argument(
        "--stages", type=int, default=3, help="stride-2 backbone stages (grid = S / 2**stages)"
    )
    parser.add_argument("--d-model", type=int, default=128, help="feature-map channels (C)")
    parser.add_argument(
        "--image-size", type=int, default=96, help="side the images are read at (S)"
    )
    parser.add_argument("--valid-every", type=int, default=500, help="steps between validations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the results here (JSON)")
    args = parser.parse_args()

    data = Path(args.data)
    for split in ("train", "valid", "test"):
        if not (data / split / "annotations.json").is_file():
            raise SystemExit(
                f"{data / split} has no annotations.json: build the data with "
                f"`transformer data detection --out {data}`"
            )
    size = args.image_size
    if args.dense_head_of:
        score_dense_head(args.dense_head_of, data, size)
        return
    if args.minutes is None:
        raise SystemExit("give --minutes (the training budget) or --dense-head-of MODEL")
    splits = {split: load_detection(data / split, 1, size) for split in ("train", "valid", "test")}
    print(
        f"CPU: {cpu_name()}, {torch.get_num_threads()} threads; "
        f"{len(splits['train'].labels):,} training images of {size} x {size}",
        flush=True,
    )
    model, record = train(args, splits["train"], splits["valid"])
    test = evaluate(model, splits["test"])
    params = sum(p.numel() for p in model.parameters())
    result = {
        "name": f"CenterNet-style dense head on DETR's backbone (no Transformer), {params / 1e6:.2f}M parameters",
        "test": test,
        "parameters": params,
        "cpu": cpu_name(),
        "threads": torch.get_num_threads(),
        **record,
        "args": vars(args),
    }
    print(
        f"test mAP {test['map']:.4f}  AP50 {test['ap50']:.4f}  AP75 {test['ap75']:.4f}  "
        f"({record['steps']:,} steps, {record['images_per_s']:.0f} images/s, {params:,} parameters)"
    )
    print(
        "| model | test mAP | AP50 | AP75 | parameters | steps | minutes |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    print(
        f"| {result['name']} | {test['map']:.3f} | {test['ap50']:.3f} | {test['ap75']:.3f} | "
        f"{params:,} | {record['steps']:,} | {args.minutes:g} |"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


def score_dense_head(model_dir: str, data: Path, size: int) -> None:
    """Print the test metrics of a trained DETR's dense head, decoded as the baseline's."""
    from transformer.model_dir import load_model

    detr = load_model(model_dir).eval()
    if getattr(detr, "dense_head", None) is None:
        raise SystemExit(f"{model_dir} has no dense head: train it with model.detection.dense_aux")
    test = evaluate(DetrDenseHead(detr), load_detection(data / "test", 1, size))
    print(
        f"{model_dir}'s dense head alone (no decoder): test mAP {test['map']:.4f}  "
        f"AP50 {test['ap50']:.4f}  AP75 {test['ap75']:.4f}"
    )


if __name__ == "__main__":
    main()
