"""The main job end to end: Spanish -> English on the Bible, on a CPU, in about 15 minutes.

Install what is missing, build the corpus, train (configs/bible-es-en.toml), average the last
checkpoints, score the test split with sacreBLEU, and translate a few sentences.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..config import ConfigError, load_config
from ..data.bible import MODULES, BibleError, find_sword_dir

REPO = Path(__file__).resolve().parents[2]
CONFIG = "configs/bible-es-en.toml"
EXAMPLES = [
    "¿De quién es?",
    "En el principio era el Verbo.",
    "Y dijo Dios: Sea la luz.",
    "El Señor es mi pastor; nada me faltará.",
    "Bienaventurados los pacificadores.",
]


class DemoError(RuntimeError):
    """Something the demo needs cannot be had; the message says how to get it."""


def _run(command: list[str]) -> bool:
    print("$ " + " ".join(command), flush=True)
    return subprocess.run(command, check=False).returncode == 0


def ensure_requirements() -> None:
    """pysword from PyPI and the three SWORD modules from Debian, installed when missing."""
    if importlib.util.find_spec("pysword") is None and not _run(
        [sys.executable, "-m", "pip", "install", "pysword"]
    ):
        raise DemoError("could not install pysword: run  pip install pysword")
    try:
        root = find_sword_dir()
        missing = [
            m.package
            for m in MODULES.values()
            if not (root / "mods.d" / f"{m.name}.conf").is_file()
        ]
    except BibleError:
        missing = [m.package for m in MODULES.values()]
    if not missing:
        return
    sudo = ["sudo"] if hasattr(os, "geteuid") and os.geteuid() != 0 else []
    install = [*sudo, "apt-get", "install", "-y", *missing]
    if sudo and shutil.which("sudo") is None:
        raise DemoError(
            f"the SWORD Bible modules are missing: run  {' '.join(install[1:])}  as root"
        )
    if not _run(install) and not (_run([*sudo, "apt-get", "update"]) and _run(install)):
        raise DemoError(f"could not install the SWORD Bible modules: run  {' '.join(install)}")


def config_path() -> Path:
    for candidate in (Path(CONFIG), REPO / CONFIG):
        if candidate.is_file():
            return candidate
    raise DemoError(
        f"{CONFIG} not found: run the demo from the repository root (git clone, then make demo)"
    )


# What the 15-minute budget changes in the config's 60-minute recipe: no dropout, and the paper's
# inverse-sqrt schedule instead of the hour's cosine. Fifteen minutes are about 2.5 epochs, where
# the model underfits and dropout only slows it (docs/experiments.md, Table 3 (D)); the hour's
# 12 epochs keep 0.1. At 15 minutes the average of the last 3 checkpoints of the still-high
# inverse-sqrt rate beats the cosine's annealed end; at the hour the cosine wins (the scores:
# docs/experiments.md, "The recipe, re-measured at its budgets"). A --set wins.
DEMO_SETTINGS = ("model.dropout=0.0", 'train.schedule="inverse_sqrt"')


def demo_config(minutes: float, data_dir: Path, overrides: tuple[str, ...] = ()):
    """configs/bible-es-en.toml on the corpus in `data_dir`, for `minutes`, with DEMO_SETTINGS,
    then `overrides`."""
    settings = [
        f'data.{side}_{part}="{data_dir / (split + "." + lang)}"'
        for side, split in (("train", "train"), ("valid", "valid"))
        for part, lang in (("src", "spa"), ("tgt", "eng"))
    ]
    try:
        return load_config(
            str(config_path()),
            [*settings, f"train.max_minutes={minutes}", *DEMO_SETTINGS, *overrides],
        )
    except ConfigError as e:
        raise DemoError(str(e)) from None


def run_demo(
    minutes: float = 15.0,
    data_dir: str | os.PathLike = "data/bible",
    run_dir: str | os.PathLike = "runs/demo",
    overrides: tuple[str, ...] = (),
    average_last: int = 3,
    test_lines: int | None = None,
    log=print,
) -> dict:
    """Build, train, average, evaluate, translate. Returns the scores and sample translations."""
    from ..data.bible import build_bible_corpus
    from ..decoding.pipeline import Pipeline
    from ..evaluation.metrics import bleu, chrf
    from ..training.checkpoint import average_into, step_dirs
    from ..training.trainer import train

    started = time.time()
    data_dir, run_dir = Path(data_dir), Path(run_dir)
    if not (data_dir / "train.spa").is_file():
        ensure_requirements()
        report = build_bible_corpus("spa", "eng", data_dir)
        pairs = report["pairs"]
        log(
            f"corpus: {pairs['train']:,} training, {pairs['valid']:,} validation and "
            f"{pairs['test']:,} test verse pairs "
            f"in {data_dir} (see {data_dir}/PROVENANCE.md)"
        )
    config = demo_config(minutes, data_dir, overrides)
    if run_dir.exists():
        shutil.rmtree(run_dir)  # the demo always starts fresh
    log(
        f"training for {minutes:g} minutes: {config_path()} with "
        f"{' '.join([*DEMO_SETTINGS, *overrides])} -> {run_dir}"
    )
    result = train(config, run_dir)
    checkpoints = step_dirs(run_dir)[-average_last:]
    model_dir = run_dir / "averaged"
    average_into(checkpoints, model_dir)
    log(f"averaged the last {len(checkpoints)} checkpoints into {model_dir}")

    pipeline = Pipeline.load(model_dir)
    sources = (data_dir / "test.spa").read_text(encoding="utf-8").splitlines()[:test_lines]
    references = (data_dir / "test.eng").read_text(encoding="utf-8").splitlines()[:test_lines]
    hypotheses = pipeline.translate(sources)
    scores = {"bleu": bleu(hypotheses, references), "chrf": chrf(hypotheses, references)}
    examples = dict(zip(EXAMPLES, pipeline.translate(EXAMPLES), strict=True))
    log(
        f"\ntest split ({len(sources):,} verses, beam {pipeline.decode.beam_size}, "
        f"length penalty {pipeline.decode.length_penalty} ({pipeline.decode.length_penalty_kind})):"
    )
    for score in scores.values():
        log(f"  {score}")
    log("\ntranslations:")
    for i in range(3):
        log(f"  {sources[i]}\n    -> {hypotheses[i]}\n    reference: {references[i]}")
    for source, translation in examples.items():
        log(f"  {source}\n    -> {translation}")
    log(
        f"\nsteps: {result.steps}; total time {(time.time() - started) / 60:.1f} min; model: "
        f"{model_dir}"
    )
    return {"scores": scores, "examples": examples, "steps": result.steps, "model_dir": model_dir}
