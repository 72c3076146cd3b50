"""The command-line contract of a dual encoder's commands: embed without input, a missing image,
evaluate --images beside other data, a split whose names the tokenizer has never seen."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli.common import run
from tests.model.dual_encoder import tiny_dual_encoder_dir
from transformer.data.images import save_split


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_dual_encoder_dir(tmp_path_factory.mktemp("clip") / "m")


def test_embed_needs_texts_or_images(model_dir, capsys):
    rc, out, err = run(["embed", model_dir], capsys)
    assert rc == 2 and "give --text TEXT (one or more) or --image FILE" in err
    rc, out, err = run(["embed", model_dir, "--image", "nowhere.png"], capsys)
    assert rc == 2 and "--image nowhere.png not found" in err


def test_embed_refuses_a_model_that_is_not_a_dual_encoder(tmp_path, capsys):
    from transformer.config import ModelConfig
    from transformer.model.build import build_model
    from transformer.model_dir import save_model

    vision = {"image_size": 8, "patch_size": 4, "channels": 1}
    cfg = ModelConfig(arch="encoder", vocab_size=1, d_model=16, n_heads=2, n_encoder_layers=1,
                      d_ff=32, pad_id=0, bos_id=0, eos_id=0, vision=vision, n_classes=2)  # fmt: skip
    save_model(build_model(cfg), tmp_path / "vit", labels=["a", "b"])
    rc, out, err = run(["embed", tmp_path / "vit", "--text", "a"], capsys)
    assert rc == 2 and "is not a text-image dual encoder" in err and err.count("\n") == 1


def test_evaluate_images_alone_and_unknown_names_are_read(model_dir, tmp_path, capsys):
    split = tmp_path / "odd.safetensors"
    images = np.random.default_rng(0).integers(0, 256, (4, 1, 6, 6)).astype(np.uint8)
    save_split(split, images, np.array([0, 1, 0, 1]), ["Ωmega", "Ζeta ∂"])
    rc, out, err = run(["evaluate", model_dir, "--images", split, "--tsv", "x.tsv"], capsys)
    assert (
        rc == 2 and "give --images (a dual encoder's zero-shot and retrieval scores) alone" in err
    )
    rc, out, err = run(["evaluate", model_dir, "--images", split], capsys)
    assert rc == 0, err
    assert "(4 images of" in out and "its 2 names" in out and "recall@1 / @5" in out


def test_info_counts_the_text_tower_at_its_own_width(tmp_path, capsys):
    from transformer.model.accounting import attention_flops, feed_forward_flops

    tower = {"d_model": 24, "n_heads": 3, "n_encoder_layers": 2, "d_ff": 48}
    rc, out, err = run(["info", tiny_dual_encoder_dir(tmp_path / "m", text_tower=tower)], capsys)
    assert rc == 0, err
    per_token = 2 * (attention_flops(24, 128, 3, 3, 8, 8) + feed_forward_flops(24, 48, "relu"))
    assert f"text tower: FLOPs per token at sequence length 128: forward {per_token:,} " in out
    assert "FLOPs per image (4 patches of 4 x 4 + [CLS]): forward" in out
