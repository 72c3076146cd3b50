"""Hugging Face interop, Whisper: two random shapes of WhisperForConditionalGeneration against our
speech EncoderDecoder (model.audio): logits, both directions, greedy and beam search against
Whisper's own `generate` from a forced prompt, token suppression, and an import through a
saved directory.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import transformer
from tests.interop.hf_common import perturb, transformers
from transformer.interop.hf import HFConversionError, from_hf, to_hf, whisper

SHAPES = {
    "tiny-like": dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=256, decoder_ffn_dim=256,
                      num_mel_bins=80, max_source_positions=60, max_target_positions=48),
    "narrow-deep": dict(d_model=48, encoder_layers=3, decoder_layers=1, encoder_attention_heads=3,
                        decoder_attention_heads=3, encoder_ffn_dim=96, decoder_ffn_dim=96,
                        num_mel_bins=16, max_source_positions=40, max_target_positions=32,
                        activation_function="relu"),
}
VOCAB, PAD, BOS, EOS = 120, 3, 1, 2


def whisper_model(shape: str, seed: int = 0):
    config = transformers.WhisperConfig(vocab_size=VOCAB, pad_token_id=PAD, bos_token_id=BOS,
                                        eos_token_id=EOS, decoder_start_token_id=BOS,
                                        suppress_tokens=None, begin_suppress_tokens=None,
                                        **SHAPES[shape])
    torch.manual_seed(seed)
    hf_model = perturb(transformers.WhisperForConditionalGeneration(config), seed)
    with torch.no_grad():  # small token embeddings: the next token depends on the audio too
        hf_model.model.decoder.embed_tokens.weight.mul_(0.1)
    return hf_model.eval()


def features(hf_model, batch: int = 3, seed: int = 1) -> torch.Tensor:
    c = hf_model.config
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(batch, c.num_mel_bins, 2 * c.max_source_positions, generator=g)
    return noise + 3 * torch.randn(batch, c.num_mel_bins, 1, generator=g)  # a spectrum per clip


@pytest.mark.parametrize("shape", list(SHAPES))
def test_whisper_logits_match_hf_both_ways(shape):
    hf_model = whisper_model(shape)
    model = from_hf(hf_model)
    assert model.config.audio.n_mels == hf_model.config.num_mel_bins
    x = features(hf_model)
    tgt = torch.randint(4, VOCAB, (3, 11), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        theirs = hf_model(input_features=x, decoder_input_ids=tgt).logits
        ours = model(x, tgt)
    assert (ours - theirs).abs().max() < 1e-5
    with torch.no_grad():  # a bias on the keys, which Whisper lacks, leaves the softmax unchanged
        for name, p in model.named_parameters():
            if "k_proj.bias" in name:
                p.normal_()
        ours = model(x, tgt)
        back = to_hf(model)(input_features=x, decoder_input_ids=tgt).logits
    assert (ours - back).abs().max() < 1e-5


def until_eos(row: list[int]) -> list[int]:
    return row[: row.index(EOS)] if EOS in row else row


@pytest.mark.parametrize("shape", list(SHAPES))
def test_whisper_greedy_and_beam_match_hf_generate_from_a_prompt(shape):
    hf_model = whisper_model(shape, seed=5)
    model = from_hf(hf_model)
    x, prompt, n_new = features(hf_model, seed=7), [BOS, 10, 11], 16
    decoder_ids = torch.tensor([prompt] * len(x))
    for beams in (1, 3):
        with torch.no_grad():
            theirs = hf_model.generate(input_features=x, decoder_input_ids=decoder_ids,
                                       max_new_tokens=n_new, num_beams=beams, do_sample=False,
                                       length_penalty=1.0)
        theirs = theirs[:, len(prompt):] if theirs.shape[1] > n_new else theirs
        if beams == 1:
            ours = transformer.greedy_search(model, x, max_len_a=0, max_len_b=n_new, prefix=prompt)
        else:
            ours = transformer.beam_search(model, x, beam_size=beams, length_penalty=1.0,
                                           length_penalty_kind="power", max_len_a=0,
                                           max_len_b=n_new, prefix=prompt)
        for mine, hf_row in zip(ours.tolist(), theirs.tolist(), strict=True):
            want = until_eos(hf_row)
            assert mine[: len(want)] == want and all(t == PAD for t in mine[len(want):]), (beams, mine, hf_row)
        assert len({tuple(r) for r in ours.tolist()}) > 1  # the outputs depend on the audio


def test_suppressed_tokens_match_hf_generate():
    hf_model = whisper_model("tiny-like", seed=9)
    model = from_hf(hf_model)
    x, n_new = features(hf_model, seed=4), 12
    plain = transformer.greedy_search(model, x, max_len_a=0, max_len_b=n_new)
    common = sorted({t for row in plain.tolist() for t in row} - {PAD})[:3]
    first = sorted({row[0] for row in plain.tolist()})
    with torch.no_grad():
        theirs = hf_model.generate(input_features=x, max_new_tokens=n_new, do_sample=False,
                                   suppress_tokens=common, begin_suppress_tokens=first)
    theirs = theirs[:, 1:] if theirs.shape[1] > n_new else theirs
    ours = transformer.greedy_search(model, x, max_len_a=0, max_len_b=n_new,
                                     suppress_tokens=common, begin_suppress_tokens=first)
    for mine, hf_row in zip(ours.tolist(), theirs.tolist(), strict=True):
        want = until_eos(hf_row)
        assert mine[: len(want)] == want
        assert not set(mine) & set(common) and mine[0] not in first
    with pytest.raises(ValueError, match="outside the vocabulary"):
        transformer.greedy_search(model, x, suppress_tokens=[VOCAB])


def test_a_saved_whisper_directory_imports(tmp_path):
    hf_model = whisper_model("narrow-deep")
    hf_model.save_pretrained(tmp_path / "hf")
    result = transformer.interop.hf.import_hf(tmp_path / "hf", tmp_path / "ours")
    assert result.model_type == "whisper"
    model = transformer.load_model(tmp_path / "ours")
    x, tgt = features(hf_model), torch.tensor([[BOS, 5, 6, 7]] * 3)
    with torch.no_grad():
        assert (model(x, tgt) - hf_model(input_features=x, decoder_input_ids=tgt).logits).abs().max() < 1e-5


def test_what_whisper_cannot_express_is_named():
    model = from_hf(whisper_model("narrow-deep"))
    with pytest.raises(HFConversionError, match="norm_position"):
        to_hf(transformer.build_model(model.config.replace(norm_position="post")))
    audio = model.config.audio
    for change, name in ((dict(stride=4), "model.audio.stride"), (dict(pad_to_max=False), "model.audio.pad_to_max")):
        with pytest.raises(HFConversionError, match=name):
            to_hf(transformer.build_model(model.config.replace(audio=dataclasses.replace(audio, **change))))
    config = transformers.WhisperConfig(decoder_attention_heads=2, encoder_attention_heads=4, d_model=32)
    with pytest.raises(HFConversionError, match="decoder_attention_heads"):
        whisper.config_from_hf(config)
