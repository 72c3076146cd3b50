"""[sizing] auto: each shape's measured step time turned into the steps a budget buys, the curves
read there, the best shape trained; the measurements faked where the choice is tested."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from transformer.config import ConfigError, SizingConfig, load_config
from transformer.training import sizing as S
from transformer.training.trainer import train

STEPS = (100, 200, 400)
TABLE = {  # a large shape that learns more per step, a small one that is cheaper per step
    "names": ("large", "small"),
    "sets": ((), ("model.d_ff=32", "model.n_heads=1")),
    "steps": STEPS,
    "scores": ((10.0, 20.0, 30.0), (12.0, 18.0)),
    "training_share": 0.5,
}


def sized(config, minutes=1.0, **table):
    sizing = SizingConfig(auto=True, **{**TABLE, **table})
    return dataclasses.replace(
        config, sizing=sizing, train=dataclasses.replace(config.train, max_minutes=minutes)
    )


def test_a_curve_is_read_linearly_in_log_steps_scaled_below_and_flat_past_its_end():
    curve = (10.0, 20.0, 30.0)
    assert S.predict(STEPS, curve, 100) == 10.0 and S.predict(STEPS, curve, 400) == 30.0
    assert math.isclose(S.predict(STEPS, curve, 100 * 2**0.5), 15.0)  # halfway in log steps
    assert S.predict(STEPS, curve, 50) == 5.0 and S.predict(STEPS, curve, 0) == 0.0
    assert S.predict(STEPS, curve, 10_000) == 30.0
    assert S.predict(STEPS, (12.0, 18.0), 1_000) == 18.0  # a curve that ends at 200 steps


@pytest.mark.parametrize("seconds, expected", [
    # 60 s x 0.5 = 30 s of steps. Fast: large 300 steps (25.0) against small 600 (past: 18.0)
    ({"large": 0.1, "small": 0.05}, "large"),
    # slow: large 60 steps (6.0) against small 150 steps (15.5)
    ({"large": 0.5, "small": 0.2}, "small"),
])
def test_the_shape_whose_curve_scores_best_at_the_affordable_steps_is_chosen(tiny, seconds, expected):
    name, reason = S.choose(sized(tiny()), seconds)
    assert name == expected
    assert f"{expected} {seconds[expected]:.2f} s/step" in reason and "1 min" in reason


def test_past_every_curve_the_config_is_kept_as_written(tiny):
    name, reason = S.choose(sized(tiny()), {"large": 0.01, "small": 0.01})
    assert name is None and "past its measured curve" in reason


def test_resolve_size_applies_the_chosen_shapes_changes_and_caches_the_measurements(tiny, tmp_path):
    measured = []

    def fake(shape, precision, device):
        measured.append((shape.model.d_ff, precision))
        return {64: 0.5, 32: 0.2}[shape.model.d_ff]

    cache = tmp_path / "cache.json"
    choice = S.resolve_size(sized(tiny()), torch.device("cpu"), measure=fake, cache_file=cache)
    assert choice.name == "small" and measured == [(64, "fp32"), (32, "fp32")]
    m = choice.config.model
    assert (m.d_ff, m.n_heads, m.d_model) == (32, 1, 32)
    assert choice.config.sizing.chosen == "small" and not choice.config.sizing.auto
    again = S.resolve_size(sized(tiny()), torch.device("cpu"), measure=fake, cache_file=cache)
    assert again.name == "small" and len(measured) == 2 and again.reason.startswith("cached: ")
    assert "step_seconds" in cache.read_text()
    # the prediction it states, and the run's steps beside it: 60 s x 0.5 / 0.2 s = 150 steps
    assert (choice.step_seconds, choice.steps) == (0.2, pytest.approx(150.0))
    assert choice.outcome(120) == "sizing predicted 150 steps (0.20 s/step); the run made 120 (-20%)"
    assert S.SizeChoice(choice.config, None, "off").outcome(120) == ""


def test_a_run_calibrates_the_next_prediction_on_this_machine(tiny, tmp_path):
    """A run that made more steps than predicted records the ratio; the next sizing scales every
    shape's probe by it (so the choice compares like with like) and predicts what the run made."""
    cache = tmp_path / "cache.json"
    fake = lambda shape, precision, device: {64: 0.5, 32: 0.2}[shape.model.d_ff]  # noqa: E731
    config = sized(tiny())
    first = S.resolve_size(config, torch.device("cpu"), measure=fake, cache_file=cache)
    assert first.steps == pytest.approx(150.0) and "calibrated" not in first.reason
    # the run made 180 steps in its 60 s: 60 x 0.5 / 180 = 0.1667 s a step against the probe's 0.2
    ratio = S.record_outcome(first, first.config, 180, cache_file=cache)
    assert ratio == pytest.approx(60 * 0.5 / 180 / 0.2)
    again = S.resolve_size(config, torch.device("cpu"), measure=fake, cache_file=cache)
    assert again.name == "small" and again.steps == pytest.approx(180.0)
    assert again.step_seconds == pytest.approx(0.2 * ratio) and "x0.83, calibrated" in again.reason
    assert again.probe == first.probe  # the probe itself is kept as measured
    assert S.record_outcome(S.SizeChoice(config, None, "off"), config, 10, cache) is None


def test_without_a_time_budget_or_with_auto_off_nothing_is_measured(tiny):
    def never(*_):
        raise AssertionError("measured")

    choice = S.resolve_size(sized(tiny(), minutes=0.0), torch.device("cpu"), measure=never)
    assert choice.name is None and "no train.max_minutes" in choice.reason
    off = dataclasses.replace(sized(tiny()), sizing=SizingConfig(**TABLE))
    assert S.resolve_size(off, torch.device("cpu"), measure=never).name is None


def test_a_real_probe_times_a_training_step(tiny):
    seconds = S.measure_step_seconds(tiny(), "fp32", torch.device("cpu"), repeats=1)
    assert 0 < seconds < 5


def test_training_trains_the_chosen_shape_and_a_resumed_run_keeps_it(tiny, tmp_path, monkeypatch):
    times = {64: 0.5, 32: 0.2}  # the small shape wins
    monkeypatch.setattr(S, "measure_step_seconds", lambda shape, p, d: times[shape.model.d_ff])
    config = sized(tiny(max_steps=4, save_every=2), minutes=1.0)
    lines = []
    result = train(config, tmp_path / "run", log=lines.append)
    header = next(line for line in lines if line.startswith("sizing: "))
    assert header.startswith("sizing: small (best score for 1 min on this machine: large 0.50 s/step")
    recorded = load_config(str(tmp_path / "run" / "config.toml"))
    assert recorded.model.d_ff == 32 and recorded.sizing.chosen == "small"
    assert result.steps == 4

    times.update({64: 0.01, 32: 1.0})  # now the large shape would win: the run keeps its own
    longer = dataclasses.replace(config, train=dataclasses.replace(config.train, max_steps=6))
    lines.clear()
    train(longer, tmp_path / "run", resume=True, log=lines.append)
    assert "sizing: small (as the run recorded it)" in lines
    assert load_config(str(tmp_path / "run" / "config.toml")).model.d_ff == 32


@pytest.mark.parametrize("table, message", [
    ({"sets": ((),)}, r"2 names need as many sets and scores rows \(sets has 1, scores 2\)"),
    ({"steps": (100, 100, 400)}, r"sizing.steps must be ascending"),
    ({"scores": ((1.0, 2.0, 3.0, 4.0), (1.0,))}, r"scores of 'large' has 4 values for 3 steps"),
    ({"sets": ((), ("decode.beam_size=1",))}, r"changes \[decode\]; a shape changes only"),
    ({"sets": ((), ("d_ff",))}, r"sets of 'small': --set 'd_ff' is not valid: write section.key=value"),
    ({"names": ("a", "a")}, r"sizing.names repeats a name"),
])
def test_a_bad_table_is_a_one_line_error(table, message):
    with pytest.raises(ConfigError, match=message) as info:
        SizingConfig(auto=True, **{**TABLE, **table})
    assert "\n" not in str(info.value)


def test_a_shape_that_does_not_make_a_valid_config_is_named(tiny):
    config = sized(tiny(), sets=((), ("model.n_heads=3",)))  # 32 is not divisible by 3
    with pytest.raises(ConfigError, match=r"\[sizing\]: a shape's changes do not make a valid config"):
        S.resolve_size(config, torch.device("cpu"), measure=lambda *_: 1.0)


def test_the_table_travels_through_toml(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        "[model]\narch='encoder-decoder'\nd_model=32\nn_heads=2\n"
        "[data]\ntrain_src='a'\ntrain_tgt='b'\n"
        "[sizing]\nauto=true\nnames=['large','small']\nsets=[[],['model.d_ff=32']]\n"
        "steps=[100,200]\nscores=[[1.0,2.0],[1.5]]\n"
    )
    config = load_config(str(path))
    assert config.sizing.sets == ((), ("model.d_ff=32",)) and config.sizing.scores == ((1.0, 2.0), (1.5,))
    (tmp_path / "again.toml").write_text(config.to_toml())
    assert load_config(str(tmp_path / "again.toml")).sizing == config.sizing
