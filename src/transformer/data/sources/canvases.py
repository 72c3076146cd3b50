"""Object detection data (DETR): canvases of Fashion-MNIST items with their boxes, in COCO's
format, as `transformer data detection` writes them.

The canvases (build_detection), each image_size x image_size grayscale on black:
- items: 1..max_objects (a uniform count) Fashion-MNIST images, each scaled by a factor drawn
  from [0.6, 1.6] (28 px -> 17..45 px square, bilinear, Pillow), at a uniform position with the
  whole scaled square inside the canvas, pasted by per-pixel maximum so an overlap erases nothing;
- boxes: tight to the scaled item's pixels > 0, x0, y0 its first column and row holding one and
  x1, y1 one past its last (exclusive), so COCO's bbox [x0, y0, x1 - x0, y1 - y0] is in whole
  pixels; the category is the item's class;
- overlap limit: a position whose box has IoU > 0.3 with a box already placed, or covers or is
  covered by more than half of one (IoU alone lets a small item hide inside a large one, where the
  maximum can erase it), is drawn again, up to 50 times; an item that finds no place is left out
  (counted as "crowded");
- clutter (unless clutter=False): 0-2 unannotated distractors, each a random 6-12 px square cut
  from another item of the split's pool at half intensity, placed where it touches no object box
  (50 tries, else left out); then Gaussian noise of sigma 8 grey levels on every pixel, rounded
  and clipped to 0..255. Boxes come from the clean items: the noise is not in them.
The splits never share a source image: train canvases take their items (and distractors) from
Fashion-MNIST's 60,000 training images less 5,000 held out (stratified by class, seeded), valid
canvases from those 5,000, test canvases from the official 10,000 test images. Each split draws
from its own generator, numpy default_rng([seed, 1|2|3]): a split does not change with the
others' counts, and two builds from one seed are byte-identical.

On disk, COCO's object detection format:
    DIR/{train,valid,test}/images/000000.png ...   mode "L" PNGs
    DIR/{train,valid,test}/annotations.json        written after its split's images
    DIR/PROVENANCE.md
annotations.json holds "images" [{id, file_name, width, height}], "annotations" [{id, image_id,
category_id, bbox [x, y, w, h], area, iscrowd}] and "categories" [{id, name, supercategory}].
Image ids are the file numbers (from 0); annotation ids count from 1 (pycocotools' COCOeval reads
id 0 as "unmatched"); category ids are 1..10, the class index + 1, COCO's being 1-based.

Reading them, or a user's COCO data: load_detection (transformer.data.coco).
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from ...files import atomic_write, atomic_write_text
from ..coco import DetectionDataError
from ..images import (
    FASHION_MNIST_LABELS,
    FASHION_MNIST_PACKAGE,
    read_fashion_mnist,
    stratified_split,
)

ITEM_SIZE = 28
"""Fashion-MNIST's images are 28 x 28."""
SCALES = (0.6, 1.6)
LARGEST_ITEM = round(ITEM_SIZE * SCALES[1])  # 45 px
MIN_IMAGE_SIZE = LARGEST_ITEM
"""The smallest canvas: the largest scaled item must fit in it."""
MAX_IOU = 0.3
MAX_COVER = 0.5
"""The most of a box's area that another box may cover."""
TRIES = 50
CLUTTER_COUNT = (0, 2)
CLUTTER_SIZES = (6, 12)
NOISE_SIGMA = 8.0
HELD_OUT = 5000
"""Fashion-MNIST training images held out of the train canvases, for the valid canvases."""
SPLITS = ("train", "valid", "test")
__all__ = ["build_detection"]

Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, x1 and y1 exclusive


# ---- the canvases ----


@dataclass
class Canvas:
    """One canvas: pixels (S, S) uint8, its objects' boxes, class indices and source images
    (indices into the images given), and the distractors' squares and sources."""

    pixels: np.ndarray
    boxes: list[Box] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    clutter: list[Box] = field(default_factory=list)
    clutter_sources: list[int] = field(default_factory=list)
    crowded: int = 0


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes (x0, y0, x1, y1)."""
    inter = _intersection(a, b)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def overlaps(a: Box, b: Box) -> bool:
    """Whether two boxes overlap past the limit: IoU > MAX_IOU, or either covers more than
    MAX_COVER of the other's area."""
    inter = _intersection(a, b)
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return iou(a, b) > MAX_IOU or inter > MAX_COVER * smaller


def _intersection(a: Box, b: Box) -> int:
    return max(0, min(a[2], b[2]) - max(a[0], b[0])) * max(0, min(a[3], b[3]) - max(a[1], b[1]))


def _extent(pixels: np.ndarray) -> tuple[int, int, int, int]:
    """(r0, r1, c0, c1): the first and one-past-last row and column holding a pixel > 0."""
    rows, cols = np.flatnonzero(pixels.any(1)), np.flatnonzero(pixels.any(0))
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def _resize(item: np.ndarray, side: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(item).resize((side, side), Image.Resampling.BILINEAR))


def render_canvas(
    rng: np.random.Generator,
    images: np.ndarray,
    labels: np.ndarray,
    pool: np.ndarray,
    image_size: int,
    max_objects: int,
    clutter: bool,
) -> Canvas:
    """One canvas (see the module doc) of items drawn from `pool`, indices into images
    (N, 28, 28) uint8 and their labels (N,)."""
    canvas = Canvas(np.zeros((image_size, image_size), np.uint8))
    for _ in range(int(rng.integers(1, max_objects + 1))):
        index = int(pool[rng.integers(len(pool))])
        side = round(ITEM_SIZE * rng.uniform(*SCALES))
        item = _resize(images[index], side)
        if not item.any():
            continue
        r0, r1, c0, c1 = _extent(item)
        for _ in range(TRIES):
            x, y = (int(v) for v in rng.integers(0, image_size - side + 1, 2))
            box = (x + c0, y + r0, x + c1, y + r1)
            if not any(overlaps(box, other) for other in canvas.boxes):
                break
        else:
            canvas.crowded += 1
            continue
        region = canvas.pixels[y : y + side, x : x + side]
        np.maximum(region, item, out=region)
        canvas.boxes.append(box)
        canvas.labels.append(int(labels[index]))
        canvas.sources.append(index)
    if clutter:
        _add_clutter(canvas, rng, images, pool, image_size)
        noise = rng.normal(0.0, NOISE_SIGMA, canvas.pixels.shape)
        canvas.pixels = np.clip(np.rint(canvas.pixels + noise), 0, 255).astype(np.uint8)
    return canvas


def _add_clutter(
    canvas: Canvas, rng: np.random.Generator, images: np.ndarray, pool: np.ndarray, size: int
) -> None:
    """0-2 half-intensity squares cut from items of the pool, each touching no object box."""
    for _ in range(int(rng.integers(CLUTTER_COUNT[0], CLUTTER_COUNT[1] + 1))):
        index = int(pool[rng.integers(len(pool))])
        k = int(rng.integers(CLUTTER_SIZES[0], CLUTTER_SIZES[1] + 1))
        r0, r1, c0, c1 = _extent(images[index])
        top = min(r0, ITEM_SIZE - k)  # the cut starts inside the item and ends inside the 28 x 28
        left = min(c0, ITEM_SIZE - k)
        cy = int(rng.integers(top, max(top, min(r1, ITEM_SIZE) - k) + 1))
        cx = int(rng.integers(left, max(left, min(c1, ITEM_SIZE) - k) + 1))
        cut = images[index][cy : cy + k, cx : cx + k] // 2
        for _ in range(TRIES):
            x, y = (int(v) for v in rng.integers(0, size - k + 1, 2))
            square = (x, y, x + k, y + k)
            if not any(_intersection(square, box) for box in canvas.boxes):
                region = canvas.pixels[y : y + k, x : x + k]
                np.maximum(region, cut, out=region)
                canvas.clutter.append(square)
                canvas.clutter_sources.append(index)
                break


def build_detection(
    out: str | os.PathLike,
    source: str | os.PathLike | None = None,
    image_size: int = 96,
    n_train: int = 20000,
    n_valid: int = 1000,
    n_test: int = 1000,
    max_objects: int = 6,
    clutter: bool = True,
    seed: int = 0,
) -> dict:
    """Write the canvases (see the module doc) into out; a report: per split, "canvases",
    "objects", "per_class" (10 counts), "clutter", "crowded" (items left out for want of room) and
    "sources" (the Fashion-MNIST set, "train" or "test", and the sorted indices of the images
    used, distractors included)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DetectionDataError(f"--out {out} is a file: give a directory for the dataset")
    if image_size < MIN_IMAGE_SIZE:
        raise DetectionDataError(
            f"image_size {image_size} is too small: give at least {MIN_IMAGE_SIZE} (the largest "
            f"item, 1.6 x 28 px, must fit)"
        )
    if max_objects < 1:
        raise DetectionDataError(f"max_objects {max_objects}: give at least 1 object per canvas")
    data = read_fashion_mnist(source)
    for name, (images, _) in data.items():
        if images.shape[1:] != (ITEM_SIZE, ITEM_SIZE):
            raise DetectionDataError(
                f"the Fashion-MNIST {name} images are {images.shape[1:]}, expected 28 x 28: give "
                "--source the folder of Fashion-MNIST's four IDX files"
            )
    kept, held_out = stratified_split(data["train"][1], HELD_OUT, seed)
    plan = {
        "train": ("train", kept, n_train),
        "valid": ("train", held_out, n_valid),
        "test": ("test", np.arange(len(data["test"][1])), n_test),
    }
    report: dict = {key: {} for key in ("canvases", "objects", "per_class", "clutter", "crowded")}
    report["sources"] = {}
    for k, (split, (origin, pool, n)) in enumerate(plan.items(), start=1):
        rng = np.random.default_rng([seed, k])
        images, labels = data[origin]
        render = partial(render_canvas, rng, images, labels, pool, image_size, max_objects, clutter)
        counts = _write_split(out / split, n, render)
        for key, value in counts.items():
            if key == "sources":
                report["sources"][split] = (origin, value)
            else:
                report[key][split] = value
    command = ["transformer", "data", "detection", "--out", str(out)]
    command += ["--source", str(source)] if source else []
    command += ["--image-size", str(image_size), "--train", str(n_train), "--valid", str(n_valid)]
    command += ["--test", str(n_test), "--max-objects", str(max_objects)]
    command += ([] if clutter else ["--no-clutter"]) + ["--seed", str(seed)]
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, image_size, seed, command))
    return report


def _write_split(folder: Path, n: int, render) -> dict:
    """n canvases from render() as folder/images/NNNNNN.png, then folder/annotations.json."""
    from PIL import Image

    (folder / "images").mkdir(parents=True, exist_ok=True)
    images, annotations, used = [], [], set()
    per_class, clutter, crowded = [0] * len(FASHION_MNIST_LABELS), 0, 0
    for i in range(n):
        canvas = render()
        name = f"images/{i:06d}.png"
        pixels = Image.fromarray(canvas.pixels)
        atomic_write(folder / name, lambda tmp, pixels=pixels: pixels.save(tmp, format="PNG"))
        height, width = canvas.pixels.shape
        images.append({"id": i, "file_name": name, "width": width, "height": height})
        for (x0, y0, x1, y1), label in zip(canvas.boxes, canvas.labels, strict=True):
            w, h = x1 - x0, y1 - y0
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i,
                    "category_id": label + 1,
                    "bbox": [x0, y0, w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
            per_class[label] += 1
        used.update(canvas.sources + canvas.clutter_sources)
        clutter, crowded = clutter + len(canvas.clutter), crowded + canvas.crowded
    coco = {
        "info": {
            "description": "Fashion-MNIST items on canvases, by `transformer data detection`",
            "contributor": "Zalando Research (Fashion-MNIST)",
        },
        "licenses": [{"id": 1, "name": "MIT", "url": "https://opensource.org/licenses/MIT"}],
        "images": images,
        "annotations": annotations,
        "categories": [
            {"id": i + 1, "name": name, "supercategory": "fashion"}
            for i, name in enumerate(FASHION_MNIST_LABELS)
        ],
    }
    atomic_write_text(folder / "annotations.json", json.dumps(coco, separators=(",", ":")))
    return {
        "canvases": n,
        "objects": len(annotations),
        "per_class": per_class,
        "clutter": clutter,
        "crowded": crowded,
        "sources": np.array(sorted(used), dtype=np.int64),
    }


def _provenance(report: dict, image_size: int, seed: int, command: list[str]) -> str:
    rows = [
        f"| {split} | {report['canvases'][split]:,} | {report['objects'][split]:,} | "
        + " | ".join(f"{c:,}" for c in report["per_class"][split])
        + f" | {report['clutter'][split]:,} | {report['crowded'][split]:,} | "
        f"{len(report['sources'][split][1]):,} of Fashion-MNIST {report['sources'][split][0]} |"
        for split in SPLITS
    ]
    return "\n".join(
        [
            "# Object detection canvases, by `transformer data detection`",
            "",
            f"Items from Zalando's Fashion-MNIST (Xiao, Rasul & Vollgraf 2017; MIT licence), read "
            f"from the IDX files of Debian's {FASHION_MNIST_PACKAGE}, on {image_size} x "
            f"{image_size} grayscale canvases, with COCO annotations (`annotations.json` per "
            "split, category ids 1-10 = class index + 1).",
            "",
            "Each canvas holds 1 to --max-objects items, each scaled by a factor in [0.6, 1.6] "
            "(bilinear), placed whole inside the canvas and pasted by per-pixel maximum; a "
            "placement whose box overlaps a placed box with IoU > 0.3, or covers more than half of "
            "one or has more than half of its own covered, is drawn again (50 tries, "
            "then the item is left out: `crowded`). Boxes are tight to the scaled item's pixels "
            "> 0, in whole pixels. With clutter (the default) each canvas also gets 0-2 "
            "unannotated 6-12 px squares cut from other items at half intensity, away from every "
            "box, and Gaussian noise (sigma 8 grey levels, clipped) on every pixel.",
            "",
            f"train canvases use the Fashion-MNIST training images less {HELD_OUT:,} held out "
            f"(stratified by class, seed {seed}); valid canvases use those {HELD_OUT:,}; test "
            "canvases the official 10,000 test images. No source image is in two splits.",
            "",
            "| split | canvases | objects | "
            + " | ".join(FASHION_MNIST_LABELS)
            + " | distractors | crowded | source images |",
            "|---|" + "---:|" * (len(FASHION_MNIST_LABELS) + 5),
            *rows,
            "",
            f"Seed {seed}. Made with:",
            "",
            f"    {shlex.join(command)}",
            "",
        ]
    )
