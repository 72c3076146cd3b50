"""`transformer data speech`: clauses and what is heard, voices held out per split, a small corpus
built with espeak-ng and flite (features whose offsets cut them per clip, WAV files for the test
split, pocketsphinx's real recordings), the same corpus twice from one seed, and the errors."""

from __future__ import annotations

import shutil
import wave

import pytest
import torch

from transformer.cli import main
from transformer.data.audio import read_wav
from transformer.data.sources.speech import TEST_VOICES, VALID_VOICES, clauses, heard, voices


def _installed() -> bool:
    from transformer.data.sources.bible.sword import BibleError, find_sword_dir

    try:
        root = find_sword_dir()
    except BibleError:
        return False
    return (root / "mods.d" / "engKJV2006eb.conf").exists() and all(
        shutil.which(t) for t in ("espeak-ng", "flite")
    )


NEEDS = pytest.mark.skipif(not _installed(), reason="apt-get install -y espeak-ng flite sword-text-kjv (CI installs them)")


def test_clauses_and_what_is_heard():
    assert clauses("And God said, Let there be light: and there was light.") == [
        "And God said, Let there be light: and there was light."]
    long = " ".join(["word"] * 45) + "."
    assert [len(c.split()) for c in clauses(long)] == [20, 20, 5]
    assert clauses("Jesus wept.") == []  # fewer than 5 words: nothing to say on its own
    assert heard("Israel’s LORD, saying: 'Go!' — 3 times") == "israel's lord saying go 3 times"


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="apt-get install -y espeak-ng")
def test_voices_are_held_out_per_split():
    split = voices()
    every = [set(v) for v in split.values()]
    assert not (every[0] & every[1] or every[0] & every[2] or every[1] & every[2])
    assert all(any(v.startswith(n) for n in TEST_VOICES) for v in split["test"])
    assert all(any(v.startswith(n) for n in VALID_VOICES) for v in split["valid"])
    assert "flite kal" in split["train"] and len(split["train"]) > 100


@NEEDS
def test_a_small_corpus_builds_the_same_twice(tmp_path, capsys):
    from safetensors.torch import load_file

    args = ["data", "speech", "--train", "6", "--valid", "2", "--test", "3", "--seed", "5"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "train 6 clips" in capsys.readouterr().out
    out = tmp_path / "a"
    tensors = load_file(str(out / "train" / "features.safetensors"))
    frames, offsets = tensors["frames"], tensors["offsets"]
    assert frames.dtype == torch.float16 and frames.shape[1] == 80 and len(offsets) == 7
    assert int(offsets[-1]) == len(frames) and bool((offsets[1:] > offsets[:-1]).all())
    rows = [line.split("\t") for line in (out / "train" / "transcripts.tsv").read_text().splitlines()]
    assert len(rows) == 6 and all(r[2] == heard(r[2]) and r[2] for r in rows)
    tests = [line.split("\t") for line in (out / "test" / "transcripts.tsv").read_text().splitlines()]
    assert len(tests) == 3
    for name, _ in tests:
        with wave.open(str(out / "test" / name)) as w:
            assert (w.getframerate(), w.getsampwidth(), w.getnchannels()) == (16000, 2, 1)
        assert read_wav(out / "test" / name).abs().max() > 0.01
    used = (out / "test" / "voices.tsv").read_text()
    assert all(any(v in line for v in TEST_VOICES) for line in used.splitlines())
    assert "Chapters and voices are held out" in (out / "PROVENANCE.md").read_text()
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    for part in ("train/features.safetensors", "test/transcripts.tsv", f"test/{tests[0][0]}"):
        assert (out / part).read_bytes() == (tmp_path / "b" / part).read_bytes()


def test_bad_arguments_are_one_line(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["data", "speech", "--out", str(tmp_path / "file"), "--train", "1"]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["data", "speech", "--out", str(tmp_path / "x"), "--workers", "0"]) == 2
    assert "--workers 0" in capsys.readouterr().err
