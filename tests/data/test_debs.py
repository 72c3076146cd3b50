"""data.sources.debs: a .deb made here with dpkg-deb is unpacked under a private root with dpkg's
records, which dpkg-query and the builders then read as an installed system's."""

import shutil
import subprocess
from pathlib import Path

import pytest

from transformer.data.sources import debs, packages
from transformer.data.text import DataError

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian, Ubuntu)")


def make_deb(tmp: Path, name: str, version: str, files: dict[str, str]) -> Path:
    tree = tmp / f"{name}-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: Nobody <n@example.org>\n"
        f"Description: a test package\n its long description\n"
    )
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    deb = tmp / f"{name}_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def test_a_package_is_unpacked_with_dpkg_records(tmp_path):
    root = tmp_path / "root"
    deb = make_deb(tmp_path, "fake-manual", "1.2-3", {"usr/share/doc/fake-manual/en/a.html": "<p>Hi</p>"})
    assert not debs.fetched(root, "fake-manual")
    assert debs.unpack(deb, root) == "fake-manual"
    assert (root / "usr/share/doc/fake-manual/en/a.html").read_text() == "<p>Hi</p>"
    listed = (root / "var/lib/dpkg/info/fake-manual.list").read_text().splitlines()
    assert listed[0] == "/." and "/usr/share/doc/fake-manual/en/a.html" in listed and "/usr/share/doc" in listed
    assert debs.fetched(root, "fake-manual") and debs.missing(root, ["fake-manual", "other"]) == ["other"]
    # a second package, then the first again at a new version: one stanza each, the newest kept
    debs.unpack(make_deb(tmp_path, "fake-other", "0.1", {"usr/share/x.txt": "x"}), root)
    (tmp_path / "again").mkdir()
    debs.unpack(make_deb(tmp_path / "again", "fake-manual", "2.0", {"usr/share/y.txt": "y"}), root)
    status = (root / "var/lib/dpkg/status").read_text()
    assert status.count("Package: fake-manual\n") == 1 and "Version: 2.0" in status and "Version: 1.2-3" not in status
    if shutil.which("dpkg-query"):
        assert packages.versions(["fake-manual", "fake-other"], root) == {"fake-manual": "2.0", "fake-other": "0.1"}


def test_fetch_without_apt_names_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(debs.shutil, "which", lambda name: None)
    with pytest.raises(DataError, match="needs apt-get and dpkg-deb .* pass it as --root"):
        debs.fetch(["some-package"], tmp_path / "root")
    assert debs.fetch([], tmp_path / "root") == []  # nothing wanted: nothing asked of apt


def test_fetch_downloads_unpacks_and_deletes_the_debs(tmp_path, monkeypatch):
    made = make_deb(tmp_path, "fake-data", "1.0", {"usr/share/fake/data.txt": "d"})
    calls = []

    def run(command, cwd=None):
        calls.append(command)
        if command[:2] == ["apt-get", "download"]:
            shutil.copy(made, Path(cwd) / made.name)
            return subprocess.CompletedProcess(command, 0, "", "")
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)

    monkeypatch.setattr(debs, "_run", run)
    root = tmp_path / "pk/root"
    assert debs.fetch(["fake-data"], root, log=lambda line: None) == ["fake-data"]
    assert (root / "usr/share/fake/data.txt").read_text() == "d"
    assert not list((tmp_path / "pk/debs").glob("*.deb"))
    assert debs.fetch(["fake-data"], root) == [] and sum(c[:2] == ["apt-get", "download"] for c in calls) == 1
