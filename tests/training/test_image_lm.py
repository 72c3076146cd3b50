"""Training an image generator (objective image_lm): exact resume with flips and dropped conditions,
what best/ holds (the token layout), the config's rules; then the commands on the trained model:
generate --image writes a grid, evaluate --images reports bits/dim and sample recognition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.config import ConfigError, build_run_config
from transformer.data.images import save_split
from transformer.model_dir import load_model
from transformer.model_records import load_pixels
from transformer.training.trainer import train

NAMES = ["top", "bottom"]


def write_split(path: Path, n: int, seed: int, channels: int = 1) -> Path:
    """n 8 x 8 images: class top is bright above and dark below, bottom the other way; noisy."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    images = rng.integers(0, 60, (n, channels, 8, 8))
    for i, label in enumerate(labels):
        rows = slice(0, 4) if label == 0 else slice(4, 8)
        images[i, :, rows] += 190
    save_split(path, images.astype(np.uint8), labels, NAMES)
    return path


def config(root: Path, steps: int, **data) -> dict:
    return {
        "model": {"arch": "decoder", "d_model": 32, "n_heads": 4, "n_decoder_layers": 2, "d_ff": 64,
                  "dropout": 0.1, "positional": "learned", "norm_position": "pre", "max_positions": 65},
        "data": {"train_images": str(root / "train.safetensors"),
                 "valid_images": str(root / "valid.safetensors"), "pixel_levels": 4,
                 "horizontal_flip": True, "drop_condition": 0.3, **data},
        "train": {"batch_tokens": 520, "max_steps": steps, "warmup_steps": 2, "lr": 3e-3,
                  "schedule": "cosine", "valid_every": 4, "save_every": 4, "log_every": 50,
                  "precision": "fp32"},
    }  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("pixels")
    write_split(root / "train.safetensors", 96, 1)
    write_split(root / "valid.safetensors", 16, 2)
    return root


def test_resume_repeats_the_uninterrupted_run_exactly(data, tmp_path, runs):
    cfg = build_run_config(config(data, 8))
    assert cfg.objective == "image_lm"
    said = []
    train(cfg, tmp_path / "full", log=said.append)
    assert any("96 training and 16 validation images of 1 x 8 x 8" in s for s in said)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    assert runs.losses(tmp_path / "cut") == runs.losses(tmp_path / "full")
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    valid = runs.valid_records(tmp_path / "full")
    assert [r["step"] for r in valid] == [4, 8]
    assert all(0 < r["valid_bits_per_dim"] < 2.5 for r in valid)  # 4 levels: at most 2 bits
    tokens = load_pixels(tmp_path / "full" / "best")
    assert tokens.labels == tuple(NAMES) and tokens.levels == 4 and tokens.image_size == 8
    assert a.config.vocab_size == tokens.vocab_size


def test_image_lm_config_rules(data, tmp_path):
    values = config(data, 2)
    values["model"]["max_positions"] = 63
    with pytest.raises(ConfigError, match="raise it to 64"):
        train(build_run_config(values), tmp_path / "short", log=lambda _: None)
    values = config(data, 2)
    values["model"]["vision"] = {"image_size": 8, "patch_size": 4}
    with pytest.raises(ConfigError, match="model.vision is for arch='encoder'"):
        build_run_config(values)
    values = config(data, 2, pixel_levels=32)
    write_split(tmp_path / "rgb.safetensors", 8, 3, channels=3)
    values["data"]["train_images"] = str(tmp_path / "rgb.safetensors")
    values["data"]["valid_images"] = None
    with pytest.raises(ValueError, match="32,768 colours"):
        train(build_run_config(values), tmp_path / "rgb", log=lambda _: None)


def test_generate_and_evaluate_commands(data, tmp_path, capsys):
    from tests.cli.common import run

    train(build_run_config(config(data, 12, drop_condition=0.0)), tmp_path / "run", log=lambda _: None)
    model = tmp_path / "run" / "best"
    rc, out, err = run(["generate", model, "--image", "--label", "bottom", "--n", "4",
                        "--per-row", "2", "--seed", "1", "--out", tmp_path / "g.png"], capsys)  # fmt: skip
    assert rc == 0, err
    assert "wrote 4 image(s) of 'bottom'" in out
    from PIL import Image

    with Image.open(tmp_path / "g.png") as grid:
        assert grid.size == (2 * 58 + 2, 2 * 58 + 2)  # 2 x 2 cells of 8 px x 7 and a 2-px gap
    rc, out, err = run(["evaluate", model, "--images", data / "valid.safetensors"], capsys)
    assert rc == 0, err
    assert "bits/dim" in out and "8-bit bound" in out and "unconditional" in out
    rc, out, err = run(["generate", model, "--image", "--label", "top", "--n", "2", "--seed", "1",
                        "--guidance-scale", "3", "--out", tmp_path / "guided.png"], capsys)  # fmt: skip
    assert rc == 0 and (tmp_path / "guided.png").is_file(), err
    bad = [
        (["generate", model, "--image", "--label", "left", "--out", tmp_path / "x.png"],
         "unknown label 'left': this model knows top, bottom"),
        (["generate", model, "--image", "--label", "top"], "give --out FILE.png"),
        (["generate", model, "--prompt", "hello"], "this model generates images: use --image"),
        (["generate", model, "--label", "top"], "--label: these are for images; add --image"),
        (["generate", model, "--prompt", "x", "--guidance-scale", "2"],
         "--guidance-scale: these are for images; add --image"),
        (["generate", model, "--image", "--guidance-scale", "2", "--out", tmp_path / "x.png"],
         "guidance_scale=2 guides towards a label or text: give one"),
        (["generate", model, "--image", "--label", "top", "--max-new-tokens", "5", "--out",
          tmp_path / "x.png"], "--max-new-tokens: for text; an image has a fixed number of pixels"),
        (["evaluate", model, "--images", data / "valid.safetensors", "--plot", tmp_path / "c.png"],
         "it needs --classifier"),
    ]  # fmt: skip
    for argv, message in bad:
        rc, out, err = run(argv, capsys)
        assert rc != 0 and message in err and "Traceback" not in err, (argv, err)


def test_name_conditioned_generator_spells_its_condition(data, tmp_path, capsys):
    """condition = "name": the names' characters are the condition's vocabulary; generate --text
    draws from a name, even one never seen (unknown characters read as <unk>)."""
    from tests.cli.common import run

    values = config(data, 4, condition="name")
    values["model"]["max_positions"] = 72  # "bottom" and <s> before 64 pixels
    train(build_run_config(values), tmp_path / "run", log=lambda _: None)
    tokens = load_pixels(tmp_path / "run" / "best")
    assert tokens.chars == "bmopt" and tokens.labels == ()
    for text in ("top", "mop!"):
        rc, out, err = run(["generate", tmp_path / "run" / "best", "--image", "--text", text,
                            "--n", "2", "--out", tmp_path / f"{text}.png"], capsys)  # fmt: skip
        assert rc == 0 and (tmp_path / f"{text}.png").is_file(), err
    rc, out, err = run(["generate", tmp_path / "run" / "best", "--image", "--label", "top",
                        "--out", tmp_path / "x.png"], capsys)  # fmt: skip
    assert rc != 0 and "not class-conditional" in err


def test_an_image_generator_is_not_exported(data, tmp_path, capsys):
    from tests.cli.common import run

    train(build_run_config(config(data, 1)), tmp_path / "run", log=lambda _: None)
    for to in ("ct2", "hf", "gguf"):
        rc, out, err = run(["export", tmp_path / "run" / "best", "--to", to, "--out", tmp_path / to], capsys)
        assert rc != 0 and "an image generator" in err and "Traceback" not in err
        assert not (tmp_path / to).exists()
