"""The captioner's baseline: an image classifier over the names seen in training, its predicted
label taken as the caption, scored as a captioner is (exact match and chrF against each image's
name: transformer.evaluation.captions.caption_scores).

    transformer train configs/emoji-vit.toml --out runs/emoji-vit
    python benchmarks/caption_baseline.py runs/emoji-vit/best \\
        --images data/emoji/test.safetensors --images data/emoji/unseen.safetensors

A classifier can only answer with a name it was trained on: on a split of emoji never seen
(`unseen`) its exact match is 0 by construction, and its chrF measures how close the nearest
seen name comes. `transformer evaluate CAPTIONER --images SPLIT` gives the captioner's figures on
the same images.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformer.data.images import load_images  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.evaluation.captions import caption_scores  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("classifier", help="an image classifier's model directory")
    p.add_argument("--images", action="append", required=True, help="a labelled split (repeat)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    classifier = Pipeline.load(args.classifier)
    v = classifier.model.config.vision
    known = set(classifier.labels or [])
    results = []
    for path in args.images:
        data = load_images(path, v.channels, v.image_size)
        references = [data.names[i] for i in data.labels.tolist()]
        captions = [top[0][0] for top in classifier.classify_images(data.images)]
        scores = caption_scores(captions, references)
        seen = sum(r in known for r in references)
        results.append(
            {
                "images": path,
                "n": scores.n,
                "exact_match": scores.exact_match,
                "chrf": scores.chrf,
                "names_seen_in_training": seen,
            }
        )
        print(
            f"{path}: exact match {scores.exact_match:.2%}, chrF {scores.chrf:.2f} "
            f"({scores.n:,} images; {seen:,} of their names are the classifier's labels)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
