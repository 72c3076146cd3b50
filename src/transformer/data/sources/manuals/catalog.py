"""The six manuals `transformer data manuals` reads, and the pages each has in both languages.

Rules:
- Manuals (MANUALS): gnome-user-docs (Mallard, /usr/share/help/C and es, its gnome-help and
  system-admin-guide), LibreOffice's help (libreoffice-help-en-us and -es, HTML), the Debian
  installation guide (installation-guide-amd64, HTML), the Debian Reference (debian-reference-en
  and -es, HTML), the Debian New Maintainers' Guide (maint-guide and maint-guide-es, HTML) and the
  Linux man-pages (manpages and manpages-es, roff, gzipped). A manual is read when dpkg's file
  lists (ROOT/var/lib/dpkg/info/PACKAGE.list) show both its packages installed, and only the
  files those lists name are read, so pages other packages put in the same folders (another
  program's help, a man page that manpages-es translates for coreutils) never enter. A missing
  manual is skipped and named in the report with its apt-get line.
- A document is one page present in both languages under the same relative name (the language
  part of the path or name mapped: C <-> es, en-US <-> es, .en.html <-> .es.html, man/manN <->
  man/es/manN). Links (symbolic, or a man page that is only `.so other`) are skipped. Its text
  blocks come from blocks.py (paragraphs, items, titles; code, tables and page furniture
  dropped; inline code kept verbatim).
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .blocks import Block, html_blocks, mallard_blocks, roff_blocks


@dataclass(frozen=True)
class Manual:
    """One manual: its two packages, where each puts its pages (relative to the root), which
    files are pages, how a page reads and how an English page's path becomes the Spanish one."""

    name: str
    english: str
    spanish: str
    english_dir: str
    page: str  # a regular expression over the path relative to english_dir
    reader: Callable[[bytes, Counter], list[Block]]
    to_spanish: Callable[[str], str]  # the English page's absolute path -> the Spanish one
    by_id: bool = False  # blocks pair by their HTML id (LibreOffice's par_id, hd_id ...)


def _read_man(data: bytes, dropped: Counter) -> list[Block]:
    return roff_blocks(gzip.decompress(data).decode("utf-8", errors="replace"), dropped)


def _swap(old: str, new: str) -> Callable[[str], str]:
    return lambda path: path.replace(old, new, 1)


MANUALS = (
    Manual(
        "gnome-user-docs", "gnome-user-docs", "gnome-user-docs", "usr/share/help/C",
        r"(gnome-help|system-admin-guide)/[^/]+\.page", mallard_blocks,
        _swap("/usr/share/help/C/", "/usr/share/help/es/"),
    ),
    Manual(
        "libreoffice-help", "libreoffice-help-en-us", "libreoffice-help-es",
        "usr/share/libreoffice/help/en-US", r"text/.+\.html", html_blocks,
        _swap("/help/en-US/", "/help/es/"), by_id=True,
    ),
    Manual(
        "installation-guide", "installation-guide-amd64", "installation-guide-amd64",
        "usr/share/doc/installation-guide-amd64/en", r"[^/]+\.html", html_blocks,
        _swap("/installation-guide-amd64/en/", "/installation-guide-amd64/es/"),
    ),
    Manual(
        "debian-reference", "debian-reference-en", "debian-reference-es",
        "usr/share/debian-reference", r"[^/]+\.en\.html", html_blocks,
        lambda path: path[: -len(".en.html")] + ".es.html",
    ),
    Manual(
        "maint-guide", "maint-guide", "maint-guide-es", "usr/share/doc/maint-guide/html",
        r"[^/]+\.en\.html", html_blocks,
        lambda path: path.replace("/maint-guide/", "/maint-guide-es/")[: -len(".en.html")]
        + ".es.html",
    ),
    Manual(
        "manpages", "manpages", "manpages-es", "usr/share/man", r"man\d/[^/]+\.gz", _read_man,
        _swap("/usr/share/man/man", "/usr/share/man/es/man"),
    ),
)  # fmt: skip


def package_files(root: Path, package: str) -> set[str] | None:
    """The paths in dpkg's file list of an installed package; None when it is not installed."""
    info = root / "var/lib/dpkg/info"
    for name in (f"{package}.list", *(p.name for p in info.glob(f"{package}:*.list"))):
        try:
            return set((info / name).read_text(encoding="utf-8").splitlines())
        except OSError:
            continue
    return None


def documents(root: Path, manual: Manual) -> list[tuple[str, Path, Path]] | None:
    """(relative name, English file, Spanish file) of each page in both languages (sorted), or
    None when a package of the manual is not installed."""
    english, spanish = package_files(root, manual.english), package_files(root, manual.spanish)
    if english is None or spanish is None:
        return None
    base = "/" + manual.english_dir + "/"
    page = re.compile(manual.page)
    found = []
    for path in sorted(english):
        relative = path[len(base) :]
        if not path.startswith(base) or not page.fullmatch(relative):
            continue
        other = manual.to_spanish(path)
        en_file, es_file = root / path.lstrip("/"), root / other.lstrip("/")
        if other in spanish and en_file.is_file() and es_file.is_file():
            if not en_file.is_symlink() and not es_file.is_symlink():
                found.append((relative, en_file, es_file))
    return found
