"""Training a detector (objective detection) on a COCO folder: exact resume with flips and the
dense auxiliary head, validation's COCO mAP choosing best/, and the rules of its config."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.config import ConfigError, build_run_config
from transformer.model_dir import load_model
from transformer.model_records import load_labels
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train

NAMES = ["square", "bar"]


def write_coco(folder: Path, n: int, seed: int, most: int = 3) -> Path:
    """n 32 x 32 canvases of bright squares (class square) and wide bars (class bar) on black, as
    COCO annotations; up to `most` shapes each."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    images, annotations = [], []
    for i in range(n):
        canvas = np.zeros((32, 32), np.uint8)
        for _ in range(int(rng.integers(1, most + 1))):
            kind = int(rng.integers(2))
            w, h = (8, 8) if kind == 0 else (14, 4)
            x, y = int(rng.integers(0, 32 - w)), int(rng.integers(0, 32 - h))
            canvas[y : y + h, x : x + w] = 255
            annotations.append(
                {"id": len(annotations) + 1, "image_id": i, "category_id": kind + 1,
                 "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0}
            )  # fmt: skip
        Image.fromarray(canvas, "L").save(folder / "images" / f"{i}.png")
        images.append({"id": i, "file_name": f"images/{i}.png", "width": 32, "height": 32})
    categories = [{"id": k + 1, "name": name} for k, name in enumerate(NAMES)]
    coco = {"images": images, "annotations": annotations, "categories": categories}
    (folder / "annotations.json").write_text(json.dumps(coco))
    return folder


def config(root: Path, steps: int, **detection) -> dict:
    return {
        "model": {"arch": "encoder-decoder", "d_model": 32, "n_heads": 4, "n_encoder_layers": 1,
                  "n_decoder_layers": 2, "d_ff": 64, "dropout": 0.1, "positional": "none",
                  "detection": {"image_size": 32, "stride": 8, "n_queries": 4,
                                "backbone_channels": 8, "dense_aux": True, **detection}},
        "data": {"train_detection": str(root / "train"), "valid_detection": str(root / "valid"),
                 "horizontal_flip": True},
        "train": {"batch_tokens": 128, "max_steps": steps, "warmup_steps": 2, "lr": 1e-3,
                  "schedule": "cosine", "valid_every": 4, "save_every": 4, "log_every": 50,
                  "precision": "fp32", "clip_norm": 0.1},
    }  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("detection")
    write_coco(root / "train", 48, 1)
    write_coco(root / "valid", 8, 2)
    return root


@pytest.mark.parametrize("detection", [{}, {"denoise_groups": 2, "class_loss": "focal"}], ids=["detr", "denoising-focal"])
def test_resume_repeats_the_uninterrupted_run_exactly(data, tmp_path, runs, detection):
    """Flips drawn per batch, dropout, the Hungarian matching, the dense head, the denoising
    queries' noise (with the focal class loss): a run stopped after step 6 and resumed from step 4
    logs the full run's losses and ends with its weights."""
    cfg = build_run_config(config(data, 8, **detection))
    assert cfg.objective == "detection"
    said = []
    train(cfg, tmp_path / "full", log=said.append)
    assert any("48 training images" in line and "2 classes" in line for line in said)
    with pytest.raises(runs.Crash):
        train(cfg, tmp_path / "cut", log=lambda _: None, on_step=runs.crash_at(6))
    assert [p.name for p in step_dirs(tmp_path / "cut")] == ["step-000004"]
    train(cfg, tmp_path / "cut", resume=True, log=lambda _: None)
    assert runs.losses(tmp_path / "cut") == runs.losses(tmp_path / "full")
    a, b = load_model(tmp_path / "full" / "last"), load_model(tmp_path / "cut" / "last")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    valid = runs.valid_records(tmp_path / "full")
    assert [r["step"] for r in valid] == [4, 8]
    assert all(0 <= r["valid_map"] <= 1 and r["valid_ap50"] >= r["valid_ap75"] for r in valid)
    assert load_labels(tmp_path / "full" / "best") == NAMES


def test_detection_config_rules(data, tmp_path):
    with pytest.raises(ConfigError, match="needs a detector"):
        build_run_config({**config(data, 2), "model": {"arch": "encoder-decoder"}})
    values = config(data, 2)
    values["data"]["random_crop"] = 2
    with pytest.raises(ConfigError, match="random_crop is for image classification"):
        build_run_config(values)
    crowded = build_run_config(config(data, 2, n_queries=2))  # canvases hold up to 3 shapes
    with pytest.raises(ValueError, match="n_queries=2: raise n_queries"):
        train(crowded, tmp_path / "crowded", log=lambda _: None)
