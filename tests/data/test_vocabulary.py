"""`transformer data vocabulary` and its readers (GCompris's Qt .qm catalogue, KDE's kvtml lists)
on small files written here, and on the real packages when they are installed (under / or the
tree named by TRANSFORMER_TEST_DEB_ROOT, where they were extracted with dpkg-deb -x)."""

import os
import struct
from collections import Counter
from pathlib import Path

import pytest

from tests.cli.common import run as run_cli
from transformer.data.sources.everyday import gcompris, kvtml
from transformer.data.sources.everyday.gcompris import Message, gcompris_pairs, read_qm
from transformer.data.sources.everyday.kvtml import kvtml_pairs
from transformer.data.sources.everyday.vocabulary import (
    build_vocabulary_corpus,
    vocabulary_split,
)
from transformer.data.sources.splits import SPLITS, Pair
from transformer.data.text import DataError

QM = Path(gcompris.CATALOGUE)
KVTML = Path(kvtml.FOLDER)


def _field(tag: int, data: bytes) -> bytes:
    return bytes([tag]) + struct.pack(">I", len(data)) + data


def write_qm(messages: list[tuple], language: str = "es") -> bytes:
    """A .qm as lrelease writes one: each message (context, source or None, translations,
    comment) as translation fields (UTF-16BE; None: the 0xFFFFFFFF length), comment, source and
    context, then the end tag; a hashes and a contexts section around the messages, skipped by
    the reader. A message with 5 more items gets an obsolete field (tag 5, 4 bytes) first."""
    body = b""
    for context, source, translations, comment, *obsolete in messages:
        body += b"\x05\x00\x00\x00\x2a" if obsolete else b""
        for text in translations:
            body += b"\x03\xff\xff\xff\xff" if text is None else _field(3, text.encode("utf-16-be"))
        body += _field(8, comment.encode()) if comment is not None else b""
        body += _field(6, source.encode()) if source is not None else b""
        body += _field(7, context.encode()) + b"\x01"
    sections = [(0xA7, language.encode()), (0x42, bytes(8)), (0x69, body), (0x2F, bytes(4))]
    return gcompris.MAGIC + b"".join(_field(tag, data) for tag, data in sections)


def kvtml_file(entries: dict[int, tuple[str, str]], locale: str) -> str:
    """A kvtml 2.0 file: entry id -> (word, definition; "" for none)."""
    rows = "".join(
        f'<entry id="{key}"><inactive>false</inactive><translation id="0"><text>{word}</text>'
        + (f"<comment>{comment}</comment>" if comment else "")
        + "</translation></entry>"
        for key, (word, comment) in entries.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><kvtml version="2.0"><identifiers>'
        f'<identifier id="0"><locale>{locale}</locale></identifier></identifiers>'
        f"<entries>{rows}</entries></kvtml>"
    )


def put(root: Path, path: Path | str, data: bytes | str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.encode() if isinstance(data, str) else data)


MESSAGES = [
    ("tutorial4", None, ["0 a 255 con"], ""),  # no source (as in gcompris_es.qm)
    ("ActivityInfo", "Find the day", ["Encuentra el día"], "", "obsolete field"),
    ("board5_0", "Sweden", ["Suecia"], ""),
    ("board5_0", "Mendoza", ["Mendoza"], ""),
    ("LandSafe", "Altitude: %1", ["Altura: %1"], ""),
    ("LandSafe", "Level %1", ["Nivel"], ""),
    ("Clockgame", "%n hour(s)", ["%n hora", "%n horas"], ""),
    ("Calendar", "Monday", [None], ""),
    ("Calendar", "Tuesday", [""], ""),
    ("main", "<b>Welcome</b> to GCompris!", ["¡<b>Bienvenido</b> a GCompris!"], ""),
    ("Calendar", "12", ["12"], ""),
    ("Calendar", "1st", ["1.º"], ""),
]


def test_read_qm_decodes_every_field_and_skips_the_others():
    language, messages = read_qm(write_qm(MESSAGES))
    assert language == "es" and len(messages) == len(MESSAGES)
    assert messages[0] == Message("tutorial4", None, "", ("0 a 255 con",))
    assert messages[1] == Message("ActivityInfo", "Find the day", "", ("Encuentra el día",))
    assert messages[6].translations == ("%n hora", "%n horas")
    assert messages[7].translations == (None,)
    assert messages[9].translations == ("¡<b>Bienvenido</b> a GCompris!",)


def test_read_qm_refuses_what_it_cannot_read():
    with pytest.raises(DataError, match="not a Qt .qm file"):
        read_qm(b"\0" * 40, "x.qm")
    good = write_qm([("c", "Sun", ["Sol"], "")])
    with pytest.raises(DataError, match="x.qm: truncated at byte"):
        read_qm(good[:-2], "x.qm")
    context = b"\x07\x00\x00\x00\x01c"
    with pytest.raises(DataError, match="unknown message field 9"):
        read_qm(good.replace(context, b"\x09" + context[1:]), "x.qm")


def test_gcompris_pairs_keep_language_and_count_each_drop(tmp_path):
    put(tmp_path, QM, write_qm(MESSAGES))
    dropped = Counter()
    assert gcompris_pairs(tmp_path, dropped) == [
        Pair("Encuentra el día", "Find the day", "gcompris/ActivityInfo"),
        Pair("Suecia", "Sweden", "gcompris/board5_0"),
        Pair("Altura: %1", "Altitude: %1", "gcompris/LandSafe"),
        Pair("¡Bienvenido a GCompris!", "Welcome to GCompris!", "gcompris/main"),
    ]
    assert dropped == {
        "no source text": 1,
        "Spanish equals the English (a name, a letter, a shared word)": 1,
        "placeholders differ between the sides": 1,
        "plural forms (%n): one translation per number": 1,
        "untranslated": 2,
        "no letters besides placeholders (a format or punctuation)": 1,
        "a number only (1st, 12:30)": 1,
    }
    put(tmp_path, QM, write_qm(MESSAGES, language="fr"))
    with pytest.raises(DataError, match="for 'fr', not Spanish"):
        gcompris_pairs(tmp_path)


def fake_kvtml(root: Path) -> None:
    """fruits (a shared word, a number-only definition, an English entry the Spanish lacks),
    professions (a Spanish entry inserted with a repeated word) and a graded list."""
    es, en = KVTML / "es", KVTML / "en"
    put(root, es / "frutas.kvtml", kvtml_file(
        {0: ("manzana", "Se usa para hacer sidra"), 1: ("kiwi", "Fruta verde"),
         2: ("uva", "1.º"), 3: ("pera", "")}, "es"))  # fmt: skip
    put(root, en / "fruits.kvtml", kvtml_file(
        {0: ("apple", "Used to make cider"), 1: ("kiwi", "Green fruit"), 2: ("grape", "1st"),
         3: ("pear", "Bell-shaped fruit"), 4: ("plum", "")}, "en"))  # fmt: skip
    put(root, es / "professiones.kvtml", kvtml_file(
        {0: ("panadero", ""), 1: ("mecánico", ""), 2: ("cocinero", ""), 3: ("mecánico", ""),
         4: ("peluquero", "")}, "es"))  # fmt: skip
    put(root, en / "professions.kvtml", kvtml_file(
        {0: ("baker", ""), 1: ("mechanic", ""), 2: ("chef", ""), 3: ("hairdresser", "")},
        "en"))  # fmt: skip
    put(root, es / "easy.kvtml", kvtml_file({0: ("pelota", "")}, "es"))
    put(root, en / "easy.kvtml", kvtml_file({0: ("computer", "")}, "en"))


def test_kvtml_pairs_words_and_definitions_by_entry_id(tmp_path, monkeypatch):
    fake_kvtml(tmp_path)
    monkeypatch.setattr(kvtml, "WRONG_WORDS", frozenset({("professions", 2)}))
    dropped = Counter()
    assert kvtml_pairs(tmp_path, dropped) == [
        Pair("manzana", "apple", "kvtml/fruits"),
        Pair("Se usa para hacer sidra", "Used to make cider", "kvtml/fruits"),
        Pair("Fruta verde", "Green fruit", "kvtml/fruits"),
        Pair("uva", "grape", "kvtml/fruits"),
        Pair("pera", "pear", "kvtml/fruits"),
        Pair("panadero", "baker", "kvtml/professions"),
        Pair("mecánico", "mechanic", "kvtml/professions"),
        Pair("peluquero", "hairdresser", "kvtml/professions"),  # after the inserted mecánico
    ]
    assert dropped == {
        "Spanish equals the English (a name, a letter, a shared word)": 1,  # kiwi
        "a number only (1st, 12:30)": 1,  # the definitions 1.º = 1st
        "definition in one language only": 1,  # pera
        "Spanish entry inserted by the translator (a repeated word)": 1,
        "entry in one language only": 1,  # plum
        "word is not a translation (WRONG_WORDS, WRONG_DEFINITIONS)": 1,  # cocinero = chef
        "graded list (easy, medium, hard) skipped whole: its Spanish is its own": 1,
        "list not installed in both languages": len(kvtml.FILES) - 2,
    }
    with pytest.raises(DataError, match="apt-get install kdeedu-kvtml-data"):
        kvtml_pairs(tmp_path / "nothing")


def fake_system(root: Path, contexts: int = 40) -> None:
    """A GCompris catalogue of `contexts` contexts of three messages each, and the kvtml lists."""
    put(root, QM, write_qm([
        (f"board{c}", f"Find the {thing} number {c}", [f"Encuentra {cosa} número {c}"], "")
        for c in range(contexts)
        for thing, cosa in (("bear", "el oso"), ("duck", "el pato"), ("snail", "el caracol"))
    ]))  # fmt: skip
    fake_kvtml(root)


def read_splits(out: Path) -> dict[str, list[tuple[str, str]]]:
    def lines(name: str) -> list[str]:
        return (out / name).read_text().splitlines()

    return {s: list(zip(lines(f"{s}.spa"), lines(f"{s}.eng"), strict=True)) for s in SPLITS}


def test_vocabulary_corpus_holds_out_whole_groups(tmp_path):
    fake_system(tmp_path / "root")
    report = build_vocabulary_corpus(tmp_path / "out", tmp_path / "root")
    splits = read_splits(tmp_path / "out")
    assert report["pairs"] == {name: len(pairs) for name, pairs in splits.items()}
    assert report["sources"] == {"gcompris": 120, "kvtml": 9}  # cocinero = chef kept here
    assert report["skipped"] == [] and splits["valid"] and splits["test"]
    for split, pairs in splits.items():
        for spa, eng in pairs:
            if eng.startswith("Find the"):
                assert spa.split()[-1] == eng.split()[-1]  # aligned
                assert vocabulary_split(f"gcompris/board{eng.split()[-1]}") == split
    provenance = (tmp_path / "out/PROVENANCE.md").read_text()
    assert "| gcompris | gcompris-qt-data unknown |" in provenance
    assert "under 15 is valid, under 30 test" in provenance


def test_a_missing_package_is_skipped_and_both_missing_say_what_to_install(tmp_path):
    put(tmp_path / "root", QM, write_qm([("main", "Welcome", ["Bienvenido"], "")]))
    report = build_vocabulary_corpus(tmp_path / "out", tmp_path / "root")
    assert report["skipped"] == ["kdeedu-kvtml-data"] and report["sources"] == {"gcompris": 1}
    assert report["install"] == "apt-get install kdeedu-kvtml-data"
    assert (
        "Not installed, skipped: kdeedu-kvtml-data" in (tmp_path / "out/PROVENANCE.md").read_text()
    )
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="apt-get install gcompris-qt-data kdeedu-kvtml-data"):
        build_vocabulary_corpus(tmp_path / "out", tmp_path / "empty")


def test_cli_row_and_its_one_line_error(tmp_path, capsys):
    fake_system(tmp_path / "root", contexts=2)
    argv = ["data", "vocabulary", "--out", tmp_path / "out", "--root", tmp_path / "root"]
    rc, out, _ = run_cli(argv, capsys)
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'out'}: train ")
    assert "pairs (gcompris 6, kvtml 9); dropped " in out
    (tmp_path / "empty").mkdir()
    argv = ["data", "vocabulary", "--out", tmp_path / "o2", "--root", tmp_path / "empty"]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and len(err.splitlines()) == 1
    assert "apt-get install gcompris-qt-data kdeedu-kvtml-data (or apt-get download" in err


def installed_root(path: Path) -> Path:
    """The first of / and $TRANSFORMER_TEST_DEB_ROOT holding `path`, else skip."""
    for root in ("/", os.environ.get("TRANSFORMER_TEST_DEB_ROOT")):
        if root and (Path(root) / path).exists():
            return Path(root)
    pytest.skip(f"{path} is not installed (apt-get install, or TRANSFORMER_TEST_DEB_ROOT)")


def test_real_gcompris_catalogue():
    dropped = Counter()
    pairs = gcompris_pairs(installed_root(QM), dropped)
    assert 3000 <= len(pairs) <= 3500  # 3,224 in gcompris-qt-data 3.1-2
    assert 400 <= dropped["Spanish equals the English (a name, a letter, a shared word)"] <= 550
    found = {(p.spa, p.eng) for p in pairs}
    assert ("Encuentra el día", "Find the day") in found
    assert len({p.group for p in pairs}) > 150


def test_real_kvtml_lists():
    dropped = Counter()
    pairs = {(p.spa, p.eng) for p in kvtml_pairs(installed_root(KVTML / "es"), dropped)}
    assert 650 <= len(pairs) <= 800  # 738 in kdeedu-kvtml-data 4:22.12.3-1
    assert {("manzana", "apple"), ("peluquero", "hairdresser"), ("dirigible", "airship")} < pairs
    assert ("mecánico", "hairdresser") not in pairs and ("perro", "kitten") not in pairs
    assert dropped["Spanish entry inserted by the translator (a repeated word)"] == 2


def test_real_vocabulary_corpus(tmp_path):
    root = installed_root(QM)
    if not (root / KVTML / "es").exists():
        pytest.skip("kdeedu-kvtml-data is not installed beside gcompris-qt-data")
    report = build_vocabulary_corpus(tmp_path / "out", root)
    assert 150 <= report["pairs"]["valid"] <= 600 and 150 <= report["pairs"]["test"] <= 600
    assert report["skipped"] == [] and report["sources"]["kvtml"] > 500
