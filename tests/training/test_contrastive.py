"""Contrastive training (CLIP): the loss against a written-out computation (repeated names
included), then a tiny run on two synthetic image sets of other shapes (exact resume, what best/
holds), and the commands on the trained model: embed and evaluate --images."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.cli.common import run
from transformer.config import ConfigError, build_run_config
from transformer.data.images import save_split
from transformer.model.contrastive import DualEncoder
from transformer.model_dir import load_model
from transformer.training.objectives.contrastive import contrastive_loss
from transformer.training.trainer import train


def written_out(logits: torch.Tensor, names: list[int]) -> tuple[float, float]:
    """The loss by hand: for each image, -mean over the texts of its name of log softmax over the
    row; for each text, the same over the images of its name, down its column."""
    b = len(names)
    rows = logits.tolist()
    image_to_text = text_to_image = 0.0
    for i in range(b):
        z = math.log(sum(math.exp(rows[i][j]) for j in range(b)))
        positives = [j for j in range(b) if names[j] == names[i]]
        image_to_text -= sum(rows[i][j] - z for j in positives) / len(positives)
    for j in range(b):
        z = math.log(sum(math.exp(rows[i][j]) for i in range(b)))
        positives = [i for i in range(b) if names[i] == names[j]]
        text_to_image -= sum(rows[i][j] - z for i in positives) / len(positives)
    return image_to_text, text_to_image


def embeddings_logits(b: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    images = F.normalize(torch.randn(b, 8, generator=g), dim=1)
    texts = F.normalize(torch.randn(b, 8, generator=g), dim=1)
    return 1 / 0.07 * images @ texts.T


def test_the_loss_is_clips_when_every_name_differs():
    logits = embeddings_logits(6, 0)
    i2t, t2i = contrastive_loss(logits, torch.arange(6))
    target = torch.arange(6)
    assert i2t.item() == pytest.approx(F.cross_entropy(logits, target, reduction="sum").item())
    assert t2i.item() == pytest.approx(F.cross_entropy(logits.T, target, reduction="sum").item())
    assert (i2t.item(), t2i.item()) == pytest.approx(written_out(logits, list(range(6))))


def test_the_loss_with_repeated_names_matches_the_written_out_one():
    names = [3, 1, 3, 3, 0, 1, 2]  # three renderings of one emoji, two of another
    logits = embeddings_logits(len(names), 1)
    i2t, t2i = contrastive_loss(logits, torch.tensor(names))
    assert (i2t.item(), t2i.item()) == pytest.approx(written_out(logits, names), rel=1e-5)


def test_a_text_of_the_same_name_is_never_pushed_away():
    # image 0 and 1 share a name: the text of pair 1 is a positive of image 0, not a negative
    logits = torch.tensor(
        [[5.0, 5.0, -5.0], [5.0, 5.0, -5.0], [-5.0, -5.0, 5.0]], requires_grad=True
    )
    i2t, t2i = contrastive_loss(logits, torch.tensor([0, 0, 1]))
    (i2t + t2i).backward()
    assert logits.grad[0, 1].abs() < 1e-3 and logits.grad[1, 0].abs() < 1e-3
    naive = logits.detach().clone().requires_grad_(True)  # CLIP's arange targets would push it
    F.cross_entropy(naive, torch.arange(3), reduction="sum").backward()
    assert naive.grad[0, 1] > 0.4


# ---- a tiny run ----

COLOURS = {"Red Square": (220, 30, 30), "Blue Square": (30, 30, 220), "Green Square": (30, 200, 30)}


def colour_split(path: Path, per_name: int, seed: int) -> Path:
    """8 x 8 RGB images: a coloured square on a pale backdrop, names in title case."""
    rng = np.random.default_rng(seed)
    names = list(COLOURS)
    labels = np.repeat(np.arange(len(names)), per_name)
    images = np.full((len(labels), 3, 8, 8), 235) + rng.integers(-10, 10, (len(labels), 3, 8, 8))
    for i, label in enumerate(labels):
        y, x = rng.integers(0, 4, 2)
        images[i, :, y : y + 4, x : x + 4] = np.array(COLOURS[names[label]])[:, None, None]
    save_split(path, images.clip(0, 255).astype(np.uint8), labels, names)
    return path


def grey_split(path: Path, n: int, seed: int) -> Path:
    """6 x 6 grey images (fitted: RGB, padded to 8 x 8): bright above ("Top") or below."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    images = rng.integers(0, 40, (n, 1, 6, 6))
    for i, label in enumerate(labels):
        images[i, :, :3] += 200 if label == 0 else 0
        images[i, :, 3:] += 0 if label == 0 else 200
    save_split(path, images.astype(np.uint8), labels, ["Top", "Bottom"])
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip")
    colour_split(root / "colours.safetensors", 8, 1)
    grey_split(root / "grey.safetensors", 16, 2)
    colour_split(root / "valid.safetensors", 2, 3)
    return root


def config(root: Path, steps: int, **data) -> dict:
    return {
        "model": {"arch": "encoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "d_ff": 64,
                  "dropout": 0.1, "max_positions": 32, "norm_position": "pre",
                  "vision": {"image_size": 8, "patch_size": 4, "channels": 3},
                  "contrastive": {"embed_dim": 16}},
        "data": {"train_images": [str(root / "colours.safetensors"), str(root / "grey.safetensors")],
                 "valid_images": str(root / "valid.safetensors"), "tokenizer": "char",
                 "vocab_size": 64, "min_frequency": 1, "random_crop": 1, **data},
        "train": {"batch_tokens": 50, "max_steps": steps, "warmup_steps": 2, "lr": 3e-3,
                  "schedule": "cosine", "valid_every": 4, "save_every": 4, "log_every": 50,
                  "precision": "fp32"},
    }  # fmt: skip


@pytest.fixture(scope="module")
def trained(data, tmp_path_factory, runs) -> Path:
    """An 8-step run, and a second one crashed at step 6 and resumed: the same losses."""
    cfg = build_run_config(config(data, 8))
    assert cfg.objective == "contrastive"
    root = tmp_path_factory.mktemp("runs")
    said = []
    train(cfg, root / "full", log=said.append)
    assert any("40 training images of 5 names from 2 set(s)" in s for s in said), said
    with pytest.raises(runs.Crash):
        train(cfg, root / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    train(cfg, root / "cut", resume=True, log=lambda _: None)
    assert runs.losses(root / "cut") == runs.losses(root / "full")
    return root


def test_resume_repeats_the_run_and_best_holds_the_tokenizer(trained, runs):
    a, b = load_model(trained / "full" / "last"), load_model(trained / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert isinstance(a, DualEncoder)
    valid = runs.valid_records(trained / "full")
    assert [r["step"] for r in valid] == [4, 8]
    assert all(0 <= r["valid_zero_shot_accuracy"] <= 1 for r in valid)
    for name in ("tokenizer.json", "special_tokens.json", "config.json"):
        assert (trained / "full" / "best" / name).is_file()


def test_embed_prints_one_unit_vector_per_input(trained, data, tmp_path, capsys):
    from PIL import Image

    picture = tmp_path / "red.png"
    Image.new("RGB", (8, 8), (220, 30, 30)).save(picture)
    grey = tmp_path / "grey.png"
    Image.new("L", (6, 6), 200).save(grey)
    best = trained / "full" / "best"
    rc, out, err = run(["embed", best, "--text", "Red Square", "--text", "top", "--image", picture,
                        grey], capsys)  # fmt: skip
    assert rc == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line.get("text", line.get("image")) for line in lines] == [
        "Red Square", "top", str(picture), str(grey)
    ]  # fmt: skip
    for line in lines:
        assert len(line["embedding"]) == 16
        assert sum(x * x for x in line["embedding"]) == pytest.approx(1, abs=1e-4)


def test_evaluate_images_reports_zero_shot_and_retrieval(trained, data, tmp_path, capsys):
    best = trained / "full" / "best"
    plot, output = tmp_path / "confusion.png", tmp_path / "predicted.txt"
    rc, out, err = run(["evaluate", best, "--images", data / "valid.safetensors", "--plot", plot,
                        "--output", output], capsys)  # fmt: skip
    assert rc == 0, err
    assert "zero-shot accuracy" in out and "(6 images of" in out and "its 3 names" in out
    assert "retrieval recall@1 / @5: image->text" in out and "text->image" in out
    assert plot.is_file()
    assert set(output.read_text().split("\n")) <= {"red square", "blue square", "green square", ""}


def test_config_rules(data):
    values = config(data, 2)
    values["train"]["objective"] = "classify"
    values["model"].pop("contrastive")
    with pytest.raises(ConfigError, match="lists 2 image sets: only objective contrastive"):
        build_run_config(values)
    values = config(data, 2)
    values["model"].pop("contrastive")
    values["train"]["objective"] = "contrastive"
    with pytest.raises(ConfigError, match=r"dual encoder \(\[model.contrastive\]\)"):
        build_run_config(values)
    values = config(data, 2, train_images=str(data / "grey.safetensors"))
    assert build_run_config(values).data.images.train == str(data / "grey.safetensors")


def test_a_text_tower_from_a_sentence_encoder_brings_its_tokenizer(data, tmp_path):
    """train.init_parts.text_encoder from an encoder of another shape (its own width, post-norm,
    token types): the run reads that encoder's tokens, logs the part, and trains on."""
    from transformer.config import ModelConfig
    from transformer.data.tokenizer import ENCODER_SPECIALS, EncoderTokens, train_tokenizer
    from transformer.model.build import build_model
    from transformer.model_dir import load_tokenizers, save_model

    tower = {"d_model": 24, "n_heads": 3, "n_encoder_layers": 2, "d_ff": 48, "norm_position": "post",
             "final_norm": False, "positional": "learned", "max_positions": 40, "embedding_norm": True,
             "n_token_types": 2}  # fmt: skip
    words = ["a red square", "the blue sky", "green grass", "top and bottom", "QUIET"]
    tokenizer = train_tokenizer("char", words, 64, 1, ENCODER_SPECIALS)
    torch.manual_seed(3)
    sentence = build_model(ModelConfig(arch="encoder", vocab_size=tokenizer.vocab_size, pooler=True, **tower))
    source = save_model(sentence.eval(), tmp_path / "sentence", tokenizer=tokenizer,
                        special_tokens=EncoderTokens(tokenizer).record())  # fmt: skip
    values = config(data, 4)
    values["model"]["contrastive"]["text_tower"] = tower
    values["train"]["init_parts"] = {"text_encoder": {"from": str(source), "part": "encoder"}}
    said = []
    train(build_run_config(values), tmp_path / "run", log=said.append)
    assert any(s.startswith("init_parts: text_encoder: ") for s in said), said
    ours = load_tokenizers(tmp_path / "run" / "best")[0]
    assert ours.vocab_size == tokenizer.vocab_size
    assert all(ours.id_to_token(i) == tokenizer.id_to_token(i) for i in range(ours.vocab_size))
    assert ours.token_to_id("Q") is not None  # the source's characters, not the names' alone
    best = load_model(tmp_path / "run" / "best")
    assert best.text_projection.weight.shape == (16, 24)
    assert len(best.text_encoder.layers) == 2
    from transformer.config.toml import load_config

    assert load_config(str(tmp_path / "run" / "config.toml")).model.contrastive.text_tower == tower
