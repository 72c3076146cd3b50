"""Audio: WAV files the test writes (every sample width, stereo, other rates) and the bad ones,
one line each; the resampler against sines and scipy; the mel filters and the log-mel features
against Hugging Face's WhisperFeatureExtractor, on real speech (Debian's pocketsphinx-testdata)."""

from __future__ import annotations

import math
import struct
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.data import audio
from transformer.data.audio import (
    CHUNK_FRAMES,
    CHUNK_SAMPLES,
    AudioError,
    log_mel,
    mel_filters,
    read_wav,
    read_wav_bytes,
    resample,
)

SPEECH_DIR = Path("/usr/share/pocketsphinx/test/data")
SPEECH = sorted((SPEECH_DIR / "librivox").glob("*.wav")) + sorted(
    (SPEECH_DIR / "cards").glob("*.wav")
)


def write_wav(path: Path, ints: np.ndarray, width: int, rate: int) -> Path:
    """ints (frames, channels), in the range of `width` bytes, as a PCM WAV written by `wave`."""
    frames, channels = ints.shape
    match width:
        case 1:
            data = (ints + 128).astype(np.uint8).tobytes()  # 8-bit WAV is unsigned
        case 2:
            data = ints.astype("<i2").tobytes()
        case 3:
            data = ints.astype("<i4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
        case _:
            data = ints.astype("<i4").tobytes()
    with wave.open(str(path), "wb") as f:
        f.setnchannels(channels)
        f.setsampwidth(width)
        f.setframerate(rate)
        f.writeframes(data)
    return path


def sine(frequency: float, rate: int, seconds: float, amplitude: float = 0.5) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * frequency * np.arange(round(rate * seconds)) / rate + 0.3)


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_every_sample_width_reads_exactly(tmp_path, width):
    full = 2 ** (8 * width - 1)
    ints = np.array([-full, -full // 2, -1, 0, 1, full // 3, full - 1])[:, None]
    samples = read_wav(write_wav(tmp_path / "a.wav", ints, width, 16000))
    assert samples.dtype == torch.float32 and samples.shape == (7,)
    expected = torch.tensor(ints[:, 0] / full, dtype=torch.float32)
    assert torch.equal(samples, expected)  # 16 kHz: no resampling, the samples as written
    assert samples.min() == -1.0 and samples.max() <= 1.0  # 32-bit's largest rounds to 1 in float32


def test_channels_are_mixed_by_their_mean(tmp_path):
    ints = np.array([[1000, 3000], [-32768, 32767], [0, -2]])
    samples = read_wav(write_wav(tmp_path / "stereo.wav", ints, 2, 16000))
    assert torch.equal(samples, torch.tensor([2000, -0.5, -1], dtype=torch.float32) / 32768)


def test_an_extensible_header_with_pcm_samples_reads_as_pcm(tmp_path):
    ints = np.arange(-500, 500, 7)[:, None] * 1000
    plain = write_wav(tmp_path / "plain.wav", ints, 3, 16000).read_bytes()
    # WAVE_FORMAT_EXTENSIBLE (0xFFFE): the plain fmt fields, then cbSize 22, 24 valid bits, a
    # channel mask, and the subformat GUID (its first two bytes the format tag: 1, PCM)
    fmt = plain[20:36]
    guid = struct.pack("<H", 1) + bytes.fromhex("000000001000800000aa00389b71")
    extensible = b"\xfe\xff" + fmt[2:] + struct.pack("<HHI", 22, 24, 4) + guid
    data = plain[36:]  # the data chunk
    body = b"WAVE" + b"fmt " + struct.pack("<I", 40) + extensible + data
    as_extensible = b"RIFF" + struct.pack("<I", len(body)) + body
    assert torch.equal(read_wav_bytes(as_extensible, "ext.wav"), read_wav_bytes(plain, "plain.wav"))
    floats = as_extensible.replace(guid, struct.pack("<H", 3) + guid[2:])  # subformat: IEEE float
    with pytest.raises(AudioError, match="ext.wav holds IEEE float samples"):
        read_wav_bytes(floats, "ext.wav")


@pytest.mark.parametrize("rate, frequency", [(8000, 1000.0), (44100, 3000.0), (22050, 5000.0)])
def test_other_rates_are_resampled_to_16k(tmp_path, rate, frequency):
    # a sine below both Nyquist frequencies comes through: the 16 kHz sine, away from the ends
    # (the clip is zero outside, and the filter reaches 16 zero crossings)
    x = sine(frequency, rate, 0.5)
    samples = read_wav(write_wav(tmp_path / "x.wav", np.round(x * 32767)[:, None], 2, rate))
    assert samples.shape == (math.ceil(len(x) * 16000 / rate),)
    expected = sine(frequency, 16000, 0.5)
    assert np.abs(samples.numpy() - expected)[100:-100].max() < 1e-3


def _kinds_of_bad_file(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = write_wav(tmp_path / "good.wav", np.zeros((100, 1)), 2, 16000).read_bytes()
    files = {
        "text.wav": (
            b"hello, this is not audio\n",
            "is not a WAV file (RIFF/WAVE): convert it, e.g. `ffmpeg -i",
        ),
        "song.mp3": (
            b"ID3\x04\x00" + bytes(100),
            "song.mp3 is not a WAV file (RIFF/WAVE): convert it, e.g. `ffmpeg -i",
        ),
        "nothing.wav": (b"", "is empty (0 bytes)"),
        "silent.wav": (
            write_wav(tmp_path / "s.wav", np.zeros((0, 1)), 2, 16000).read_bytes(),
            "has no samples (0 frames)",
        ),
        "cut.wav": (good[:30], "ends inside its header (the file is cut off)"),
        "riff-only.wav": (good[:12], "has no whole format chunk"),
        "float.wav": (
            good[:20] + struct.pack("<H", 3) + good[22:],
            "holds IEEE float samples, which cannot be read (only PCM WAV can)",
        ),
        "alaw.wav": (good[:20] + struct.pack("<H", 6) + good[22:], "holds A-law samples"),
        "wide.wav": (
            good[:32] + struct.pack("<HH", 5, 40) + good[36:],
            "has 40-bit samples; only 8-, 16-, 24- and 32-bit PCM",
        ),
    }
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: (tmp_path / name, fragment) for name, (_, fragment) in files.items()}


def test_bad_files_are_one_line_naming_the_file_and_the_fix(tmp_path):
    for name, (path, fragment) in _kinds_of_bad_file(tmp_path).items():
        with pytest.raises(AudioError) as caught:
            read_wav(path)
        message = str(caught.value)
        assert "\n" not in message and message.startswith(str(path)) and fragment in message, (
            message
        )
        with pytest.raises(AudioError) as caught:  # the same checks on an upload's bytes
            read_wav_bytes(path.read_bytes(), name)
        upload = str(caught.value)
        assert "\n" not in upload and upload.startswith(f"{name} ") and fragment in upload, upload
    with pytest.raises(AudioError, match="missing.wav not found"):
        read_wav(tmp_path / "missing.wav")
    with pytest.raises(
        AudioError, match=r"`ffmpeg -i 'my talk.mp3' -ar 16000 -ac 1 'my talk.wav'`$"
    ):
        read_wav_bytes(b"ID3", "my talk.mp3")
    with pytest.raises(AudioError, match=r"`ffmpeg -i upload -ar 16000 -ac 1 upload.wav`$"):
        read_wav_bytes(b"ID3")


def test_resampler_against_scipy_on_a_band_limited_signal():
    # 40 sines of random frequencies below 0.75 of the lower Nyquist frequency, their amplitudes
    # summing to 1: the ideal output is the same sum at the new times. Both resamplers are linear,
    # so each is off the ideal by at most its worst error on a single unit sine in that band,
    # measured on a grid of 60 frequencies for each rate: ours 1.4e-3, scipy's (a Kaiser window,
    # beta 5, cut at the Nyquist frequency itself) 2.7e-3; and off each other by at most the sum.
    # The first and last 64 outputs, within either filter's reach of the zeros outside the clip,
    # are left out.
    signal = pytest.importorskip("scipy.signal")
    r = np.random.default_rng(0)
    for rate in (8000, 11025, 22050, 44100, 48000, 16001):
        top = 0.75 * min(rate, 16000) / 2
        f, phase, amp = r.uniform(20, top, 40), r.uniform(0, 2 * np.pi, 40), r.uniform(0.1, 1, 40)

        def at(t, f=f, phase=phase, amp=amp):  # the signal at times t (seconds)
            return (amp[:, None] * np.sin(2 * np.pi * f[:, None] * t + phase[:, None])).sum(
                0
            ) / amp.sum()

        x = at(np.arange(rate) / rate)  # 1 s
        ours = resample(torch.from_numpy(x), rate, 16000).numpy()
        g = math.gcd(rate, 16000)
        theirs = signal.resample_poly(x, 16000 // g, rate // g)
        assert ours.shape == theirs.shape == (16000,)
        inside = slice(64, -64)
        assert np.abs(ours - at(np.arange(16000) / 16000))[inside].max() < 1.4e-3, rate
        assert np.abs(ours - theirs)[inside].max() < 1.4e-3 + 2.7e-3, rate


def test_resampler_forms_agree_and_keep_leading_dims(monkeypatch):
    x = torch.randn(2, 3, 4410, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    one_convolution = resample(x, 44100)
    assert one_convolution.shape == (2, 3, 1600)
    monkeypatch.setattr(audio, "_MAX_KERNEL", 0)  # every output gathering its own inputs
    assert torch.allclose(resample(x, 44100), one_convolution, atol=1e-12)
    assert resample(x, 16000, 16000) is x


def test_mel_filters_match_transformers():
    audio_utils = pytest.importorskip("transformers.audio_utils")
    for n_mels in (80, 128):  # Whisper large-v3 reads 128
        expected = audio_utils.mel_filter_bank(
            num_frequency_bins=201,
            num_mel_filters=n_mels,
            min_frequency=0.0,
            max_frequency=8000.0,
            sampling_rate=16000,
            norm="slaney",
            mel_scale="slaney",
        )
        ours = mel_filters(n_mels)
        assert ours.shape == (n_mels, 201) and ours.dtype == torch.float32
        assert np.abs(ours.numpy() - expected.T).max() < 1e-6
        assert np.abs(mel_filters(n_mels, dtype=torch.float64).numpy() - expected.T).max() < 1e-12


@pytest.fixture(scope="module")
def extractor():
    transformers = pytest.importorskip("transformers")
    return transformers.WhisperFeatureExtractor(feature_size=80)


def hf_features(extractor, samples: torch.Tensor, **kwargs) -> np.ndarray:
    """Hugging Face's features of one clip: (80, F). Its __call__ takes the torch path when torch
    is installed (_torch_extract_fbank_features, float32)."""
    return extractor(
        samples.numpy(), sampling_rate=16000, return_tensors="np", **kwargs
    ).input_features[0]


@pytest.mark.skipif(
    not SPEECH,
    reason="needs Debian's pocketsphinx-testdata (apt-get install pocketsphinx-testdata): 10 clips of real speech",
)
def test_log_mel_matches_whisper_feature_extractor_on_real_speech(extractor):
    assert len(SPEECH) == 10
    for path in SPEECH:
        samples = read_wav(path)
        ours = log_mel(samples)
        assert ours.shape == (80, CHUNK_FRAMES) and ours.dtype == torch.float32
        assert np.abs(ours.numpy() - hf_features(extractor, samples)).max() < 1e-4, path.name


def test_log_mel_matches_both_of_hugging_faces_paths_on_noise_and_a_sine(extractor):
    noise = torch.randn(3 * 16000, generator=torch.Generator().manual_seed(0)) * 0.1
    tone = torch.from_numpy(sine(440.0, 16000, 2.5)).float()
    for samples in (noise, tone):
        ours = log_mel(samples).numpy()
        assert np.abs(ours - hf_features(extractor, samples)).max() < 1e-4
        # its NumPy path (taken without torch): the FFT in float64, the clip padded by hand
        padded = np.pad(samples.numpy(), (0, CHUNK_SAMPLES - len(samples)))[None]
        assert np.abs(ours - extractor._np_extract_fbank_features(padded, "cpu")[0]).max() < 1e-4


@pytest.mark.parametrize("n", [401, 16037, 116800, CHUNK_SAMPLES - 1, CHUNK_SAMPLES])
def test_log_mel_matches_whisper_feature_extractor_at_any_length(extractor, n):
    # HF pads the samples to 30 s before the STFT (the tail reads silence, not the clip reflected)
    # and floors the log at 8 under the maximum of the whole padded window: so does log_mel.
    g = torch.Generator().manual_seed(n)
    loud = torch.linspace(0, 1, n) ** 4  # a clip that swells: its loudest frame sets the floor
    samples = torch.randn(n, generator=g) * (0.01 + 0.5 * loud)
    ours = log_mel(samples)
    assert ours.shape == (80, CHUNK_FRAMES)
    assert np.abs(ours.numpy() - hf_features(extractor, samples)).max() < 1e-4


def test_log_mel_unpadded_and_cut(extractor):
    # pad_to=None: the clip's own samples // 160 frames. With one clip, HF's padding="longest"
    # pads nothing (the longest clip is this one), so these are its features of exactly the clip.
    odd = torch.randn(12345, generator=torch.Generator().manual_seed(1)) * 0.3
    for samples in [odd] + [read_wav(path) for path in SPEECH[-1:]]:
        ours = log_mel(samples, pad_to=None)
        assert ours.shape == (80, len(samples) // 160)
        assert (
            np.abs(ours.numpy() - hf_features(extractor, samples, padding="longest")).max() < 1e-4
        )
    # longer than 30 s: cut to 30 s, as HF truncates (truncation=True, max_length 480,000)
    long = torch.randn(31 * 16000, generator=torch.Generator().manual_seed(2)) * 0.1
    assert np.abs(log_mel(long).numpy() - hf_features(extractor, long)).max() < 1e-4
    with pytest.raises(ValueError, match="200 samples is too short"):
        log_mel(torch.zeros(200), pad_to=None)


def test_a_batch_is_each_clip_on_its_own(extractor):
    g = torch.Generator().manual_seed(3)
    batch = torch.stack(
        [torch.randn(CHUNK_SAMPLES, generator=g) * 0.01, torch.randn(CHUNK_SAMPLES, generator=g)]
    )
    ours = log_mel(batch)
    assert ours.shape == (2, 80, CHUNK_FRAMES)
    for clip, features in zip(batch, ours, strict=True):  # each clip floored under its own max
        assert torch.equal(features, log_mel(clip))
    theirs = extractor(list(batch.numpy()), sampling_rate=16000, return_tensors="np").input_features
    assert np.abs(ours.numpy() - theirs).max() < 1e-4
