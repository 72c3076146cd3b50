"""A sweep's scores and tables: each finished run scored on its averaged model (translation:
BLEU and chrF; classifiers: accuracy and macro-F1; else the validation loss), `results.csv` (one
row per run), `results.md` (one line per variant: mean and spread over seeds) and `results.png`.
The rules of what is scored are sweep.py's."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import RunConfig
from ..files import atomic_write_text
from ..training.checkpoint import average_into, step_dirs

if TYPE_CHECKING:
    from .sweep import Plan

RESULTS_CSV, RESULTS_MD, RESULTS_PNG = "results.csv", "results.md", "results.png"


class SweepError(ValueError):
    """A sweep cannot start or continue as asked."""


def step_of(checkpoint: Path) -> int:
    """A checkpoint directory's step (checkpoints/step-NNNNNN)."""
    return int(checkpoint.name.rsplit("-", 1)[-1])


def score_run(
    plan: Plan,
    config: RunConfig,
    name: str,
    changes,
    seed: int,
    run_dir: Path,
    log,
    at: int | None = None,
) -> dict[str, Any]:
    """The row of one run: scored at its end, or at step `at` (its checkpoints up to there)."""
    from ..decoding.pipeline import Pipeline
    from ..model.transformer import DetectionTransformer, EncoderDecoder, EncoderOnly

    checkpoints = [c for c in step_dirs(run_dir) if at is None or step_of(c) <= at]
    checkpoints = checkpoints[-plan.average :]
    if at is not None and (not checkpoints or step_of(checkpoints[-1]) != at):
        raise SweepError(
            f"{run_dir} has no checkpoint at step {at} for --at: set train.save_every to a "
            "divisor of every --at step and train.keep_last high enough to keep them"
        )
    model_dir = run_dir / "averaged"
    if checkpoints:
        shutil.rmtree(model_dir, ignore_errors=True)
        average_into(checkpoints, model_dir)
    else:
        model_dir = run_dir / "last"
    records = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip() and (at is None or json.loads(line).get("step", 0) <= at)
    ]
    train_records = [r for r in records if r.get("split") == "train"]
    valid_records = [  # at a step of --at, only the validation of that step is its own
        r for r in records if r.get("split") == "valid" and (at is None or r.get("step") == at)
    ]
    pipeline = Pipeline.load(model_dir)
    model = pipeline.model
    seconds = sum(r["tokens"] / max(r["tokens_per_s"], 1e-9) for r in train_records)
    row: dict[str, Any] = {
        "variant": name,
        **{key: value for key, value in changes},
        "seed": seed,
        **({"at": at} if at is not None else {}),
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": train_records[-1]["step"] if train_records else 0,
        "minutes": round((train_records[-1]["elapsed_s"] if train_records else 0.0) / 60, 2),
        "tokens_per_s": round(sum(r["tokens"] for r in train_records) / seconds) if seconds else 0,
        "valid_loss": valid_records[-1].get("valid_loss") if valid_records else None,
        "valid_ppl": round(valid_records[-1]["valid_ppl"], 3)
        if "valid_ppl" in (valid_records or [{}])[-1]
        else None,
        "averaged": len(checkpoints),
    }
    if seconds and isinstance(model, EncoderOnly) and all("units" in r for r in train_records):
        row["examples_per_s"] = round(
            sum(r["units"] for r in train_records) / seconds
        )  # a classifier's texts or images
    if isinstance(model, DetectionTransformer):
        from ..evaluation.detector import score_detector

        valid = config.data.valid_detection
        for split, path in (("valid", valid), ("test", plan.test[0] if plan.test else None)):
            if path:
                scores, _, _ = score_detector(pipeline, path)
                row.update({f"{split}_{k}": round(scores[k], 4) for k in ("map", "ap50", "ap75")})
    elif isinstance(model, EncoderDecoder):
        d = config.data
        if d.valid_src and d.valid_tgt:
            row.update(_translation_scores(pipeline, d.valid_src, d.valid_tgt, "valid"))
        if plan.test:
            row.update(_translation_scores(pipeline, plan.test[0], plan.test[1], "test"))
    elif isinstance(model, EncoderOnly) and model.config.n_classes:
        from ..evaluation.scoring import score_classifier

        valid = config.data.valid_images or config.data.valid_tsv
        for split, path in (("valid", valid), ("test", plan.test[0] if plan.test else None)):
            if path:
                scores, _ = score_classifier(pipeline, path)
                row.update(
                    {
                        f"{split}_accuracy": round(100 * scores.accuracy, 2),
                        f"{split}_macro_f1": round(scores.macro_f1, 4),
                    }
                )
    log(
        "  "
        + "  ".join(
            f"{k} {v}" for k, v in row.items() if k.startswith(("valid_", "test_", "steps"))
        )
    )
    return row


def _translation_scores(
    pipeline, src: str | tuple[str, ...], ref: str | tuple[str, ...], split: str
) -> dict[str, float]:
    """BLEU and chrF on aligned files; a list of them is scored as one (read one after the other)
    and each on its own too (`{split}_bleu_{name}`, the name of the file's folder, as a mixture's
    data/NAME/valid.spa), with their mean (`{split}_bleu_mean`)."""
    from ..evaluation.metrics import bleu, chrf

    srcs = (src,) if isinstance(src, str) else tuple(src)
    refs = (ref,) if isinstance(ref, str) else tuple(ref)
    parts = []
    for s, r in zip(srcs, refs, strict=True):
        sources = Path(s).read_text(encoding="utf-8").splitlines()
        references = Path(r).read_text(encoding="utf-8").splitlines()
        if len(sources) != len(references):
            raise SweepError(
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


# ------------------------------------------------------------------------------------------------
# results


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def main_metric(rows: list[dict[str, Any]]) -> str | None:
    for name in (
        "test_bleu",
        "valid_bleu",
        "test_accuracy",
        "valid_accuracy",
        "test_map",
        "valid_map",
        "valid_loss",
    ):
        if any(_number(r.get(name)) is not None for r in rows):
            return name
    return None


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def write_results(out: Path, plan: Plan, rows: list[dict[str, Any]]) -> None:
    """results.csv (every run), results.md (a line per variant) and results.png."""
    keys = [g[0] for g in plan.grid]
    columns = [
        "variant",
        *keys,
        "seed",
        *(["at"] if plan.at else []),
        "parameters",
        "steps",
        "minutes",
        "tokens_per_s",
        "valid_loss",
        "valid_ppl",
        "averaged",
    ]
    columns += sorted({k for r in rows for k in r} - set(columns))
    text = io.StringIO()
    writer = csv.DictWriter(text, columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(out / RESULTS_CSV, text.getvalue())
    metric = main_metric(rows)
    scores = [c for c in columns if c.startswith(("valid_", "test_"))]
    lines = [
        f"# Sweep of {plan.config}",
        "",
        f"{len(rows)} runs; "
        f"{plan.minutes or 'the config'}{' minutes' if plan.minutes else ''} each; "
        f"{plan.repeats} seed(s) per variant; scores of the average of the last "
        f"{plan.average} checkpoints"
        + (f"; test: {' '.join(plan.test)}" if plan.test else "")
        + ". Mean over seeds (± "
        "sample standard "
        "deviation where there are several).",
        "",
        "| variant | runs | parameters | steps | tokens/s | " + " | ".join(scores) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(scores),
    ]
    for name, group in _by_variant(rows).items():
        cells = [
            name,
            str(len(group)),
            _mean(group, "parameters", "{:,.0f}"),
            _mean(group, "steps", "{:,.0f}"),
            _mean(group, "tokens_per_s", "{:,.0f}"),
        ]
        cells += [
            _mean(group, s, "{:.4f}" if s.endswith(("_loss", "_f1")) else "{:.2f}") for s in scores
        ]
        lines.append("| " + " | ".join(cells) + " |")
    atomic_write_text(out / RESULTS_MD, "\n".join(lines) + "\n")
    if metric and rows:
        from ..viz.sweep import plot_sweep

        groups = _by_variant(rows)
        plot_sweep(
            {
                name: [v for v in (_number(r.get(metric)) for r in group) if v is not None]
                for name, group in groups.items()
            },
            metric,
            out / RESULTS_PNG,
        )


def _by_variant(rows):
    """Rows grouped by variant (and by --at step: "VARIANT @ STEP"; the run's end: the variant)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        at = r.get("at")
        groups.setdefault(f"{r['variant']} @ {at}" if at else r["variant"], []).append(r)
    return groups


def _mean(group, key: str, fmt: str) -> str:
    values = [v for v in (_number(r.get(key)) for r in group) if v is not None]
    if not values:
        return "-"
    text = fmt.format(statistics.fmean(values))
    return text + (f" ± {fmt.format(statistics.stdev(values))}" if len(values) > 1 else "")
