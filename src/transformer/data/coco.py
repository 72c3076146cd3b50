"""Reading COCO object detection data (what `transformer data detection` writes, or a user's own)
for DETR.

The rules:
- path: a split directory holding annotations.json, or a COCO annotations .json file;
- an image's file_name is looked for beside the annotations file, then in its images/ folder,
  then where COCO puts it (annotations/instances_val2017.json -> ../val2017/, or ../images/);
  the first image found decides the folder for all;
- each image is read with Pillow, converted to "L" (channels 1) or "RGB" (channels 3), and
  resized (bilinear) to image_size x image_size when its size differs; when the JSON gives a
  width and height they must be the file's;
- boxes: COCO's [x, y, w, h] in pixels, clipped to the image, then normalized by the image's
  own width and height to (cx, cy, w, h) in [0, 1] (DETR §3.1's box format), so they still fit
  after the resize; annotations with iscrowd 1 and boxes with no width or height inside the image
  are skipped and counted;
- classes: the categories sorted by id, indexed 0..K-1 (category_ids maps them back);
- anything wrong is one DetectionDataError naming the file and what to do.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .image_tensors import ImageError
from .images import read_image_resized


class DetectionDataError(ValueError):
    """Detection data is missing or malformed; the message names the file and what to do."""


@dataclass
class DetectionSet:
    """N images with their boxes, read from COCO annotations (see the module doc)."""

    images: torch.Tensor
    """(N, C, S, S) uint8, each resized to image_size x image_size."""
    boxes: list[torch.Tensor]
    """N float32 tensors (n_i, 4): (cx, cy, w, h) normalized by the original width and height."""
    labels: list[torch.Tensor]
    """N int64 tensors (n_i,): class indices 0..K-1."""
    names: list[str]
    """K class names, in the order of their category ids."""
    image_ids: list[int]
    """Each image's COCO id."""
    sizes: list[tuple[int, int]]
    """Each image's original (width, height)."""
    category_ids: list[int]
    """K COCO category ids: class i is category_ids[i]."""
    skipped: dict[str, int]
    """Annotations left out: {"crowd": iscrowd 1, "empty": no width or height inside the image}."""


ANNOTATIONS = "annotations.json"
NUMBERS = (int, float)  # exact types: JSON's true and false are no coordinates
NEEDS = {
    "image": ("id", "file_name"),
    "annotation": ("id", "image_id", "category_id", "bbox"),
    "category": ("id", "name"),
}


def load_detection(path: str | os.PathLike, channels: int, image_size: int) -> DetectionSet:
    """A split directory holding annotations.json, or a COCO annotations file (see the module
    doc), read for a model of `channels` (1 or 3) and image_size."""
    path = Path(path)
    file = path / ANNOTATIONS if path.is_dir() else path
    if not file.is_file():
        where = f"{path} has no {ANNOTATIONS}" if path.is_dir() else f"{path} not found"
        raise DetectionDataError(
            f"{where}: give a split directory written by `transformer data detection` "
            f"(DIR/train) or a COCO annotations .json file"
        )
    if channels not in (1, 3):
        raise DetectionDataError(
            f"channels={channels}: images are read as grayscale (1) or RGB (3)"
        )
    images, annotations, categories = _read_json(file)
    category_ids = sorted(c["id"] for c in categories)
    if len(set(category_ids)) != len(category_ids):
        raise DetectionDataError(f"{file}: two categories share an id; give each its own")
    index = {cid: i for i, cid in enumerate(category_ids)}
    names = {c["id"]: str(c["name"]) for c in categories}
    rows = {image["id"]: i for i, image in enumerate(images)}
    if len(rows) != len(images):
        raise DetectionDataError(f"{file}: two images share an id; give each its own")
    found = []  # (row, class index, bbox) of each annotation kept
    skipped = {"crowd": 0, "empty": 0}
    for a in annotations:
        _check_annotation(file, a, rows, index)
        if a.get("iscrowd", 0):
            skipped["crowd"] += 1
        else:
            found.append((rows[a["image_id"]], index[a["category_id"]], *a["bbox"]))
    pixels, sizes = _read_images(file, images, channels, image_size)
    table = np.array(found, dtype=np.float64).reshape(-1, 6)
    row, label = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
    wh = np.array(sizes, dtype=np.float64).reshape(-1, 2)[row]  # (M, 2) each box's image size
    x0y0 = np.clip(table[:, 2:4], 0, wh)  # clipped to the image
    x1y1 = np.clip(table[:, 2:4] + table[:, 4:6], 0, wh)
    keep = (x1y1 > x0y0).all(1)
    skipped["empty"] = int((~keep).sum())
    cxcywh = np.concatenate([(x0y0 + x1y1) / 2 / wh, (x1y1 - x0y0) / wh], 1)  # (M, 4)
    order = np.argsort(row[keep], kind="stable")  # by image, in the file's order within one
    counts = np.bincount(row[keep], minlength=len(images)).tolist()
    boxes = torch.from_numpy(cxcywh[keep][order].astype(np.float32)).split(counts)
    labels = torch.from_numpy(label[keep][order]).split(counts)
    return DetectionSet(
        images=torch.from_numpy(pixels),
        boxes=list(boxes),
        labels=list(labels),
        names=[names[cid] for cid in category_ids],
        image_ids=[image["id"] for image in images],
        sizes=sizes,
        category_ids=category_ids,
        skipped=skipped,
    )


def _read_json(file: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """images, annotations and categories of a COCO file, each record holding its NEEDS."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DetectionDataError(
            f"{file} is not JSON ({e}): give a COCO annotations file (images, annotations, "
            "categories)"
        ) from None
    except OSError as e:
        raise DetectionDataError(f"{file} cannot be read ({e.strerror or e})") from None
    if not isinstance(data, dict):
        raise DetectionDataError(
            f"{file} holds a JSON {type(data).__name__}, not an object: a COCO annotations file "
            "is an object with images, annotations and categories"
        )
    parts = []
    for key, what in (
        ("images", "image"),
        ("annotations", "annotation"),
        ("categories", "category"),
    ):
        records = data.get(key)
        if not isinstance(records, list):
            raise DetectionDataError(
                f"{file} has no {key} list: a COCO annotations file holds images, annotations "
                "and categories"
            )
        for i, record in enumerate(records):
            missing = [k for k in NEEDS[what] if not isinstance(record, dict) or k not in record]
            if missing:
                raise DetectionDataError(
                    f"{file}: {key}[{i}] has no {', '.join(missing)}: a COCO {what} needs "
                    f"{', '.join(NEEDS[what])}"
                )
        parts.append(records)
    return parts[0], parts[1], parts[2]


def _check_annotation(file: Path, a: dict, rows: dict, index: dict) -> None:
    """An annotation must point at a listed image and category and give a bbox of 4 numbers."""
    if a["image_id"] not in rows:
        raise DetectionDataError(
            f"{file}: annotation {a['id']} points at image {a['image_id']!r}, which is not in its "
            "images list: add the image or remove the annotation"
        )
    if a["category_id"] not in index:
        raise DetectionDataError(
            f"{file}: annotation {a['id']} points at category {a['category_id']!r}, which is not "
            "in its categories list: add the category or remove the annotation"
        )
    bbox = a["bbox"]
    if not (isinstance(bbox, list) and len(bbox) == 4 and all(type(v) in NUMBERS for v in bbox)):
        raise DetectionDataError(
            f"{file}: annotation {a['id']} has bbox {bbox!r}: give [x, y, width, height] in pixels"
        )


def _size_of(image: dict) -> tuple[int, int] | None:
    """The (width, height) the JSON gives an image, or None when it gives none."""
    if "width" in image and "height" in image:
        return int(image["width"]), int(image["height"])
    return None


def _image_folder(file: Path, images: list[dict]) -> Path:
    """Where the images of annotations `file` are (see the module doc), from its first image."""
    root, name = file.parent, str(images[0]["file_name"])
    stem = file.stem.split("_", 1)[-1]  # instances_val2017 -> val2017
    folders = [root, root / "images", root.parent / stem, root.parent / "images"]
    for folder in folders:
        if (folder / name).is_file():
            return folder
    raise DetectionDataError(
        f"{file}: image {images[0]['id']}'s file {name} is in none of "
        f"{', '.join(str(f) for f in dict.fromkeys(folders))}: put the images beside the "
        "annotations file or in its images/ folder"
    )


def _read_images(
    file: Path, images: list[dict], channels: int, image_size: int
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The images, (N, C, S, S) uint8, and each one's (width, height) as read."""
    mode = "L" if channels == 1 else "RGB"
    pixels = np.empty((len(images), channels, image_size, image_size), np.uint8)
    if not images:
        return pixels, []
    folder = _image_folder(file, images)
    read = []
    for i, image in enumerate(images):
        path = folder / str(image["file_name"])
        if not path.is_file():
            raise DetectionDataError(
                f"{file}: image {image['id']}'s file {path} not found: put it there or remove "
                "the image from the annotations"
            )
        try:
            array, size = read_image_resized(path, mode, image_size)
        except ImageError as e:  # Pillow's UnidentifiedImageError, a truncated file
            raise DetectionDataError(
                f"{e} (image {image['id']} of {file}): replace the file"
            ) from None
        said = _size_of(image)
        if said is not None and said != size:
            raise DetectionDataError(
                f"{file}: image {image['id']} ({path}) is {size[0]} x {size[1]} pixels, the "
                f"annotations say {said[0]} x {said[1]}: the boxes must be in the file's pixels"
            )
        pixels[i] = array
        read.append(size)
    return pixels, read
