"""Scoring an image generator: bits per dimension on held-out images, and how recognisable its
class-conditional samples are to a classifier.

Bits per dimension are reported three ways (transformer.data.pixels has the rules): given each
image's condition (its label or name, as trained), unconditionally (from <s> alone; a model trained
with data.images.drop_condition > 0 has learned this), and the conditional figure as an 8-bit bound
(each level spread evenly over its bin), the number comparable with published 8-bit results.

Sample recognition (a Classification Accuracy Score in the spirit of Ravuri & Vinyals 2019, read
the other way): `per_class` images are sampled for every label and an image classifier trained on
the real images names each; the share it names as the label they were sampled for.
"""

from __future__ import annotations

from ..data.image_tensors import ImageError
from ..data.images import open_images
from ..data.pixels import START
from ..decoding.images import image_log_likelihoods


def image_prefixes(pipeline, names: list[str]) -> list[list[int]]:
    """Each image's condition as the model was trained: label, name, or <s>."""
    tokens = pipeline.pixels
    if tokens.labels:
        unknown = sorted(set(names) - set(tokens.labels))
        if unknown:
            raise ImageError(
                f"label {unknown[0]!r} is not one this model was trained on "
                f"({', '.join(tokens.labels)})"
            )
        return [tokens.prefix(label=n) for n in names]
    if tokens.chars:
        return [tokens.prefix(name=n) for n in names]
    return [[START] for _ in names]


def score_image_lm(pipeline, path: str, batch_size: int = 32, limit: int = 0) -> dict[str, float]:
    """Bits per dimension of the images at `path` (a prepared split or a folder of class folders;
    the first `limit` images when limit > 0)."""
    data = open_images(path)
    tokens = pipeline.pixels
    images, labels = data.images, data.labels
    if limit:
        images, labels = images[:limit], labels[:limit]
    want = (tokens.channels, tokens.image_size, tokens.image_size)
    if tuple(images.shape[1:]) != want:
        raise ImageError(
            f"{path} holds images of shape {tuple(images.shape[1:])}; the model generates {want}"
        )
    names = [data.names[i] for i in labels]
    model = pipeline.model
    conditional = image_log_likelihoods(
        model, tokens, images, image_prefixes(pipeline, names), batch_size
    )
    n = len(images)
    result = {"images": float(n)}
    result["bits_per_dim"] = tokens.bits_per_dim(-float(conditional.sum()), n)
    result["bits_per_dim_8bit"] = tokens.bits_per_dim_8bit(result["bits_per_dim"])
    if tokens.labels or tokens.chars:
        unconditional = image_log_likelihoods(model, tokens, images, [[START]] * n, batch_size)
        result["bits_per_dim_unconditional"] = tokens.bits_per_dim(-float(unconditional.sum()), n)
    return result


def score_samples(
    generator,
    classifier,
    per_class: int,
    seed: int = 0,
    batch_size: int = 50,
    on_images=None,
    **decode,
) -> tuple[float, list[int], list[int]]:
    """Sample per_class images of each of the generator's labels and classify them: the share
    classified as their label, and the (true, predicted) label indices (generator's numbering).
    on_images(images, label_index), when given, sees every batch of samples."""
    labels = list(generator.pixels.labels)
    if not labels:
        raise ValueError("sample recognition needs a class-conditional generator (labels)")
    if sorted(classifier.labels or []) != sorted(labels):
        raise ValueError(
            "the classifier's labels are not the generator's: train it on the same classes "
            f"({', '.join(labels)})"
        )
    truth, predicted = [], []
    for index, label in enumerate(labels):
        for start in range(0, per_class, batch_size):
            n = min(batch_size, per_class - start)
            images = generator.generate_images(
                n, label=label, seed=seed * 1_000_003 + index * 1009 + start, **decode
            )
            if on_images is not None:
                on_images(images, index)
            for top in classifier.classify_images(images):
                truth.append(index)
                predicted.append(labels.index(top[0][0]))
    right = sum(t == p for t, p in zip(truth, predicted, strict=True))
    return right / max(len(truth), 1), truth, predicted
