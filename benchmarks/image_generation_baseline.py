"""Models without a Transformer beside Image GPT's bits/dim on Fashion-MNIST, so its number means
something, and the term that turns any of them into a model of the 8-bit image.

On the splits of `transformer data fashion-mnist` (DIR/{train,test}.safetensors), quantised as
transformer.data.pixels quantises them (--levels, 16 by default), the test bits/dim of:
- uniform: every level equally likely, log2(levels) bits a pixel;
- independent pixels: a categorical distribution per position (and per class, for the
  class-conditional row) counted on the training images, add-one smoothed: what is left when a
  pixel sees none of the others;
- a causal neighbourhood (a context-counting model in the spirit of JBIG/CALIC's context modelling):
  each pixel's level given the class and the levels of its west, north-west, north and north-east
  neighbours (outside the image = level 0), counted on the training images, smoothed by
  interpolating with the independent-pixel model of its position (weight n / (n + --prior) on the
  context's counts, n = that context's occurrences).
Each also as a model of the 8-bit image, two ways: the bound (each level spread evenly over the
256 / levels values of its bin: + log2(256 / levels)), and the value within the bin drawn from its
distribution counted on the training images (p(value | level), add-one smoothed, the same for every
position): + the test images' mean -log2 p(value | level). The second is what makes the figures
comparable with published 8-bit results: most of a Fashion-MNIST image is background, exactly 0,
which the even spread charges log2(256 / levels) bits a pixel. --model NAME=BITS adds a model's
bits/dim (at --levels) as a row. Runs in seconds on a CPU:

    python benchmarks/image_generation_baseline.py data/fashion-mnist [--limit 2000] \
        [--model "Image GPT, given the class=0.9985"]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from transformer.data.images import open_images
from transformer.data.pixels import PIXEL_OFFSET, ImageTokens


def levels_of(path: Path, tokens: ImageTokens) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Levels (N, 28, 28), labels (N,) and the 8-bit values (N, 28, 28)."""
    data = open_images(path)
    q = (tokens.quantise(data.images) - PIXEL_OFFSET).numpy().reshape(-1, 28, 28)
    return q, data.labels.numpy(), data.images.numpy().reshape(-1, 28, 28)


def within_bin_bits(train_values: np.ndarray, test_values: np.ndarray, levels: int) -> float:
    """Mean -log2 p(value | its level) over the test pixels, p counted on the training pixels
    (add-one smoothed over the bin's 256 / levels values)."""
    width = 256 // levels
    counts = np.ones((levels, width))
    np.add.at(counts, (train_values // width, train_values % width), 1)
    p = counts / counts.sum(-1, keepdims=True)
    return float(-np.log2(p[test_values // width, test_values % width]).mean())


def independent(train, labels, classes: int, levels: int, conditional: bool) -> np.ndarray:
    """(classes or 1, 28, 28, levels) add-one smoothed probabilities."""
    groups = classes if conditional else 1
    counts = np.ones((groups, 28, 28, levels))
    for g in range(groups):
        rows = train[labels == g] if conditional else train
        for level in range(levels):
            counts[g, :, :, level] += (rows == level).sum(0)
    return counts / counts.sum(-1, keepdims=True)


def neighbours(q: np.ndarray) -> np.ndarray:
    """(N, 28, 28, 4): the west, north-west, north and north-east levels (0 outside)."""
    p = np.pad(q, ((0, 0), (1, 0), (1, 1)))  # a row above, a column each side
    return np.stack([p[:, 1:, :-2], p[:, :-1, :-2], p[:, :-1, 1:-1], p[:, :-1, 2:]], axis=-1)


def context_model(train, labels, test, test_labels, levels, prior, base_test):
    """Summed test NLL in bits of the causal-neighbourhood model."""

    def keys(q, lab):
        n = neighbours(q)
        key = lab[:, None, None]
        for k in range(4):
            key = key * levels + n[..., k]
        return key  # (N, 28, 28)

    k_train, k_test = keys(train, labels), keys(test, test_labels)
    space = 10 * levels**4
    counts = np.zeros((space, levels))
    np.add.at(counts, (k_train.reshape(-1), train.reshape(-1)), 1)
    n = counts.sum(-1)[k_test]  # (N, 28, 28)
    hits = counts[k_test, test]  # (N, 28, 28)
    w = n / (n + prior)  # base_test (N, 28, 28): the independent model's p of the test level
    p = w * (hits / np.maximum(n, 1)) + (1 - w) * base_test
    return float(-np.log2(p).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="the folder of `transformer data fashion-mnist`")
    parser.add_argument("--levels", type=int, default=16)
    parser.add_argument("--prior", type=float, default=4.0)
    parser.add_argument("--limit", type=int, default=0, help="score the first N test images only")
    parser.add_argument(
        "--model", action="append", default=[], help="NAME=BITS: a model's bits/dim as a row"
    )
    args = parser.parse_args()
    if 256 % args.levels:
        parser.error(f"--levels {args.levels}: give a divisor of 256 (2, 4, 8, 16, 32, ...)")
    tokens = ImageTokens(28, 1, args.levels)
    train, labels, train_values = levels_of(args.data / "train.safetensors", tokens)
    test, test_labels, test_values = levels_of(args.data / "test.safetensors", tokens)
    if args.limit:
        test, test_labels, test_values = (x[: args.limit] for x in (test, test_labels, test_values))
    dims = test.size
    rows = [("uniform", math.log2(args.levels))]
    cells = np.arange(28)
    for conditional in (False, True):
        probs = independent(train, labels, 10, args.levels, conditional)
        group = test_labels if conditional else np.zeros_like(test_labels)
        p = probs[group[:, None, None], cells[None, :, None], cells[None, None, :], test]
        name = "independent pixels" + (" given the class" if conditional else "")
        rows.append((name, float(-np.log2(p).sum()) / dims))
        if conditional:
            base_test = p
    bits = context_model(train, labels, test, test_labels, args.levels, args.prior, base_test)
    rows.append(("causal neighbourhood (W, NW, N, NE) given the class", bits / dims))
    for model in args.model:
        name, _, value = model.rpartition("=")
        rows.append((name, float(value)))
    extra = math.log2(256 / args.levels)
    within = within_bin_bits(train_values, test_values, args.levels)
    print(f"test bits/dim on {len(test):,} Fashion-MNIST test images, {args.levels} levels:")
    print(f"| model | {args.levels} levels | 8-bit, even in the bin | 8-bit, counted in the bin |")
    print("|---|---:|---:|---:|")
    for name, value in rows:
        print(f"| {name} | {value:.4f} | {value + extra:.4f} | {value + within:.4f} |")
    print(f"(within the bin: {within:.4f} bits/dim counted, {extra:.4f} spread evenly)")


if __name__ == "__main__":
    main()
