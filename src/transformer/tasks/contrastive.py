"""Text-image dual encoders (CLIP): an image tower and a text tower trained so that matching pairs
embed close; run by `embed`, scored by zero-shot accuracy and retrieval recall (`evaluate
--images` of a dual encoder)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Scored, Task
from .evaluation import Confusion, Evaluation, EvaluationError
from .figures import IMAGE
from .inputs import patches, per_image_and_token
from .reports import open_model

PLOTTED_NAMES = 30
"""--plot draws at most this many names (a confusion matrix of 1,000 names is not a picture):
those most often confused, as gold or as prediction."""


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.contrastive is not None


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import Contrastive

    return Contrastive(config, run_dir, dist, say, resume)


def infer(pipeline, texts, **settings):
    """`pipeline(texts)`: the unit embeddings of texts (Pipeline.embed_texts; images:
    Pipeline.embed_images)."""
    return pipeline.embed_texts(texts, **settings)


def evaluate_retrieval(e: Evaluation) -> Confusion | None:
    """`evaluate --images SPLIT` of a dual encoder: zero-shot accuracy (each image given the
    nearest of the split's names), recall@1 and @5 both ways (evaluation.retrieval); --output
    writes each image's predicted name, --plot asks for the confusion matrix."""
    from ..data.lines import write_text
    from ..evaluation.retrieval import RECALL_AT, score_retrieval
    from ..files import check_output, check_picture

    others = [
        flag
        for flag, value in (
            ("--text", e.text),
            ("--src", e.src),
            ("--ref", e.ref),
            ("--tsv", e.tsv),
            ("--classifier", e.classifier),
        )
        if value
    ]
    if others:
        raise EvaluationError(
            f"give --images (a dual encoder's zero-shot and retrieval scores) alone, without "
            f"{', '.join(others)}"
        )
    if e.plot:
        check_picture("--plot", e.plot, "the picture")
    if e.output:
        check_output(e.output)
    pipeline = open_model(e, TASK)
    scores, predicted = score_retrieval(pipeline, e.images)
    c = scores.classification
    if e.output:
        write_text(e.output, [c.labels[p] for p in predicted])
    at = " / ".join(f"@{k}" for k in RECALL_AT)

    def shares(recall: dict[int, float]) -> str:
        return " / ".join(f"{recall[k]:.2%}" for k in RECALL_AT)

    print(
        f"zero-shot accuracy {c.accuracy:.2%}  macro-F1 {c.macro_f1:.4f}  ({scores.images:,} "
        f"images of {e.images}, each given the nearest of its {scores.names:,} names)"
    )
    print(
        f"retrieval recall{at}: image->text {shares(scores.image_to_text)}  text->image "
        f"{shares(scores.text_to_image)}"
    )
    return confusion(e, c) if e.plot else None


def confusion(e: Evaluation, scores) -> Confusion:
    """The confusion matrix to draw; over PLOTTED_NAMES names, of the ones most often confused."""
    from ..data.lines import note
    from ..evaluation.metrics import ClassificationScores

    n = len(scores.labels)
    title = (
        f"{Path(e.model_dir).name} on {Path(e.images).name}: zero-shot accuracy "
        f"{scores.accuracy:.1%}"
    )
    if n > PLOTTED_NAMES:
        m = scores.confusion
        errors = [sum(m[i]) + sum(row[i] for row in m) - 2 * m[i][i] for i in range(n)]
        keep = sorted(sorted(range(n), key=lambda i: -errors[i])[:PLOTTED_NAMES])
        scores = ClassificationScores(
            [scores.labels[i] for i in keep], [[m[i][j] for j in keep] for i in keep]
        )
        title += f" ({PLOTTED_NAMES} of {n} names: the most confused)"
        note("evaluate", f"--plot shows {PLOTTED_NAMES} of the {n} names, the most confused")
    return Confusion(scores, title)


TASK = Task(
    name="contrastive",
    summary="text-image dual encoders: images and texts in one embedding space (CLIP)",
    described="a text-image dual encoder",
    objectives=("contrastive",),
    family="encoder",
    runs=runs,
    prepare=prepare,
    attention=IMAGE,
    batch_size=256,
    inputs=patches,
    cost=per_image_and_token,
    infer=infer,
    command="embed",
    evaluate=(
        Scored(
            "--images",
            "zero-shot",
            "a dual encoder's zero-shot and retrieval scores",
            run=evaluate_retrieval,
        ),
    ),
)
