"""Image generation over the KV cache (decoding/images.py) against the plain computation: greedy
sampling equals the argmax of full recomputes over the pixel tokens (with classifier-free guidance
too), the scored likelihood equals the written-out sum, and only pixel tokens are ever drawn."""

from __future__ import annotations

import pytest
import torch

import transformer
from transformer.config import ModelConfig
from transformer.data.pixels import PIXEL_OFFSET, START, ImageTokens
from transformer.decoding.images import guide, image_log_likelihoods, sample_images

TOKENS = ImageTokens(3, 1, 4, labels=("a", "b"), chars="xy")


def model(seed: int = 0, max_positions: int = 16):
    torch.manual_seed(seed)
    cfg = ModelConfig(arch="decoder", d_model=32, n_heads=4, n_decoder_layers=2, d_ff=64,
                      dropout=0.0, positional="learned", norm_position="pre", activation="gelu",
                      max_positions=max_positions, vocab_size=TOKENS.vocab_size)  # fmt: skip
    m = transformer.build_model(cfg).eval()
    with torch.no_grad():  # make the suppressed ids the most likely ones: they must still never come
        m.lm_head.weight[: PIXEL_OFFSET] *= 0
        m.lm_head.weight[TOKENS.label_offset :] += 3.0
    return m


def test_greedy_sampling_equals_the_argmax_of_full_recomputes():
    m = model()
    prefixes = [[TOKENS.label_token("b")], TOKENS.prefix(name="xyx"), [START]]
    got = sample_images(m, TOKENS, prefixes, temperature=0.0)
    pixels = range(PIXEL_OFFSET, PIXEL_OFFSET + TOKENS.n_colours)
    for row, prefix in enumerate(prefixes):
        seq = list(prefix)
        with torch.no_grad():
            for _ in range(TOKENS.n_pixels):
                logits = m(torch.tensor([seq]))[0, -1]
                seq.append(max(pixels, key=lambda t: logits[t].item()))
        want = TOKENS.pixels(torch.tensor([seq[len(prefix) :]]))
        assert torch.equal(got[row : row + 1], want), row


def test_samples_are_whole_images_of_pixel_tokens_and_reproducible():
    m = model(1)
    g = lambda: torch.Generator().manual_seed(7)
    a = sample_images(m, TOKENS, [[START]] * 6, generator=g())
    b = sample_images(m, TOKENS, [[START]] * 6, generator=g())
    assert a.shape == (6, 1, 3, 3) and a.dtype == torch.uint8 and torch.equal(a, b)
    assert set(a.unique().tolist()) <= {32, 96, 160, 224}  # the 4 levels' bin centres
    assert len({tuple(x.flatten().tolist()) for x in a}) > 1  # sampled, not one image


def test_log_likelihood_equals_the_written_out_sum():
    m = model(2)
    images = torch.randint(0, 256, (5, 1, 3, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
    prefixes = [[START], TOKENS.prefix(label="a"), TOKENS.prefix(name="yy"), [START], TOKENS.prefix(name="x")]
    got = image_log_likelihoods(m, TOKENS, images, prefixes, batch_size=2)
    pixels = TOKENS.quantise(images)
    for row, prefix in enumerate(prefixes):
        seq = torch.tensor([prefix + pixels[row].tolist()])
        with torch.no_grad():
            log_probs = torch.log_softmax(m(seq[:, :-1])[0].float(), dim=-1)  # (L - 1, V)
        n = len(prefix)
        want = sum(log_probs[n - 1 + j, pixels[row, j]].item() for j in range(TOKENS.n_pixels))
        assert got[row].item() == pytest.approx(want, abs=1e-4), row


def test_too_long_a_condition_is_one_clear_error():
    m = model(max_positions=10)
    with pytest.raises(ValueError, match="need 11 positions; the model has max_positions=10"):
        sample_images(m, TOKENS, [TOKENS.prefix(name="xy")])


def test_guidance_is_its_definition():
    """softmax(guide) is p_cond^s * p_uncond^(1 - s), renormalised; a token ruled out in either row
    stays ruled out; the sampled distribution is that of Hugging Face's guidance_scale."""
    g = torch.Generator().manual_seed(4)
    cond = torch.log_softmax(torch.randn(3, 7, generator=g), -1)
    uncond = torch.log_softmax(torch.randn(3, 7, generator=g), -1)
    cond[:, 0] = uncond[1:, 1] = -float("inf")
    for scale in (0.0, 0.5, 2.0, 4.0):
        got = guide(torch.cat([cond, uncond]), scale).softmax(-1)
        want = cond.exp() ** scale * uncond.exp() ** (1 - scale)
        want[:, 0] = want[1:, 1] = 0.0
        torch.testing.assert_close(got, want / want.sum(-1, keepdim=True), rtol=1e-5, atol=1e-7)


def test_guided_greedy_sampling_equals_full_recomputes_of_both_rows():
    m = model(3)
    prefixes = [[TOKENS.label_token("a")], TOKENS.prefix(name="yxy"), [TOKENS.label_token("b")]]
    scale = 2.5
    got = sample_images(m, TOKENS, prefixes, temperature=0.0, guidance_scale=scale)
    pixels = range(PIXEL_OFFSET, PIXEL_OFFSET + TOKENS.n_colours)
    for row, prefix in enumerate(prefixes):
        drawn: list[int] = []
        with torch.no_grad():
            for _ in range(TOKENS.n_pixels):
                lc = torch.log_softmax(m(torch.tensor([prefix + drawn]))[0, -1], -1)
                lu = torch.log_softmax(m(torch.tensor([[START] + drawn]))[0, -1], -1)
                mixed = lu + scale * (lc - lu)
                drawn.append(max(pixels, key=lambda t: mixed[t].item()))
        assert torch.equal(got[row : row + 1], TOKENS.pixels(torch.tensor([drawn]))), row


def test_guidance_zero_draws_from_the_plain_start_and_one_is_off():
    m = model(5)
    label = [[TOKENS.label_token("a")]] * 2
    plain = sample_images(m, TOKENS, [[START]] * 2, temperature=0.0)
    assert torch.equal(sample_images(m, TOKENS, label, temperature=0.0, guidance_scale=0.0), plain)
    g = lambda: torch.Generator().manual_seed(9)
    assert torch.equal(
        sample_images(m, TOKENS, label, generator=g(), guidance_scale=1.0),
        sample_images(m, TOKENS, label, generator=g()),
    )


def test_a_model_whose_decode_json_guides_still_samples_unconditionally(tmp_path):
    """decode.json's guidance_scale applies to samples of a label or text; an unconditional sample
    ignores it, and only an explicit scale without a condition is an error."""
    from transformer.config import DecodeConfig
    from transformer.decoding.inputs import PipelineError
    from transformer.decoding.pipeline import Pipeline
    from transformer.model_dir import save_model

    save_model(model(6), tmp_path / "m", decode=DecodeConfig(guidance_scale=3.0), pixels=TOKENS)
    p = Pipeline.load(tmp_path / "m")
    plain = p.generate_images(3, seed=0)
    assert torch.equal(plain, p.generate_images(3, seed=0, guidance_scale=1.0))
    guided = p.generate_images(3, label="a", seed=0, temperature=0.0)
    assert torch.equal(guided, p.generate_images(3, label="a", seed=0, temperature=0.0, guidance_scale=3.0))
    with pytest.raises(PipelineError, match="guidance_scale=2 guides towards a label or text"):
        p.generate_images(3, seed=0, guidance_scale=2.0)
