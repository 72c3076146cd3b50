"""The Bible corpus: markup stripping, alignment, splits, and the real SWORD modules when installed."""

import contextlib
import io
import re
import sys

import pytest

from transformer.cli import main
from transformer.data.sources.bible import (
    GENRE_OF,
    GENRES,
    BibleError,
    align,
    build_bible_corpus,
    clean_osis,
    find_sword_dir,
    genre_splits,
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
    # 1 Chronicles 21: the Reina-Valera splits verse 15 in two, so its verses 15-30 hold the text
    # of the English verse before; the chapter checks keep the chapter, the verse check the first 14
    assert "1Chr.21.14" in lines["test"] and not any(f"1Chr.21.{v}" in lines["test"] for v in range(15, 31))
    provenance = (out / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "Job 39" in provenance and "spaRV1909eb" in provenance and "Public Domain" in provenance
    assert "- 1Chr 21: 15-30" in provenance and "- 1Kgs 22: 43-53" in provenance


@pytest.mark.parametrize("codes, message", [
    (["xyz"], "unknown text code 'xyz' in --add-target"),
    (["eng"], "--add-target eng is already the target"),
    (["spa"], "--add-target spa is already the source"),
    (["kjv", "kjv"], "names a text twice"),
])
def test_add_target_rejects_bad_codes_before_reading_anything(tmp_path, codes, message):
    with pytest.raises(BibleError, match=re.escape(message)):
        build_bible_corpus("spa", "eng", tmp_path / "out", sword_dir=tmp_path / "no-sword", add_targets=tuple(codes))
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.skipif(not _installed(), reason="SWORD modules not installed: apt-get install -y sword-text-sparv sword-text-web sword-text-kjv (CI installs them)")
def test_real_added_target_trains_on_tagged_kjv_pairs_of_the_training_chapters_only(tmp_path, capsys):
    plain, both = tmp_path / "plain", tmp_path / "both"
    assert main(["data", "bible", "--src", "spa", "--tgt", "eng", "--out", str(plain)]) == 0
    assert main(["data", "bible", "--src", "spa", "--tgt", "eng", "--add-target", "kjv", "--out", str(both)]) == 0
    assert "(tagged <kjv>)" in capsys.readouterr().out
    for name in ("valid.spa", "valid.eng", "valid.ids", "test.spa", "test.eng", "test.ids"):
        assert (both / name).read_bytes() == (plain / name).read_bytes(), name
    read = {d: {side: (d / f"train.{side}").read_text(encoding="utf-8").splitlines() for side in ("spa", "eng", "ids")}
            for d in (plain, both)}
    n = len(read[plain]["ids"])
    assert len(read[both]["spa"]) == len(read[both]["eng"]) == len(read[both]["ids"]) > n + 28_000
    for side in ("spa", "eng", "ids"):
        assert read[both][side][:n] == read[plain][side]  # the main pairs first, unchanged
    extra = dict(zip(read[both]["ids"][n:], zip(read[both]["spa"][n:], read[both]["eng"][n:], strict=True), strict=True))
    assert extra["kjv:Gen.1.1"] == ("<kjv> En el principio crió Dios los cielos y la tierra.",
                                    "In the beginning God created the heaven and the earth.")
    assert all(k.startswith("kjv:") and s.startswith("<kjv> ") and len(s) > 7 and e for k, (s, e) in extra.items())
    train_chapters = {k.rsplit(".", 1)[0] for k in read[plain]["ids"]}
    held_out = {k.rsplit(".", 1)[0] for split in ("valid", "test")
                for k in (plain / f"{split}.ids").read_text(encoding="utf-8").splitlines()}
    extra_chapters = {k[len("kjv:"):].rsplit(".", 1)[0] for k in extra}
    assert not extra_chapters & held_out  # no held-out verse reaches training through the second target
    assert len(extra_chapters - train_chapters) < 30  # chapters only the KJV pairing keeps (the WEB's misaligned ones)
    provenance = (both / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "engKJV2006eb" in provenance and "Added target kjv" in provenance


# --------------------------------------------------------------------------------------------
# The genre dataset


def test_genre_table_has_8_labels_over_66_books_each_once():
    assert [genre for genre, _ in GENRES] == ["Law", "History", "Wisdom and Poetry", "Major Prophets", "Minor Prophets",
                                             "Gospels and Acts", "Epistles", "Revelation"]
    assert sum(len(books) for _, books in GENRES) == len(GENRE_OF) == 66
    assert (GENRE_OF["Deut"], GENRE_OF["Esth"], GENRE_OF["Song"], GENRE_OF["Dan"], GENRE_OF["Mal"],
            GENRE_OF["Acts"], GENRE_OF["Jude"]) == ("Law", "History", "Wisdom and Poetry", "Major Prophets",
                                                    "Minor Prophets", "Gospels and Acts", "Epistles")


def test_genre_splits_label_skip_and_count():
    verses = {**_chapter("Gen", 1, ["In the beginning", "and\tthe earth\n was ", ""]), **_chapter("Exod", 6, ["I am"]),
              **_chapter("Tob", 1, ["Tobit", ""]), **_chapter("Rev", 22, ["Amen."])}
    result = genre_splits(verses)
    assert result.examples["train"] == [(("Gen", 1, 1), "Law", "In the beginning"),
                                        (("Gen", 1, 2), "Law", "and the earth was"),
                                        (("Rev", 22, 1), "Revelation", "Amen.")]
    assert result.examples["test"] == [(("Exod", 6, 1), "Law", "I am")]  # split_of(("Exod", 6)) == "test"
    assert result.empty_verses == [("Gen", 1, 3)]
    assert result.skipped_books == {"Tob": 1}  # verses with text only


def test_genre_missing_module_is_one_line_naming_its_package(tmp_path, capsys):
    pytest.importorskip("pysword", reason="reading SWORD modules needs pysword (pip install -e '.[data]')")
    (tmp_path / "mods.d").mkdir()
    argv = ["data", "bible-genre", "--lang", "kjv", "--out", str(tmp_path / "out"), "--sword-dir", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "engKJV2006eb" in err and "apt-get install -y sword-text-kjv" in err


@pytest.fixture(scope="module")
def web_genres(tmp_path_factory):
    """The genre dataset of the World English Bible, built once through the CLI: (dir, stdout, {split: [(id, label, text)]})."""
    if not _installed():
        pytest.skip("SWORD modules not installed: apt-get install -y sword-text-sparv sword-text-web sword-text-kjv")
    out = tmp_path_factory.mktemp("bible-genre")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):  # capsys is per test; this fixture is per module
        assert main(["data", "bible-genre", "--out", str(out)]) == 0
    rows = {}
    for split in ("train", "valid", "test"):
        tsv = (out / f"{split}.tsv").read_text(encoding="utf-8").split("\n")
        ids = (out / f"{split}.ids").read_text(encoding="utf-8").split("\n")
        assert tsv[-1] == ids[-1] == ""  # every line ends with a newline
        rows[split] = [(i, *line.split("\t")) for i, line in zip(ids[:-1], tsv[:-1], strict=True)]
    return out, stdout.getvalue(), rows


def _web_verse_slots() -> dict[str, int]:
    """Verse numbers per book in the WEB's versification (NRSVA), without reading the text."""
    from pysword.modules import SwordModules

    modules = SwordModules(str(find_sword_dir()))
    modules.parse_modules()
    structure = modules.get_bible_from_module("engWEB2015eb").get_structure()
    return {book.osis_name: sum(book.chapter_lengths) for books in structure.get_books().values() for book in books}


@pytest.mark.slow
def test_real_genre_files_are_label_tab_text(web_genres):
    _, _, rows = web_genres
    for split, examples in rows.items():
        assert len(examples) > 500, split
        for row in examples:
            assert len(row) == 3, row  # one tab per line
            _, label, text = row
            assert label in GENRE_OF.values() and text and text == text.strip() and "<" not in text
    train = {i: (label, text) for i, label, text in rows["train"]}
    assert train["Gen.1.1"] == ("Law", "In the beginning, God created the heavens and the earth.")
    assert train["Ps.23.1"] == ("Wisdom and Poetry", "A Psalm by David. Yahweh is my shepherd; I shall lack nothing.")


@pytest.mark.slow
def test_real_genre_table_covers_exactly_the_66_books_of_the_web(web_genres):
    out, _, rows = web_genres
    books = {i.split(".")[0] for examples in rows.values() for i, _, _ in examples}
    assert books == set(GENRE_OF)
    assert all(GENRE_OF[i.split(".")[0]] == label for examples in rows.values() for i, label, _ in examples)
    assert set(GENRE_OF) < set(_web_verse_slots())  # the others are the WEB's deuterocanon, skipped and listed
    provenance = (out / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "Books outside the 66, skipped: 14" in provenance and "Sir 1357" in provenance


@pytest.mark.slow
def test_real_genre_splits_are_the_translation_chapters(web_genres):
    _, _, rows = web_genres
    chapters = {}
    for split, examples in rows.items():
        for i, _, _ in examples:
            book, chapter, _ = i.split(".")
            assert split_of((book, int(chapter))) == split, i  # the chapter split of `data bible`
            chapters.setdefault(split, set()).add((book, chapter))
    assert not chapters["train"] & chapters["valid"] and not chapters["train"] & chapters["test"]
    assert ("Exod", "6") in chapters["test"] and ("Rev", "13") in chapters["test"] and ("Ps", "16") in chapters["valid"]


@pytest.mark.slow
def test_real_genre_counts_add_up(web_genres):
    out, stdout, rows = web_genres
    counts = {split: len(examples) for split, examples in rows.items()}
    assert stdout.startswith(f"wrote {out}: train {counts['train']:,}, valid {counts['valid']:,}, "
                             f"test {counts['test']:,} verses (eng, 8 genres); dropped 9 empty verses")
    # Every verse number of the 66 books is a line or one of the 9 empty verses (Acts 8:37, Rom 16:24, ...).
    slots = _web_verse_slots()
    assert sum(counts.values()) + 9 == sum(slots[book] for book in GENRE_OF) == 31_104
    provenance = (out / "PROVENANCE.md").read_text(encoding="utf-8")
    for genre, _ in GENRES:
        per_split = [sum(label == genre for _, label, _ in rows[split]) for split in ("train", "valid", "test")]
        assert f"| {genre} | " in provenance and " | ".join(f"{n:,}" for n in per_split) + " |" in provenance
    total = " | ".join(f"{counts[s]:,}" for s in ("train", "valid", "test"))
    assert f"| total | 66 books | {total} |" in provenance


# --------------------------------------------------------------------------------------------
# The text-to-text mixture


@pytest.mark.slow
@pytest.mark.skipif(not _installed(), reason="SWORD modules not installed: apt-get install -y sword-text-sparv sword-text-web sword-text-kjv (CI installs them)")
def test_real_t2t_mixture_has_three_prefixed_tasks_on_the_translation_chapters(tmp_path, capsys):
    from transformer.data.text import iter_pairs

    out = tmp_path / "t2t"
    assert main(["data", "bible-t2t", "--out", str(out)]) == 0
    assert "input<TAB>target lines" in capsys.readouterr().out
    prefixes = {"spa-eng": "translate Spanish to English: ", "eng-spa": "translate English to Spanish: ",
                "genre": "genre: "}
    for split in ("train", "valid", "test"):
        pairs = list(iter_pairs(out / f"{split}.tsv"))  # every line parses: one tab, both sides non-empty
        ids = (out / f"{split}.ids").read_text(encoding="utf-8").splitlines()
        assert len(pairs) == len(ids)
        by_task: dict[str, list] = {}
        for (_, x, y), row in zip(pairs, ids, strict=True):
            task, verse = row.split("\t")
            assert x.startswith(prefixes[task]), (task, x)
            book, chapter, _ = verse.split(".")
            assert split_of((book, int(chapter))) == split  # the chapters of `data bible`
            by_task.setdefault(task, []).append((verse, x.removeprefix(prefixes[task]), y))
        assert len(by_task["spa-eng"]) == len(by_task["eng-spa"]) > 400
        assert all(label in GENRE_OF.values() for _, _, label in by_task["genre"])
        # the two translation directions are the same verse pairs, mirrored
        assert [(v, y, x) for v, x, y in by_task["spa-eng"]] == by_task["eng-spa"]
        if split == "train":
            first = dict((v, (x, y)) for v, x, y in by_task["spa-eng"])["Gen.1.1"]
            assert first == ("En el principio crió Dios los cielos y la tierra.",
                             "In the beginning, God created the heavens and the earth.")
            assert ("Gen.1.1", "In the beginning, God created the heavens and the earth.", "Law") in by_task["genre"]
        if split != "test":  # both languages' verses as plain text, for pretraining
            text = (out / f"{split}.txt").read_text(encoding="utf-8").splitlines()
            assert text == [x for _, x, _ in by_task["spa-eng"]] + [y for _, _, y in by_task["spa-eng"]]
    assert not (out / "test.txt").exists()
