"""Debian packages read without installing them: `apt-get download` fetches each .deb (no root
needed, no dependencies pulled), `dpkg-deb -x` unpacks it under a private root, and dpkg's own
records are written there as dpkg writes them, so a builder reads ROOT/usr/share/... exactly as
it reads an installed system (its `root` argument) and `dpkg-query --admindir ROOT/var/lib/dpkg`
answers for it (packages.versions(..., root=ROOT)).

Rules:
- A package counts as fetched when ROOT/var/lib/dpkg/info/PACKAGE.list exists: that file is
  written last, after the unpacking, so a fetch cut short is done again whole.
- The .list names every path the package holds (directories too, as dpkg lists them: "/.",
  "/usr", ...); ROOT/var/lib/dpkg/status gets the package's stanza (Package, Status "install ok
  installed", Version, Architecture, Maintainer, Description), replacing an older one of the
  same name.
- The .deb files go to ROOT/../debs and are deleted once unpacked (the files are what is kept).
- `apt-get download` needs apt's package lists; when it fails and we may (root, or sudo), the
  lists are updated once (`apt-get update`) and the download tried again. What still fails is
  one DataError naming the packages and the command to run.
- Every apt-get that takes apt's or dpkg's lock (install, update: `apt_get`) waits for it when
  another process holds it (a second terminal, or unattended-upgrades just after boot): apt's own
  `DPkg::Lock::Timeout`, a line saying what it waits for, and one more try after a pause when it
  still finds the lock held.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..text import DataError

ADMIN = Path("var/lib/dpkg")
LOCK_WAIT_S = 300
"""How long apt-get waits for another apt or dpkg to let go of its lock (DPkg::Lock::Timeout)."""
RETRY_PAUSE_S = 30.0
"""The pause before the one more try when apt-get still found the lock held."""
BUSY = ("Could not get lock", "Unable to acquire the dpkg frontend lock", "Unable to lock")
"""The words of apt's answers when another process holds its lock."""


def apt_get(
    command: list[str],
    log: Callable[[str], object] = print,
    cwd: Path | None = None,
    quiet: bool = False,
) -> tuple[bool, str]:
    """Run `command` (apt-get ..., perhaps after sudo), waiting for apt's lock (the rules above):
    (succeeded, apt's last error line). Its output goes to ours (`quiet`: kept back, its errors
    echoed when it fails)."""
    at = command.index("apt-get") + 1
    command = [*command[:at], "-o", f"DPkg::Lock::Timeout={LOCK_WAIT_S}", *command[at:]]
    log("$ " + " ".join(command))
    retried = False
    while True:
        done = subprocess.run(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            check=False,
            text=True,
            stdout=subprocess.PIPE if quiet else None,
            stderr=subprocess.PIPE,
        )
        if done.returncode == 0:
            return True, ""
        errors = done.stderr.strip().splitlines()
        sys.stderr.write(done.stderr)
        busy = next((line for line in errors if any(b in line for b in BUSY)), None)
        if busy is None or retried:
            return False, (errors or ["apt-get failed"])[-1]
        log(
            f"apt is busy ({busy.removeprefix('E: ').strip()}): another apt or dpkg holds "
            f"its lock; waiting {RETRY_PAUSE_S:.0f} s for it, then trying once more"
        )
        time.sleep(RETRY_PAUSE_S)
        retried = True


def fetched(root: str | os.PathLike, package: str) -> bool:
    """Whether `package` was unpacked under root (its dpkg file list is there)."""
    return (Path(root) / ADMIN / "info" / f"{package}.list").is_file()


def missing(root: str | os.PathLike, packages: Iterable[str]) -> list[str]:
    """The packages not yet unpacked under root, in the order given."""
    return [p for p in dict.fromkeys(packages) if not fetched(root, p)]


def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def _as_root(command: list[str]) -> list[str] | None:
    if not hasattr(os, "geteuid") or os.geteuid() == 0:
        return command
    return None if shutil.which("sudo") is None else ["sudo", "-n", *command]


def _field(deb: Path, name: str) -> str:
    return _run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()


def _paths(deb: Path) -> list[str]:
    """The paths a .deb holds, as dpkg's .list writes them ("/." first, no trailing slash)."""
    done = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=False
    )
    if done.returncode:
        raise DataError(f"{deb} is not a readable Debian package: delete it and fetch it again")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        return [member.name.removeprefix(".").rstrip("/") or "/." for member in tar]


def unpack(deb: Path, root: Path) -> str:
    """Unpack one .deb under root and write dpkg's records for it; return its package name."""
    if _run(["dpkg-deb", "-x", str(deb), str(root)]).returncode:
        raise DataError(f"could not unpack {deb}: delete it and fetch it again")
    package = _field(deb, "Package")
    stanza = {
        "Package": package,
        "Status": "install ok installed",
        "Version": _field(deb, "Version"),
        "Architecture": _field(deb, "Architecture"),
        "Maintainer": _field(deb, "Maintainer"),
        "Description": _field(deb, "Description"),
    }
    admin = root / ADMIN
    (admin / "info").mkdir(parents=True, exist_ok=True)
    status = admin / "status"
    kept = [
        block.strip()
        for block in (status.read_text(encoding="utf-8").split("\n\n") if status.is_file() else [])
        if block.strip() and not block.startswith(f"Package: {package}\n")
    ]
    kept.append("\n".join(f"{k}: {v}" for k, v in stanza.items()))
    status.write_text("\n\n".join(kept) + "\n", encoding="utf-8")
    (admin / "info" / f"{package}.list").write_text(
        "".join(p + "\n" for p in _paths(deb)), encoding="utf-8"
    )
    return package


def fetch(
    packages: Iterable[str],
    root: str | os.PathLike,
    log: Callable[[str], object] = print,
) -> list[str]:
    """Download and unpack under root each package not fetched yet (the rules above); return
    those fetched now."""
    root = Path(root)
    wanted = missing(root, packages)
    if not wanted:
        return []
    if not shutil.which("apt-get") or not shutil.which("dpkg-deb"):
        raise DataError(
            f"fetching {' '.join(wanted)} needs apt-get and dpkg-deb (Debian or Ubuntu): on "
            "another system, unpack those packages under a folder and pass it as --root"
        )
    debs = root.parent / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    command = ["apt-get", "download", *wanted]
    log(f"$ {' '.join(command)}  (in {debs})")
    done = _run(command, cwd=debs)
    if done.returncode:
        update = _as_root(["apt-get", "update"])
        if update is not None:
            apt_get(update, log, quiet=True)
            done = _run(command, cwd=debs)
    if done.returncode:
        reason = (done.stderr.strip().splitlines() or ["apt-get failed"])[-1]
        raise DataError(
            f"could not download {' '.join(wanted)} ({reason}): run  apt-get update  as root, "
            "then try again"
        )
    for deb in sorted(debs.glob("*.deb")):
        unpack(deb, root)
        deb.unlink()
    return wanted
