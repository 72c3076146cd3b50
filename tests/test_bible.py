"""The Bible corpus: markup stripping, alignment, splits, and the real SWORD modules when installed."""

import sys

import pytest

from transformer.cli import main
from transformer.data.bible import (
    BibleError,
    align,
    build_bible_corpus,
    clean_osis,
    find_sword_dir,
    misalignment,
    split_of,
    undo_drop_cap,
)


@pytest.mark.parametrize(
    "raw, clean",
    [
        # A footnote between two words must leave a space, not glue them.
        ('<w lemma="strong:H0430">God</w><note placement="foot"><reference type="annotateRef">1:1 </reference>'
         'The Hebrew word is “Elohim”.</note><w lemma="strong:H1254">created</w> the earth.', "God created the earth."),
        # Strong's numbers live in attributes; words inside <w> keep their own spacing.
        ('¡<w lemma="strong:H1121">OH</w> <w lemma="strong:H3068">Jehová</w>, cuánto', "¡OH Jehová, cuánto"),
        # Psalm titles are text; other headings and speaker labels are not.
        ('<div type="x-milestone" subType="x-preverse" sID="pv1"/><title canonical="true" type="psalm">A Psalm by David.'
         '</title> <lg sID="g1"/> <l level="1" sID="g2"/>Yahweh, how<l eID="g2" level="1"/>', "A Psalm by David. Yahweh, how"),
        ('<title><foreign>ב BETH.</foreign></title> <l level="1"/>Wherewithal shall', "Wherewithal shall"),
        ("<speaker>Beloved</speaker> <l/>Let him kiss me", "Let him kiss me"),
        # Variant readings inside notes, cross references, entities, pilcrows, words split by line tags.
        ('rejoice<note type="crossReference"><reference osisRef="Ps.1.1">Ps 1:1</reference></note>, '
         'Literally <note>Or, <rdg type="alternate">head</rdg></note>&amp; ¶ sing<l/>now', "rejoice, Literally & sing now"),
        ("Saints. Amen. <chapter eID=\"Rev.22\"/> <div sID=\"g\" type=\"glossary\"/> <title>Glossary</title> Abba is ...",
         "Saints. Amen."),
        ("<q who=\"Jesus\">“ Follow me ”</q> ( he said )", "“Follow me” (he said)"),
    ],
)
def test_clean_osis(raw, clean):
    assert clean_osis(raw) == clean


def test_drop_caps_are_undone():
    assert undo_drop_cap("EN el principio crió Dios") == "En el principio crió Dios"
    assert undo_drop_cap("¿CAZARÁS tú la presa") == "¿Cazarás tú la presa"
    assert undo_drop_cap("Y dijo Dios") == "Y dijo Dios"


def _chapter(book, chapter, texts):
    return {(book, chapter, v): t for v, t in enumerate(texts, start=1)}


def test_alignment_drops_chapters_that_do_not_line_up():
    words = ["a" * n for n in (10, 80, 20, 90, 15, 70, 30, 60, 25, 100)]
    src = {**_chapter("Gen", 1, words), **_chapter("Gen", 2, words[:4]), **_chapter("Gen", 3, words[:5]),
           **_chapter("Gen", 4, words), **_chapter("Gen", 5, words[:3]), **_chapter("Tob", 1, ["x"])}
    tgt = {**_chapter("Gen", 1, words),
           **_chapter("Gen", 2, words[:3]),  # a verse fewer
           **_chapter("Gen", 3, words[:4] + [""]),  # last verse merged into the one before
           **_chapter("Gen", 4, ["b" * 50] + words[:-1]),  # Hebrew numbering: shifted by one
           **_chapter("Gen", 5, [words[0], "", words[2]])}  # a verse one text omits
    result = align(src, tgt)
    assert set(result.dropped_chapters) == {("Gen", 2), ("Gen", 3), ("Gen", 4)}
    assert result.dropped_chapters[("Gen", 2)] == "4 vs 3 verses"
    assert "shifted by 1" in result.dropped_chapters[("Gen", 4)]
    assert result.dropped_verses == [("Gen", 5, 2)]
    assert len(result.pairs) == 10 + 2
    assert result.only_in_one == 2  # Gen 2:4 and Tobit 1:1 exist in one text only
    assert misalignment(list(zip(words, words, strict=True))) is None


def test_splits_are_whole_chapters_and_deterministic():
    chapters = [("Gen", c) for c in range(1, 51)] + [("Ps", c) for c in range(1, 151)]
    splits = [split_of(c) for c in chapters]
    assert splits == [split_of(c) for c in chapters]
    assert {"train", "valid", "test"} <= set(splits)
    assert 0.9 < splits.count("train") / len(splits) < 0.99


@pytest.mark.parametrize("chapter, split", [
    (("Gen", 1), "train"), (("Ps", 23), "train"), (("Rev", 22), "train"),
    (("Ps", 16), "valid"), (("John", 16), "valid"),
    (("Exod", 6), "test"), (("Matt", 12), "test"), (("Rev", 13), "test"),
])
def test_splits_are_the_same_in_every_process_and_version(chapter, split):
    # sha256 of "Book.chapter" % 100: 0-1 valid, 2-4 test. A corpus rebuilt elsewhere, or by a later
    # version, must put each chapter where it was (Python's hash() would change per process).
    assert split_of(chapter) == split


def test_missing_sword_directory_names_the_install_command(tmp_path):
    with pytest.raises(BibleError, match="apt-get install -y sword-text-sparv sword-text-web sword-text-kjv"):
        find_sword_dir(tmp_path / "nowhere")


def test_missing_module_names_its_package(tmp_path):
    pytest.importorskip("pysword", reason="reading SWORD modules needs pysword (pip install -e '.[data]')")
    (tmp_path / "mods.d").mkdir()
    with pytest.raises(BibleError, match="apt-get install -y sword-text-sparv"):
        build_bible_corpus("spa", "eng", tmp_path / "out", sword_dir=tmp_path)


def test_missing_pysword_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pysword.modules", None)  # import pysword.modules raises ImportError
    with pytest.raises(BibleError, match=r"needs pysword: pip install pysword"):
        build_bible_corpus("spa", "eng", tmp_path / "out", sword_dir=tmp_path)


def _installed():
    try:
        import pysword  # noqa: F401

        root = find_sword_dir()
    except (ImportError, BibleError):
        return False
    return all((root / "mods.d" / f"{name}.conf").exists() for name in ("spaRV1909eb", "engWEB2015eb"))


@pytest.mark.slow
@pytest.mark.skipif(not _installed(), reason="SWORD modules not installed: apt-get install -y sword-text-sparv sword-text-web sword-text-kjv (CI installs them)")
def test_real_spanish_english_corpus(tmp_path, capsys):
    out = tmp_path / "bible"
    assert main(["data", "bible", "--src", "spa", "--tgt", "eng", "--out", str(out)]) == 0
    assert "verse pairs (spa -> eng)" in capsys.readouterr().out
    lines = {}
    for split in ("train", "valid", "test"):
        spa = (out / f"{split}.spa").read_text(encoding="utf-8").splitlines()
        eng = (out / f"{split}.eng").read_text(encoding="utf-8").splitlines()
        ids = (out / f"{split}.ids").read_text(encoding="utf-8").splitlines()
        assert len(spa) == len(eng) == len(ids) > 400
        assert all(s and e for s, e in zip(spa, eng, strict=True))
        assert not any("<" in s or ">" in s for s in spa + eng)
        lines[split] = dict(zip(ids, zip(spa, eng, strict=True), strict=True))
    assert 30_000 < sum(len(v) for v in lines.values()) < 31_102
    assert lines["train"]["Gen.1.1"] == ("En el principio crió Dios los cielos y la tierra.",
                                          "In the beginning, God created the heavens and the earth.")
    rev = next(v for split in lines.values() for k, v in split.items() if k == "Rev.22.21")
    assert rev[1] == "The grace of the Lord Jesus Christ be with all the saints. Amen."
    chapters = {split: {k.rsplit(".", 1)[0] for k in v} for split, v in lines.items()}
    assert not chapters["train"] & chapters["test"] and not chapters["train"] & chapters["valid"]
    provenance = (out / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "Job 39" in provenance and "spaRV1909eb" in provenance and "Public Domain" in provenance
