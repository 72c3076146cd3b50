"""Classification: a label for each text (an encoder with a classification head, on
label<TAB>text lines) or for each image (a ViT, on labelled images); run by `classify`, scored by
accuracy, macro-F1 and the confusion matrix (`evaluate --tsv`, `--images`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .figures import IMAGE
from .inputs import patches, per_image


def runs_texts(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder" and model.n_classes > 0 and model.vision is None


def runs_images(model: ModelConfig, pixels: bool) -> bool:
    """An image encoder (a dual encoder's task comes before): with its head, or the body of one
    (an imported ViT without a classifier: it reads images and no text)."""
    return model.arch == "encoder" and model.vision is not None


def prepare_texts(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Classify

    return Classify(config, run_dir, dist, say, resume)


def prepare_images(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import ImageClassify

    return ImageClassify(config, run_dir, say, resume)


def score(pipeline, config: RunConfig, test: tuple[str, ...]) -> dict[str, float]:
    """Accuracy (%) and macro-F1 on the validation data and on the test file or folder."""
    from ..evaluation.scoring import score_classifier

    row: dict[str, float] = {}
    valid = config.data.valid_images or config.data.valid_tsv
    for split, path in (("valid", valid), ("test", test[0] if test else None)):
        if path:
            scores, _ = score_classifier(pipeline, path)
            row[f"{split}_accuracy"] = round(100 * scores.accuracy, 2)
            row[f"{split}_macro_f1"] = round(scores.macro_f1, 4)
    return row


def infer_texts(pipeline, lines, **settings):
    """`pipeline(lines)`: each text's top labels with their probabilities (Pipeline.classify)."""
    return pipeline.classify(lines, **settings)


def infer_images(pipeline, images, **settings):
    """`pipeline(images)`: each image's top labels with their probabilities
    (Pipeline.classify_images)."""
    return pipeline.classify_images(images, **settings)


TEXTS = Task(
    name="text-classification",
    summary="text classification: a label for each text",
    described="a text classifier",
    objectives=("classify",),
    family="encoder",
    runs=runs_texts,
    prepare=prepare_texts,
    infer=infer_texts,
    command="classify",
    routes=(Route("/v1/classify"),),
    evaluate=(Scored("--tsv", "classification", "a classifier's accuracy"),),
    score=score,
    test_files=1,
    trains=lambda config: config.data.train_images is None,
)

IMAGES = Task(
    name="image-classification",
    summary="image classification: a label for each image (ViT)",
    described="an image classifier",
    objectives=("classify",),
    family="encoder",
    runs=runs_images,
    prepare=prepare_images,
    batch_size=256,
    tokenizers=False,
    inputs=patches,
    cost=per_image,
    attention=IMAGE,
    infer=infer_images,
    command="classify",
    routes=(Route("/v1/classify"),),
    evaluate=(Scored("--images", "image classification", "an image classifier's accuracy"),),
    score=score,
    test_files=1,
    trains=lambda config: config.data.train_images is not None,
)
