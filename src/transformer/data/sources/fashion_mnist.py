"""`transformer data fashion-mnist`: Fashion-MNIST (Xiao, Rasul & Vollgraf 2017; Zalando, MIT
licence) from the IDX files Debian's dataset-fashion-mnist installs, as prepared splits
(transformer.data.images reads them): the 60,000 training images less a stratified, seeded
validation set, and the official 10,000 test images."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...files import atomic_write_text
from ..image_tensors import ImageError
from ..images import (
    FASHION_MNIST_LABELS,
    FASHION_MNIST_PACKAGE,
    read_fashion_mnist,
    save_split,
    stratified_split,
)


def build_fashion_mnist(
    out_dir: str | os.PathLike,
    source: str | os.PathLike | None = None,
    n_valid: int = 5000,
    seed: int = 0,
) -> dict:
    """DIR/{train,valid,test}.safetensors: the 60,000 training images less a stratified, seeded
    validation set of n_valid, and the official 10,000 test images; DIR/README.md says what they
    are."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ImageError(f"--out {out} is a file: give a directory for the dataset")
    data = read_fashion_mnist(source)
    images, labels = data["train"]
    train, valid = stratified_split(labels, n_valid, seed)
    out.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": (images[train], labels[train]),
        "valid": (images[valid], labels[valid]),
        "test": data["test"],
    }
    for name, (x, y) in splits.items():
        save_split(out / f"{name}.safetensors", x, y, list(FASHION_MNIST_LABELS))
    counts = {name: np.bincount(y, minlength=10).tolist() for name, (_, y) in splits.items()}
    atomic_write_text(
        out / "README.md",
        "\n".join(
            [
                "# Fashion-MNIST, prepared by `transformer data fashion-mnist`",
                "",
                "Zalando's Fashion-MNIST (Xiao, Rasul & Vollgraf 2017, MIT licence), read from "
                "the IDX files of Debian's",
                f"{FASHION_MNIST_PACKAGE}: 28 x 28 grayscale images of 10 classes.",
                "",
                "Each `{split}.safetensors` holds `images` (uint8, N x 1 x 28 x 28, 0-255) and "
                "`labels` (int64, N),",
                "with the label names as JSON in the metadata key `labels`. valid.safetensors is "
                f"{n_valid:,} images held out of the 60,000 training images, stratified by class "
                f"(seed {seed});",
                "train.safetensors the rest; test.safetensors the official 10,000 test images.",
                "",
                "| label | "
                + " | ".join(f"{i} {n}" for i, n in enumerate(FASHION_MNIST_LABELS))
                + " |",
                "|---|" + "---|" * 10,
                *[
                    f"| {name} | " + " | ".join(f"{c:,}" for c in counts[name]) + " |"
                    for name in splits
                ],
                "",
            ]
        ),
    )
    return {name: len(y) for name, (_, y) in splits.items()}
