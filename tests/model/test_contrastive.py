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
