"""The image captioner: ViT's patch encoder under a text decoder (arch encoder-decoder with
[model.vision]): shapes, the decoder reading the image, the config's rules, FLOPs, and decoding over
the KV cache (cache = recompute, beam 1 = greedy, a batch = one image at a time)."""

from __future__ import annotations

import pytest
import torch

import transformer as T
from transformer.config import ConfigError, ModelConfig
from transformer.decoding.search.step import Stepper
from transformer.model.accounting import flops_per_image
from transformer.model.build import build_model
from transformer.model.stacks import ImageEncoder
from transformer.model_dir import load_model, save_model

PAD, START, EOS = 0, 2, 3


def captioner(**changes) -> ModelConfig:
    values = dict(arch="encoder-decoder", vocab_size=20, d_model=32, n_heads=4, n_encoder_layers=2,
                  n_decoder_layers=2, d_ff=64, dropout=0.0, norm_position="pre", activation="gelu",
                  max_positions=24, vision={"image_size": 8, "patch_size": 4, "channels": 3})
    return ModelConfig(**{**values, **changes})


def tiny(seed: int = 0, **changes):
    torch.manual_seed(seed)
    model = build_model(captioner(**changes)).eval()
    with torch.no_grad():  # a sharper output distribution than at initialisation: ties are unlikely
        model.lm_head.weight.mul_(4)
    return model


def pixels(n: int, seed: int = 1) -> torch.Tensor:
    return torch.rand(n, 3, 8, 8, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def test_shapes_and_the_decoder_reads_the_image():
    model = tiny()
    assert isinstance(model.encoder, ImageEncoder)
    tgt = torch.tensor([[START, 5, 6, 7], [START, 8, 9, 9]])
    x = pixels(2)
    logits = model(x, tgt)
    assert logits.shape == (2, 4, 20)
    memory, mask = model.encode(x)
    assert memory.shape == (2, 1 + 4, 32) and mask is None  # [CLS] and 2 x 2 patches, all real
    torch.testing.assert_close(model.decode(tgt, memory, None), logits)
    other = model(pixels(2, seed=2), tgt)
    assert not torch.allclose(other, logits, atol=1e-3)  # another image, other logits
    # one image's logits do not depend on the rest of the batch
    torch.testing.assert_close(model(x[:1], tgt[:1]), logits[:1], atol=1e-5, rtol=1e-5)


def test_a_captioner_is_saved_and_loaded_whole(tmp_path):
    model = tiny()
    save_model(model, tmp_path / "m")
    again = load_model(tmp_path / "m")
    assert again.config == model.config and isinstance(again.encoder, ImageEncoder)
    tgt = torch.tensor([[START, 5]])
    torch.testing.assert_close(again(pixels(1), tgt), model(pixels(1), tgt))


def test_config_rules():
    with pytest.raises(ConfigError, match="arch='encoder' .ViT. or 'encoder-decoder'"):
        captioner(arch="decoder")
    with pytest.raises(ConfigError, match="two front ends"):
        captioner(audio={"n_mels": 8, "max_frames": 20})
    with pytest.raises(ConfigError, match="its own image front end"):
        captioner(positional="none", detection={"image_size": 8, "stride": 4})
    with pytest.raises(ConfigError, match="n_classes"):
        captioner(n_classes=3)
    captioner(max_positions=4)  # the decoder's table: the patches have their own positions
    with pytest.raises(ValueError, match="no src_mask"):
        tiny().encode(pixels(1), torch.ones(1, 5, dtype=torch.bool))


def test_flops_per_image_adds_the_decoder_of_a_caption():
    cfg = captioner()
    vit = ModelConfig(**{**cfg.to_dict(), "arch": "encoder", "n_decoder_layers": 0, "max_positions": 24})
    image, encoder_only = flops_per_image(cfg, caption_tokens=10), flops_per_image(vit)
    assert image["encoder"] == encoder_only["encoder"] and image["patches"] == encoder_only["patches"]
    assert image["output"] == 10 * 2 * 32 * 20
    assert image["forward"] == image["patches"] + image["encoder"] + image["decoder"] + image["output"]
    assert flops_per_image(cfg, caption_tokens=20)["decoder"] > 2 * image["decoder"]  # attention grows


def _recompute_greedy(model, image: torch.Tensor, steps: int) -> list[int]:
    """Greedy without a cache: the whole prefix run through the model at every step."""
    tgt = torch.tensor([[START]])
    out = []
    with torch.no_grad():
        for _ in range(steps):
            lp = torch.log_softmax(model(image[None], tgt)[:, -1], -1)
            lp[:, PAD] = -float("inf")
            token = int(lp.argmax())
            if token == EOS:
                break
            out.append(token)
            tgt = torch.cat([tgt, torch.tensor([[token]])], 1)
    return out


def test_cached_greedy_equals_recompute_and_a_batch_equals_each_image():
    model, images = tiny(), pixels(4)
    ids, scores = T.greedy_search(model, images, max_len_a=0, max_len_b=6, return_scores=True)
    assert ids.shape[0] == 4
    for i in range(4):
        ref = _recompute_greedy(model, images[i], 6)
        row = ids[i].tolist()
        assert row[: len(ref)] == ref and all(t == PAD for t in row[len(ref):])
        one, one_score = T.greedy_search(model, images[i], max_len_a=0, max_len_b=6, return_scores=True)
        assert one[0].tolist() == row[: one.shape[1]]
        assert float(one_score[0]) == pytest.approx(float(scores[i]), abs=1e-4)


def test_cached_step_logits_equal_the_full_forward():
    model, images = tiny(), pixels(2)
    tgt = torch.tensor([[START, 5, 6, 7, 8], [START, 9, 10, 11, 12]])
    full = torch.log_softmax(model(images, tgt), -1)  # (B, T, V)
    stepper = Stepper(model, images)
    with torch.no_grad():
        steps = [stepper.start()] + [stepper.step(tgt[:, t]) for t in range(1, tgt.shape[1])]
    torch.testing.assert_close(torch.stack(steps, 1), full, atol=1e-5, rtol=1e-5)
    assert stepper.source_positions == 5 and stepper.src_lengths.tolist() == [5, 5]


def test_beam_one_equals_greedy_and_beams_run_over_images():
    model, images = tiny(), pixels(3)
    greedy, g_scores = T.greedy_search(model, images, max_len_a=0, max_len_b=6, return_scores=True)
    beam, b_scores = T.beam_search(model, images, beam_size=1, length_penalty=0.0, max_len_a=0,
                                   max_len_b=6, return_scores=True)
    assert torch.equal(greedy, beam) and torch.allclose(g_scores, b_scores, atol=1e-5)
    wide, attention = T.beam_search(model, images, beam_size=3, max_len_a=0, max_len_b=6,
                                    return_attention=True)
    assert wide.shape[0] == 3 and attention["cross"].shape[-1] == 5  # over [CLS] and the 4 patches


def test_an_image_source_must_be_pixels():
    model = tiny()
    with pytest.raises(ValueError, match="decodes pixels"):
        T.greedy_search(model, [[5, 6, 7]])
    with pytest.raises(ValueError, match="no source mask"):
        T.greedy_search(model, pixels(1), src_mask=torch.ones(1, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"do not fit this model: it takes \(B, 3, 8, 8\)"):
        T.greedy_search(model, torch.rand(1, 3, 12, 12))


def test_exports_refuse_a_captioner_in_one_line():
    from transformer.export.common import ExportError
    from transformer.export.ct2_limits import check_exportable
    from transformer.interop.hf import to_hf
    from transformer.interop.hf.common import HFConversionError

    with pytest.raises(ExportError, match="an image captioner .* cannot be exported with --to ct2"):
        check_exportable(captioner())
    with pytest.raises(HFConversionError, match="an image captioner .* has no Hugging Face export"):
        to_hf(tiny())
