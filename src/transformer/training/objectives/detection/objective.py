"""detection: object detection as set prediction (DETR, Carion et al. 2020) over images with boxes
in COCO's format (model.detection; data.detection.train).

The rules:
- Data: data.detection.train / valid are COCO folders (annotations.json and the images),
  as `transformer data detection` writes them or a user brings them; images are resized to
  model.detection.image_size, boxes kept relative to the image (data.coco.load_detection).
  Classes are the annotation file's categories in the order of their ids.
- Batches: train.batch_tokens // P images a batch (P feature-map positions, what the encoder
  sees), in an order shuffled per epoch; whole batches only. data.images.horizontal_flip mirrors an
  image and its boxes with probability 1/2, drawn from the batch's generator.
- Loss: each decoder layer's predictions are matched one to one to the image's objects by the
  Hungarian algorithm (class probability + L1 + generalized IoU costs), then cross entropy over
  all queries (the "no object" class weighted by model.detection.no_object_weight; or with
  class_loss focal, the focal loss over every query and class) + 5 x L1 +
  2 x (1 - GIoU) on the matched pairs (set_loss.py); every layer's loss is added when
  model.detection.aux_loss. With model.detection.dense_aux, dense_weight x the dense head's loss
  on the encoder's memory (Co-DETR; dense_loss.py: CenterNet's focal loss + 5 x L1 +
  2 x (1 - GIoU) at the objects' cells, summed) is added, in validation's loss too. With
  model.detection.denoise_groups, the denoising queries' loss (DN-DETR: each noised object's query
  against its object, set_loss.denoise_loss; the noise drawn in collate from the batch's
  generator, so a resumed run draws it again) is added in training, not in validation. Units are
  the objects, so a step's loss is DETR's (summed over the step's objects and divided by their
  count).
- Validation: the loss per object, and COCO's mAP@[.5:.95], AP50 and AP75 of the last layer's
  predictions (each image's 100 most probable (query, class) pairs, as `evaluate --detection`;
  evaluation.detection); best/ by mAP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from ....config import ConfigError, RunConfig
from ....data.batching import batch_seed, fixed_size_batches, to_device
from ....data.coco import load_detection
from ....data.image_tensors import to_pixels
from ....data.text import DataError
from ....evaluation.detection import coco_map
from ....evaluation.detector import relative_to_xywh
from ....model.build import build_model
from ....model.denoise import DenoiseQueries, denoise_queries
from ....model.detection import COCO_DETECTIONS
from ....model_dir import load_config, load_model
from ....model_records import load_labels
from ...checkpoint import step_dirs
from ..base import Objective, StepSums, autocast
from .dense_loss import dense_loss
from .set_loss import denoise_loss, detr_loss


@dataclass
class DetectionBatch:
    """Pixels (B, channels, size, size) scaled to [-1, 1] and each image's objects: (labels (n,),
    boxes (n, 4) as (cx, cy, w, h) relative to the image)."""

    pixels: torch.Tensor
    targets: list[tuple[torch.Tensor, torch.Tensor]]
    units: int
    tokens: int
    denoise: DenoiseQueries | None = None
    """Training's denoising queries (model.detection.denoise_groups), noised in collate."""

    def to(self, device) -> DetectionBatch:
        targets = [(to_device(y, device), to_device(b, device)) for y, b in self.targets]
        denoise = None if self.denoise is None else self.denoise.to(device)
        pixels = to_device(self.pixels, device)
        return DetectionBatch(pixels, targets, self.units, self.tokens, denoise)


def flip_boxes(boxes: torch.Tensor) -> torch.Tensor:
    """(n, 4) (cx, cy, w, h) relative boxes of an image mirrored left-right."""
    out = boxes.clone()
    out[:, 0] = 1.0 - out[:, 0]
    return out


class Detection(Objective):
    """DETR's set prediction over data.detection.train."""

    name = "detection"
    best_key, higher_is_better = "valid_map", True

    def __init__(self, config: RunConfig, run_dir: Path, say: Callable[[str], None], resume: bool):
        super().__init__(config)
        d, init_from = config.data, config.train.init_from
        model = config.model if not init_from else load_config(init_from)
        if model.detection is None:
            raise ConfigError(
                f"train.init_from={init_from} is not a detector: it has no model.detection"
            )
        self.detection = det = model.detection
        self.train = load_detection(d.detection.train, det.channels, det.image_size)
        self.labels = load_labels(step_dirs(run_dir)[-1]) if resume else list(self.train.names)
        if list(self.train.names) != self.labels:
            raise DataError(
                f"{d.detection.train} has the classes {self.train.names}, the run has "
                f"{self.labels}: resume on the data the run started with"
            )
        if init_from and model.n_classes != len(self.labels):
            raise ConfigError(
                f"train.init_from={init_from} detects {model.n_classes} classes, "
                f"{d.detection.train} has {len(self.labels)}: fine-tune on data of its classes"
            )
        self.valid = None
        if d.detection.valid:
            self.valid = load_detection(d.detection.valid, det.channels, det.image_size)
            if list(self.valid.names) != self.labels:
                raise DataError(
                    f"{d.detection.valid} has the classes {self.valid.names}; the training data "
                    f"({d.detection.train}) has {self.labels}: they must be the same"
                )
        self.per_batch = max(1, config.train.batch_tokens // det.grid**2)
        self.counts = torch.tensor([len(y) for y in self.train.labels])
        most = int(self.counts.max()) if len(self.counts) else 0
        if most > det.n_queries:
            raise DataError(
                f"{d.detection.train} has an image with {most} objects, more than "
                f"model.detection.n_queries={det.n_queries}: raise n_queries above the most "
                "objects an image has"
            )
        n_valid = 0 if self.valid is None else len(self.valid.labels)
        size = f"{det.channels} x {det.image_size} x {det.image_size}"
        say(
            f"data: {len(self.counts):,} training images ({int(self.counts.sum()):,} objects) and "
            f"{n_valid:,} validation images of {size}, {len(self.labels)} classes; "
            f"{self.per_batch} images per batch"
        )

    # data
    def batches(self, epoch):
        return fixed_size_batches(len(self.counts), self.per_batch, self.config.train.seed, epoch)

    def padding_share(self, batches):
        return 0.0

    def attention_shape(self):
        return self.per_batch, self.detection.grid**2

    def units(self, indices, key):
        return max(1, int(self.counts[indices].sum()))

    def collate(self, indices, key):
        images = self.train.images[indices]
        targets = [(self.train.labels[i], self.train.boxes[i]) for i in indices]
        g = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
        if self.config.data.images.horizontal_flip:
            flip = torch.rand(len(indices), generator=g) < 0.5
            images = torch.where(flip[:, None, None, None], images.flip(-1), images)
            targets = [
                (y, flip_boxes(b) if f else b)
                for (y, b), f in zip(targets, flip.tolist(), strict=True)
            ]
        batch = self._batch(images, targets)
        det = self.detection
        if det.denoise_groups:  # the noise drawn after the flips, from the batch's generator
            batch.denoise = denoise_queries(
                targets,
                det.denoise_groups,
                len(self.labels),
                det.denoise_box_noise,
                det.denoise_label_noise,
                g,
            )
        return batch

    def _batch(self, images, targets) -> DetectionBatch:
        units = max(1, sum(len(y) for y, _ in targets))
        return DetectionBatch(
            to_pixels(images), targets, units, len(images) * self.detection.grid**2
        )

    @property
    def has_valid(self):
        return self.valid is not None and len(self.valid.labels) > 0

    def valid_batches(self):
        v = self.valid
        for start in range(0, len(v.labels), self.per_batch):
            end = min(len(v.labels), start + self.per_batch)
            yield self._batch(
                v.images[start:end], [(v.labels[i], v.boxes[i]) for i in range(start, end)]
            )

    # model
    def new_model(self):
        init_from = self.config.train.init_from
        if init_from is not None:
            return load_model(init_from)
        cfg = self.config.model.replace(
            vocab_size=1, pad_id=0, bos_id=0, eos_id=0, n_classes=len(self.labels)
        )
        return build_model(cfg)

    def loss(self, net, model, batch, device):
        det = model.config.detection
        denoise = batch.denoise if model.training else None  # validation: the matching alone
        with autocast(device, self.config.train.precision):
            out = net(batch.pixels, all_layers=True, dense=det.dense_aux, denoise=denoise)
        logits, boxes = out[0], out[1]  # (n_layers, B, Q, n_classes + 1), (n_layers, B, Q, 4)
        layers = list(zip(logits.float().unbind(0), boxes.float().unbind(0), strict=True))
        focal = det.class_loss == "focal"
        sums = detr_loss(
            layers,
            batch.targets,
            aux=det.aux_loss,
            no_object_weight=det.no_object_weight,
            focal=focal,
        )
        loss = sums.loss
        if det.dense_aux:  # Co-DETR: (B, n_classes, grid, grid), (B, grid, grid, 4)
            heat_logits, cell_boxes = out[2]
            dense, _ = dense_loss(heat_logits.float(), cell_boxes.float(), batch.targets)
            loss = loss + det.dense_weight * dense  # a sum over the objects, as the set loss
        if denoise is not None:  # DN-DETR: (n_layers, B, D, n_classes + 1), (n_layers, B, D, 4)
            dn_logits, dn_boxes = out[-1]
            loss = loss + denoise_loss(dn_logits, dn_boxes, denoise, det.aux_loss, focal=focal)
        return StepSums(loss, sums.last.class_nll.detach(), batch.units, batch.tokens)

    def validate(self, model, device):
        was_training = model.training
        model.eval()
        loss = nll = units = 0.0
        truth, predictions = [], []
        with torch.no_grad():
            for batch in self.valid_batches():
                batch = batch.to(device)
                out = self.loss(model, model, batch, device)
                loss, nll, units = loss + float(out.loss), nll + float(out.nll), units + out.units
                scores, labels, boxes = model.detect(batch.pixels, pairs=COCO_DETECTIONS)
                size = self.detection.image_size
                for (y, b), s, lab, p in zip(batch.targets, scores, labels, boxes, strict=True):
                    truth.append(
                        {"boxes": relative_to_xywh(b.cpu(), size, size), "labels": y.cpu().numpy()}
                    )
                    predictions.append(
                        {
                            "boxes": relative_to_xywh(p.cpu(), size, size),
                            "labels": lab.cpu().numpy(),
                            "scores": s.float().cpu().numpy(),
                        }
                    )
        model.train(was_training)
        scores = coco_map(truth, predictions)
        return {
            "valid_loss": loss / max(units, 1),
            "valid_nll": nll / max(units, 1),
            "valid_map": scores["map"],
            "valid_ap50": scores["ap50"],
            "valid_ap75": scores["ap75"],
        }

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  mAP {result['valid_map']:.4f}  "
            f"AP50 {result['valid_ap50']:.4f}  AP75 {result['valid_ap75']:.4f}"
        )

    def save_files(self):
        return {"decode": self.config.decode, "labels": self.labels}
