"""The dual encoder (CLIP): unit embeddings, logits = clamped scale x cosine, each tower reading its
own input (and the text tower only the real tokens), the config's rules, and a save/load round
trip."""

from __future__ import annotations

import math

import pytest
import torch

from tests.model.dual_encoder import tiny_config
from transformer.config import ConfigError, ModelConfig
from transformer.model.build import build_model
from transformer.model.contrastive import MAX_LOGIT_SCALE, DualEncoder
from transformer.model_dir import load_weights, save_weights


def model(**contrastive) -> DualEncoder:
    torch.manual_seed(0)
    return build_model(tiny_config(**contrastive)).eval()


def inputs(b: int = 3, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    pixels = torch.rand(b, 3, 8, 8, generator=g) * 2 - 1
    ids = torch.randint(5, 40, (b, 6), generator=g)
    mask = torch.ones(b, 6, dtype=torch.bool)
    mask[0, 4:] = False
    return pixels, ids, mask


def test_embeddings_are_unit_vectors_and_logits_their_scaled_cosines():
    m, (pixels, ids, mask) = model(), inputs()
    images, texts = m.embed_images(pixels), m.embed_texts(ids, mask)
    assert images.shape == texts.shape == (3, 16)
    assert torch.allclose(images.norm(dim=1), torch.ones(3), atol=1e-5)
    assert torch.allclose(texts.norm(dim=1), torch.ones(3), atol=1e-5)
    logits = m(pixels, ids[:2], mask[:2])  # 3 images against 2 texts
    assert logits.shape == (3, 2)
    assert torch.allclose(logits, (1 / 0.07) * images @ texts[:2].T, atol=1e-4)


def test_the_temperature_starts_at_clips_and_the_scale_is_clamped_at_100():
    m = model()
    assert m.logit_scale.item() == pytest.approx(math.log(1 / 0.07))
    assert model(temperature=0.5).scale().item() == pytest.approx(2.0)
    with torch.no_grad():
        m.logit_scale.fill_(10.0)  # e^10 = 22026
    assert m.scale().item() == MAX_LOGIT_SCALE == 100.0
    pixels, ids, mask = inputs()
    m(pixels, ids, mask).sum().backward()
    assert m.logit_scale.grad.item() == 0.0  # clamped: no gradient, as CLIP's


def test_each_tower_sees_its_own_input_and_only_real_tokens():
    pixels, ids, mask = inputs()
    for pooling in ("mean", "first"):
        m = model(text_pooling=pooling)
        images, texts = m.embed_images(pixels), m.embed_texts(ids, mask)
        other = pixels.clone()
        other[1] = -other[1]
        changed = m.embed_images(other)
        assert torch.allclose(changed[0], images[0], atol=1e-6)
        assert not torch.allclose(changed[1], images[1], atol=1e-4)
        padded = ids.clone()
        padded[0, 4:] = 7  # behind the mask: nothing changes
        assert torch.allclose(m.embed_texts(padded, mask), texts, atol=1e-6)
        last = ids.clone()
        last[1, 5] = 6 if ids[1, 5] != 6 else 8  # the last real token reaches [CLS] too
        moved = m.embed_texts(last, mask)
        assert not torch.allclose(moved[1], texts[1], atol=1e-4)
        assert torch.allclose(moved[2], texts[2], atol=1e-6)


def test_config_rules():
    vision = {"image_size": 8, "patch_size": 4, "channels": 3}
    with pytest.raises(ConfigError, match=r'arch = "encoder" and a \[model.vision\]'):
        ModelConfig(arch="encoder", contrastive={})
    with pytest.raises(ConfigError, match="not a classifier"):
        ModelConfig(arch="encoder", vision=vision, contrastive={}, n_classes=3)
    with pytest.raises(ConfigError, match="model.contrastive.text_pooling='cls' is not valid"):
        ModelConfig(arch="encoder", vision=vision, contrastive={"text_pooling": "cls"})
    with pytest.raises(ConfigError, match="unknown key model.contrastive.embed_size"):
        ModelConfig(arch="encoder", vision=vision, contrastive={"embed_size": 8})


def test_save_and_load_give_the_same_model(tmp_path):
    m, (pixels, ids, mask) = model(), inputs()
    with torch.no_grad():
        m.logit_scale.fill_(2.5)
    save_weights(m, tmp_path / "m")
    loaded = load_weights(tmp_path / "m")
    assert isinstance(loaded, DualEncoder) and loaded.config == m.config
    assert torch.equal(loaded(pixels, ids, mask), m(pixels, ids, mask))


TEXT_TOWER = {"d_model": 24, "n_heads": 3, "n_encoder_layers": 2, "d_ff": 48, "norm_position": "post",
              "final_norm": False, "positional": "learned", "embedding_norm": True, "n_token_types": 2}  # fmt: skip


def test_a_text_tower_of_its_own_shape_is_read_through_its_own_projection(tmp_path):
    m, (pixels, ids, mask) = model(text_tower=TEXT_TOWER), inputs()
    text = m.text_encoder
    assert len(text.layers) == 2 and text.embed.tokens.weight.shape == (40, 24)
    assert text.embed.token_types.weight.shape == (2, 24) and text.embed.norm is not None
    assert m.text_projection.weight.shape == (16, 24) and m.image_projection.weight.shape == (16, 32)
    assert len(m.image_encoder.layers) == 1  # the image tower keeps [model]'s shape
    with torch.no_grad():
        hidden = text(ids, mask)  # (B, L, 24): the mean over real tokens, projected, unit length
        pooled = torch.stack([hidden[i, mask[i]].mean(0) for i in range(len(ids))])
        want = torch.nn.functional.normalize(pooled @ m.text_projection.weight.T, dim=-1)
        assert torch.allclose(m.embed_texts(ids, mask), want, atol=1e-6)
    save_weights(m, tmp_path / "m")
    loaded = load_weights(tmp_path / "m")
    assert loaded.config.contrastive.text_tower == TEXT_TOWER
    assert torch.equal(loaded(pixels, ids, mask), m(pixels, ids, mask))


def test_text_tower_rules():
    with pytest.raises(ConfigError, match=r"model.contrastive.text_tower.vision is not a text tower's setting: it takes d_model, n_heads"):
        tiny_config(text_tower={"vision": {}})
    with pytest.raises(ConfigError, match=r"model.contrastive.text_tower=\[24\] is not valid: give a table"):
        tiny_config(text_tower=[24])
    with pytest.raises(ConfigError, match=r"^model.contrastive.text_tower: .*d_model=24.* n_heads=5"):
        tiny_config(text_tower={"d_model": 24, "n_heads": 5})
