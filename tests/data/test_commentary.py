"""Matthew Henry's commentary (transformer.data.sources.commentary): the zCom reader on a module
written here (10- and 12-byte index records), the heading rules, both builders on a fake Bible, and
the real Debian module where it is installed."""

import json
import struct
import zlib
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data.sources import commentary
from transformer.data.sources.bible.align import split_of
from transformer.data.sources.bible.sword import BibleError
from transformer.data.text import iter_pairs

pysword_books = pytest.importorskip("pysword.books")

OUTLINE = (
    '<title type="x-s2">Chapter {c}</title> <table> <row><cell>{a}</cell><cell>(1-2)</cell></row> '
    "</table> <table><row><cell>{b}</cell><cell>(3)</cell></row></table> "
    "<table><row><cell>Backwards.</cell><cell>(3-1)</cell></row></table> "
    "<table><row><cell>Too far.</cell><cell>(3-9)</cell></row></table> <hi>Verses 1-2</hi> text"
)


def write_module(root: Path, texts: dict[tuple[str, int, int], str], record: int = 10) -> Path:
    """A zCom module under root (mods.d/mhcc.conf and its six files): each text at its verse,
    each in a block of its own."""
    structure = pysword_books.BibleStructure("kjv", ["ot", "nt"])
    folder = root / "modules" / "comments" / "zcom" / "mhcc"
    folder.mkdir(parents=True)
    for testament, books in structure.get_books().items():
        n = 2 + sum(1 + len(b.chapter_lengths) + sum(b.chapter_lengths) for b in books)
        index = bytearray(record * n)
        blocks, data = bytearray(), bytearray()
        for k, ((book, chapter, verse), text) in enumerate(t for t in texts.items() if structure.find_book(t[0][0])[0] == testament):
            at = structure.ref_to_indicies(books=[book], chapters=[chapter], verses=[verse])[testament][0]
            raw = text.encode("utf-8")
            packed = zlib.compress(raw)
            blocks += struct.pack("<III", len(data), len(packed), len(raw))
            data += packed
            struct.pack_into("<IIH" if record == 10 else "<III", index, record * at, k, 0, len(raw))
        (folder / f"{testament}.bzv").write_bytes(bytes(index))
        (folder / f"{testament}.bzs").write_bytes(bytes(blocks))
        (folder / f"{testament}.bzz").write_bytes(bytes(data))
    (root / "mods.d").mkdir()
    (root / "mods.d" / "mhcc.conf").write_text(
        "[MHCC]\nDataPath=./modules/comments/zcom/mhcc/\nModDrv=zCom4\nCompressType=ZIP\nVersion=2.0\n"
    )
    return root


TEXTS = {
    ("Genesis", 2, 1): OUTLINE.format(c=2, a="The first <hi>sabbath</hi>.", b="Man&apos;s place."),
    ("Matthew", 5, 1): OUTLINE.format(c=5, a="The beatitudes.", b="Salt."),
}
BIBLE = {("Gen", 2, v): f"Genesis two verse {v}." for v in (1, 2, 3)} | {
    ("Matt", 5, v): f"Matthew five  verse {v}." for v in (1, 2, 3)
}


@pytest.mark.parametrize("record", [10, 12])
def test_the_reader_finds_each_outline_row(tmp_path, record):
    root = write_module(tmp_path / "sword", TEXTS, record)
    rows, version = commentary.read_outlines(root)
    assert version == "2.0"
    assert rows[:2] == [("Gen", 2, "The first sabbath.", "(1-2)"), ("Gen", 2, "Man's place.", "(3)")]
    assert [r[:2] for r in rows] == [("Gen", 2)] * 4 + [("Matt", 5)] * 4
    headings, dropped, _ = commentary.read_headings(BIBLE, root)
    assert [(h.key, h.heading) for h in headings] == [
        ("Gen.2.1-2", "The first sabbath."),
        ("Gen.2.3-3", "Man's place."),
        ("Matt.5.1-2", "The beatitudes."),
        ("Matt.5.3-3", "Salt."),
    ]
    assert dropped == {"verse range ends before it starts": 2, "verse range beyond the chapter in the Bible text": 2}
    assert commentary.passage(BIBLE, headings[2]) == "Matthew five verse 1. Matthew five verse 2."


def test_a_broken_module_is_one_line_naming_the_package(tmp_path):
    with pytest.raises(BibleError, match="apt-get install -y sword-comm-mhcc"):
        commentary.read_outlines(tmp_path)  # no mods.d at all
    root = write_module(tmp_path / "sword", TEXTS)
    index = root / "modules" / "comments" / "zcom" / "mhcc" / "ot.bzv"
    index.write_bytes(index.read_bytes()[:-3])
    with pytest.raises(BibleError, match="not 24,115 records of 10 or 12 bytes"):
        commentary.read_outlines(root)
    (root / "mods.d" / "mhcc.conf").unlink()
    with pytest.raises(BibleError, match="Concise Commentary is not installed"):
        commentary.read_outlines(root)


def test_both_builders_on_a_fake_bible(tmp_path, monkeypatch, capsys):
    root = write_module(tmp_path / "sword", TEXTS)
    monkeypatch.setattr(commentary, "read_module", lambda code, sword_dir=None: (BIBLE, "1.0"))
    assert main(["data", "commentary-headings", "--out", str(tmp_path / "h"), "--sword-dir", str(root)]) == 0
    assert capsys.readouterr().out.endswith("headings (passage<TAB>heading) from 2 chapters; dropped 4 (see "
                                            f"{tmp_path / 'h'}/PROVENANCE.md)\n")
    split = {c: split_of(c, commentary.VALID_PERCENT, commentary.TEST_PERCENT) for c in (("Gen", 2), ("Matt", 5))}
    rows = list(iter_pairs(tmp_path / "h" / f"{split[('Gen', 2)]}.tsv"))
    assert [(x, y) for _, x, y in rows][:2] == [
        ("Genesis two verse 1. Genesis two verse 2.", "The first sabbath."),
        ("Genesis two verse 3.", "Man's place."),
    ]
    ids = (tmp_path / "h" / f"{split[('Gen', 2)]}.ids").read_text().splitlines()
    assert ids[:2] == ["Gen.2.1-2", "Gen.2.3-3"]

    report = commentary.build_qa_corpus(tmp_path / "q", "kjv", root)
    assert sum(report["headings"].values()) == 4 and sum(report["chapters"].values()) == 2
    data = json.loads((tmp_path / "q" / f"{split[('Matt', 5)]}.json").read_text())["data"]
    paragraph = next(a for a in data if a["title"] == "Matt 5")["paragraphs"][0]
    context = paragraph["context"]
    assert context == "Matthew five verse 1. Matthew five verse 2. Matthew five verse 3."
    assert [context[s:].split(".")[0] for s in paragraph["verse_starts"]] == [f"Matthew five verse {v}" for v in (1, 2, 3)]
    for qa in paragraph["qas"]:
        answer = qa["answers"][0]
        assert context[answer["answer_start"] :].startswith(answer["text"])
    assert [(q["question"], q["answers"][0]["text"], q["verses"]) for q in paragraph["qas"]] == [
        ("The beatitudes.", "Matthew five verse 1. Matthew five verse 2.", [1, 2]),
        ("Salt.", "Matthew five verse 3.", [3, 3]),
    ]
    assert "SQuAD 1.1's format" in (tmp_path / "q" / "PROVENANCE.md").read_text()


def _installed() -> bool:
    try:
        from transformer.data.sources.bible.sword import find_sword_dir

        root = find_sword_dir()
    except BibleError:
        return False
    return all((root / "mods.d" / f"{name}.conf").exists() for name in ("mhcc", "engKJV2006eb"))


@pytest.mark.slow
@pytest.mark.skipif(not _installed(), reason="apt-get install -y sword-comm-mhcc sword-text-kjv (CI installs them)")
def test_the_real_commentary(tmp_path):
    report = commentary.build_headings_corpus(tmp_path / "h")
    assert report["headings"] == {"train": 2041, "valid": 243, "test": 244}
    assert sum(report["chapters"].values()) == 792
    assert report["dropped"] == {"verse range ends before it starts": 3}
    ids = {}
    for name in ("train", "valid", "test"):
        keys = (tmp_path / "h" / f"{name}.ids").read_text().splitlines()
        ids.update(zip(keys, [(x, y) for _, x, y in iter_pairs(tmp_path / "h" / f"{name}.tsv")], strict=True))
    text, heading = ids["Gen.2.1-3"]
    assert heading == "The first sabbath."
    assert text.startswith("Thus the heavens and the earth were finished") and text.endswith("created and made.")
