"""`transformer data manuals` on small fake package trees written here (files under a fake root and
dpkg's file lists naming them), and one test on the real installed manuals when they are there."""

import gzip
from collections import Counter
from pathlib import Path

import pytest

from tests.cli.common import run as run_cli
from transformer.data.sources.manuals.blocks import html_blocks, mallard_blocks, roff_blocks
from transformer.data.sources.manuals.catalog import MANUALS
from transformer.data.sources.manuals.corpus import build_manuals_corpus, manual_split
from transformer.data.sources.manuals.pairing import MAX_CHARS, MIN_WORDS
from transformer.data.text import DataError


def install(root: Path, package: str, files: dict[str, bytes | str]) -> None:
    """Write a fake package's files under root and dpkg's list of them."""
    for path, data in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True, exist_ok=True)
    with (info / f"{package}.list").open("a") as f:
        f.write("".join(f"{path}\n" for path in files))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def corpus(out: Path) -> dict[str, list[tuple[str, str]]]:
    return {
        split: list(zip(lines(out / f"{split}.spa"), lines(out / f"{split}.eng"), strict=True))
        for split in ("train", "valid", "test")
    }


def page(body: str) -> str:
    return f'<page xmlns="http://projectmallard.org/1.0/" id="x">{body}</page>'


MALLARD_EN = page(
    "<info><credit><name>Ann Author</name></credit><desc>Turn on the screen reader.</desc></info>"
    "<title>Use a screen reader</title>"
    "<p>Run <cmd>orca --setup</cmd> to change its settings. It asks a few questions.</p>"
    "<screen>orca --replace</screen><p><cmd>orca</cmd></p>"
    "<p>See <link xref='a11y'/> for more.</p>"
)
MALLARD_ES = page(
    "<info><credit><name>Ann Author</name></credit><desc>Active el lector de pantalla.</desc>"
    "<credit type='translator'><name>Tra Ductor</name></credit></info>"
    "<title>Usar un lector de pantalla</title>"
    "<p>Ejecute <cmd>orca --setup</cmd> para cambiar su configuración. Le hace unas preguntas.</p>"
    "<screen>orca --replace</screen><p><cmd>orca</cmd></p>"
    "<p>Consulte <link xref='a11y'/> para más.</p>"
)
HTML_EN = (
    "<html><head><title>1.1. What is Debian?</title></head><body>"
    "<div class='navheader'><p>Prev Next Home</p></div>"
    "<h2>What is Debian?</h2><p>Debian is an all-volunteer organization that makes a free "
    "operating system.</p><pre class='screen'># apt-get install debian</pre>"
    "<table><tr><td>Some cell text here</td></tr></table>"
    "<ul><li><p>Edit <code>/etc/fstab</code> with care.</p></li></ul></body></html>"
)
HTML_ES = (
    "<html><head><title>1.1. ¿Qué es Debian?</title></head><body>"
    "<div class='navheader'><p>Anterior Siguiente Inicio</p></div>"
    "<h2>¿Qué es Debian?</h2><p>Debian es una organización de voluntarios que hace un sistema "
    "operativo libre.</p><pre class='screen'># apt-get install debian</pre>"
    "<table><tr><td>Texto de una celda</td></tr></table>"
    "<ul><li><p>Edite <code>/etc/fstab</code> con cuidado.</p></li></ul></body></html>"
)
ROFF_EN = r""".\" a comment
.TH CHDIR 2 2023-02-05 "Linux man-pages 6.03"
.SH NAME
chdir \- change working directory
.SH SYNOPSIS
.nf
.B #include <unistd.h>
.fi
.SH DESCRIPTION
.BR chdir ()
changes the current working directory of the calling process to
.IR path .
.PP
On success, zero is returned.
.EX
chdir("/tmp");
.EE
.SH "SEE ALSO"
.BR getcwd (3)
"""
ROFF_ES = r""".TH CHDIR 2 "5 Febrero 2023" "Páginas de manual de Linux 6.03"
.SH NOMBRE
chdir \- cambia el directorio de trabajo
.SH SINOPSIS
.nf
\fB#include <unistd.h>\fP
.fi
.SH DESCRIPCIÓN
\fBchdir\fP() cambia el directorio de trabajo actual del proceso que la llama al
directorio \fIpath\fP.
.PP
En caso de éxito se devuelve cero.
.EX
chdir("/tmp");
.EE
.SH "VÉASE TAMBIÉN"
\fBgetcwd\fP(3)
.SH TRADUCCIÓN
La traducción al español fue creada por un equipo de voluntarios.
"""


def test_mallard_blocks_drop_code_and_keep_inline_code():
    dropped = Counter()
    blocks = [b.text for b in mallard_blocks(MALLARD_EN.encode(), dropped)]
    assert blocks == [
        "Turn on the screen reader.",
        "Use a screen reader",
        "Run orca --setup to change its settings. It asks a few questions.",
    ]
    assert dropped["code block"] == 1 and dropped["block of code only (a command, a file name)"]
    assert dropped["block with an empty cross-reference (its text is filled in on display)"] == 1


def test_html_blocks_drop_furniture_code_and_tables():
    dropped = Counter()
    blocks = [b.text for b in html_blocks(HTML_ES.encode(), dropped)]
    assert blocks == [
        "¿Qué es Debian?",
        "Debian es una organización de voluntarios que hace un sistema operativo libre.",
        "Edite /etc/fstab con cuidado.",
    ]
    assert dropped["code block"] == 1 and dropped["table"] == 1


def test_roff_blocks_read_macros_and_escapes_the_same_on_both_sides():
    dropped = Counter()
    en = [b.text for b in roff_blocks(ROFF_EN, dropped)]
    es = [b.text for b in roff_blocks(ROFF_ES, dropped)]
    assert en == [
        "NAME",
        "chdir - change working directory",
        "DESCRIPTION",
        "chdir() changes the current working directory of the calling process to path.",
        "On success, zero is returned.",
    ]
    assert es[3].startswith("chdir() cambia") and es[3].endswith("directorio path.")
    assert len(es) == len(en)  # SYNOPSIS, SEE ALSO, the translators' section and code dropped
    assert roff_blocks(".so man2/chdir.2\n", dropped) == []


def fake_system(root: Path) -> None:
    """gnome-user-docs (one page), the installation guide (one page) and the man pages (one)."""
    install(
        root,
        "gnome-user-docs",
        {
            "/usr/share/help/C/gnome-help/a11y.page": MALLARD_EN,
            "/usr/share/help/es/gnome-help/a11y.page": MALLARD_ES,
        },
    )
    install(
        root,
        "installation-guide-amd64",
        {
            "/usr/share/doc/installation-guide-amd64/en/ch01s01.html": HTML_EN,
            "/usr/share/doc/installation-guide-amd64/es/ch01s01.html": HTML_ES,
        },
    )
    install(root, "manpages", {"/usr/share/man/man2/chdir.2.gz": gzip.compress(ROFF_EN.encode())})
    install(
        root, "manpages-es", {"/usr/share/man/es/man2/chdir.2.gz": gzip.compress(ROFF_ES.encode())}
    )


def test_build_pairs_sentences_of_three_formats(tmp_path):
    fake_system(tmp_path / "root")
    # another program's help in the same folders: not a package of the six, never read
    install(
        tmp_path / "root",
        "gnome-terminal",
        {
            "/usr/share/help/C/gnome-help/terminal.page": page("<p>Open a new terminal tab.</p>"),
            "/usr/share/help/es/gnome-help/terminal.page": page("<p>Abra una pestaña nueva.</p>"),
        },
    )
    report = build_manuals_corpus(tmp_path / "out", tmp_path / "root")
    pairs = {eng: spa for split in corpus(tmp_path / "out").values() for spa, eng in split}
    assert pairs["Run orca --setup to change its settings."] == (
        "Ejecute orca --setup para cambiar su configuración."
    )
    assert pairs["It asks a few questions."] == "Le hace unas preguntas."
    assert pairs["Edit /etc/fstab with care."] == "Edite /etc/fstab con cuidado."
    assert pairs["On success, zero is returned."] == "En caso de éxito se devuelve cero."
    assert pairs["chdir - change working directory"] == "chdir - cambia el directorio de trabajo"
    assert "Open a new terminal tab." not in pairs
    assert not any("orca --replace" in eng or "Some cell" in eng for eng in pairs)
    assert report["skipped"] == ["libreoffice-help", "debian-reference", "maint-guide"]
    assert report["install"].startswith("apt-get install -y libreoffice-help-en-us")
    found = report["manuals"]
    assert found["manpages"].documents == 1 and found["manpages"].how["position"] == 1
    provenance = (tmp_path / "out/PROVENANCE.md").read_text()
    assert "| manpages |" in provenance and "Not installed, skipped: libreoffice-help" in provenance


def test_unequal_block_counts_are_aligned_or_skipped(tmp_path):
    root = tmp_path / "root"
    extra = "<p>Este párrafo solo existe en la traducción española del manual.</p>"
    body = "".join(
        f"<p>This is paragraph number {n} of the page, a sentence of some length.</p>"
        for n in ("one", "two", "three")
    )
    cuerpo = [
        f"<p>Este es el párrafo número {n} de la página, una frase de cierta longitud.</p>"
        for n in ("uno", "dos", "tres")
    ]
    spanish = cuerpo[0] + extra + cuerpo[1] + cuerpo[2]
    install(
        root,
        "maint-guide",
        {"/usr/share/doc/maint-guide/html/start.en.html": f"<html><body>{body}</body></html>"},
    )
    install(
        root,
        "maint-guide-es",
        {"/usr/share/doc/maint-guide-es/html/start.es.html": f"<body>{spanish}</body>"},
    )
    report = build_manuals_corpus(tmp_path / "a", root)
    assert report["manuals"]["maint-guide"].how["aligner"] == 1
    pairs = [p for split in corpus(tmp_path / "a").values() for p in split]
    assert len(pairs) == 3
    number = {"one": "uno", "two": "dos", "three": "tres"}
    assert sorted(number[eng.split()[4]] for _, eng in pairs) == ["dos", "tres", "uno"]
    assert all(spa.split()[5] == number[eng.split()[4]] for spa, eng in pairs)
    report = build_manuals_corpus(tmp_path / "s", root, unequal="skip")
    assert report["manuals"]["maint-guide"].how["skipped"] == 1
    assert sum(report["pairs"].values()) == 0


def test_libreoffice_blocks_pair_by_id_across_reordered_sections(tmp_path):
    en = "".join(
        f"<p id='par_id{i}'>The function number {i} returns a value.</p>" for i in range(1, 4)
    )
    es = "".join(  # sections sorted by their Spanish names: another order
        f"<p id='par_id{i}'>La función número {i} devuelve un valor.</p>" for i in (3, 1, 2)
    )
    root = tmp_path / "root"
    install(root, "libreoffice-help-en-us", {"/usr/share/libreoffice/help/en-US/text/f.html": en})
    install(root, "libreoffice-help-es", {"/usr/share/libreoffice/help/es/text/f.html": es})
    report = build_manuals_corpus(tmp_path / "out", root)
    assert report["manuals"]["libreoffice-help"].how["id"] == 1
    pairs = [p for split in corpus(tmp_path / "out").values() for p in split]
    assert len(pairs) == 3
    assert all(spa.split()[3] == eng.split()[3] for spa, eng in pairs)


def test_held_out_by_document(tmp_path):
    root = tmp_path / "root"
    en, es = {}, {}
    for d in range(60):
        en[f"/usr/share/help/C/gnome-help/p{d}.page"] = page(
            "".join(f"<p>Page {d} says thing {k} about the desktop.</p>" for k in range(3))
        )
        es[f"/usr/share/help/es/gnome-help/p{d}.page"] = page(
            "".join(f"<p>La página {d} dice la cosa {k} del escritorio.</p>" for k in range(3))
        )
    install(root, "gnome-user-docs", {**en, **es})
    build_manuals_corpus(tmp_path / "out", root)
    splits = corpus(tmp_path / "out")
    assert splits["valid"] or splits["test"]
    for split, pairs in splits.items():
        for spa, eng in pairs:
            d = eng.split()[1]
            assert spa.split()[2] == d  # aligned
            assert manual_split(f"gnome-user-docs/gnome-help/p{d}.page") == split
    train = {eng for _, eng in splits["train"]}
    assert not train & {eng for _, eng in splits["valid"] + splits["test"]}


def test_nothing_installed_says_what_to_install(tmp_path):
    (tmp_path / "root").mkdir()
    with pytest.raises(DataError, match="none of the manuals is installed: apt-get install -y "):
        build_manuals_corpus(tmp_path / "out", tmp_path / "root")
    with pytest.raises(DataError, match="--root .* does not exist"):
        build_manuals_corpus(tmp_path / "out", tmp_path / "nowhere")


def test_cli_report_line(tmp_path, capsys):
    fake_system(tmp_path / "root")
    argv = ["data", "manuals", "--out", tmp_path / "out", "--root", tmp_path / "root"]
    rc, out, _ = run_cli(argv, capsys)
    assert rc == 0 and out.startswith(f"wrote {tmp_path / 'out'}: train ")
    assert "sentence pairs from 3 manuals; skipped libreoffice-help, debian-reference" in out
    assert "(apt-get install -y libreoffice-help-en-us libreoffice-help-es" in out
    rc, _, err = run_cli(["data", "manuals", "--out", tmp_path / "o2", "--root", tmp_path], capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "apt-get install -y" in err


def test_real_installed_manuals(tmp_path, monkeypatch):
    """The small manuals as installed here (gnome-user-docs, manpages): sane, aligned output."""
    wanted = [m for m in MANUALS if m.name in ("gnome-user-docs", "manpages")]
    monkeypatch.setattr("transformer.data.sources.manuals.corpus.MANUALS", tuple(wanted))  # what the builder reads
    try:
        report = build_manuals_corpus(tmp_path / "out")
    except DataError as e:
        pytest.skip(f"gnome-user-docs and manpages + manpages-es not installed: {e}")
    splits = corpus(tmp_path / "out")
    assert report["pairs"]["train"] > 1000
    for pairs in splits.values():
        for spa, eng in pairs:
            assert spa != eng and len(eng.split()) >= MIN_WORDS
            assert 0.5 <= len(spa) / len(eng) <= 2.2 and len(spa) <= MAX_CHARS
    ratio = sum(len(s) for p in splits.values() for s, _ in p) / sum(
        len(e) for p in splits.values() for _, e in p
    )
    assert 1.0 < ratio < 1.3  # Spanish runs ~15% longer than English
    spanish = " ".join(s for s, _ in splits["train"][:500]).split()
    assert sum(w in ("de", "la", "el", "que", "en") for w in spanish) > 0.05 * len(spanish)
