"""Images for the image encoder (ViT): Fashion-MNIST's IDX files, prepared splits, and folders of
images.

Prepared split (what `transformer data fashion-mnist` writes, with
transformer.data.sources.fashion_mnist): one safetensors file per split,
    images  uint8 (N, C, H, W), pixel values 0-255 as stored
    labels  int64 (N,), indices into the label names
and the label names as JSON in the file's metadata ("labels"). A model reads images / 255.

A folder of images (a user's own data): DIR/<label>/<file>.png|.jpg|.jpeg|.bmp|.gif|.webp, one
folder per class, read with Pillow and converted to grayscale ("L") or RGB as the channels say.
Every image must have the size the config says; a corrupt file, a size mismatch or an empty
class folder is one ImageError naming it. Labels are the folder names, sorted.

Fashion-MNIST (Xiao, Rasul & Vollgraf 2017; Zalando, MIT licence): 60,000 training and 10,000
test images, 28 x 28 grayscale, 10 classes, as four gzipped IDX files (Debian package
dataset-fashion-mnist, /usr/share/datasets/fashion-mnist).

What is done to image tensors once read (pixels for the encoder, augmentation, fitting to a
config's size and channels) is image_tensors.py's.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..files import atomic_write
from .image_tensors import ImageError

FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
FASHION_MNIST_LABELS = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
_IDX_TYPES = {
    0x08: np.uint8,
    0x09: np.int8,
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """An IDX file (LeCun's MNIST format; .gz is decompressed) as an array of its shape and type.

    Layout: two zero bytes, a type code (0x08 unsigned byte, ...), the number of dimensions, then
    each dimension as a big-endian 32-bit integer, then the data in row-major order."""
    path = Path(path)
    try:
        data = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    except FileNotFoundError:
        raise ImageError(f"{path} not found") from None
    except (OSError, EOFError) as e:
        raise ImageError(f"{path} cannot be read ({e})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ImageError(
            f"{path} is not an IDX file (it does not start with 0, 0, a type code, a dimension "
            "count)"
        )
    dtype, ndim = np.dtype(_IDX_TYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ImageError(f"{path} is truncated inside its header")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    size = int(np.prod(shape)) * dtype.itemsize
    if len(data) != header + size:
        raise ImageError(
            f"{path} holds {len(data) - header:,} bytes of data; its header {shape} says {size:,}"
        )
    return (
        np.frombuffer(data, dtype=dtype, offset=header)
        .reshape(shape)
        .astype(dtype.newbyteorder("="))
    )


def read_fashion_mnist(
    source: str | os.PathLike | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"train": (images (60000, 28, 28) uint8, labels (60000,) uint8), "test": (10000 of each)}."""
    folder = Path(source) if source else FASHION_MNIST_DIR
    if not folder.is_dir():
        raise ImageError(
            f"{folder} not found: install Fashion-MNIST with `apt-get install -y "
            f"{FASHION_MNIST_PACKAGE}` "
            "(or pass --source DIR with its four IDX files)"
        )
    out = {}
    for split, (images, labels) in FASHION_MNIST_FILES.items():
        x, y = read_idx(folder / images), read_idx(folder / labels)
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise ImageError(
                f"{folder / images} {x.shape} and {folder / labels} {y.shape} do not pair up: "
                "expected (N, H, W) images and N labels"
            )
        out[split] = (x, y)
    return out


def stratified_split(labels: np.ndarray, n_valid: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, valid indices): n_valid examples held out, each class in proportion to its
    count (the largest remainders get the leftover), chosen at random from a seed; both sorted."""
    classes, counts = np.unique(labels, return_counts=True)
    exact = counts * n_valid / len(labels)
    take = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - take), kind="stable")[: n_valid - take.sum()]:
        take[i] += 1
    rng = np.random.default_rng(seed)
    valid = np.concatenate(
        [
            rng.choice(np.flatnonzero(labels == c), k, replace=False)
            for c, k in zip(classes, take, strict=True)
        ]
    )
    valid = np.sort(valid)
    train = np.setdiff1d(np.arange(len(labels)), valid)
    return train, valid


def save_split(
    path: str | os.PathLike, images: np.ndarray, labels: np.ndarray, names: list[str]
) -> None:
    """Write one prepared split (see the module doc), atomically. images (N, C, H, W) or (N, H, W)
    uint8."""
    from safetensors.torch import save_file

    if images.ndim == 3:
        images = images[:, None]
    tensors = {
        "images": torch.from_numpy(np.ascontiguousarray(images, dtype=np.uint8)),
        "labels": torch.from_numpy(np.asarray(labels, dtype=np.int64)),
    }
    atomic_write(
        path, lambda tmp: save_file(tensors, tmp, metadata={"labels": json.dumps(list(names))})
    )


@dataclass
class ImageSet:
    """Images (N, C, H, W) uint8, labels (N,) int64 and the label names."""

    images: torch.Tensor
    labels: torch.Tensor
    names: list[str]


def load_images(path: str | os.PathLike, channels: int, image_size: int) -> ImageSet:
    """A prepared split (.safetensors) or a folder of class folders, checked against the model's
    channels and image_size."""
    path = Path(path)
    if not path.exists():
        raise ImageError(
            f"{path} not found: give a prepared split (.safetensors) or a folder of class folders"
        )
    data = _load_prepared(path) if path.is_file() else _load_folder(path, channels, image_size)
    want = (channels, image_size, image_size)
    if tuple(data.images.shape[1:]) != want:
        raise ImageError(
            f"{path} holds images of shape {tuple(data.images.shape[1:])}, the model takes {want} "
            "(model.vision.channels, image_size, image_size)"
        )
    return data


def open_images(path: str | os.PathLike) -> ImageSet:
    """A prepared split or a folder of class folders, at the shape it has: a folder's images are
    read in the mode and size of its first image (grey "L" as 1 channel, anything else as RGB)."""
    from PIL import Image

    path = Path(path)
    if not path.exists():
        raise ImageError(
            f"{path} not found: give a prepared split (.safetensors) or a folder of class folders"
        )
    if path.is_file():
        return _load_prepared(path)
    first = next((f for f in sorted(path.rglob("*")) if f.suffix.lower() in IMAGE_SUFFIXES), None)
    if first is None:
        raise ImageError(f"{path} has no image files: expected {path}/<label>/<image files>")
    try:
        with Image.open(first) as image:
            channels, size = (1 if image.mode in ("L", "1") else 3), image.size
    except OSError as e:
        raise ImageError(f"{first} cannot be read as an image ({e})") from None
    if size[0] != size[1]:
        raise ImageError(f"{first} is {size[0]} x {size[1]} pixels: the images must be square")
    return _load_folder(path, channels, size[0])


def _load_prepared(path: Path) -> ImageSet:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            names = json.loads((f.metadata() or {}).get("labels", "null"))
            images, labels = f.get_tensor("images"), f.get_tensor("labels")
    except Exception as e:  # safetensors raises its own error types
        raise ImageError(
            f"{path} is not a prepared image split ({str(e).splitlines()[0]}): "
            "write one with transformer data fashion-mnist, or give a folder of class folders"
        ) from None
    if (
        images.dtype != torch.uint8
        or images.dim() != 4
        or labels.dim() != 1
        or len(images) != len(labels)
    ):
        raise ImageError(
            f"{path}: expected images uint8 (N, C, H, W) and labels (N,), got {images.dtype} "
            f"{tuple(images.shape)} and {tuple(labels.shape)}"
        )
    if not isinstance(names, list) or (len(labels) and int(labels.max()) >= len(names)):
        raise ImageError(f"{path}: the metadata's label names do not cover its labels")
    return ImageSet(images, labels.long(), names)


def _load_folder(path: Path, channels: int, image_size: int) -> ImageSet:

    if channels not in (1, 3):
        raise ImageError(
            f"model.vision.channels={channels}: image files are read as grayscale (1) or RGB (3)"
        )
    mode = "L" if channels == 1 else "RGB"
    folders = sorted(p for p in path.iterdir() if p.is_dir())
    if not folders:
        raise ImageError(f"{path} has no class folders: expected {path}/<label>/<image files>")
    images, labels = [], []
    for index, folder in enumerate(folders):
        files = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            raise ImageError(
                f"{folder} is an empty class folder: it has no {'/'.join(IMAGE_SUFFIXES)} file"
            )
        for file in files:
            images.append(read_image(file, mode, image_size))
            labels.append(index)
    return ImageSet(
        torch.from_numpy(np.stack(images)),
        torch.tensor(labels, dtype=torch.long),
        [f.name for f in folders],
    )


def read_image(file, mode: str, image_size: int, name: str | None = None) -> np.ndarray:
    """One image file (a path or a binary file object; `name` is what errors call it) as uint8
    (C, H, W) in mode "L" or "RGB"; its size must be image_size x image_size."""
    from PIL import Image, UnidentifiedImageError

    name = str(file) if name is None else name
    try:
        with Image.open(file) as image:
            image.load()
            pixels = np.asarray(image.convert(mode), dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as e:
        raise ImageError(f"{name} cannot be read as an image ({e})") from None
    if pixels.shape[0] != image_size or pixels.shape[1] != image_size:
        raise ImageError(
            f"{name} is {pixels.shape[1]} x {pixels.shape[0]} pixels; the model takes "
            f"{image_size} x {image_size}: resize it"
        )
    return np.array(
        pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1)
    )  # a writable copy


def read_image_resized(
    file, mode: str, image_size: int, name: str | None = None
) -> tuple[np.ndarray, tuple[int, int]]:
    """One image file of any size as uint8 (C, image_size, image_size) in mode "L" or "RGB"
    (resized bilinearly, the aspect ratio not kept: a detector's boxes are relative to the image),
    and its original (width, height)."""
    from PIL import Image, UnidentifiedImageError

    name = str(file) if name is None else name
    try:
        with Image.open(file) as image:
            image.load()
            size = image.size
            if image.mode != mode:
                image = image.convert(mode)
            if image.size != (image_size, image_size):
                image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
            pixels = np.asarray(image, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as e:
        raise ImageError(f"{name} cannot be read as an image ({e})") from None
    return np.array(pixels[None] if pixels.ndim == 2 else pixels.transpose(2, 0, 1)), size
