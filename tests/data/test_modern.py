"""The Spanish -> English builders of transformer.data.sources on tiny fixtures written here (.mo
catalogs, Translation-es/-en indexes, a dictd dictionary), so that no test depends on what this
machine has installed; one slow test builds from the real system files when they are there."""

import hashlib
import os
import struct
from collections import Counter
from pathlib import Path

import pytest

from tests.cli.common import run as run_cli
from transformer.data.sources import debian, freedict, gettext_ui
from transformer.data.sources.bible.verse_align import LengthModel
from transformer.data.sources.debian import build_debian_corpus
from transformer.data.sources.freedict import build_dictionary_corpus
from transformer.data.sources.gettext_ui import build_ui_corpus
from transformer.data.sources.sentences import align_sentences, split_sentences
from transformer.data.sources.splits import Pair, assign, split_of
from transformer.data.sources.ui_clean import clean_pair
from transformer.data.text import DataError

# ---- fixture writers ----

MO_HEADER = (
    "Project-Id-Version: demo 1.0\nContent-Type: text/plain; charset=UTF-8\n"
    "Plural-Forms: nplurals=2; plural=(n != 1);\n"
)


def write_mo(path: Path, messages: dict[str, str]) -> Path:
    """A GNU .mo file: magic, revision, count, two tables of (length, offset), NUL-ended strings.
    A plural entry's msgid and msgstr hold their forms separated by NUL; a context is `ctx\\x04`."""
    items = sorted({"": MO_HEADER, **messages}.items())
    ids = [k.encode() for k, _ in items]
    strs = [v.encode() for _, v in items]
    n = len(items)
    originals, translations = 28, 28 + 8 * n
    offset = 28 + 16 * n
    tables, blob = [b"", b""], b""
    for table, strings in enumerate((ids, strs)):
        for s in strings:
            tables[table] += struct.pack("<2I", len(s), offset + len(blob))
            blob += s + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, n, originals, translations, 0, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + tables[0] + tables[1] + blob)
    return path


def stanza(package: str, md5: str, lang: str, title: str, *paragraphs: str) -> str:
    """A deb822 description stanza: body lines start with a space, " ." between paragraphs."""
    body = "\n .\n".join("\n".join(" " + line for line in p.split("\n")) for p in paragraphs)
    return (
        f"Package: {package}\nDescription-md5: {md5}\nDescription-{lang}: {title}\n"
        + (body + "\n" if paragraphs else "")
        + "\n"
    )


def b64(number: int) -> str:
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = ""
    while True:
        out = digits[number % 64] + out
        number //= 64
        if not number:
            return out


def write_dict(root: Path, entries: list[tuple[str, str]]) -> Path:
    """freedict-spa-eng.index and .dict (plain) of (index headword, entry text)."""
    root.mkdir(parents=True, exist_ok=True)
    data, index = b"", []
    for head, text in [("00databaseinfo", "Spanish-English FreeDict\n\nEdition: 0.1\n"), *entries]:
        raw = text.encode()
        index.append(f"{head}\t{b64(len(data))}\t{b64(len(raw))}\n")
        data += raw
    (root / "freedict-spa-eng.dict").write_bytes(data)
    (root / "freedict-spa-eng.index").write_text("".join(index), encoding="utf-8")
    return root


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


# ---- cleaning of UI strings ----


@pytest.mark.parametrize(
    "eng, spa, kept",
    [
        ("_File", "_Archivo", ("File", "Archivo")),
        ("Save _As…", "Guardar _como…", ("Save As…", "Guardar como…")),
        ("Copie_s:", "_Copias:", ("Copies:", "Copias:")),
        ("&Open", "&Abrir", ("Open", "Abrir")),
        ("Fish && &Chips", "Pescado && &patatas", ("Fish & Chips", "Pescado & patatas")),
        (
            "sh_link not set",
            "no se estableció sh_link",
            ("sh_link not set", "no se estableció sh_link"),
        ),
        ("local_schema", "esquema_local", ("local_schema", "esquema_local")),
        ("in AT&T syntax", "con sintaxis AT&T", ("in AT&T syntax", "con sintaxis AT&T")),
        (
            "%s: cannot open %s\n",
            "%s: no se puede abrir %s\n",
            ("%s: cannot open %s", "%s: no se puede abrir %s"),
        ),
        ("%1$s on %2$s", "%2$s en %1$s", ("%1$s on %2$s", "%2$s en %1$s")),
        ("Hello {name}", "Hola {name}", ("Hello {name}", "Hola {name}")),
        (
            "<b>Image Options</b>",
            "<b>Opciones de imagen</b>",
            ("Image Options", "Opciones de imagen"),
        ),
        (
            "Only <em/> is permitted",
            "Solo se permite <em/>",
            ("Only <em/> is permitted", "Solo se permite <em/>"),
        ),
        ("The &lt; &gt; key", "La tecla &lt; &gt;", ("The < > key", "La tecla < >")),
        ("Error", "Error", ("Error", "Error")),
        (
            "line one\n  line two",
            "línea uno\n  línea dos",
            ("line one line two", "línea uno línea dos"),
        ),
    ],
)
def test_clean_pair_keeps(eng, spa, kept):
    reason, *pair = clean_pair(eng, spa)
    assert reason is None and tuple(pair) == kept


@pytest.mark.parametrize(
    "eng, spa, reason",
    [
        ("Open", "", "untranslated"),
        ("%s: %s", "%s: %s", "no letters"),
        ("%H:%M", "%H:%M", "no letters"),
        ("cannot open %s", "no se puede abrir", "placeholders differ"),
        ("%s and %d", "%2$d y %1$s", "placeholders differ"),
        ("<b>Bold</b>", "Negrita", "markup differs"),
        ("a\nb\nc\nd", "a\nb\nc\nd", "more than 3 lines"),
        ("x" * 401, "y" * 401, "longer than 400"),
        ("Creative Desktop Wireless 7000", "Creative Desktop Wireless 7000", "msgstr = msgid"),
    ],
)
def test_clean_pair_drops(eng, spa, reason):
    assert reason in clean_pair(eng, spa)[0]


# ---- hash splits and deduplication ----


def test_split_of_is_sha256_of_the_key():
    for key in ("gtk30", "postgres", "0ad", "gnupg2"):
        bucket = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 10_000 / 100
        expected = "valid" if bucket < 3 else "test" if bucket < 12 else "train"
        assert split_of(key, 3, 9) == expected
    assert split_of("gnupg2", 3, 9) == "test"  # fixed across processes and versions
    assert split_of("gtk30", 3, 9) == "valid"


def test_assign_keeps_groups_whole_and_valid_test_english_out_of_train():
    groups = {"a": "train", "b": "valid", "c": "test"}
    pairs = [
        Pair("uno", "one", "a"),
        Pair("uno", "one", "c"),  # the same pair in test: a duplicate, kept in train
        Pair("dos", "two", "b"),
        Pair("tres", "three", "c"),
        Pair("un", "one", "b"),  # another translation of a training English string
        Pair("dos", "two", "a"),  # the valid pair also in train: train keeps it, valid loses it
    ]
    dropped = Counter()
    splits = assign(pairs, groups.get, dropped)
    assert splits == {
        "train": [("uno", "one"), ("dos", "two")],
        "valid": [],
        "test": [("tres", "three")],
    }
    assert dropped["duplicate pair"] == 2
    assert dropped["in valid but its English is also in train"] == 1
    english = {split: {e for _, e in p} for split, p in splits.items()}
    assert not english["train"] & (english["valid"] | english["test"])


def test_assign_one_translation_keeps_the_most_frequent():
    pairs = [Pair("Abierto", "Open", "a"), Pair("Abrir", "Open", "b"), Pair("Abrir", "Open", "c")]
    dropped = Counter()
    splits = assign(pairs, lambda _: "train", dropped, one_translation=True)
    assert splits["train"] == [("Abrir", "Open")]
    assert sum(v for k, v in dropped.items() if k.startswith("conflicting")) == 1


# ---- ui-strings ----


def ui_fixture(root: Path) -> Path:
    """Two catalogs in train, one in test (gnupg2 hashes to test), a copy of one, and es_ES."""
    messages = root / "es" / "LC_MESSAGES"
    write_mo(
        messages / "demo.mo",
        {
            "_Open": "_Abrir",
            "Menu\x04_Quit": "_Salir",  # a context
            "%d file\x00%d files": "%d archivo\x00%d archivos",  # a plural entry
            "%s": "%s",  # format only
            "Cancel": "Cancelar",
        },
    )
    write_mo(messages / "other.mo", {"Open": "Abierto", "Close": "Cerrar", "Cancel": "Cancelar"})
    write_mo(
        messages / "gnupg2.mo",
        {"Cancel": "Anular", "Bad passphrase": "Frase de contraseña incorrecta"},
    )
    (messages / "zcopy.mo").write_bytes((messages / "other.mo").read_bytes())
    write_mo(root / "es_ES" / "LC_MESSAGES" / "extra.mo", {"Print": "Imprimir"})
    return root


def test_ui_strings_build(tmp_path):
    root = ui_fixture(tmp_path / "locale")
    report = build_ui_corpus(tmp_path / "ui", root)
    out = tmp_path / "ui"
    train = dict(zip(lines(out / "train.eng"), lines(out / "train.spa"), strict=True))
    assert train == {
        "Open": "Abrir",  # one translation: "Abrir" (after the accelerator) and "Abierto" tie,
        "Quit": "Salir",  # the first in catalog order wins
        "%d file": "%d archivo",
        "Cancel": "Cancelar",
        "Close": "Cerrar",
        "Print": "Imprimir",
    }
    # gnupg2's "Cancel" is in train already: only its other string reaches test
    assert lines(out / "test.eng") == ["Bad passphrase"]
    assert lines(out / "test.domains") == ["gnupg2"]
    assert report["skipped_catalogs"] == {"zcopy": "same file as other"}
    assert report["pairs"] == {"train": 6, "valid": 0, "test": 1}
    provenance = (out / "PROVENANCE.md").read_text()
    assert "train 6, valid 0, test 1 pairs" in provenance
    assert "| es_ES/extra | train |" in provenance


def test_outputs_are_written_to_a_temporary_file_then_renamed(tmp_path, monkeypatch):
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (renamed.append((a, b)), real_replace(a, b)))
    build_ui_corpus(tmp_path / "ui", ui_fixture(tmp_path / "locale"))
    names = {Path(b).name for _, b in renamed}
    assert names == {f"{s}.{x}" for s in ("train", "valid", "test") for x in ("spa", "eng")} | {
        "test.domains",
        "PROVENANCE.md",
    }
    assert all(
        Path(a).parent == Path(b).parent and Path(a).name.endswith(".tmp") for a, b in renamed
    )
    assert not list((tmp_path / "ui").glob("*.tmp"))


def test_ui_group_drops_the_version_suffix():
    assert gettext_ui.group_of("postgres-15") == "postgres"
    assert gettext_ui.group_of("gstreamer-1.0") == "gstreamer"
    assert gettext_ui.ui_split("psql-15") == gettext_ui.ui_split("psql-16")


# ---- debian-descriptions ----

ES = (
    stanza(
        "alpha",
        "aaa",
        "es",
        "herramienta de prueba",
        "Alpha es una herramienta. Hace pruebas rápidas.",
        "Funciones:\n * primera cosa\n * segunda cosa",
    )
    + stanza("beta", "bbb", "es", "juego de beta", "Un párrafo.\n .\n Otro párrafo.")
    + stanza("gamma", "stale", "es", "traducción antigua", "Texto.")
)
EN = (
    stanza(
        "alpha",
        "aaa",
        "en",
        "test tool",
        "Alpha is a tool. It runs quick tests.",
        "Features:\n * first thing\n * second thing",
    )
    + stanza("beta", "bbb", "en", "beta game", "One paragraph only.")
    + stanza("gamma", "new", "en", "new description", "Text.")
)


def debian_fixture(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "deb_dists_x_main_i18n_Translation-es").write_text(ES, encoding="utf-8")
    (root / "deb_dists_x_main_i18n_Translation-en").write_text(EN, encoding="utf-8")
    return root


def test_debian_pairs_by_md5_paragraphs_and_sentences(tmp_path, monkeypatch):
    monkeypatch.setattr(debian, "debian_split", lambda package: "train")
    report = build_debian_corpus(tmp_path / "deb", debian_fixture(tmp_path / "lists"))
    out = tmp_path / "deb"
    pairs = list(zip(lines(out / "train.spa"), lines(out / "train.eng"), strict=True))
    assert pairs == [
        ("herramienta de prueba", "test tool"),
        ("Alpha es una herramienta.", "Alpha is a tool."),
        ("Hace pruebas rápidas.", "It runs quick tests."),
        ("Funciones:", "Features:"),
        ("primera cosa", "first thing"),
        ("segunda cosa", "second thing"),
        ("juego de beta", "beta game"),  # its body: 2 paragraphs against 1, dropped
    ]
    dropped = report["dropped"]
    assert dropped["description body: paragraph counts differ (title kept)"] == 1
    assert dropped["Spanish description without its English original in the en index"] == 1
    assert "Pairs: train 7, valid 0, test 0" in (out / "PROVENANCE.md").read_text()


def test_debian_reads_gzip_indexes(tmp_path):
    import gzip

    root = debian_fixture(tmp_path / "lists")
    for path in list(root.iterdir()):
        with gzip.open(path.with_name(path.name + ".gz"), "wt", encoding="utf-8") as f:
            f.write(path.read_text(encoding="utf-8"))
        path.unlink()
    report = build_debian_corpus(tmp_path / "deb", root)
    assert sum(report["pairs"].values()) == 7


def test_debian_blocks():
    assert debian.blocks(
        ["Intro line", "continued.", "* item one", "  more of it", "- item two"]
    ) == [
        ("prose", "Intro line continued."),
        ("item", "item one more of it"),
        ("item", "item two"),
    ]
    assert debian.blocks(["  foo", "   A tool", "   for foo."]) == [
        ("verbatim", "foo"),
        ("verbatim", "A tool for foo."),
    ]


def test_sentences_split_and_align():
    assert split_sentences("It runs on Linux, e.g. Debian. It is free! Is it? Yes.") == [
        "It runs on Linux, e.g. Debian.",
        "It is free!",
        "Is it?",
        "Yes.",
    ]
    assert split_sentences("Written by J. Smith in 500 A.D. and more.") == [
        "Written by J. Smith in 500 A.D. and more."
    ]
    model = LengthModel(1.0, 1.0)
    eng = ["a" * 40, "b" * 10, "c" * 30, "d" * 50]
    spa = ["A" * 40, "B" * 41, "D" * 50]  # the second and third English sentences merged
    pairs, alone = align_sentences(eng, spa, model)
    assert pairs == [(eng[0], spa[0]), (f"{eng[1]} {eng[2]}", spa[1]), (eng[3], spa[2])]
    assert alone == 0


# ---- dictionary ----


def test_dictionary(tmp_path):
    root = write_dict(
        tmp_path / "dict",
        [
            ("colonia", "Colonia /kolˈonja/\nCologne\n"),
            ("colonia", "colonia /kolˈonja/\ncolony, settlement\n"),
            ("prisa", "prisa /pɾˈisa/\n1. haste\n2. speed, hurry\n3. urgency\n4. rush\n"),
            ("delante de", "delante de /x/\ninfrontof\n"),
            ("frente", "frente /fɾˈente/\nfront\n"),  # "front": a word the dictionary knows
        ],
    )
    report = build_dictionary_corpus(tmp_path / "out", root)
    out = tmp_path / "out"
    pairs = list(zip(lines(out / "train.spa"), lines(out / "train.eng"), strict=True))
    assert pairs == [
        ("Colonia", "Cologne"),
        ("colonia", "colony"),
        ("colonia", "settlement"),
        ("prisa", "haste"),  # at most 3: each sense's first
        ("prisa", "speed"),
        ("prisa", "urgency"),
        ("delante de", "in front of"),  # re-spaced
        ("frente", "front"),
    ]
    assert report["respaced"] == {"infrontof": "in front of"}
    assert not (out / "valid.spa").exists()
    assert "No valid or test split" in (out / "PROVENANCE.md").read_text()


def test_unglue_leaves_real_words_alone():
    known = {"in", "front", "of", "pot", "a", "to", "ban", "an", "with", "out", "cost", "bay"}
    assert freedict.unglue("infrontof", known) == "in front of"
    assert freedict.unglue("potato", known) == "potato"  # an article before "to": no split
    assert freedict.unglue("banana", known) == "banana"
    assert freedict.unglue("without", known) == "without"
    assert freedict.unglue("CostaBrava", known) == "Costa Brava"
    assert freedict.unglue("BayofBiscay", known) == "Bay of Biscay"


# ---- missing inputs: one line, exit 2 ----


@pytest.mark.parametrize(
    "command, flag, phrase",
    [
        ("ui-strings", "--locale-dir", "no Spanish gettext catalogs under {root}/es/LC_MESSAGES"),
        ("debian-descriptions", "--lists", "run `sudo apt-get -o Acquire::Languages=es,en update`"),
        ("dictionary", "--dict", "install dict-freedict-spa-eng (apt-get install dict-freedict"),
    ],
)
def test_missing_input_is_one_line(tmp_path, capsys, command, flag, phrase):
    root = tmp_path / "empty"
    root.mkdir()
    rc, out, err = run_cli(["data", command, "--out", tmp_path / "out", flag, root], capsys)
    assert rc == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith(f"transformer data {command}: error: ")
    assert phrase.format(root=root) in err
    assert not (tmp_path / "out").exists()
    rc, _, err = run_cli(["data", command, "--out", tmp_path / "out", flag, root / "no"], capsys)
    assert rc == 2 and f"{flag} {root / 'no'} does not exist" in err


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    rc, _, err = run_cli(["data", "ui-strings", "--out", a_file], capsys)
    assert rc == 2 and f"--out {a_file} is a file" in err
    assert a_file.read_text() == "x"


def test_cli_builds_from_fixtures(tmp_path, capsys):
    root = write_dict(tmp_path / "dict", [("casa", "casa /kˈasa/\nhouse\n")])
    rc, out, _ = run_cli(["data", "dictionary", "--out", tmp_path / "d", "--dict", root], capsys)
    assert rc == 0 and "train 1 headword -> translation pairs" in out
    rc, out, _ = run_cli(
        ["data", "ui-strings", "--out", tmp_path / "u", "--locale-dir", ui_fixture(tmp_path / "l")],
        capsys,
    )
    assert rc == 0 and "train 6, valid 0, test 1 message pairs" in out


def test_missing_data_error_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="no Translation-es index"):
        build_debian_corpus(tmp_path / "out", tmp_path)


# ---- the real system files ----


@pytest.mark.slow
@pytest.mark.parametrize(
    "build, needs",
    [
        (build_ui_corpus, "/usr/share/locale/es/LC_MESSAGES"),
        (build_debian_corpus, "/var/lib/apt/lists"),
        (build_dictionary_corpus, "/usr/share/dictd/freedict-spa-eng.index"),
    ],
)
def test_real_system_files(tmp_path, build, needs):
    try:
        report = build(tmp_path / "out")
    except DataError as e:
        pytest.skip(f"{needs}: {e}")
    out = tmp_path / "out"
    for split in ("train", "valid", "test"):
        if (out / f"{split}.spa").exists():
            assert len(lines(out / f"{split}.spa")) == len(lines(out / f"{split}.eng"))
    assert (out / "PROVENANCE.md").exists()
    pairs = report["pairs"]
    assert (pairs if isinstance(pairs, int) else pairs["train"]) > 1000
