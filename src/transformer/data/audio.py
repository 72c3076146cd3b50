"""Audio for the speech encoder: WAV files read to 16 kHz mono samples, and Whisper's log-mel
features (Radford et al. 2022, §2.2: "re-sampled to 16,000 Hz, and an 80-channel log-magnitude Mel
spectrogram representation is computed on 25-millisecond windows with a stride of 10
milliseconds ... globally scale the input to be between -1 and 1 with approximately zero mean").

Legend (model/__init__.py): B batch, F audio frames (100 a second); spelled out: samples, n_mels
(the spectrogram's bands), bins (the STFT's frequency bins, n_fft // 2 + 1).

Reading (read_wav, read_wav_bytes): a RIFF/WAVE file of PCM samples, read with the standard
library's `wave`: 8-bit (unsigned), 16-, 24- or 32-bit (signed, little-endian), any number of
channels, any rate. Samples are scaled to [-1, 1] (divided by 2^(bits - 1), 8-bit centred on 128
first), the channels mixed to mono by their mean, and any rate other than 16,000 Hz resampled
(then clipped to [-1, 1], as writing it back to PCM would clip its overshoot). A
WAVE_FORMAT_EXTENSIBLE header whose subformat is PCM (what ffmpeg writes for samples wider than 16
bits, more than two channels or rates above 48 kHz) is read as plain PCM, as Python 3.12's `wave`
reads it. Float, A-law, µ-law, ADPCM or MP3 inside a WAV, other sample widths, a file without
samples and a file that is not a WAV are each one AudioError naming the file and, where a
conversion helps, the ffmpeg line that makes a readable one. How long a clip may be is the
caller's to decide.

Resampling (resample): band-limited interpolation with a windowed sinc (Smith & Gossett 1984), in
polyphase form, torchaudio.functional.resample's algorithm: the rates reduced by their gcd to
up / down, a low-pass at 0.99 of the lower rate's Nyquist frequency, the sinc cut at its 16th zero
crossing on either side under a Hann window (torchaudio's lowpass_filter_width; its default is 6,
whose response already falls by 6% at 0.8 of the Nyquist frequency). With 16, measured with sines:
flat within 1.4e-3 up to 0.75 of the lower Nyquist frequency, 3e-3 at 0.8, 2e-2 at 0.9; an input
tone at 9 kHz folds back 46 dB down, one at 10 kHz 64 dB down. Output sample j sits at time
j / new_rate and input sample 0 at time 0 (no delay, as in scipy.signal.resample_poly); the signal
is zero outside the clip; the output has ceil(samples * new_rate / orig_rate) samples.

Features (log_mel), Whisper's log_mel_spectrogram step by step:
  1. zero-pad (or cut) the clip to pad_to samples (30 s = 480,000: Whisper always reads 30 s);
  2. STFT: a periodic Hann window of 400 samples (25 ms), hop 160 (10 ms), the clip reflected by
     200 samples at each end (centred frames) -> samples // 160 + 1 frames of 201 bins;
  3. power |X|^2, the last frame dropped -> F = samples // 160 frames (3,000 for 30 s);
  4. the mel filter bank (mel_filters: Slaney's scale and area normalisation, librosa's default)
     -> (n_mels, F);
  5. log10 of the mel power, floored at 1e-10; then floored at the clip's maximum - 8 (80 dB
     under its loudest band and frame); then (x + 4) / 4.
All in float32, as Hugging Face's WhisperFeatureExtractor computes them when torch is installed
(its __call__ then takes _torch_extract_fbank_features: the same operations, and the same numbers).
Its NumPy path, without torch, takes the FFT in float64 and differs from both by up to 2e-5.
"""

from __future__ import annotations

import io
import math
import os
import shlex
import struct
import wave
from pathlib import Path

import numpy as np
import torch

SAMPLE_RATE = 16000
N_FFT = 400  # 25 ms
HOP = 160  # 10 ms
CHUNK_SECONDS = 30
CHUNK_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # 480,000
CHUNK_FRAMES = CHUNK_SAMPLES // HOP  # 3,000

_PCM, _EXTENSIBLE = 0x0001, 0xFFFE
_FORMATS = {  # the WAVE format tags a user may meet (Microsoft's mmreg.h)
    0x0002: "Microsoft ADPCM",
    0x0003: "IEEE float",
    0x0006: "A-law",
    0x0007: "µ-law",
    0x0011: "IMA ADPCM",
    0x0031: "GSM 6.10",
    0x0055: "MP3",
}
_MAX_KERNEL = 2**20  # resample: its one-convolution form up to this many weights
_MAX_INT = {1: 128, 2: 2**15, 3: 2**31, 4: 2**31}  # 24-bit samples are read shifted into int32


class AudioError(ValueError):
    """An audio file cannot be read; the one-line message names it and says how to convert it."""


def _convert(name: str) -> str:
    """The ffmpeg line that makes a readable WAV of the file (16 kHz, mono, 16-bit PCM)."""
    stem = Path(name).with_suffix("")
    out = f"{stem}-16k.wav" if Path(name).suffix.lower() == ".wav" else f"{stem}.wav"
    return f"convert it, e.g. `ffmpeg -i {shlex.quote(name)} -ar 16000 -ac 1 {shlex.quote(out)}`"


def _format_tag(data: bytes) -> tuple[int, int] | None:
    """(the format tag, its offset in data) of a RIFF/WAVE file's fmt chunk; for an extensible
    header, the tag of its subformat. None when there is no fmt chunk."""
    at = 12
    while at + 8 <= len(data):
        chunk, size = data[at : at + 4], struct.unpack_from("<I", data, at + 4)[0]
        if chunk == b"fmt ":
            if at + 10 > len(data):
                return None
            tag = struct.unpack_from("<H", data, at + 8)[0]
            if tag == _EXTENSIBLE and size >= 40 and at + 8 + 26 <= len(data):
                return struct.unpack_from("<H", data, at + 8 + 24)[0], at + 8
            return tag, at + 8
        at += 8 + size + size % 2  # chunks are padded to an even size
    return None


def read_wav_bytes(data: bytes, name: str = "upload") -> torch.Tensor:
    """A WAV file's bytes -> (samples,) float32 mono in [-1, 1] at 16 kHz (see the module doc);
    name is the file's name in errors."""
    if not data:
        raise AudioError(f"{name} is empty (0 bytes): record or export it again")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise AudioError(f"{name} is not a WAV file (RIFF/WAVE): {_convert(name)}")
    found = _format_tag(data)
    if found is None:
        raise AudioError(
            f"{name} has no whole format chunk (its header is cut off or damaged): export it "
            f"again, or {_convert(name)}"
        )
    tag, at = found
    if tag != _PCM:
        kind = _FORMATS.get(tag, f"format 0x{tag:04x}")
        raise AudioError(
            f"{name} holds {kind} samples, which cannot be read (only PCM WAV can): "
            f"{_convert(name)}"
        )
    if data[at : at + 2] != b"\x01\x00":  # an extensible header with PCM samples: read as PCM
        data = data[:at] + b"\x01\x00" + data[at + 2 :]
    try:
        with wave.open(io.BytesIO(data)) as f:
            channels, width, rate = f.getnchannels(), f.getsampwidth(), f.getframerate()
            frames = f.readframes(f.getnframes())
    except EOFError:
        raise AudioError(
            f"{name} ends inside its header (the file is cut off): export it again, or "
            f"{_convert(name)}"
        ) from None
    except wave.Error as e:
        raise AudioError(f"{name} cannot be read as a WAV file ({e}): {_convert(name)}") from None
    if width not in _MAX_INT:
        raise AudioError(
            f"{name} has {8 * width}-bit samples; only 8-, 16-, 24- and 32-bit PCM can be read: "
            f"{_convert(name)}"
        )
    if rate <= 0:
        raise AudioError(f"{name} says its sample rate is {rate} Hz: {_convert(name)}")
    n = len(frames) // (channels * width)  # a partial last frame (a cut-off file) is dropped
    if n == 0:
        raise AudioError(f"{name} has no samples (0 frames): record or export it again")
    raw = np.frombuffer(frames, dtype=np.uint8, count=n * channels * width)
    match width:
        case 1:
            ints = raw.astype(np.float32) - 128
        case 2:
            ints = raw.view("<i2")
        case 3:  # three little-endian bytes as the top of an int32 (the sign comes with them)
            wide = np.zeros((n * channels, 4), dtype=np.uint8)
            wide[:, 1:] = raw.reshape(-1, 3)
            ints = wide.reshape(-1).view("<i4")
        case _:
            ints = raw.view("<i4")
    scaled = ints.astype(np.float32) / np.float32(_MAX_INT[width])  # powers of 2: exact
    samples = torch.from_numpy(scaled).reshape(n, channels).mean(dim=1)  # (samples,)
    if rate == SAMPLE_RATE:
        return samples
    return resample(samples, rate, SAMPLE_RATE).clamp(-1.0, 1.0)  # overshoot clipped, as in PCM


def read_wav(path: str | os.PathLike) -> torch.Tensor:
    """A WAV file -> (samples,) float32 mono in [-1, 1] at 16 kHz (see the module doc)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise AudioError(f"{path} not found") from None
    except OSError as e:
        raise AudioError(f"{path} cannot be read ({e.strerror or e})") from None
    return read_wav_bytes(data, str(path))


def _sinc_taps(
    offsets: torch.Tensor, cutoff: float, zero_crossings: int, dtype: torch.dtype
) -> torch.Tensor:
    """The low-pass's weights at offsets (input samples from the output's time, float64): a sinc
    cut at `cutoff` (1 = the input's Nyquist frequency) under a Hann window of zero_crossings of its
    zero crossings on either side."""
    u = (offsets * cutoff).clamp(-zero_crossings, zero_crossings)  # in zero crossings
    window = torch.cos(u * math.pi / (2 * zero_crossings)) ** 2  # 0 at the ends
    return (cutoff * torch.sinc(u) * window).to(dtype)


def resample(
    samples: torch.Tensor,
    orig_rate: int,
    new_rate: int = SAMPLE_RATE,
    zero_crossings: int = 16,
    rolloff: float = 0.99,
) -> torch.Tensor:
    """(..., samples) at orig_rate -> (..., ceil(samples * new_rate / orig_rate)) at new_rate:
    windowed-sinc band-limited interpolation, in polyphase form (see the module doc); the same
    tensor back when the rates are equal."""
    if orig_rate == new_rate:
        return samples
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be positive, not {orig_rate} -> {new_rate}")
    g = math.gcd(orig_rate, new_rate)
    down, up = orig_rate // g, new_rate // g  # every `down` input samples give `up` output ones
    cutoff = rolloff * min(up, down) / down  # 1 = the input's Nyquist frequency
    width = math.ceil(zero_crossings / cutoff)  # the filter's reach either side, input samples
    shape, n = samples.shape, samples.shape[-1]
    n_out = math.ceil(n * up / down)
    x = samples.reshape(-1, n)  # (rows, samples)
    # Output j sits at input time j * down / up: phase j % up, whole block j // up.
    if up * (2 * width + down) <= _MAX_KERNEL:
        # torchaudio's form: one strided convolution whose up output channels are the phases,
        # each a kernel over a whole block of input plus the reach either side (mostly zeros
        # when down is large, but one fast call).
        taps = torch.arange(-width, width + down, dtype=torch.float64)
        offsets = taps[None, :] - torch.arange(up, dtype=torch.float64)[:, None] * down / up
        kernel = _sinc_taps(offsets, cutoff, zero_crossings, x.dtype).to(x.device)  # (up, taps)
        x = torch.nn.functional.pad(x[:, None, :], (width, width + down))  # (rows, 1, padded)
        y = torch.nn.functional.conv1d(x, kernel[:, None, :], stride=down)  # (rows, up, blocks)
        y = y.transpose(1, 2).reshape(x.shape[0], -1)[:, :n_out]  # (rows, n_out)
    else:
        # Rates with a large up and down (44,101 Hz, say): the kernel above would not fit, so each
        # output sample gathers its own 2 width + 1 inputs, a slice of outputs at a time.
        phase = torch.arange(up, dtype=torch.float64)
        fraction = phase * down / up - torch.floor(phase * down / up)  # (up,)
        taps = torch.arange(-width, width + 1, dtype=torch.float64)
        weights = _sinc_taps(taps[None, :] - fraction[:, None], cutoff, zero_crossings, x.dtype)
        weights = weights.to(x.device)  # (up, 2 width + 1)
        windows = torch.nn.functional.pad(x, (width, width)).unfold(-1, 2 * width + 1, 1)
        parts = []  # windows (rows, samples, 2 width + 1): input i and its reach either side
        for start in range(0, n_out, 2**15):
            j = torch.arange(start, min(start + 2**15, n_out), device=x.device)
            parts.append(torch.einsum("rjt,jt->rj", windows[:, j * down // up], weights[j % up]))
        y = torch.cat(parts, dim=-1)  # (rows, n_out)
    return y.reshape(*shape[:-1], n_out)


def _hz_to_mel(hz: torch.Tensor) -> torch.Tensor:
    """Slaney's mel scale (librosa's default, htk=False): linear below 1 kHz (3 mels per 200 Hz),
    logarithmic above (27 mels per factor 6.4)."""
    linear = hz * 3 / 200
    log = 15 + torch.log(hz.clamp(min=1000) / 1000) * 27 / math.log(6.4)
    return torch.where(hz >= 1000, log, linear)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    linear = mel * 200 / 3
    log = 1000 * torch.exp((mel.clamp(min=15) - 15) * math.log(6.4) / 27)
    return torch.where(mel >= 15, log, linear)


def mel_filters(
    n_mels: int = 80,
    n_fft: int = N_FFT,
    sample_rate: int = SAMPLE_RATE,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """(n_mels, bins) triangular filters from 0 Hz to the Nyquist frequency, their centres evenly
    spaced on Slaney's mel scale, each scaled to unit area (2 / its width in Hz): librosa's
    filters.mel(sr, n_fft, n_mels), which Whisper and Hugging Face use. Computed in float64."""
    bins = torch.linspace(0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    top = _hz_to_mel(torch.tensor(sample_rate / 2, dtype=torch.float64))
    edges = _mel_to_hz(torch.linspace(0, float(top), n_mels + 2, dtype=torch.float64))
    lower, centre, upper = edges[:-2, None], edges[1:-1, None], edges[2:, None]  # (n_mels, 1)
    rising = (bins - lower) / (centre - lower)
    falling = (upper - bins) / (upper - centre)
    filters = torch.minimum(rising, falling).clamp(min=0)  # (n_mels, bins)
    return (filters * 2 / (upper - lower)).to(dtype)


def log_mel(
    samples: torch.Tensor, n_mels: int = 80, pad_to: int | None = CHUNK_SAMPLES
) -> torch.Tensor:
    """Whisper's log-mel features (see the module doc): (samples,) -> (n_mels, F), or (B, samples)
    -> (B, n_mels, F) with each clip floored under its own maximum; F = pad_to // 160 (3,000 for
    30 s), or samples // 160 with pad_to=None. float32, on the samples' device."""
    if samples.dim() not in (1, 2):
        raise ValueError(
            f"samples of shape {tuple(samples.shape)}: expected (samples,) or (B, samples)"
        )
    x = samples.float()
    if pad_to is not None:
        n = x.shape[-1]
        x = x[..., :pad_to] if n >= pad_to else torch.nn.functional.pad(x, (0, pad_to - n))
    if x.shape[-1] <= N_FFT // 2:
        raise ValueError(
            f"{x.shape[-1]} samples is too short for a spectrogram: the STFT needs more than "
            f"{N_FFT // 2} (12.5 ms), or pad it (pad_to)"
        )
    window = torch.hann_window(N_FFT, device=x.device)  # periodic
    spectrum = torch.stft(
        x, N_FFT, HOP, window=window, center=True, pad_mode="reflect", return_complex=True
    )  # (..., bins, F + 1)
    power = spectrum[..., :-1].abs() ** 2  # (..., bins, F)
    mel = mel_filters(n_mels, N_FFT, SAMPLE_RATE).to(x.device) @ power  # (..., n_mels, F)
    logs = mel.clamp(min=1e-10).log10()
    peak = logs.amax(dim=(-2, -1), keepdim=True)  # each clip's own maximum
    return (torch.maximum(logs, peak - 8.0) + 4.0) / 4.0
