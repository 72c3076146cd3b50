"""Image captioning trained here (objective caption) on a tiny prepared split of coloured halves,
each image's caption its label name: the config's rules, exact resume with crops, flips and
dropout, a run that learns the captions, and the caption / evaluate --images / attention --image
commands on its output, with their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.cli import main
from transformer.config import ConfigError, build_run_config
from transformer.data.images import save_split
from transformer.decoding.pipeline import Pipeline
from transformer.model_dir import load_model, load_tokenizers
from transformer.training.trainer import train

COLOURS = {"red": (230, 20, 20), "green": (20, 200, 20), "blue": (30, 30, 230)}
NAMES = [f"{colour} {half}" for colour in COLOURS for half in ("top", "bottom")]


def draw(name: str, rng: np.random.Generator) -> np.ndarray:
    """An 8 x 8 RGB image: the named half in the named colour, the other half grey, with noise."""
    colour, half = name.split()
    image = np.full((8, 8, 3), 128, dtype=np.int64)
    rows = slice(0, 4) if half == "top" else slice(4, 8)
    image[rows] = COLOURS[colour]
    image += rng.integers(-20, 21, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8).transpose(2, 0, 1)


def write_split(path: Path, per_name: int, seed: int, names=NAMES) -> Path:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(names)), per_name)
    save_split(path, np.stack([draw(names[k], rng) for k in labels]), labels, list(names))
    return path


def config(root: Path, steps: int, **changes) -> dict:
    values = {
        "model": {"arch": "encoder-decoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1,
                  "n_decoder_layers": 1, "d_ff": 64, "dropout": 0.1, "norm_position": "pre",
                  "activation": "gelu", "positional": "learned", "max_positions": 16,
                  "scale_embedding": False, "vision": {"image_size": 8, "patch_size": 4, "channels": 3}},
        "data": {"train_images": str(root / "train.safetensors"),
                 "valid_images": str(root / "valid.safetensors"), "tokenizer": "char",
                 "vocab_size": 24, "max_len": 14, "random_crop": 1, "horizontal_flip": True},
        "train": {"batch_tokens": 60, "max_steps": steps, "warmup_steps": 4, "lr": 3e-3,
                  "schedule": "cosine", "valid_every": 4, "save_every": 4, "log_every": 50,
                  "precision": "fp32", "valid_questions": 6},
        "decode": {"beam_size": 1, "max_len_a": 0.0, "max_len_b": 14},
    }  # fmt: skip
    for section, items in changes.items():
        values[section] = {**values[section], **items}
    return values


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("caption")
    write_split(root / "train.safetensors", 16, 1)
    write_split(root / "valid.safetensors", 2, 2)
    return root


def test_config_rules(data):
    assert build_run_config(config(data, 2)).objective == "caption"
    values = config(data, 2)
    values["model"].pop("vision")
    with pytest.raises(ConfigError, match="data.train_images needs an image encoder"):
        build_run_config(values)
    with pytest.raises(ConfigError, match="data.max_len=20 exceeds model.max_positions=16"):
        build_run_config(config(data, 2, data={"max_len": 20}))
    with pytest.raises(ConfigError, match='use arch = "encoder-decoder"'):
        build_run_config(config(data, 2, train={"objective": "caption"},
                                model={"arch": "encoder", "n_classes": 0}))


def test_resume_repeats_the_uninterrupted_run_exactly(data, tmp_path, runs):
    """Crops and flips drawn per batch, dropout, the batch order: a run stopped after step 6 and
    resumed from step 4 logs the full run's losses and ends with its weights."""
    cfg = build_run_config(config(data, 8))
    said = []
    train(cfg, tmp_path / "full", log=said.append)
    assert any("96 training and 12 validation images of 3 x 8 x 8, 6 training captions; 12 images "
               "per batch" in line for line in said)
    assert any("trained character tokenizer on 6 captions" in line for line in said)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    assert runs.losses(tmp_path / "cut") == runs.losses(tmp_path / "full")
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    valid = runs.valid_records(tmp_path / "full")
    assert [r["step"] for r in valid] == [4, 8]
    assert all(0 <= r["valid_exact_match"] <= 1 and 0 <= r["valid_chrf"] <= 100 for r in valid)
    tok, _ = load_tokenizers(tmp_path / "full" / "best")
    assert tok.decode(tok.encode("red top")) == "red top"


@pytest.fixture(scope="module")
def captioner(data, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "caption"
    vision = {"image_size": 8, "patch_size": 4, "channels": 3, "positions": "sinusoidal2d"}
    values = config(data, 100, model={"dropout": 0.0, "vision": vision},
                    data={"random_crop": 0, "horizontal_flip": False},
                    train={"valid_every": 100, "save_every": 100, "label_smoothing": 0.0})
    result = train(build_run_config(values), run, log=lambda _: None)
    return result


def test_a_tiny_captioner_learns_the_names(captioner, runs):
    assert captioner.best_key == "valid_exact_match"
    last = runs.valid_records(captioner.run_dir)[-1]
    assert last["valid_exact_match"] == 1.0 and last["valid_chrf"] == 100.0  # 6 images spread over 12


def test_caption_evaluate_and_attention_commands(captioner, data, tmp_path, capsys):
    from PIL import Image

    best = str(captioner.best_dir)
    pipe = Pipeline.load(best)
    rng = np.random.default_rng(5)
    images = torch.from_numpy(np.stack([draw(name, rng) for name in NAMES]))
    assert pipe.caption(images) == NAMES
    assert pipe.caption(images, beam_size=3, batch_size=4) == NAMES
    files = []
    for name, image in zip(NAMES[:2], images, strict=False):
        files.append(tmp_path / f"{name.replace(' ', '-')}.png")
        # saved at 4x the size: the captioner resizes what it reads
        Image.fromarray(image.permute(1, 2, 0).numpy()).resize((32, 32), Image.NEAREST).save(files[-1])
    assert main(["caption", best, str(files[0])]) == 0
    assert capsys.readouterr().out == f"{NAMES[0]}\n"
    assert main(["caption", best, str(files[0]), str(files[1]), "--beam", "2"]) == 0
    beams = pipe.caption(files, beam_size=2)
    assert capsys.readouterr().out.splitlines() == [f"{f}\t{c}" for f, c in zip(files, beams, strict=True)]
    assert main(["caption", best, str(tmp_path), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["caption"] for r in records} == set(NAMES[:2])

    out = tmp_path / "captions.txt"
    valid = str(data / "valid.safetensors")
    assert main(["evaluate", best, "--images", valid, "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"exact match 100.00% (12 of 12 images of {valid})" and lines[1].startswith("chrF2 = 100.0")
    assert out.read_text().splitlines() == [name for name in NAMES for _ in range(2)]

    assert main(["info", best]) == 0
    assert "+ [CLS] and a caption of 16 tokens): forward" in capsys.readouterr().out

    pytest.importorskip("matplotlib")
    picture = tmp_path / "att.png"
    assert main(["attention", best, "--image", str(files[0]), "--out", str(picture)]) == 0
    said = capsys.readouterr().out
    assert picture.stat().st_size > 0 and "layer 0 of 0-0, mean of 2 heads" in said
    assert said.splitlines()[-1] == f"caption: {NAMES[0]}"


def test_attention_maps_cover_the_patches(captioner):
    from transformer.viz.caption_attention import caption_attention

    pipe = Pipeline.load(captioner.best_dir)
    image = torch.from_numpy(draw("blue bottom", np.random.default_rng(0)))
    m = caption_attention(pipe, image, head=1)
    assert m.text == "blue bottom" and len(m.tokens) == len("blue bottom") and m.maps.shape == (11, 2, 2)
    torch.testing.assert_close(m.maps.sum((1, 2)) + m.cls, torch.ones(11))  # [CLS] + 4 patches


def test_bad_input_is_one_line(captioner, data, tmp_path, capsys):
    best = str(captioner.best_dir)
    notes = tmp_path / "notes.png"
    notes.write_text("not an image")
    assert main(["caption", best, str(notes)]) == 2
    assert "notes.png cannot be read as an image" in capsys.readouterr().err
    assert main(["caption", best, str(tmp_path / "missing.png")]) == 2
    assert "missing.png not found" in capsys.readouterr().err
    lines = tmp_path / "lines.txt"
    lines.write_text("red top\n")
    assert main(["translate", best, "--input", str(lines)]) == 2
    assert "this is an image captioning model: use caption, not translate" in capsys.readouterr().err
    assert main(["evaluate", best, "--images", valid_of(data), "--tsv", "x.tsv"]) == 2
    assert "alone, without --tsv" in capsys.readouterr().err
    small = tmp_path / "small.safetensors"
    save_split(small, np.zeros((2, 3, 4, 4), np.uint8), np.array([0, 1]), ["a", "b"])
    assert main(["evaluate", best, "--images", str(small)]) == 2
    assert "the model takes (3, 8, 8)" in capsys.readouterr().err
    # an image classifier is not a captioner
    from transformer.config import ModelConfig
    from transformer.model.build import build_model
    from transformer.model_dir import save_model

    vit = build_model(ModelConfig(arch="encoder", vocab_size=1, pad_id=0, bos_id=0, eos_id=0, d_model=16, n_heads=2, n_encoder_layers=1,
                                  d_ff=32, n_classes=2, vision={"image_size": 8, "patch_size": 4, "channels": 3}))
    save_model(vit, tmp_path / "vit", labels=["a", "b"])
    assert main(["caption", str(tmp_path / "vit"), str(notes)]) == 2
    assert "this is an image classifier: use classify, not caption" in capsys.readouterr().err


def valid_of(data: Path) -> str:
    return str(data / "valid.safetensors")
