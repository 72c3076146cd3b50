"""One owner per run directory (files.own): two trainers racing for one directory, a lock left by
a killed process, a directory inside another's, `sweep` and `average --out`, and the one-line
messages that name the process holding it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.cli.common import run
from transformer.files import OWNER_FILE, DirectoryInUse, own, owner
from transformer.training.trainer import train
from transformer.workflows.sweep import Plan, run_sweep

HOLD = textwrap.dedent("""
    import sys, time
    from transformer.files import own
    with own(sys.argv[1], sys.argv[2]):
        print("held", flush=True)
        time.sleep(float(sys.argv[3]))
""")

RACE = textwrap.dedent("""
    import sys, time
    from transformer.config import load_config
    from transformer.files import DirectoryInUse
    from transformer.training.trainer import train
    config = load_config(sys.argv[1])
    while time.time() < float(sys.argv[3]):  # both start at once, torch imported
        time.sleep(0.001)
    try:
        train(config, sys.argv[2], log=lambda line: None, on_step=lambda step, record: time.sleep(0.3))
    except DirectoryInUse as e:
        print(e, file=sys.stderr)
        sys.exit(3)
""")


def _hold(directory: Path, command: str = "train", seconds: float = 120) -> subprocess.Popen:
    """A process that owns `directory` until killed (or `seconds` pass)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), command, str(seconds)],
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.fixture
def holder(tmp_path):
    """hold(directory, command): a live owner of directory, killed at the end of the test."""
    held = []

    def hold(directory: Path, command: str = "train") -> subprocess.Popen:
        held.append(_hold(directory, command))
        return held[-1]

    yield hold
    for p in held:
        p.kill()
        p.wait()


def test_two_trainers_racing_for_one_directory_exactly_one_trains(tmp_path, tiny):
    config = tmp_path / "tiny.toml"
    config.write_text(tiny().to_toml())
    out = tmp_path / "run"
    start = time.time() + 10  # after both have imported torch (the winner then holds it 3 s and more)
    racers = [subprocess.Popen([sys.executable, "-c", RACE, str(config), str(out), str(start)],
                               stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in racers]
    assert sorted(rc for rc, _ in results) == [0, 3], results
    winner = racers[[rc for rc, _ in results].index(0)]
    message = next(err for rc, err in results if rc == 3).strip()
    assert message.splitlines() == [message]
    assert message.startswith(f"{out} is in use by process {winner.pid} (train, "), message
    assert message.endswith("wait for it to finish, or choose another directory")
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()
             if json.loads(line)["split"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 10  # one trainer's records, none twice
    assert not (out / OWNER_FILE).exists()  # let go at the end


def test_a_second_trainer_is_refused_in_one_line_naming_the_first(tmp_path, tiny, holder, capsys):
    config = tmp_path / "tiny.toml"
    config.write_text(tiny().to_toml())
    out = tmp_path / "run"
    first = holder(out)
    rc, _, err = run(["train", config, "--out", out, "--resume"], capsys)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"{out} is in use by process {first.pid} (train, " in err
    assert sorted(p.name for p in out.iterdir()) == [OWNER_FILE]  # nothing written beside it
    rc, _, err = run(["train", config, "--out", out / "inner"], capsys)  # nor inside it
    assert rc == 2 and f"{out / 'inner'} is inside {out}, in use by process {first.pid}" in err, err
    assert not (out / "inner").exists()


def test_a_lock_left_by_a_killed_trainer_is_taken_over_with_a_note(tmp_path, tiny):
    out = tmp_path / "run"
    dead = _hold(out)
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    assert json.loads((out / OWNER_FILE).read_text())["pid"] == dead.pid  # the file stays, unlocked
    assert owner(out) is None
    lines = []
    result = train(tiny(), out, log=lines.append)
    assert result.steps == 10
    assert f"note: {out}: taking over from process {dead.pid} (train, " in lines[0]
    assert lines[0].endswith("which is no longer running")
    assert not (out / OWNER_FILE).exists()


def test_sweep_and_average_refuse_a_directory_being_written(tmp_path, tiny, holder, capsys):
    run_dir = tmp_path / "run"
    train(tiny(), run_dir, log=lambda _: None)
    config = tmp_path / "tiny.toml"
    config.write_text(tiny().to_toml())
    sweep = tmp_path / "sweep"
    first = holder(sweep, "sweep")
    with pytest.raises(DirectoryInUse, match=rf"in use by process {first.pid} \(sweep, "):
        run_sweep(Plan(str(config), []), sweep, log=lambda _: None)
    assert sorted(p.name for p in sweep.iterdir()) == [OWNER_FILE]
    trainer = holder(run_dir)  # a live trainer's run directory is its own
    rc, _, err = run(["average", "--last", "2", run_dir, "--out", run_dir / "averaged"], capsys)
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"is inside {run_dir}, in use by process {trainer.pid} (train, " in err
    assert not (run_dir / "averaged").exists()
    rc, out, _ = run(["average", "--last", "2", run_dir, "--out", tmp_path / "averaged"], capsys)
    assert rc == 0 and (tmp_path / "averaged" / "config.json").is_file(), out
    assert not (tmp_path / "averaged" / OWNER_FILE).exists()


def test_own_is_reentrant_and_leaves_nothing_behind(tmp_path):
    made = tmp_path / "made"
    with own(made, "demo", log=print):
        record = json.loads((made / OWNER_FILE).read_text())
        assert record["pid"] == os.getpid() and record["command"] == "demo"
        with own(made, "train"):  # the demo's trainer asks again: this process holds it already
            assert owner(made / "x") is None  # not another process
    assert not made.exists()  # made here and left empty: removed
    kept = tmp_path / "kept"
    kept.mkdir()
    with own(kept, "average"):
        (kept / "weights").write_text("w")
    assert sorted(p.name for p in kept.iterdir()) == ["weights"]
