"""Image generation (Image GPT): a decoder over pixel tokens, conditioned on a label, a name or
nothing; run by `generate --image`, scored by bits per dimension (`evaluate --images` of a model
with pixels.json)."""

from __future__ import annotations

from pathlib import Path

from ..config import IMAGE_SAMPLING_SETTINGS, ModelConfig, RunConfig
from .base import Scored, Task
from .evaluation import Confusion, Evaluation, EvaluationError
from .reports import open_model


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "decoder" and pixels


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.objectives import ImageLM

    return ImageLM(config, run_dir, say)


def infer(pipeline, count, **settings):
    """`pipeline(count)`: images sampled pixel by pixel (Pipeline.generate_images)."""
    return pipeline.generate_images(count, **settings)


def evaluate_image_lm(e: Evaluation) -> Confusion | None:
    """Bits/dim on --images; with --classifier, the share of class-conditional samples it
    recognises (and --plot: their confusion matrix to draw)."""
    from ..data.image_tensors import ImageError
    from ..decoding.inputs import PipelineError
    from ..evaluation.image_lm import score_image_lm, score_samples
    from ..evaluation.metrics import classification_scores
    from ..files import check_picture

    for flag, value in (("--text", e.text), ("--src", e.src), ("--tsv", e.tsv)):
        if value:
            raise EvaluationError(f"give --images (an image generator's bits/dim) without {flag}")
    if e.plot:
        if not e.classifier:
            raise EvaluationError(
                "--plot draws the samples' confusion matrix: it needs --classifier"
            )
        check_picture("--plot", e.plot, "the picture")
    pipeline = open_model(e)
    try:
        scores = score_image_lm(pipeline, e.images, limit=e.limit or 0)
    except ImageError as error:
        raise EvaluationError(str(error)) from None
    n = int(scores["images"])
    levels = pipeline.pixels.levels
    line = (
        f"bits/dim {scores['bits_per_dim']:.4f} ({levels} levels a channel, given each image's "
        f"condition)  8-bit bound {scores['bits_per_dim_8bit']:.4f}"
    )
    if "bits_per_dim_unconditional" in scores:
        line += f"  unconditional {scores['bits_per_dim_unconditional']:.4f}"
    print(f"{line}  ({n:,} images of {e.images})")
    if not e.classifier:
        return None
    try:
        classifier = e.models.load(e.classifier)
    except (OSError, ValueError) as error:
        raise EvaluationError(f"--classifier {e.classifier}: {error}") from None
    if not pipeline.pixels.labels:
        raise EvaluationError(
            "--classifier scores class-conditional samples: this model has no labels"
        )
    try:
        share, truth, predicted = score_samples(
            pipeline,
            classifier,
            e.samples,
            seed=e.seed or 0,
            **e.settings(IMAGE_SAMPLING_SETTINGS),
        )
    except (ValueError, PipelineError) as error:
        raise EvaluationError(str(error)) from None
    labels = list(pipeline.pixels.labels)
    result = classification_scores(predicted, truth, labels)
    print(
        f"samples recognised {share:.2%}  ({len(truth):,} samples, {e.samples} a label, "
        f"named by {e.classifier})"
    )
    width = max(map(len, labels))
    for row in result.per_class():
        print(f"  {row['label']:<{width}}  {row['recall']:7.2%}")
    if not e.plot:
        return None
    return Confusion(
        result,
        f"samples of {Path(e.model_dir).name} named by {Path(e.classifier).name}: {share:.1%}",
    )


TASK = Task(
    name="image-generation",
    summary="image generation: images sampled pixel by pixel (Image GPT)",
    described="an image generator",
    objectives=("image_lm",),
    family="image-generation",
    runs=runs,
    prepare=prepare,
    infer=infer,
    command="generate_images",
    tokenizers=False,
    evaluate=(
        Scored(
            "--images",
            "bits per dimension",
            "an image generator's bits per dimension",
            run=evaluate_image_lm,
        ),
    ),
)
