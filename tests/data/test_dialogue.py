"""`transformer data dialogue`: the games' pairs recased, split by each game's groups, es_AR kept
in training only, a missing game named; with fake readers here, and on the real packages when
they are installed (or unpacked under $TRANSFORMER_TEST_DEB_ROOT)."""

import os
from pathlib import Path

import pytest

from tests.cli.common import run as run_cli
from transformer.data.sources.everyday import dialogue
from transformer.data.sources.everyday.dialogue import (
    Game,
    build_dialogue_corpus,
    dialogue_split,
    recase,
)
from transformer.data.sources.splits import Pair
from transformer.data.text import DataError


def corpus(out: Path) -> dict[str, list[tuple[str, str]]]:
    read = lambda f: (out / f).read_text(encoding="utf-8").splitlines()  # noqa: E731
    return {s: list(zip(read(f"{s}.spa"), read(f"{s}.eng"), strict=True)) for s in ("train", "valid", "test")}


def group_in(split: str, prefix: str) -> str:
    """A group key of `prefix` that dialogue_split puts in `split`."""
    return next(g for i in range(10_000) if dialogue_split(g := f"{prefix}/{i}") == split)


@pytest.mark.parametrize("text, expected", [
    ("Where did you FIND them?", "Where did you find them?"),
    ("¿Y A QUIEN LLAMO A ESTAS HORAS?", "¿Y a quien llamo a estas horas?"),
    ("HI BLIND MAN. HOW IT'S GOING?", "Hi blind man. How it's going?"),
    ("I saw it.", "I saw it."),
])
def test_recase(text, expected):
    assert recase(text) == expected


def fake_games(monkeypatch, pairs: dict[str, list[Pair]], missing=()):
    def reader(name):
        def read(root, dropped):
            if name in missing:
                raise DataError(f"{name}'s data is missing under {root}: apt-get install {name}")
            dropped[f"{name}: a fake drop"] += 1
            return pairs[name]
        return read

    games = {name: Game(reader(name), (f"pkg-{name}",), name.title(), name.endswith("es_AR"))
             for name in ("bass", "cataclysm", "cataclysm-es_AR", "drascula")}
    monkeypatch.setattr(dialogue, "SOURCES", games)


def test_splits_by_group_with_es_ar_in_training_only(tmp_path, monkeypatch):
    train_g, test_g = group_in("train", "cataclysm"), group_in("test", "cataclysm")
    bass_valid = group_in("valid", "bass")
    pairs = {
        "bass": [Pair("¿Dónde las ENCONTRASTE?", "Where did you FIND them?", bass_valid),
                 Pair("Hola.", "Hello.", group_in("train", "bass")),
                 Pair("No las encontraste, STANAG.", "You did not find them, STANAG.", group_in("train", "bass"))],
        "cataclysm": [Pair("Ya me lo dijiste.", "You've told me already.", train_g),
                      Pair("Aléjate de mí.", "Get away from me.", test_g)],
        "cataclysm-es_AR": [Pair("Ya me lo dijiste vos.", "You've told me already.", train_g),
                            Pair("Alejate de mí.", "Get away from me.", test_g)],
        "drascula": [Pair(" ".join(["palabra"] * 41), "word " * 3, group_in("train", "drascula")),
                     Pair("¡CACHIS! ¡SE ME HA ROTO!", "SHOOT! IT'S BROKEN!", group_in("train", "drascula"))],
    }
    fake_games(monkeypatch, pairs)
    report = build_dialogue_corpus(tmp_path / "d", tmp_path)
    got = corpus(tmp_path / "d")
    assert got["valid"] == [("¿Dónde las encontraste?", "Where did you find them?")]
    assert got["test"] == [("Aléjate de mí.", "Get away from me.")]  # es_ES only
    assert set(got["train"]) == {("Hola.", "Hello."), ("No las encontraste, STANAG.", "You did not find them, STANAG."),
                                 ("Ya me lo dijiste.", "You've told me already."),
                                 ("Ya me lo dijiste vos.", "You've told me already."),
                                 ("¡Cachis! ¡Se me ha roto!", "Shoot! It's broken!")}
    assert report["pairs"] == {"train": 5, "valid": 1, "test": 1}
    assert report["sources"]["cataclysm-es_AR"] == {"train": 1, "valid": 0, "test": 0}
    assert report["dropped"]["more than 40 words"] == 1 and report["dropped"]["bass: a fake drop"] == 1
    assert sum(v for k, v in report["dropped"].items() if "es_AR" in k) == 1
    provenance = (tmp_path / "d/PROVENANCE.md").read_text()
    assert "| Bass | pkg-bass unknown |" in provenance and "5 / 10" in provenance


def test_a_missing_game_is_named_and_none_is_one_line(tmp_path, monkeypatch, capsys):
    fake_games(monkeypatch, {"bass": [Pair("Hola.", "Hello.", group_in("train", "bass"))]},
               missing=("cataclysm", "cataclysm-es_AR", "drascula"))
    report = build_dialogue_corpus(tmp_path / "d", tmp_path)
    assert sorted(report["skipped"]) == ["cataclysm", "drascula"] and "apt-get" in report["install"]
    assert "Not read:" in (tmp_path / "d/PROVENANCE.md").read_text()
    fake_games(monkeypatch, {}, missing=("bass", "cataclysm", "cataclysm-es_AR", "drascula"))
    with pytest.raises(DataError, match="none of the games' data is under .*: apt-get install beneath-a-steel-sky"):
        build_dialogue_corpus(tmp_path / "e", tmp_path)
    rc, out, err = run_cli(["data", "dialogue", "--out", tmp_path / "e", "--root", tmp_path], capsys)
    assert rc != 0 and err.count("\n") == 1 and "none of the games' data" in err
    assert not (tmp_path / "e").exists()


def _real_root():
    for root in (os.environ.get("TRANSFORMER_TEST_DEB_ROOT"), "/"):
        if root and (Path(root) / "usr/share/scummvm/beneath-a-steel-sky/sky.dsk").is_file():
            return Path(root)
    pytest.skip("needs beneath-a-steel-sky, scummvm, cataclysm-dda-data and scummvm-data (or them unpacked under "
                "$TRANSFORMER_TEST_DEB_ROOT)")


@pytest.mark.slow
def test_the_real_games(tmp_path, capsys):
    root = _real_root()
    rc, out, _ = run_cli(["data", "dialogue", "--out", tmp_path / "d", "--root", root], capsys)
    assert rc == 0 and "dialogue pairs" in out
    got = corpus(tmp_path / "d")
    assert 15_000 < len(got["train"]) and 300 < len(got["test"]) < 3_000
    held = {eng for s in ("valid", "test") for _, eng in got[s]}
    assert not held & {eng for _, eng in got["train"]}
