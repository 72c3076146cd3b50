"""The image encoder (ViT): patches, positions, pooling, shape errors, saving, and Hugging Face ViT both ways."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from transformer.config import ConfigError, ModelConfig
from transformer.model.build import build_model
from transformer.model.patches import PatchEmbedding, sinusoidal_2d
from transformer.model_dir import load_model, save_model


def vit(**changes) -> ModelConfig:
    values = dict(arch="encoder", d_model=32, n_heads=4, n_encoder_layers=2, n_decoder_layers=0, d_ff=64,
                  dropout=0.0, norm_position="pre", activation="gelu", n_classes=3,
                  vision={"image_size": 12, "patch_size": 4, "channels": 3})
    return ModelConfig(**{**values, **changes})


def test_patch_projection_is_unfold_and_matmul_and_a_strided_convolution():
    torch.manual_seed(0)
    embed = PatchEmbedding(image_size=12, patch_size=4, channels=3, d_model=16, positions="none", dropout=0.0)
    pixels = torch.rand(2, 3, 12, 12)
    # explicit: patch (r, c) is pixels[:, :, 4r:4r+4, 4c:4c+4], flattened channel, row, column; row-major order
    rows = []
    for r in range(3):
        for c in range(3):
            rows.append(pixels[:, :, 4 * r:4 * r + 4, 4 * c:4 * c + 4].reshape(2, -1))
    explicit = torch.stack(rows, dim=1) @ embed.projection.weight.T + embed.projection.bias  # (2, 9, 16)
    out = embed(pixels)
    assert out.shape == (2, 10, 16)
    torch.testing.assert_close(out[:, 1:], explicit)
    torch.testing.assert_close(out[:, 0], embed.cls[0].expand(2, -1))
    conv = nn.Conv2d(3, 16, kernel_size=4, stride=4)
    with torch.no_grad():
        conv.weight.copy_(embed.projection.weight.reshape(16, 3, 4, 4))
        conv.bias.copy_(embed.projection.bias)
    torch.testing.assert_close(out[:, 1:], conv(pixels).flatten(2).transpose(1, 2))
    torch.testing.assert_close(torch.nn.functional.unfold(pixels, 4, stride=4).transpose(1, 2), embed.patches(pixels))


def test_position_variants():
    learned = PatchEmbedding(12, 4, 1, 16, "learned", 0.0)
    assert learned.positions.shape == (1, 10, 16) and learned.positions.requires_grad
    fixed = PatchEmbedding(12, 4, 1, 16, "sinusoidal2d", 0.0)
    assert "positions" not in dict(fixed.named_parameters()) and "positions" not in fixed.state_dict()
    table = sinusoidal_2d(3, 16)
    assert table.shape == (10, 16) and table[0].abs().sum() == 0  # [CLS] has no position
    patches = table[1:].reshape(3, 3, 16)
    assert torch.equal(patches[0, 0, :8], patches[0, 2, :8])  # same row: same first half
    assert torch.equal(patches[0, 1, 8:], patches[2, 1, 8:])  # same column: same second half
    assert not torch.equal(patches[0, 0], patches[1, 0])
    none = PatchEmbedding(12, 4, 1, 16, "none", 0.0)
    pixels = torch.rand(1, 1, 12, 12)
    with torch.no_grad():
        fixed.projection.load_state_dict(none.projection.state_dict())
        fixed.cls.copy_(none.cls)
    torch.testing.assert_close(fixed(pixels) - none(pixels), table.unsqueeze(0))
    with pytest.raises(ValueError, match="divisible by 4"):
        sinusoidal_2d(3, 18)


def test_cls_and_mean_pooling():
    torch.manual_seed(0)
    first = build_model(vit(pooling="first")).eval()
    mean = build_model(vit(pooling="mean")).eval()
    mean.load_state_dict(first.state_dict())
    pixels = torch.rand(2, 3, 12, 12)
    hidden = first(pixels)  # (2, 10, 32)
    head = first.pooler.classifier
    torch.testing.assert_close(first.classify(pixels), head(hidden[:, 0]))
    torch.testing.assert_close(mean.classify(pixels), head(hidden.mean(dim=1)))


def test_wrong_images_and_configs_get_one_clear_error():
    model = build_model(vit()).eval()
    with pytest.raises(ValueError, match=r"images of shape \(1, 3, 16, 16\) do not fit this model: it takes "
                                         r"\(B, 3, 12, 12\) \(channels=3, image_size=12\)"):
        model.classify(torch.rand(1, 3, 16, 16))
    with pytest.raises(ValueError, match=r"\(1, 1, 12, 12\) do not fit"):
        model.classify(torch.rand(1, 1, 12, 12))
    with pytest.raises(ValueError, match="pass floats"):
        model.classify(torch.zeros(1, 3, 12, 12, dtype=torch.uint8))
    with pytest.raises(ConfigError, match="image_size=28 is not divisible by patch_size=5"):
        vit(vision={"image_size": 28, "patch_size": 5})
    with pytest.raises(ConfigError, match="model.vision is for arch='encoder'"):
        ModelConfig(arch="decoder", vision={"image_size": 28})
    with pytest.raises(ConfigError, match="unknown key model.vision.patch"):
        vit(vision={"image_size": 28, "patch": 4})


def test_an_image_model_directory_round_trips(tmp_path):
    model = build_model(vit(vision={"image_size": 12, "patch_size": 4, "channels": 3, "positions": "sinusoidal2d"})).eval()
    save_model(model, tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.config == model.config and again.config.vision.positions == "sinusoidal2d"
    pixels = torch.rand(2, 3, 12, 12)
    torch.testing.assert_close(again.classify(pixels), model.classify(pixels))


HF_SHAPES = [
    dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, image_size=28, patch_size=7,
         num_channels=1),
    dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=8, intermediate_size=128, image_size=32, patch_size=4,
         num_channels=3, hidden_act="gelu_new"),
]


@pytest.mark.parametrize("shape", range(len(HF_SHAPES)))
@pytest.mark.parametrize("kind", ["ViTForImageClassification", "ViTModel"])
def test_hf_vit_both_ways_same_outputs(shape, kind):
    transformers = pytest.importorskip("transformers")
    from transformer.interop.hf import from_hf, to_hf

    torch.manual_seed(shape)
    config = transformers.ViTConfig(**HF_SHAPES[shape], num_labels=7)
    hf = getattr(transformers, kind)(config).eval()
    ours = from_hf(hf)
    c = HF_SHAPES[shape]
    pixels = torch.randn(3, c["num_channels"], c["image_size"], c["image_size"])
    with torch.no_grad():
        theirs = hf(pixel_values=pixels)
        if kind == "ViTModel":
            torch.testing.assert_close(ours(pixels), theirs.last_hidden_state, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(ours.pooler(ours(pixels)), theirs.pooler_output, atol=1e-5, rtol=1e-5)
        else:
            assert ours.config.n_classes == 7
            torch.testing.assert_close(ours.classify(pixels), theirs.logits, atol=1e-5, rtol=1e-5)
        back = to_hf(ours)
        assert type(back).__name__ == kind
        again = back(pixel_values=pixels)
        first = theirs.logits if kind != "ViTModel" else theirs.last_hidden_state
        second = again.logits if kind != "ViTModel" else again.last_hidden_state
        torch.testing.assert_close(second, first, atol=1e-5, rtol=1e-5)


def test_our_vit_exports_and_what_vit_cannot_express_is_refused():
    pytest.importorskip("transformers")
    from transformer.interop.hf import HFConversionError, from_hf, to_hf

    torch.manual_seed(0)
    ours = build_model(vit()).eval()  # trained here: pre-norm, GELU, learned positions, [CLS] pooling
    pixels = torch.rand(2, 3, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(to_hf(ours)(pixel_values=pixels).logits, ours.classify(pixels), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(from_hf(to_hf(ours)).classify(pixels), ours.classify(pixels))
    for changes, field in ((dict(pooling="mean"), "pooling"), (dict(norm_position="post"), "norm_position"),
                           (dict(vision={"image_size": 12, "patch_size": 4, "channels": 3, "positions": "none"}),
                            "vision.positions")):
        with pytest.raises(HFConversionError, match=f"{field}=.* cannot be exported as ViT"):
            to_hf(build_model(vit(**changes)))


# ------------------------------------------------------------------------------------------------
# Training on images


@pytest.fixture(scope="module")
def quadrants(tmp_path_factory):
    """Which quadrant of an 8 x 8 image is bright: 4 classes, as a prepared train and valid split."""
    import numpy as np

    from transformer.data.images import save_split

    root = tmp_path_factory.mktemp("quadrants")
    rng = np.random.default_rng(0)
    names = ["top-left", "top-right", "bottom-left", "bottom-right"]
    for split, n in (("train", 400), ("valid", 80)):
        x = rng.integers(0, 60, (n, 1, 8, 8), dtype=np.uint8)
        y = rng.integers(0, 4, n)
        for i, q in enumerate(y):
            r, c = divmod(int(q), 2)
            x[i, 0, 4 * r:4 * r + 4, 4 * c:4 * c + 4] += 180
        save_split(root / f"{split}.safetensors", x, y, names)
    return root


def _image_config(root, **train):
    from transformer.config import build_run_config

    return build_run_config({
        "model": {"arch": "encoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "d_ff": 64, "dropout": 0.0,
                  "norm_position": "pre", "activation": "gelu",
                  "vision": {"image_size": 8, "patch_size": 4, "channels": 1}},
        "data": {"train_images": str(root / "train.safetensors"), "valid_images": str(root / "valid.safetensors"),
                 "random_crop": 1},
        "train": {"batch_tokens": 200, "max_steps": 300, "warmup_steps": 10, "schedule": "cosine", "lr": 3e-3,
                  "label_smoothing": 0.0, "valid_every": 300, "save_every": 300, "precision": "fp32", **train},
    })


@pytest.fixture(scope="module")
def quadrant_model(quadrants, tmp_path_factory):
    from transformer.training.trainer import train

    return train(_image_config(quadrants), tmp_path_factory.mktemp("runs") / "vit", log=lambda _: None)


def test_a_tiny_image_task_is_learned_to_100_percent(quadrant_model):
    from transformer.decoding.pipeline import Pipeline
    from transformer.model_records import load_labels

    assert quadrant_model.best_key == "valid_accuracy" and quadrant_model.best == 1.0
    assert load_labels(quadrant_model.best_dir) == ["top-left", "top-right", "bottom-left", "bottom-right"]
    pipe = Pipeline.load(quadrant_model.best_dir)
    image = torch.zeros(1, 1, 8, 8, dtype=torch.uint8)
    image[0, 0, 4:, :4] = 250
    assert pipe.classify_images(image)[0][0][0] == "bottom-left"


def test_image_classify_and_evaluate_cli(quadrant_model, quadrants, tmp_path, capsys):
    from PIL import Image

    from transformer.cli import main
    from transformer.data.images import load_images

    valid = load_images(quadrants / "valid.safetensors", 1, 8)
    for i in range(8):
        folder = tmp_path / "images" / valid.names[int(valid.labels[i])]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(valid.images[i, 0].numpy()).save(folder / f"{i}.png")
    out = tmp_path / "out.tsv"
    assert main(["classify", str(quadrant_model.best_dir), "--input", str(tmp_path / "images"), "--output", str(out)]) == 0
    rows = [line.split("\t") for line in out.read_text().splitlines()]
    assert len(rows) == 8 and all(Path(file).parent.name == label for file, label, _ in rows)
    assert main(["evaluate", str(quadrant_model.best_dir), "--images", str(quadrants / "valid.safetensors"),
                 "--plot", str(tmp_path / "cm.png")]) == 0
    assert "accuracy 100.00%  macro-F1 1.0000  (80 images of" in capsys.readouterr().out
    assert main(["evaluate", str(quadrant_model.best_dir), "--tsv", str(out)]) == 2
    assert "this is an image classifier: use --images" in capsys.readouterr().err


def test_augmentation_crops_and_flips_deterministically():
    from transformer.data.image_tensors import augment

    images = torch.arange(2 * 1 * 4 * 4, dtype=torch.uint8).reshape(2, 1, 4, 4)
    same = augment(images, 0, False, torch.Generator().manual_seed(0))
    assert torch.equal(same, images)
    flipped = augment(images, 0, True, torch.Generator().manual_seed(0))
    for i in range(2):
        assert torch.equal(flipped[i], images[i]) or torch.equal(flipped[i], images[i].flip(-1))
    cropped = augment(images, 1, False, torch.Generator().manual_seed(3))
    assert cropped.shape == images.shape
    padded = torch.nn.functional.pad(images, (1, 1, 1, 1))
    for i in range(2):  # each crop is a 4 x 4 window of the zero-padded image
        assert any(torch.equal(cropped[i], padded[i, :, y:y + 4, x:x + 4]) for y in range(3) for x in range(3))
    again = augment(images, 1, True, torch.Generator().manual_seed(3))
    assert torch.equal(again, augment(images, 1, True, torch.Generator().manual_seed(3)))


def test_image_training_resumes_exactly(quadrants, tmp_path):
    from transformer.training.trainer import train

    full = train(_image_config(quadrants, max_steps=6, save_every=3, valid_every=100), tmp_path / "full",
                 log=lambda _: None)
    train(_image_config(quadrants, max_steps=3, save_every=3, valid_every=100), tmp_path / "resumed", log=lambda _: None)
    train(_image_config(quadrants, max_steps=6, save_every=3, valid_every=100), tmp_path / "resumed", resume=True,
          log=lambda _: None)
    import json

    losses = lambda run: [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()  # noqa: E731
                          if json.loads(line)["split"] == "train"]
    assert losses(tmp_path / "resumed") == pytest.approx(losses(full.run_dir), rel=1e-6)


def test_image_data_and_model_must_go_together(quadrants):
    from transformer.config import build_run_config

    with pytest.raises(ConfigError, match=r"data.train_images needs an image encoder \(\[model.vision\]\)"):
        build_run_config({"model": {"arch": "encoder"}, "data": {"train_images": str(quadrants / "train.safetensors")}})


def test_attention_rollout_is_the_product_of_residual_mixed_head_means():
    from transformer.viz.image_attention import rollout

    torch.manual_seed(0)
    layers = [torch.rand(2, 5, 5).softmax(-1) for _ in range(3)]
    expected = torch.eye(5)
    for w in layers:
        a = 0.5 * w.mean(0) + 0.5 * torch.eye(5)
        expected = (a / a.sum(-1, keepdim=True)) @ expected
    torch.testing.assert_close(rollout(layers), expected)
    torch.testing.assert_close(rollout(layers).sum(-1), torch.ones(5))  # still a distribution per row
    uniform = [torch.full((1, 4, 4), 0.25)]
    torch.testing.assert_close(rollout(uniform), 0.5 * torch.full((4, 4), 0.25) + 0.5 * torch.eye(4))


def test_attention_cli_draws_an_image_encoder(quadrant_model, tmp_path, capsys):
    from PIL import Image

    from transformer.cli import main

    pixels = torch.zeros(8, 8, dtype=torch.uint8)
    pixels[:4, 4:] = 250
    Image.fromarray(pixels.numpy()).save(tmp_path / "q.png")
    out = tmp_path / "att.png"
    assert main(["attention", str(quadrant_model.best_dir), "--image", str(tmp_path / "q.png"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "[CLS] attention per head, layer 0 of 0-0, and the rollout" in printed and "model: top-right" in printed
    assert out.stat().st_size > 2000
    assert main(["attention", str(quadrant_model.best_dir), "--text", "hi", "--out", str(out)]) == 2
    assert "this is an image classifier: give --image FILE, not --text" in capsys.readouterr().err
    assert main(["attention", str(quadrant_model.best_dir), "--out", str(out)]) == 2
    assert "give --text (a sentence or prompt), --image (for an image encoder or a detector) or --audio" in capsys.readouterr().err
