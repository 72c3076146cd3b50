"""Which Debian package installed a file, its version and its licence, for PROVENANCE.md: asked of
dpkg-query, /usr/share/doc/PACKAGE/copyright and (for a tree extracted with dpkg-deb -x)
changelog.Debian.gz, "unknown" where none answers (tests, other systems). Nothing here decides
what goes into a corpus."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

UNKNOWN = "unknown"


def _dpkg_query(*args: str) -> str:
    """dpkg-query's standard output ("" without dpkg-query); unowned paths are not an error."""
    if not shutil.which("dpkg-query"):
        return ""
    try:
        done = subprocess.run(
            ["dpkg-query", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout


def owners(paths: Iterable[str | os.PathLike]) -> dict[str, str]:
    """{path: the package that installed it} for the paths dpkg knows (`dpkg-query -S`)."""
    wanted = [os.fspath(p) for p in paths]
    found: dict[str, str] = {}
    for line in _dpkg_query("-S", *wanted).splitlines() if wanted else []:
        packages, sep, path = line.partition(": ")
        if sep and not line.startswith("diversion "):
            found[path.strip()] = packages.split(", ")[0].split(":")[0]
    return found


def versions(packages: Iterable[str], root: str | os.PathLike = "/") -> dict[str, str]:
    """{package: installed version} (`dpkg-query -W`); under another root, the packages that
    sources.debs unpacked there (its ROOT/var/lib/dpkg)."""
    wanted = sorted(set(packages) - {UNKNOWN})
    found: dict[str, str] = {}
    admin = Path(root) / "var/lib/dpkg"
    where = [] if Path(root) == Path("/") or not admin.is_dir() else [f"--admindir={admin}"]
    if wanted:
        query = _dpkg_query(*where, "-W", "-f=${Package}\t${Version}\n", *wanted)
        for line in query.splitlines():
            name, _, version = line.partition("\t")
            found[name] = version
    return found


def licence(package: str, doc_root: str | os.PathLike = "/usr/share/doc") -> str:
    """The licence of a package's `Files: *` stanza (or its first License: line) from its
    machine-readable copyright file; otherwise where to read it."""
    path = Path(doc_root) / package / "copyright"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return UNKNOWN
    star = re.search(r"^Files:\s*\*\s*$(.*?)(?:^\s*$|\Z)", text, re.M | re.S)
    match = re.search(r"^License:\s*(\S.*)$", star.group(1) if star else text, re.M)
    if match is None and star:
        match = re.search(r"^License:\s*(\S.*)$", text, re.M)
    return match.group(1).strip() if match else f"see {path}"


def package_version(package: str, root: str | os.PathLike = "/") -> str:
    """The version of a package whose files are under ROOT: dpkg's (versions: this system's, or
    the records sources.debs wrote under ROOT), else the first line of
    ROOT/usr/share/doc/PACKAGE/changelog.Debian.gz ("gcompris-qt (3.1-2) unstable; ...": a tree
    extracted by hand with dpkg-deb -x, which no dpkg database knows); UNKNOWN without either."""
    found = versions([package], root).get(package)
    if found:
        return found
    try:
        with gzip.open(Path(root) / "usr/share/doc" / package / "changelog.Debian.gz", "rt") as f:
            first = f.readline()
    except (OSError, EOFError, UnicodeDecodeError):
        return UNKNOWN
    match = re.match(r"\S+ \(([^()\s]+)\)", first)
    return match.group(1) if match else UNKNOWN
