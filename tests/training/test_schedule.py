"""Learning-rate schedules (training/schedule.py, §5.3) and the cosine under a time budget on the
run's clock, resumed exactly."""

from __future__ import annotations

import json
import time
from itertools import pairwise

import pytest

from transformer.training.schedule import inverse_sqrt, warmup_cosine
from transformer.training.trainer import train


def test_inverse_sqrt_schedule_follows_the_paper():
    d, w = 512, 4000
    assert inverse_sqrt(0, d, w) == inverse_sqrt(1, d, w) > 0  # guarded at step 0
    peak = inverse_sqrt(w, d, w)
    assert peak == pytest.approx(d ** -0.5 * w ** -0.5)
    assert inverse_sqrt(w // 2, d, w) == pytest.approx(peak / 2)  # linear warmup
    assert inverse_sqrt(4 * w, d, w) == pytest.approx(peak / 2)  # inverse square root decay
    assert max(inverse_sqrt(s, d, w) for s in range(1, 3 * w, 50)) <= peak
    assert inverse_sqrt(w, d, w, factor=2.0) == pytest.approx(2 * peak)


def test_warmup_cosine_schedule():
    assert warmup_cosine(0, 1e-3, 10, 100) == pytest.approx(1e-4)
    assert warmup_cosine(10, 1e-3, 10, 100) == pytest.approx(1e-3)
    assert warmup_cosine(55, 1e-3, 10, 100, min_lr=1e-4) == pytest.approx(5.5e-4)
    assert warmup_cosine(100, 1e-3, 10, 100, min_lr=1e-4) == pytest.approx(1e-4)
    assert warmup_cosine(500, 1e-3, 10, 100) == pytest.approx(0.0)
    # under a time budget: whichever of steps and clock is further along
    assert warmup_cosine(20, 1e-3, 10, 100, time_progress=0.5) == pytest.approx(5e-4)
    assert warmup_cosine(55, 1e-3, 10, 100, time_progress=0.1) == pytest.approx(5e-4)
    assert warmup_cosine(20, 1e-3, 10, 100, min_lr=1e-4, time_progress=1.0) == pytest.approx(1e-4)
    assert warmup_cosine(5, 1e-3, 10, 100, time_progress=0.9) == pytest.approx(5e-4)  # warmup: steps only


def test_cosine_under_max_minutes_decays_on_the_clock_and_resumes_exactly(tmp_path, monkeypatch, tiny, runs):
    """A cosine with max_steps far away and a 60-second budget on a fake clock (1 s per step): after
    the warmup the rate follows the share of the budget spent, ends near min_lr when the budget does,
    and a run cut and resumed takes the same rates and losses step for step."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])

    def tick(step, record):
        now[0] += 1.0

    cfg = tiny(schedule="cosine", lr=1e-3, warmup_steps=3, max_steps=100000, max_minutes=1.0,
                valid_every=1000, save_every=10, keep_last=10)
    full = train(cfg, tmp_path / "full", log=lambda _: None, on_step=tick)
    records = [json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()]
    train_records = [r for r in records if r["split"] == "train"]
    assert 50 <= full.steps <= 60  # stopped by the clock, far before max_steps
    warmup_end = train_records[2]["elapsed_s"]  # the clock at the end of the warmup's last step
    for before, r in pairwise(train_records):  # the rate of step s+1 reads the clock at the end of step s
        progress = 0.0 if before["step"] < 3 else (before["elapsed_s"] - warmup_end) / (60 - warmup_end)
        assert r["lr"] == pytest.approx(warmup_cosine(r["step"], 1e-3, 3, 100000, 0.0, progress))
    lrs = [r["lr"] for r in train_records]
    assert lrs[2] == pytest.approx(1e-3) and all(a >= b for a, b in pairwise(lrs[2:]))
    assert lrs[-1] < 0.02 * 1e-3  # the decay ended with the budget, not at max_steps

    now[0] = 1000.0
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=lambda step, record: (tick(step, record),
                                                                                     runs.crash_at(25)(step, record)))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None, on_step=tick)
    cut = [json.loads(line) for line in (tmp_path / "cut" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["lr"]) for r in cut if r["split"] == "train"] == [(r["step"], r["lr"]) for r in train_records]
    assert runs.losses(tmp_path / "cut") == runs.losses(tmp_path / "full")


def test_schedule_clock_reads_the_budget_from_the_end_of_the_warmup():
    """The cosine's time progress starts when the warmup ends (recorded the first time it is asked
    past it); the budget share is the further along of steps and clock."""
    from transformer.config import TrainConfig
    from transformer.training.schedule import ScheduleClock

    t = TrainConfig(schedule="cosine", lr=1e-3, warmup_steps=3, max_steps=100, max_minutes=1.0)
    clock = ScheduleClock(10.0)
    assert clock.time_progress(t, 2) == 0.0 and clock.warmup_end_s is None  # still warming up
    assert clock.time_progress(t, 3) == 0.0 and clock.warmup_end_s == 10.0
    clock.seconds = 35.0
    assert clock.time_progress(t, 4) == pytest.approx(25.0 / 50.0)
    assert clock.budget_spent(t, 10) == pytest.approx(35.0 / 60.0)  # the clock is further along
    assert clock.budget_spent(t, 90) == pytest.approx(0.9)  # the steps are
    no_budget = TrainConfig(schedule="cosine", lr=1e-3, warmup_steps=3, max_steps=100)
    assert ScheduleClock(35.0).time_progress(no_budget, 50) == 0.0
    assert ScheduleClock(35.0).budget_spent(no_budget, 50) == 0.5
