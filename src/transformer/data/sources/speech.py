"""`transformer data speech`: synthetic English speech from real text, for training a speech model
where no recorded corpus can be downloaded. Bible verses (KJV, read with pysword) are cut into
clauses and spoken by Debian's two synthesisers, espeak-ng (accents x voice variants) and flite
(its voices kal, awb, rms, slt), with speed, pitch and noise varied.

The rules:
- Text: every verse cut at , ; : . ? ! into clauses of MIN_WORDS..MAX_WORDS words (shorter pieces
  join the next). The transcript is what is heard: lowercased, letters, digits and inner
  apostrophes only (the synthesisers do not speak punctuation).
- Splits hold whole chapters (sha256 of book.chapter): VALID_PERCENT valid, TEST_PERCENT test.
- Voices are held out too: the test split is spoken only by TEST_VOICES (an accent and a flite
  voice training never hears), the validation split only by VALID_VOICES, training by the rest.
  A voice is an espeak-ng accent with one of its variants, or a flite voice.
- Each clip draws (from a generator seeded by --seed and the clip's number) its engine (flite for
  FLITE_SHARE of the clips), its voice, a speed
  (espeak-ng 130-210 words a minute; flite a duration stretch 0.8-1.25), a pitch (espeak-ng 25-75;
  flite a mean F0 around the voice's) and, for half the clips, white noise at 15-40 dB SNR.
- Audio is read back at 16 kHz (data.audio resamples espeak-ng's 22.05 kHz).
- Writes OUT/train/ and OUT/valid/ as features (Whisper's 80-band log-mel, float16:
  features.safetensors holds `frames` (all clips' frames, F x 80) and `offsets` (N + 1)) with
  transcripts.tsv (`clip<TAB>voice<TAB>text`); OUT/test/ as WAV files with transcripts.tsv
  (`file.wav<TAB>text`, what `evaluate --audio` reads); OUT/test-real/ the real recordings of
  Debian's pocketsphinx-testdata (LibriVox and spoken card names, when it is installed); and
  OUT/PROVENANCE.md. Each file is written to a temporary file and renamed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from ...files import atomic_write, atomic_write_text
from ..audio import HOP, SAMPLE_RATE, log_mel, read_wav_bytes
from ..text import DataError
from .splits import SPLITS, check_out, split_of

MIN_WORDS, MAX_WORDS = 5, 20
FLITE_SHARE = 0.25
"""The share of clips flite speaks (it has 4 voices, espeak-ng hundreds of accent x variant)."""
VALID_PERCENT, TEST_PERCENT = 3.0, 3.0
ESPEAK_ACCENTS = (
    "en-us", "en-gb", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-gb-x-gbcwmd", "en-029",
)  # fmt: skip
FLITE_VOICES = ("kal", "awb", "rms", "slt")
TEST_VOICES = ("espeak-ng en-029", "flite slt")
VALID_VOICES = ("espeak-ng en-gb-x-gbcwmd", "flite rms")
FLITE_F0 = {"kal": 105, "awb": 110, "rms": 105, "slt": 170}
POCKETSPHINX = Path("/usr/share/pocketsphinx/test/data")
INSTALL = "apt-get install espeak-ng flite"


@dataclass(frozen=True)
class Clip:
    """One utterance to synthesise."""

    number: int
    text: str
    """What is spoken (the verse's words as written)."""
    transcript: str
    """What is heard (normalised, see the module's rules)."""
    split: str


def heard(text: str) -> str:
    """Lowercased; letters, digits and apostrophes inside words kept; the rest a space."""
    text = re.sub(r"[^\w']+", " ", text.lower().replace("’", "'")).replace("_", " ")
    return " ".join(w.strip("'") for w in text.split() if w.strip("'"))


def clauses(verse: str) -> list[str]:
    """A verse cut into clauses of MIN_WORDS..MAX_WORDS words (see the module's rules)."""
    out, current = [], []
    for piece in re.split(r"(?<=[,;:.?!])\s+", " ".join(verse.split())):
        current += piece.split()
        if len(current) >= MIN_WORDS:
            while len(current) > MAX_WORDS:
                out.append(" ".join(current[:MAX_WORDS]))
                current = current[MAX_WORDS:]
            if len(current) >= MIN_WORDS:
                out.append(" ".join(current))
                current = []
    if current and out and len(out[-1].split()) + len(current) <= MAX_WORDS:
        out[-1] += " " + " ".join(current)
    return out


def voices() -> dict[str, list[str]]:
    """{split: voices}: espeak-ng accents x its installed variants, and flite's voices."""
    variants = espeak_variants()
    every = [
        f"espeak-ng {a}+{v}" if v else f"espeak-ng {a}" for a in ESPEAK_ACCENTS for v in variants
    ]
    every += [f"flite {v}" for v in FLITE_VOICES]

    def held(voice: str, names: tuple[str, ...]) -> bool:
        return any(voice == n or voice.startswith(n + "+") for n in names)

    return {
        "test": [v for v in every if held(v, TEST_VOICES)],
        "valid": [v for v in every if held(v, VALID_VOICES)],
        "train": [v for v in every if not held(v, TEST_VOICES + VALID_VOICES)],
    }


def espeak_variants() -> list[str]:
    """ "" (the accent's own voice) and the variants espeak-ng lists."""
    out = subprocess.run(["espeak-ng", "--voices=variant"], capture_output=True, text=True).stdout
    files = [line.split()[4] for line in out.splitlines()[1:] if len(line.split()) > 4]
    return ["", *sorted({f.split("/")[-1] for f in files})]


def check_tools() -> None:
    missing = [tool for tool in ("espeak-ng", "flite") if shutil.which(tool) is None]
    if missing:
        raise DataError(f"{' and '.join(missing)} not found: {INSTALL}")


def synthesise(voice: str, text: str, generator: torch.Generator) -> torch.Tensor:
    """16 kHz samples of `text` spoken by `voice`, with a speed and pitch drawn from generator."""
    engine, name = voice.split(" ", 1)
    u = torch.rand(2, generator=generator).tolist()
    if engine == "espeak-ng":
        speed, pitch = 130 + int(80 * u[0]), 25 + int(50 * u[1])
        command = ["espeak-ng", "-v", name, "-s", str(speed), "-p", str(pitch), "--stdout", text]
        result = subprocess.run(command, capture_output=True, check=False)
        data = result.stdout
    else:
        stretch, f0 = 0.8 + 0.45 * u[0], FLITE_F0[name] * (0.85 + 0.3 * u[1])
        with tempfile.TemporaryDirectory() as tmp:
            wav = Path(tmp) / "clip.wav"
            command = ["flite", "-voice", name, "--setf", f"duration_stretch={stretch:.3f}",
                       "--setf", f"int_f0_target_mean={f0:.0f}",
                       "-t", text, "-o", str(wav)]  # fmt: skip
            result = subprocess.run(command, capture_output=True, check=False)
            data = wav.read_bytes() if wav.is_file() else b""
    if result.returncode != 0 or not data:
        raise DataError(f"{engine} failed on voice {name}: {result.stderr.decode()[:200].strip()}")
    return read_wav_bytes(data, f"{engine} output")


def add_noise(samples: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Half the clips get white noise at 15-40 dB SNR."""
    if torch.rand(1, generator=generator).item() < 0.5 or len(samples) == 0:
        return samples
    snr = 15 + 25 * torch.rand(1, generator=generator).item()
    power = samples.pow(2).mean().clamp(min=1e-10)
    noise = torch.randn(len(samples), generator=generator) * (power / 10 ** (snr / 10)).sqrt()
    return (samples + noise).clamp(-1, 1)


def render(clip: Clip, voice_list: list[str], seed: int) -> tuple[str, torch.Tensor]:
    """(voice, 16 kHz samples) of one clip; everything random drawn from (seed, clip number)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + clip.number)
    engine = "flite" if torch.rand(1, generator=generator).item() < FLITE_SHARE else "espeak-ng"
    choices = [v for v in voice_list if v.startswith(engine + " ")] or voice_list
    voice = choices[int(torch.randint(len(choices), (1,), generator=generator))]
    return voice, add_noise(synthesise(voice, clip.text, generator), generator)


def read_clips(
    counts: dict[str, int], sword_dir: str | os.PathLike | None, seed: int
) -> dict[str, list[Clip]]:
    """{split: clips}: counts[split] clauses drawn from that split's chapters (all when fewer)."""
    from .bible.sword import read_module

    verses, _ = read_module("kjv", sword_dir)
    pools: dict[str, list[str]] = {name: [] for name in SPLITS}
    for (book, chapter, _), text in verses.items():
        split = split_of(f"{book}.{chapter}", VALID_PERCENT, TEST_PERCENT)
        pools[split] += [c for c in clauses(text) if heard(c)]
    generator = torch.Generator().manual_seed(seed)
    out, number = {}, 0
    for name in SPLITS:
        pool = pools[name]
        order = torch.randperm(len(pool), generator=generator)[: counts[name]].tolist()
        out[name] = []
        for i in order:
            out[name].append(Clip(number, pool[i], heard(pool[i]), name))
            number += 1
    return out


def features_of(samples: torch.Tensor) -> torch.Tensor:
    """(F, 80) float16 log-mel frames of one clip, as train/ and valid/ store them."""
    return log_mel(samples, pad_to=None).T.to(torch.float16)


def _features_split(
    out: Path, clips: list[Clip], rendered: list[tuple[str, torch.Tensor]]
) -> float:
    """OUT/{split}/features.safetensors + transcripts.tsv (rendered: each clip's voice and (F, 80)
    frames); returns the seconds of audio."""
    from safetensors.torch import save_file

    feats = [frames for _, frames in rendered]
    offsets = torch.tensor([0] + [len(f) for f in feats]).cumsum(0)
    frames = torch.cat(feats) if feats else torch.zeros(0, 80, dtype=torch.float16)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(
        out / "features.safetensors",
        lambda tmp: save_file({"frames": frames.contiguous(), "offsets": offsets}, tmp),
    )
    lines = [
        f"{c.number}\t{v}\t{c.transcript}\n" for c, (v, _) in zip(clips, rendered, strict=True)
    ]
    atomic_write_text(out / "transcripts.tsv", "".join(lines))
    return int(offsets[-1]) * HOP / SAMPLE_RATE


def write_wav(path: Path, samples: torch.Tensor) -> None:
    """16-bit mono 16 kHz WAV, atomically."""
    import wave

    pcm = (samples.clamp(-1, 1) * 32767).round().to(torch.int16).numpy().tobytes()

    def write(tmp: str) -> None:
        with wave.open(tmp, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(pcm)

    atomic_write(path, write)


def _wav_split(out: Path, clips: list[Clip], rendered: list[tuple[str, torch.Tensor]]) -> float:
    out.mkdir(parents=True, exist_ok=True)
    for clip, (_, samples) in zip(clips, rendered, strict=True):
        write_wav(out / f"{clip.number:06d}.wav", samples)
    lines = [f"{c.number:06d}.wav\t{c.transcript}\n" for c in clips]
    atomic_write_text(out / "transcripts.tsv", "".join(lines))
    voices_used = [f"{c.number:06d}.wav\t{v}\n" for c, (v, _) in zip(clips, rendered, strict=True)]
    atomic_write_text(out / "voices.tsv", "".join(voices_used))
    return sum(len(s) for _, s in rendered) / SAMPLE_RATE


def copy_real(out: Path, source: Path = POCKETSPHINX) -> int:
    """OUT (test-real/): pocketsphinx-testdata's LibriVox and card clips with their transcripts;
    0 when the package is not installed."""
    rows = []
    for folder, table in (("librivox", "transcription"), ("cards", "cards.transcription")):
        path = source / folder / table
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            m = re.match(r"\s*<s>(.*)</s>\s*\((\S+)\)", line)
            if m and (source / folder / f"{m.group(2)}.wav").is_file():
                rows.append((folder, m.group(2), " ".join(m.group(1).split())))
    if not rows:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    for folder, name, _ in rows:
        shutil.copyfile(source / folder / f"{name}.wav", out / f"{folder}-{name}.wav")
    atomic_write_text(out / "transcripts.tsv", "".join(f"{f}-{n}.wav\t{t}\n" for f, n, t in rows))
    return len(rows)


def build_speech_corpus(
    out_dir: str | os.PathLike,
    counts: dict[str, int],
    seed: int = 1,
    sword_dir: str | os.PathLike | None = None,
    workers: int = 2,
) -> dict:
    """Write the corpus (see the module docstring); return what was written."""
    out = check_out(out_dir, "speech corpus")
    check_tools()
    clips = read_clips(counts, sword_dir, seed)
    split_voices = voices()
    report: dict = {
        "clips": {},
        "seconds": {},
        "voices": {k: len(v) for k, v in split_voices.items()},
    }
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for name in SPLITS:
            as_wav = name == "test"

            def one(clip: Clip, voices_of=split_voices[name], as_wav=as_wav):
                voice, samples = render(clip, voices_of, seed)
                return voice, (samples if as_wav else features_of(samples))  # 1/8 the bytes

            rendered = list(pool.map(one, clips[name]))
            write = _wav_split if as_wav else _features_split
            report["seconds"][name] = write(out / name, clips[name], rendered)
            report["clips"][name] = len(clips[name])
            report.setdefault("engines", {})[name] = dict(
                Counter(v.split()[0] for v, _ in rendered)
            )
    report["real"] = copy_real(out / "test-real")
    atomic_write_text(out / "PROVENANCE.md", provenance(report, seed))
    return report


def provenance(report: dict, seed: int) -> str:
    engines = {
        name: ", ".join(f"{k} {v:,}" for k, v in report["engines"][name].items()) for name in SPLITS
    }
    rows = "\n".join(
        f"| {name} | {report['clips'][name]:,} | {report['seconds'][name] / 3600:.2f} | "
        f"{report['voices'][name]} | {engines[name]} |"
        for name in SPLITS
    )
    real = (
        f"test-real/: {report['real']} recordings of Debian's pocketsphinx-testdata (LibriVox, "
        "public domain; spoken card names), with their transcripts."
        if report["real"]
        else "test-real/ was not written: apt-get install pocketsphinx-testdata for real speech."
    )
    return f"""# Synthetic speech from the King James Bible

Built by `transformer data speech` (seed {seed}): KJV verses (public domain, SWORD module KJV)
cut into clauses and spoken by espeak-ng (accents {", ".join(ESPEAK_ACCENTS)} with its voice
variants) and flite (voices {", ".join(FLITE_VOICES)}), with speed, pitch and noise varied.
Chapters and voices are held out: validation is spoken only by {", ".join(VALID_VOICES)}, test only
by {", ".join(TEST_VOICES)}.

| split | clips | hours | voices | engines |
|---|---|---|---|---|
{rows}

Transcripts are what is heard: lowercased, without punctuation. train/ and valid/ hold log-mel
features (features.safetensors); test/ holds WAV files for `transformer evaluate --audio`.
{real}
"""
