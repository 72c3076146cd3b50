"""Late dropout (training/dropout.py): every dropout off and back to its built rate, the first share
of the budget trained without it, resumed exactly."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from transformer.config import ConfigError, cpu_tiny
from transformer.model.build import build_model
from transformer.training.trainer import train


def test_dropout_switch_turns_every_dropout_off_and_back_to_its_built_rate():
    from transformer.training.dropout import DropoutSwitch

    torch.manual_seed(0)
    model = build_model(cpu_tiny(dropout=0.1, attention_dropout=0.2, activation_dropout=0.3)).train()
    src, tgt = torch.randint(4, 64, (2, 7)), torch.randint(4, 64, (2, 6))
    built = [(type(m).__name__, getattr(m, "p", getattr(m, "dropout", None))) for m in model.modules()]
    switch = DropoutSwitch(model)
    assert {rate for _, _, rate in switch.rates} == {0.1, 0.2, 0.3}  # residual/embedding, attention, activation
    switch.set(False)
    assert all(getattr(module, name) == 0.0 for module, name, _ in switch.rates)
    off = model(src, tgt)
    assert torch.equal(off, model(src, tgt))  # no randomness left in a training-mode forward
    assert torch.equal(off, model.eval()(src, tgt))  # ... it is the eval-mode forward
    model.train()
    switch.set(True)
    assert [(type(m).__name__, getattr(m, "p", getattr(m, "dropout", None))) for m in model.modules()] == built
    assert not torch.equal(model(src, tgt), off)


def test_late_dropout_trains_the_first_share_without_dropout_then_with_it(tmp_path, tiny, runs):
    """late_dropout 0.5 of 10 steps: updates 1-5 repeat a run built without dropout loss for loss, 6-10
    do not; the log says where it switched."""
    said = []
    train(tiny(late_dropout=0.5), tmp_path / "late", log=said.append)
    none = tiny()
    train(dataclasses.replace(none, model=dataclasses.replace(none.model, dropout=0.0)), tmp_path / "none",
          log=lambda _: None)
    train(tiny(), tmp_path / "always", log=lambda _: None)
    late, without, always = runs.losses(tmp_path / "late"), runs.losses(tmp_path / "none"), runs.losses(tmp_path / "always")
    assert [late[s] for s in range(1, 6)] == [without[s] for s in range(1, 6)]
    assert all(late[s] != without[s] for s in range(6, 11))
    assert late[1] != always[1]
    assert [line for line in said if "dropout on" in line] == [
        "step 6: dropout on (50% of the budget spent; train.late_dropout)"]
    assert json.loads((tmp_path / "late" / "last" / "config.json").read_text())["dropout"] == 0.1


@pytest.mark.parametrize("cut", [5, 9])  # resumed from step 4 (dropout still off) and from step 8 (on)
def test_late_dropout_resumes_exactly(tmp_path, cut, tiny, runs):
    cfg = tiny(late_dropout=0.5)
    train(cfg, tmp_path / "full", log=lambda _: None)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(cut))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    assert runs.losses(tmp_path / "cut") == runs.losses(tmp_path / "full")


def test_late_dropout_outside_0_1_is_a_clear_error(tiny):
    with pytest.raises(ConfigError, match=r"train.late_dropout=1.0 is not valid: it must be a number in \[0, 1\)"):
        tiny(late_dropout=1.0)


def test_late_dropout_turns_on_once_when_the_share_is_spent():
    from transformer.training.dropout import LateDropout

    model = build_model(cpu_tiny(dropout=0.1))
    late = LateDropout(model, 0.5)
    said = [late.before_update(share) for share in (0.0, 0.2, 0.49, 0.5, 0.7, 1.0)]
    assert said == [False, False, False, True, False, False]  # the switch is reported once
    assert late.switch.on and all(getattr(m, name) == rate for m, name, rate in late.switch.rates)
    resumed = LateDropout(build_model(cpu_tiny(dropout=0.1)), 0.5)  # resumed after the switch
    assert resumed.before_update(0.6) is False and resumed.switch.on
