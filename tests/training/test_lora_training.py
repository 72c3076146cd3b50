"""Training with LoRA adapters (train.lora): only the adapters learn (the base's weights are those
of the base after the run), the optimizer holds the adapters' state only, the run's model
directories hold the adapters and name the base, and resume repeats the uninterrupted run."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file

from transformer.config import ConfigError, build_run_config
from transformer.model.lora import lora_layers
from transformer.model_dir import ADAPTER_FILE, ADAPTER_WEIGHTS_FILE, WEIGHTS_FILE, load_model
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train

from .test_packed_lm import lm_config, texts  # noqa: F401 (a fixture)


@pytest.fixture
def base(texts, tmp_path):  # noqa: F811
    train(lm_config(texts, max_steps=6), tmp_path / "base", log=lambda _: None)
    return tmp_path / "base" / "last"


def lora_config(texts, base, **train):  # noqa: F811
    values = lm_config(texts, init_from=str(base), **train).to_dict()
    values["train"]["lora"] = {"rank": 4, "alpha": 8.0, "targets": ["q_proj", "v_proj", "w2"]}
    return build_run_config(values)


def test_only_the_adapters_learn_and_the_directory_names_the_base(texts, base, tmp_path):  # noqa: F811
    said = []
    train(lora_config(texts, base), tmp_path / "lora", log=said.append)
    assert any("frozen" in line for line in said)
    best = tmp_path / "lora" / "best"
    names = set(load_file(best / ADAPTER_WEIGHTS_FILE))
    assert names and all("lora_" in n for n in names) and not (best / WEIGHTS_FILE).exists()
    apart = load_model(best, merge=False)
    assert len(lora_layers(apart)) == 3  # q, v, w2 of the one layer
    pretrained = load_file(base / WEIGHTS_FILE)
    for name, tensor in apart.state_dict().items():
        if name in pretrained:  # the base is untouched
            assert torch.equal(tensor, pretrained[name]), name
    assert any(layer.lora_B.abs().max() > 0 for layer in lora_layers(apart))  # the adapters moved
    ckpt = step_dirs(tmp_path / "lora")[-1]
    moments = load_file(ckpt / "optimizer.safetensors")
    assert sum(t.numel() for k, t in moments.items() if "exp_avg" in k) == 2 * sum(
        p.numel() for n, p in apart.named_parameters() if "lora_" in n
    )  # Adam's two moments, of the adapters only
    ids = torch.randint(0, 40, (2, 12))
    torch.testing.assert_close(load_model(best)(ids), apart(ids), rtol=1e-5, atol=1e-5)
    assert (best / ADAPTER_FILE).read_text().count(str(base.resolve())) == 1


def test_resume_repeats_the_uninterrupted_losses(texts, base, tmp_path, runs):  # noqa: F811
    cfg = lora_config(texts, base)
    train(cfg, tmp_path / "full", log=lambda _: None)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    full, resumed = runs.losses(tmp_path / "full"), runs.losses(tmp_path / "cut")
    assert sorted(full) == list(range(1, 11)) and resumed == full
    assert all(math.isfinite(v) for v in full.values())


def test_lora_needs_a_pretrained_model(texts):  # noqa: F811
    values = lm_config(texts).to_dict()
    values["train"]["lora"] = {"rank": 4}
    with pytest.raises(ConfigError, match="train.lora adapts a pretrained model: set train.init_from"):
        build_run_config(values)
    values["train"]["lora"] = {"rank": 4, "targets": ["query"]}
    with pytest.raises(ConfigError, match="train.lora.targets"):
        build_run_config(values)


def test_precision_is_measured_at_the_pretrained_models_shapes(texts, base, tmp_path, monkeypatch):  # noqa: F811
    """With init_from, bf16 is measured on the shapes of the model trained (the base's width,
    feed-forward and vocabulary), not on the [model] section that init_from replaces."""
    import transformer.runtime.precision as precision
    from transformer.model_dir import load_config

    shapes = []
    monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
    monkeypatch.setattr(precision, "measure_bf16_speedup", lambda *a: shapes.append(a[:3]) or 0.5)
    cfg = lora_config(texts, base, precision="auto", max_steps=2)
    values = cfg.to_dict()
    values["model"].update(d_model=512, d_ff=2048)  # ignored with init_from
    train(build_run_config(values), tmp_path / "run", log=lambda _: None)
    m = load_config(base)
    assert shapes == [(m.d_model, m.d_ff, m.vocab_size)]
