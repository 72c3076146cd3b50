"""Classification: a label for each text (an encoder with a classification head, on
label<TAB>text lines) or for each image (a ViT, on labelled images); run by `classify`, scored by
accuracy, macro-F1 and the confusion matrix (`evaluate --tsv`, `--images`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .evaluation import Confusion, Evaluation, EvaluationError
from .figures import IMAGE
from .inputs import patches, per_image
from .reports import open_model


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
    valid = config.data.images.valid or config.data.text.valid_tsv
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


def evaluate_classifier(e: Evaluation) -> Confusion | None:
    """Accuracy, macro-F1, per-class scores and the confusion matrix on --tsv texts or --images
    (--output: the predicted labels; --plot: the matrix to draw)."""
    from ..data.lines import note
    from ..data.text import DataError
    from ..decoding.inputs import truncation_note
    from ..evaluation.scoring import score_classifier
    from ..files import check_picture
    from ..model.transformer import EncoderOnly

    flag = "--tsv" if e.tsv else "--images"
    if e.text or e.src or e.ref or (e.tsv and e.images):
        raise EvaluationError(
            f"give {flag} (a classifier's accuracy) alone, without --text, --src, --ref or the "
            "other"
        )
    if e.plot:
        check_picture("--plot", e.plot, "the picture")
    pipeline = open_model(e)
    if not isinstance(pipeline.model, EncoderOnly) or pipeline.model.config.n_classes == 0:
        raise EvaluationError(f"{flag} is for classifiers: this model is not one")
    if (pipeline.model.config.vision is None) != bool(e.tsv):
        raise EvaluationError(
            "this is an image classifier: use --images"
            if e.tsv
            else "this is a text classifier: use --tsv"
        )
    if e.images:
        scores, predicted = score_classifier(pipeline, e.images)
        return report(e, scores, predicted, f"images of {e.images}", e.images)
    if pipeline.labels is None:
        raise EvaluationError(
            f"{e.model_dir} has no labels.json: evaluate --tsv needs a classifier trained here"
        )
    cut: list[int] = []
    try:
        scores, predicted = score_classifier(pipeline, e.tsv, on_truncate=cut.extend)
    except DataError as error:
        raise EvaluationError(str(error)) from None
    if cut:
        note(
            "evaluate", truncation_note(cut, scores.total, pipeline.model.config.max_positions - 2)
        )
    return report(e, scores, predicted, f"texts of {e.tsv}", e.tsv)


def report(e: Evaluation, scores, predicted: list[int], what: str, source: str) -> Confusion | None:
    """Accuracy, macro-F1, the per-class table and the confusion matrix printed (--output: the
    predicted labels written); the matrix to draw when --plot asks for it."""
    from ..data.lines import write_text

    labels = scores.labels
    if e.output:
        write_text(e.output, [labels[p] for p in predicted])
    print(
        f"accuracy {scores.accuracy:.2%}  macro-F1 {scores.macro_f1:.4f}  ({scores.total:,} {what})"
    )
    width = max(map(len, labels))
    print(f"{'label':<{width}}  precision  recall      F1  support")
    for row in scores.per_class():
        print(
            f"{row['label']:<{width}}  {row['precision']:9.4f}  {row['recall']:6.4f}  "
            f"{row['f1']:6.4f}  {row['support']:7,}"
        )
    print("confusion matrix (rows: gold, columns: predicted, in the order above):")
    for label, counts in zip(labels, scores.confusion, strict=True):
        print(f"{label:<{width}}  " + " ".join(f"{n:6,}" for n in counts))
    if not e.plot:
        return None
    return Confusion(
        scores,
        f"{Path(e.model_dir).name} on {Path(source).name}: "
        f"accuracy {scores.accuracy:.1%}, macro-F1 {scores.macro_f1:.3f}",
    )


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
    evaluate=(
        Scored("--tsv", "classification", "a classifier's accuracy", run=evaluate_classifier),
    ),
    score=score,
    test_files=1,
    trains=lambda config: config.data.images.train is None,
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
    evaluate=(
        Scored(
            "--images",
            "image classification",
            "an image classifier's accuracy",
            run=evaluate_classifier,
        ),
    ),
    score=score,
    test_files=1,
    trains=lambda config: config.data.images.train is not None,
)
