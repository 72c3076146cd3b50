"""The speech front end (model.audio): shapes, Whisper's sinusoids, a padded batch equal to each
clip alone, the config's rules and its errors."""

from __future__ import annotations

import math

import pytest
import torch

import transformer
from transformer.config import AudioConfig, ConfigError, ModelConfig
from transformer.model.audio import whisper_sinusoids


def speech_config(**changes) -> ModelConfig:
    values = dict(arch="encoder-decoder", vocab_size=50, d_model=32, n_heads=4, n_encoder_layers=2,
                  n_decoder_layers=2, d_ff=64, dropout=0.0, norm_position="pre", positional="learned",
                  max_positions=40, activation="gelu", scale_embedding=False,
                  audio=AudioConfig(n_mels=8, max_frames=120))
    values.update(changes)
    return ModelConfig(**values)


def test_whisper_sinusoids_are_sines_then_cosines_at_whispers_frequencies():
    table = whisper_sinusoids(10, 8)
    t, i = 7, 2
    rate = math.exp(-math.log(10000) / 3 * i)  # channels / 2 - 1 = 3
    assert table[t, i] == pytest.approx(math.sin(t * rate), abs=1e-6)
    assert table[t, 4 + i] == pytest.approx(math.cos(t * rate), abs=1e-6)


@pytest.mark.parametrize("stride", [2, 4])
@pytest.mark.parametrize("lengths", [[120, 37, 64], [9, 10, 11], [13, 14, 15, 16]])
def test_a_padded_batch_encodes_each_clip_as_alone(lengths, stride):
    torch.manual_seed(0)
    audio = AudioConfig(n_mels=8, max_frames=120, stride=stride)
    model = transformer.build_model(speech_config(audio=audio)).eval()
    clips = [torch.randn(8, n) for n in lengths]
    width = max(lengths)
    batch = torch.zeros(len(clips), 8, width)
    mask = torch.zeros(len(clips), width, dtype=torch.bool)
    for row, clip in enumerate(clips):
        batch[row, :, : clip.shape[1]] = clip
        mask[row, : clip.shape[1]] = True
    with torch.no_grad():
        memory, positions = model.encode(batch, mask)
        assert positions.sum(-1).tolist() == [math.ceil(n / stride) for n in lengths]
        assert positions.sum(-1).tolist() == audio.positions_of(mask.sum(-1)).tolist()
        for row, clip in enumerate(clips):
            alone, none = model.encode(clip[None])
            assert none is None and alone.shape[1] == math.ceil(clip.shape[1] / stride)
            assert torch.allclose(memory[row, : alone.shape[1]], alone[0], atol=1e-5)
        tgt = torch.randint(4, 50, (len(clips), 6))
        padded = model.decode(tgt, memory, positions)
        for row, clip in enumerate(clips):
            assert torch.allclose(padded[row], model(clip[None], tgt[row : row + 1])[0], atol=1e-5)


def test_bad_features_get_one_clear_error():
    model = transformer.build_model(speech_config())
    with pytest.raises(ValueError, match=r"do not fit this model: it takes \(B, 8, frames <= 120\)"):
        model.encode(torch.randn(1, 80, 50))
    with pytest.raises(ValueError, match="do not fit"):
        model.encode(torch.randn(1, 8, 121))
    with pytest.raises(ValueError, match="log-mel features"):
        model.encode(torch.randn(8, 50))


def test_the_audio_config_rules():
    with pytest.raises(ConfigError, match="max_frames=121 must be a multiple of stride=2"):
        AudioConfig(max_frames=121)
    with pytest.raises(ConfigError, match="max_frames=122 must be a multiple of stride=4"):
        AudioConfig(max_frames=122, stride=4)
    with pytest.raises(ConfigError, match="stride"):
        AudioConfig(stride=3)
    with pytest.raises(ConfigError, match="arch='encoder-decoder'"):
        speech_config(arch="decoder")
    with pytest.raises(ConfigError, match="does not fit a speech model"):
        speech_config(positional="rope")
    cfg = ModelConfig.from_dict({**speech_config().to_dict(), "audio": {"n_mels": 8, "max_frames": 120}})
    assert cfg.audio == AudioConfig(n_mels=8, max_frames=120)


def test_a_speech_model_saves_and_loads(tmp_path):
    model = transformer.build_model(speech_config(audio=AudioConfig(n_mels=8, max_frames=120, positions="learned")))
    transformer.save_model(model, tmp_path / "m")
    loaded = transformer.load_model(tmp_path / "m")
    x, tgt = torch.randn(2, 8, 100), torch.randint(4, 50, (2, 5))
    with torch.no_grad():
        assert torch.equal(model.eval()(x, tgt), loaded(x, tgt))


def test_the_ctc_head_reads_the_encoder_positions():
    torch.manual_seed(0)
    model = transformer.build_model(speech_config(audio=AudioConfig(n_mels=8, max_frames=120, ctc=True))).eval()
    x, tgt = torch.randn(2, 8, 90), torch.randint(4, 50, (2, 5))
    mask = torch.ones(2, 90, dtype=torch.bool)
    mask[1, 61:] = False
    with torch.no_grad():
        logits, ctc, positions = model(x, tgt, src_mask=mask, ctc=True)
        memory, _ = model.encode(x, mask)
        assert torch.equal(logits, model(x, tgt, src_mask=mask))
        assert ctc.shape == (2, 45, 50) and positions.sum(-1).tolist() == [45, 31]
        assert torch.allclose(ctc, model.ctc_head(memory))
    plain = transformer.build_model(speech_config())
    with pytest.raises(ValueError, match="no CTC head"):
        plain(x, tgt, ctc=True)


def test_stride_4_strides_both_convolutions_as_written_out():
    torch.manual_seed(0)
    cfg = speech_config(audio=AudioConfig(n_mels=8, max_frames=120, stride=4))
    front = transformer.build_model(cfg).eval().encoder.front
    x = torch.randn(1, 8, 37)
    conv = torch.nn.functional.conv1d
    h = torch.nn.functional.gelu(conv(x, front.conv1.weight, front.conv1.bias, stride=2, padding=1))
    h = torch.nn.functional.gelu(conv(h, front.conv2.weight, front.conv2.bias, stride=2, padding=1))
    want = h.transpose(1, 2) + front.positions[:10]
    with torch.no_grad():
        got, _ = front(x)
    assert got.shape == (1, 10, 32) and torch.allclose(got, want, atol=1e-6)
