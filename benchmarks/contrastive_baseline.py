"""A baseline for a text-image dual encoder (CLIP, objective contrastive): naming an image by its
nearest training image on raw pixels, no model at all.

For each image of --test, its nearest image of the --train sets by L2 distance on the pixels
(0-255; every set fitted to --channels x --size x --size as training fits them:
transformer.data.images.fit_images); a hit when that image has the test image's name (label names
lowercased, as the objective reads them). Only test images whose name occurs in training are
scored: pixels cannot name an emoji never seen, so on an `unseen` split the baseline has nothing
to say, while the dual encoder's zero-shot accuracy still does. Read it beside
`transformer evaluate MODEL --images TEST`, whose zero-shot accuracy ranks the names of TEST only
(this baseline may answer any training name: it is the harder task for the same images).
transformer.evaluation.retrieval.pixel_nearest_neighbour does the work.

    python benchmarks/contrastive_baseline.py --train data/emoji/train.safetensors \\
        [--train data/fashion-mnist/train.safetensors] --test data/emoji/test.safetensors \\
        [--size 32] [--channels 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from transformer.data.image_tensors import fit_images
from transformer.data.images import open_images
from transformer.evaluation.retrieval import pixel_nearest_neighbour


def named_images(path: str, channels: int, size: int) -> tuple[torch.Tensor, list[str]]:
    data = open_images(path)
    names = [data.names[i].lower() for i in data.labels.tolist()]
    return fit_images(data.images, channels, size), names


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", action="append", required=True, help="a training image set (repeat)")
    p.add_argument("--test", required=True, help="the image set to name")
    p.add_argument("--size", type=int, default=32, help="side the images are fitted to")
    p.add_argument("--channels", type=int, default=3, choices=(1, 3))
    p.add_argument("--json", help="also write the result to this file")
    args = p.parse_args()
    start = time.perf_counter()
    images, names = [], []
    for path in args.train:
        x, n = named_images(path, args.channels, args.size)
        images.append(x)
        names += n
    test, test_names = named_images(args.test, args.channels, args.size)
    result = pixel_nearest_neighbour(torch.cat(images), names, test, test_names)
    record = {
        "train": args.train,
        "test": args.test,
        "accuracy": result.accuracy,
        "scored": result.counted,
        "test_images": result.total,
        "seconds": time.perf_counter() - start,
    }
    print(
        f"nearest training image by pixels: {result.accuracy:.2%} of {result.counted:,} test images "
        f"named right ({result.total - result.counted:,} of {result.total:,} have a name training "
        f"never had: not scored); {record['seconds']:.0f}s"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
