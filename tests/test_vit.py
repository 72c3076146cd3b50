"""The image encoder (ViT): patches, positions, pooling, shape errors, saving, and Hugging Face ViT both ways."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer.config import ConfigError, ModelConfig
from transformer.model.io import load_model
from transformer.model.patches import PatchEmbedding, sinusoidal_2d
from transformer.model.transformer import build_model
from transformer.model_dir import save_model


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
