"""apt-get waits for apt's lock (data.sources.debs.apt_get): a fake apt-get on PATH that answers as
apt does while unattended-upgrades holds dpkg's lock, the first time or every time."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from transformer.data.sources import debs
from transformer.workflows import demo_sources

BUSY = ("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4321 (unattended-upgr)\n"
        "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?")


@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    """fake_apt(failures): an apt-get that answers BUSY (exit 100) its first `failures` calls, then
    succeeds; returns the file where each call writes its arguments, one line a call."""
    def make(failures: int) -> Path:
        calls = tmp_path / "calls"
        script = tmp_path / "bin" / "apt-get"
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"""#!{sys.executable}
import sys
from pathlib import Path
calls = Path({str(calls)!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
with calls.open("a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if n < {failures}:
    sys.stderr.write({BUSY!r} + "\\n")
    sys.exit(100)
print("Setting up dict-freedict-spa-eng ...")
""")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(debs, "RETRY_PAUSE_S", 0.0)
        return calls
    return make


def test_a_busy_lock_is_waited_for_and_tried_once_more(fake_apt, capfd):
    calls = fake_apt(failures=1)
    lines = []
    assert debs.apt_get(["apt-get", "install", "-y", "dict-freedict-spa-eng"], lines.append) == (True, "")
    assert calls.read_text().splitlines() == ["-o DPkg::Lock::Timeout=300 install -y dict-freedict-spa-eng"] * 2
    assert lines[0] == "$ apt-get -o DPkg::Lock::Timeout=300 install -y dict-freedict-spa-eng"
    assert lines[1] == ("apt is busy (Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4321 "
                        "(unattended-upgr)): another apt or dpkg holds its lock; waiting 0 s for it, then trying "
                        "once more")
    assert "Setting up dict-freedict-spa-eng" in capfd.readouterr().out


def test_a_lock_still_held_fails_with_apts_own_words(fake_apt):
    calls = fake_apt(failures=5)
    ok, reason = debs.apt_get(["apt-get", "update"], lambda _: None)
    assert not ok and reason.endswith("is another process using it?")
    assert len(calls.read_text().splitlines()) == 2  # once more, not forever


def test_another_failure_is_not_retried(tmp_path, monkeypatch):
    script = tmp_path / "apt-get"
    script.write_text("#!/bin/sh\necho 'E: Unable to locate package nothing-such' >&2\nexit 100\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    lines = []
    assert debs.apt_get(["apt-get", "install", "-y", "nothing-such"], lines.append) == (
        False, "E: Unable to locate package nothing-such")
    assert len(lines) == 1  # the command only: no wait


def test_the_demo_installs_a_system_package_through_a_busy_lock(fake_apt, tmp_path, monkeypatch):
    calls = fake_apt(failures=1)
    monkeypatch.setattr(demo_sources, "_as_root", lambda command: command)
    monkeypatch.setattr(demo_sources, "_system_missing", lambda packages: list(packages))
    source = demo_sources.Source("everyday-bt", lambda out, root: None, system=("apertium-eng-spa",))
    lines = []
    assert demo_sources.install_missing(source, tmp_path, lines.append) is True
    assert calls.read_text().splitlines() == ["-o DPkg::Lock::Timeout=300 install -y apertium-eng-spa"] * 2
    assert any(line.startswith("apt is busy (Could not get lock") for line in lines)
