"""transformer data apertium-bt: everyday English back-translated by Apertium, on files made here
with a fake Apertium (and the real one where apertium-eng-spa is installed)."""

import subprocess

import pytest

from tests.cli.common import run as run_cli
from transformer.data.markup import protect
from transformer.data.sources import apertium
from transformer.data.text import DataError


class FakeApertium:
    """subprocess.run for `apertium eng-spa` (unknown words marked): each paragraph upper-cased,
    a word holding "zz" marked unknown ('*' before it); records each command."""

    def __init__(self):
        self.commands = []

    def __call__(self, argv, input, capture_output, text, check):
        self.commands.append(argv)
        paragraphs = input.removesuffix("\n").split("\n\n")
        out = [
            " ".join(("*" + w if "zz" in w else w.upper()) for w in p.split()) for p in paragraphs
        ]
        return subprocess.CompletedProcess(argv, 0, "\n\n".join(out) + "\n", "")


def lines_of(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_fortune_records_are_joined_and_their_attribution_cut(tmp_path):
    fortunes = tmp_path / "people"
    fortunes.write_text(
        "A friend in need\nis a friend indeed.\n%\nNever put off till tomorrow what you can do today.\n"
        "\t\t-- Thomas Jefferson\n%\nShort one.  -- Anonymous\n%\n",
        encoding="utf-8",
    )
    assert apertium.read_texts(fortunes) == [
        "A friend in need is a friend indeed.",
        "Never put off till tomorrow what you can do today.",
        "Short one.",
    ]
    plain = tmp_path / "plain.eng"
    plain.write_text("What time is it?\n\n  Turn   the lights off  \n", encoding="utf-8")
    assert apertium.read_texts(plain) == ["What time is it?", "Turn the lights off"]


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Hi there", "fewer than 3 words"),
        (" ".join(["word"] * 26), "more than 25 words"),
        ("Visit https://example.org for more", "a URL or an e-mail address"),
        ("Write to me at someone@example.org today", "a URL or an e-mail address"),
        ("One. Two. Three. Four.", "more than 3 sentences"),
        ("|___| /__\\ |___| ~~~ ^^^ a b", "drawing or symbols (a third or more of it)"),
        ("12 34 56", "no letter"),
        ("1969 - Apollo 11 lands on the Moon", "a dated list entry (YEAR - event)"),
        ("Is it going to rain tomorrow?", None),
    ],
)
def test_what_is_kept(text, reason):
    assert apertium.reason_to_drop(text, 25) == reason


def test_pairs_are_tagged_train_only_held_out_english_excluded_and_shared_among_inputs(tmp_path):
    big = tmp_path / "big.eng"
    big.write_text("".join(f"Line number {i} is here.\n" for i in range(100)), encoding="utf-8")
    small = tmp_path / "small.eng"
    small.write_text(
        "What time is it?\nTurn on the zzlamp zzfoo now\nWhat time is it?\nThe door is open.\n"
        "Opening {app} for you\n",
        encoding="utf-8",
    )
    corpus = tmp_path / "phrases"
    corpus.mkdir()
    (corpus / "test.eng").write_text("The door is open.\n", encoding="utf-8")
    (corpus / "valid.eng").write_text("Line number 7 is here.\n", encoding="utf-8")
    fake = FakeApertium()
    out = tmp_path / "bt"
    report = apertium.build_apertium_bt_corpus(out, [big, small], [corpus], max_lines=20, run=fake)
    assert sorted(p.name for p in out.iterdir()) == ["PROVENANCE.md", "train.eng", "train.spa"]
    spa, eng = lines_of(out / "train.spa"), lines_of(out / "train.eng")
    assert len(spa) == len(eng) == report["pairs"]["train"]
    assert all(s == f"⟪bt⟫ {e.upper()}" for s, e in zip(spa, eng, strict=True))
    # held out: never as English; the duplicate once; 2 of 5 words unknown: dropped
    assert "The door is open." not in eng and "Line number 7 is here." not in eng
    assert eng.count("What time is it?") == 1 and not any("zz" in e for e in eng)
    assert report["inputs"][str(big)] == {"eligible": 99, "chosen": 17}  # 20, less small's 3
    assert report["inputs"][str(small)] == {"eligible": 3, "chosen": 3}
    assert report["dropped"]["a third or more of the words unknown to Apertium"] == 1
    assert (
        report["dropped"]["a placeholder or tag changed by Apertium ({slot} -> {la ranura})"] == 1
    )
    assert report["dropped"]["a valid or test reference of an excluded corpus"] == 2
    assert all(c == ["apertium", "eng-spa"] for c in fake.commands)  # unknown words marked
    assert "Pairs: train 18" in (out / "PROVENANCE.md").read_text(encoding="utf-8")
    again = tmp_path / "again"
    apertium.build_apertium_bt_corpus(again, [big, small], [corpus], max_lines=20, run=fake)
    assert lines_of(again / "train.eng") == eng  # the same texts chosen on a rebuild


def test_the_lines_are_shared_evenly_and_a_small_input_leaves_the_rest():
    assert apertium.share_out(10, {"a": 100, "b": 100}) == {"a": 5, "b": 5}
    assert apertium.share_out(10, {"a": 100, "b": 2, "c": 100}) == {"a": 4, "b": 2, "c": 4}
    assert apertium.share_out(10, {"a": 3, "b": 2}) == {"a": 3, "b": 2}
    assert sum(apertium.share_out(7, {"a": 9, "b": 9}).values()) == 7


def test_the_tag_is_not_markup_so_protection_leaves_it():
    masked, spans = protect("⟪bt⟫ ¿Qué hora es?")
    assert masked == "⟪bt⟫ ¿Qué hora es?" and not spans


def test_bad_input_says_what_to_give(tmp_path):
    with pytest.raises(DataError, match="--input .*missing.eng is not a file"):
        apertium.build_apertium_bt_corpus(
            tmp_path / "o", [tmp_path / "missing.eng"], run=FakeApertium()
        )
    empty = tmp_path / "empty.eng"
    empty.write_text("no\n", encoding="utf-8")
    with pytest.raises(DataError, match="no English text was kept"):
        apertium.build_apertium_bt_corpus(tmp_path / "o", [empty], run=FakeApertium())
    with pytest.raises(DataError, match="--tag 'a b'"):
        apertium.build_apertium_bt_corpus(tmp_path / "o", [empty], tag="a b", run=FakeApertium())
    assert not (tmp_path / "o").exists()


def test_the_cli_says_what_is_wrong_in_one_line(tmp_path, capsys):
    argv = ["data", "apertium-bt", "--out", tmp_path / "o", "--input", tmp_path / "no.eng"]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "is not a file" in err


@pytest.mark.skipif(not apertium.ready("eng-spa"), reason="apertium-eng-spa is not installed")
def test_the_real_apertium_translates_english_into_spanish(tmp_path):
    text = tmp_path / "in.eng"
    text.write_text("The door is open.\nI like to read books.\n", encoding="utf-8")
    report = apertium.build_apertium_bt_corpus(tmp_path / "bt", [text])
    pairs = dict(
        zip(
            lines_of(tmp_path / "bt" / "train.eng"),
            lines_of(tmp_path / "bt" / "train.spa"),
            strict=True,
        )
    )
    assert report["pairs"]["train"] == 2 and all(s.startswith("⟪bt⟫ ") for s in pairs.values())
    assert "puerta" in pairs["The door is open."] and "libros" in pairs["I like to read books."]
