"""Translation and text-to-text: an encoder-decoder over text, trained by teacher forcing on
aligned files or input<TAB>target pairs (seq2seq), or by T5's span corruption; run by
`translate`, scored by BLEU and chrF (`evaluate --src --ref`, `--pairs`)."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..config import EVALUATE_SEARCH, ModelConfig, RunConfig
from .base import Route, Scored, Task
from .evaluation import Evaluation, EvaluationError
from .figures import TEXT
from .reports import open_model, print_pair_scores


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "encoder-decoder"


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.corpora import prepare_data
    from ..training.objectives import Seq2Seq, SpanCorruption

    data = prepare_data(config, run_dir, dist, say, resume)
    return (
        SpanCorruption(config, data)
        if config.objective == "span_corruption"
        else Seq2Seq(config, data)
    )


def score(pipeline, config: RunConfig, test: tuple[str, ...]) -> dict[str, float]:
    """BLEU and chrF on the validation files and on the test pair (SRC, REF)."""
    row: dict[str, float] = {}
    d = config.data
    if d.text.valid_src and d.text.valid_tgt:
        row.update(translation_scores(pipeline, d.text.valid_src, d.text.valid_tgt, "valid"))
    if test:
        row.update(translation_scores(pipeline, test[0], test[1], "test"))
    return row


def translation_scores(
    pipeline, src: str | tuple[str, ...], ref: str | tuple[str, ...], split: str
) -> dict[str, float]:
    """BLEU and chrF on aligned files; a list of them is scored as one (read one after the other)
    and each on its own too (`{split}_bleu_{name}`, the name of the file's folder, as a mixture's
    data/NAME/valid.spa), with their mean (`{split}_bleu_mean`)."""
    from ..data.text import DataError
    from ..evaluation.metrics import bleu, chrf

    srcs = (src,) if isinstance(src, str) else tuple(src)
    refs = (ref,) if isinstance(ref, str) else tuple(ref)
    parts = []
    for s, r in zip(srcs, refs, strict=True):
        sources = Path(s).read_text(encoding="utf-8").splitlines()
        references = Path(r).read_text(encoding="utf-8").splitlines()
        if len(sources) != len(references):
            raise DataError(
                f"{s} has {len(sources):,} lines but {r} has {len(references):,}: "
                "they must be aligned"
            )
        parts.append((Path(s).parent.name or Path(s).stem, references, sources))
    hypotheses = pipeline.translate([line for _, _, sources in parts for line in sources])
    references = [line for _, refs_, _ in parts for line in refs_]
    scores = {
        f"{split}_bleu": round(bleu(hypotheses, references).score, 2),
        f"{split}_chrf": round(chrf(hypotheses, references).score, 2),
    }
    names = [name for name, _, _ in parts]
    if len(parts) > 1 and len(set(names)) == len(names):
        start = 0
        for name, refs_, _ in parts:
            hyps = hypotheses[start : start + len(refs_)]
            start += len(refs_)
            scores[f"{split}_bleu_{name}"] = round(bleu(hyps, refs_).score, 2)
            scores[f"{split}_chrf_{name}"] = round(chrf(hyps, refs_).score, 2)
        scores[f"{split}_bleu_mean"] = round(
            statistics.fmean(scores[f"{split}_bleu_{n}"] for n in names), 2
        )
    return scores


def infer(pipeline, lines, **settings):
    """`pipeline(lines)`: the translations (Pipeline.translate)."""
    return pipeline.translate(lines, **settings)


def evaluate_translations(e: Evaluation) -> None:
    """BLEU and chrF (or ROUGE, --metric rouge) of the translations of --src against --ref, and
    the share of placeholders kept; --output writes the translations."""
    from ..data.lines import note, read_text, write_text
    from ..decoding.inputs import truncation_note
    from ..evaluation.metrics import bleu, chrf
    from ..evaluation.scoring import pair_scores
    from ..files import check_output

    if e.output:
        check_output(e.output)
    pipeline = open_model(e)
    sources, references = read_text(e.src, "--src"), read_text(e.ref, "--ref")
    if len(sources) != len(references):
        raise EvaluationError(
            f"--src has {len(sources):,} lines but --ref has {len(references):,}: they must be "
            "aligned line by line"
        )
    cut: list[int] = []
    hypotheses = pipeline.translate(sources, **e.settings(EVALUATE_SEARCH), on_truncate=cut.extend)
    if cut:
        note("evaluate", truncation_note(cut, len(sources), pipeline.max_source_tokens))
    if e.output:
        write_text(e.output, hypotheses)
    if e.metric == "rouge":
        print_pair_scores(
            {"-": {"lines": len(hypotheses), **pair_scores(hypotheses, references, "rouge")}}
        )
    else:
        for score in (bleu(hypotheses, references), chrf(hypotheses, references)):
            print(score)
    if line := placeholders_line(sources, hypotheses):
        print(line)


def placeholders_line(sources: list[str], hypotheses: list[str]) -> str | None:
    """The line "placeholders kept: ..." over the source lines with placeholders or markup
    (data.markup's spans: each must come out as often as it went in); None when no line has
    one."""
    from ..data.markup import kept_share

    kept, lines = kept_share(sources, hypotheses)
    if not lines:
        return None
    return (
        f"placeholders kept: {kept / lines:.1%} ({kept:,} of the {lines:,} lines with "
        "placeholders or markup keep every one exactly)"
    )


def evaluate_pairs(e: Evaluation) -> None:
    """BLEU, chrF and exact matches per task of a text-to-text model on input<TAB>target lines."""
    from ..data.lines import note, write_text
    from ..decoding.inputs import truncation_note
    from ..evaluation.scoring import score_pairs
    from ..files import check_output
    from ..model.transformer import EncoderDecoder

    if not Path(e.pairs).is_file():
        raise EvaluationError(f"--pairs {e.pairs} not found: give a file of input<TAB>target lines")
    if e.output:
        check_output(e.output)
    pipeline = open_model(e)
    if not isinstance(pipeline.model, EncoderDecoder):
        raise EvaluationError(
            "--pairs is for encoder-decoder (text-to-text) models: this model is not one"
        )
    cut: list[int] = []
    scores, outputs = score_pairs(
        pipeline, e.pairs, on_truncate=cut.extend, metric=e.metric, **e.settings(EVALUATE_SEARCH)
    )
    if cut:
        note("evaluate", truncation_note(cut, len(outputs), pipeline.max_source_tokens))
    if e.output:
        write_text(e.output, outputs)
    print_pair_scores(scores)


TASK = Task(
    name="translation",
    summary="translation and text-to-text: source text in, target text out",
    described="a translation model",
    objectives=("seq2seq", "span_corruption"),
    family="encoder-decoder",
    runs=runs,
    prepare=prepare,
    attention=TEXT,
    infer=infer,
    command="translate",
    routes=(
        Route("/v1/translate"),
        Route("/v1/attention"),
        Route("/translate"),
        Route("/languages"),
    ),  # + LibreTranslate's
    evaluate=(
        Scored("--src", "BLEU, chrF", "BLEU and chrF against --ref", run=evaluate_translations),
        Scored(
            "--pairs", "text-to-text", "a text-to-text model's scores per task", run=evaluate_pairs
        ),
    ),
    score=score,
    test_files=2,
)
