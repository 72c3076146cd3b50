"""Classifier-free guidance for a class-conditional image generator: how often a classifier
recognises the samples, and how varied they stay, at each guidance scale.

    python benchmarks/image_guidance.py runs/fashion-mnist-igpt/best \
        --classifier runs/fashion-mnist-vit/best --real data/fashion-mnist/test.safetensors \
        --scales 1 1.5 2 3 --samples 100 --seed 1

For each scale: `--samples` images of every label (decoding/images.py, temperature 1), the share
the classifier names as their label (what `transformer evaluate --classifier` reports), and the
spread of each label's samples: the mean pixel distance (root mean square over pixels, 0-255)
between pairs of samples of one label, over the same for pairs of real images of that label
(`--real`; 1.0 = as varied as the real images). Guidance buys recognisable samples with spread:
the table shows how much of each. The device is --device (default: the GPU when torch sees one).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformer.data.images import open_images  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.evaluation.image_lm import score_samples  # noqa: E402
from transformer.evaluation.metrics import classification_scores  # noqa: E402
from transformer.runtime.measure_cache import cpu_name


def spread(images: torch.Tensor, pairs: int = 2000, seed: int = 0) -> float:
    """Mean RMS pixel distance between random pairs of distinct images (N, C, H, W) uint8."""
    n = len(images)
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, n, (pairs,), generator=g)
    b = (a + torch.randint(1, n, (pairs,), generator=g)) % n  # never the same image
    x = images.float().flatten(1)
    return float(((x[a] - x[b]) ** 2).mean(1).sqrt().mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model_dir", help="a class-conditional image generator")
    p.add_argument("--classifier", required=True, help="an image classifier of the same labels")
    p.add_argument("--real", required=True, help="real labelled images (the spread's reference)")
    p.add_argument("--scales", type=float, nargs="+", default=[1.0, 1.5, 2.0, 3.0])
    p.add_argument("--samples", type=int, default=100, help="samples per label and scale")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()

    generator = Pipeline.load(args.model_dir, device=args.device)
    classifier = Pipeline.load(args.classifier, device=args.device)
    labels = list(generator.pixels.labels)
    real = open_images(args.real)
    real_spread = {
        label: spread(real.images[real.labels == real.names.index(label)]) for label in labels
    }
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else cpu_name()
    print(f"{args.model_dir}: {args.samples} samples a label and scale, seed {args.seed}, {device}")
    rows = []
    for scale in args.scales:
        started = time.perf_counter()
        kept: dict[int, list[torch.Tensor]] = {}
        share, truth, predicted = score_samples(
            generator,
            classifier,
            args.samples,
            seed=args.seed,
            batch_size=args.samples,
            guidance_scale=scale,
            on_images=lambda images, i, kept=kept: kept.setdefault(i, []).append(images),
        )
        ratio = {
            labels[i]: spread(torch.cat(images)) / real_spread[labels[i]]
            for i, images in kept.items()
        }
        scores = classification_scores(predicted, truth, labels)
        recall = {row["label"]: row["recall"] for row in scores.per_class()}
        rows.append(
            {
                "scale": scale,
                "recognised": share,
                "spread": sum(ratio.values()) / len(ratio),
                "per_label": {label: [recall[label], ratio[label]] for label in labels},
                "seconds": time.perf_counter() - started,
            }
        )
        print(
            f"guidance {scale:g}: recognised {share:.2%}, spread {rows[-1]['spread']:.3f} of the "
            f"real images' ({rows[-1]['seconds']:.0f} s)"
        )
        for label in labels:
            print(f"  {label:<12} {recall[label]:7.2%}  spread {ratio[label]:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
