"""speech: speech recognition with an encoder-decoder over a speech front end (model.audio,
Whisper's shape), by teacher forcing with label-smoothed cross entropy over the transcript's tokens.

The rules:
- Data: data.audio.train / valid are folders that `transformer data speech` writes:
  features.safetensors (`frames` F x n_mels log-mel frames of all clips, float16; `offsets`) and
  transcripts.tsv (`clip<TAB>voice<TAB>text`). A clip longer than model.audio.max_frames, or whose
  transcript has more than data.max_len tokens, is left out (counted).
- Targets: the decoder reads the prompt (the model's start token; a Whisper model's speech.json
  prompt, e.g. <|startoftranscript|> <|notimestamps|>) then the transcript's tokens, and predicts
  the transcript then </s>; the prompt's own next tokens are not scored. Units are target tokens.
- Batches: clips grouped by length, at most train.batch_tokens encoder positions (frames / 2) a
  batch; padded frames are masked, unless the model was trained on whole windows
  (model.audio.pad_to_max: Whisper), where every clip is padded to max_frames with the features of
  silence (the clip's maximum less 2, where Whisper's log-mel clamps). train.pad_to_max overrides
  a pretrained model's setting, and the model written carries the new one.
- Augmentation (data.audio.spec_augment): SpecAugment's masks (Park et al. 2019) on each training
  clip, drawn from the batch's generator: two bands of up to 10 mel channels and two spans of up to
  5% of the frames set to the clip's mean.
- CTC (model.audio.ctc): a linear head on the encoder's positions and CTC's loss of the transcript
  (the padding id its blank), added as (1 - train.ctc_weight) x cross entropy + train.ctc_weight x
  CTC (Kim et al. 2017); it teaches the encoder a monotonic alignment early. Decoding uses it with
  decode.speech_head = "ctc" or "joint" (transformer.decoding.ctc).
- Validation: loss, NLL and perplexity per target token, and the word error rate of greedy
  transcripts of the first train.valid_questions clips (evaluation.overlap.wer), the CTC head's
  best path with decode.speech_head = "ctc"; best/ by WER.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ...config import ConfigError, RunConfig
from ...data.batching import batch_indices, batch_seed, to_device
from ...data.text import DataError
from ...evaluation.transcripts import ctc_wer, greedy_wer
from ...model.build import build_model
from ...model_dir import load_config, load_model, load_tokenizers, save_tokenizers
from ...model_records import load_speech
from .. import distributed as D
from ..loss import label_smoothed_cross_entropy
from .base import BatchCache, Objective, StepSums, autocast, validation_sums
from .encoder import run_tokenizer

FEATURES_FILE, TRANSCRIPTS_FILE = "features.safetensors", "transcripts.tsv"


@dataclass
class SpeechBatch:
    """Features (B, n_mels, F), frame mask (B, F) or None, decoder input and targets (B, T)."""

    features: torch.Tensor
    mask: torch.Tensor | None
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    units: int
    tokens: int
    rows: list[int]
    ctc_targets: torch.Tensor
    """The transcripts' tokens one after another (N,), and each one's length (B,): CTC's targets."""
    ctc_lengths: torch.Tensor

    def to(self, device) -> SpeechBatch:
        move = lambda t: None if t is None else to_device(t, device)  # noqa: E731
        return SpeechBatch(
            move(self.features), move(self.mask), move(self.tgt_in), move(self.tgt_out),
            self.units, self.tokens, self.rows, move(self.ctc_targets), move(self.ctc_lengths),
        )  # fmt: skip


class SpeechCorpus:
    """A folder of `transformer data speech`: every clip's frames and its transcript's tokens."""

    def __init__(self, folder: str, tokenizer, max_frames: int, max_len: int):
        from safetensors.torch import load_file

        path = Path(folder)
        for name in (FEATURES_FILE, TRANSCRIPTS_FILE):
            if not (path / name).is_file():
                raise DataError(
                    f"{folder} has no {name}: give a folder that `transformer data speech` wrote "
                    "(its train/ or valid/)"
                )
        tensors = load_file(str(path / FEATURES_FILE))
        self.frames, offsets = tensors["frames"], tensors["offsets"].tolist()
        rows = (path / TRANSCRIPTS_FILE).read_text(encoding="utf-8").splitlines()
        if len(rows) != len(offsets) - 1:
            raise DataError(
                f"{folder}: {TRANSCRIPTS_FILE} has {len(rows):,} lines for {len(offsets) - 1:,} "
                "clips of features: rebuild it with transformer data speech"
            )
        self.texts = [row.split("\t")[-1] for row in rows]
        targets = tokenizer.encode_batch(self.texts)
        self.spans, self.targets, self.kept_texts, self.dropped = [], [], [], 0
        for i, (text, ids) in enumerate(zip(self.texts, targets, strict=True)):
            start, end = offsets[i], offsets[i + 1]
            if end - start > max_frames or len(ids) + 1 > max_len or end - start < 2:
                self.dropped += 1
                continue
            self.spans.append((start, end))
            self.targets.append(ids)
            self.kept_texts.append(text)
        self.n_frames = np.array([e - s for s, e in self.spans], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.spans)

    def features(self, i: int) -> torch.Tensor:
        """(n_mels, F_i) float32."""
        start, end = self.spans[i]
        return self.frames[start:end].T.float()


def spec_augment(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """SpecAugment's frequency and time masks on one clip (n_mels, F), set to its mean."""
    x = x.clone()
    mels, frames = x.shape
    fill = x.mean()
    for _ in range(2):
        width = int(torch.randint(0, 11, (1,), generator=generator))
        start = int(torch.randint(0, max(1, mels - width), (1,), generator=generator))
        x[start : start + width] = fill
        width = int(torch.randint(0, max(1, frames // 20) + 1, (1,), generator=generator))
        start = int(torch.randint(0, max(1, frames - width), (1,), generator=generator))
        x[:, start : start + width] = fill
    return x


class Speech(Objective):
    """Speech recognition (see the module docstring)."""

    name = "speech"
    best_key, higher_is_better = "valid_wer", False

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        dist: D.DistInfo,
        say: Callable[[str], None],
        resume: bool,
    ):
        super().__init__(config)
        d, init_from = config.data, config.train.init_from
        if init_from and not resume:
            self.tokenizer = load_tokenizers(init_from)[1]
            self.speech = load_speech(init_from)
            if dist.is_main:
                save_tokenizers(run_dir, self.tokenizer, self.tokenizer)
        else:
            self.tokenizer = run_tokenizer(config, run_dir, dist, say, resume)
            self.speech = load_speech(init_from) if init_from else None
        audio = load_config(init_from).audio if init_from else config.model.audio
        if audio is None:
            raise ConfigError(f"train.init_from={init_from} is not a speech model (no model.audio)")
        if config.train.pad_to_max is not None:
            audio = replace(audio, pad_to_max=config.train.pad_to_max)
        self.audio = audio
        if config.decode.speech_head != "decoder" and not audio.ctc:
            raise ConfigError(
                f'decode.speech_head = "{config.decode.speech_head}" needs a CTC head: set '
                "model.audio.ctc = true"
            )
        self.train = SpeechCorpus(d.audio.train, self.tokenizer, audio.max_frames, d.max_len)
        self.valid = (
            SpeechCorpus(d.audio.valid, self.tokenizer, audio.max_frames, d.max_len)
            if d.audio.valid
            else None
        )
        if len(self.train) == 0:
            raise DataError(f"{d.audio.train} has no clip that fits the model: see data.max_len")
        positions = (
            np.full(len(self.train), audio.n_positions)
            if audio.pad_to_max
            else audio.positions_of(self.train.n_frames)
        )
        self.sizes = positions
        self.cache = BatchCache()
        hours = self.train.n_frames.sum() / 100 / 3600
        n_valid = 0 if self.valid is None else len(self.valid)
        say(
            f"data: {len(self.train):,} training clips ({hours:.1f} h) and {n_valid:,} validation "
            f"clips; {self.train.dropped:,} left out (longer than model.audio.max_frames or "
            "data.max_len)"
        )

    # data
    def bind(self, model) -> None:
        super().bind(model)
        cfg = model.config
        record = self.speech or {}
        self.prompt = list(record.get("prompt") or [cfg.start_id])
        # targets nobody scores: padding, unless padding is </s> (Whisper's), then the first
        # prompt token, which is never a target
        self.ignore_id = cfg.pad_id if cfg.pad_id != cfg.eos_id else self.prompt[0]

    def batches(self, epoch):
        return batch_indices(
            self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch
        )

    def padding_share(self, batches):
        if self.audio.pad_to_max:
            return float(1 - self.train.n_frames.mean() / self.audio.max_frames)
        real = padded = 0
        for batch in batches:
            frames = self.train.n_frames[list(batch)]
            real, padded = real + frames.sum(), padded + frames.max() * len(frames)
        return float(1 - real / max(padded, 1))

    def units(self, indices, key):
        return sum(len(self.train.targets[i]) + 1 for i in indices)

    def collate(self, indices, key):
        return self.cache.get(key, lambda: self._batch(self.train, list(indices), key))

    def _batch(self, corpus: SpeechCorpus, indices: list[int], key=None) -> SpeechBatch:
        feats = [corpus.features(i) for i in indices]
        if key is not None and self.config.data.audio.spec_augment:
            generator = torch.Generator().manual_seed(batch_seed(self.config.train.seed, *key))
            feats = [spec_augment(f, generator) for f in feats]
        n_mels = self.audio.n_mels
        width = self.audio.max_frames if self.audio.pad_to_max else max(f.shape[1] for f in feats)
        features = torch.zeros(len(feats), n_mels, width)
        mask = torch.zeros(len(feats), width, dtype=torch.bool)
        for row, f in enumerate(feats):
            features[row, :, : f.shape[1]] = f
            mask[row, : f.shape[1]] = True
            if self.audio.pad_to_max:  # Whisper pads its audio with silence, which its log-mel
                features[row, :, f.shape[1] :] = f.max() - 2.0  # clamps to 8 (/ 4) below the max
        targets = [corpus.targets[i] for i in indices]
        cfg = self.model_config
        p = len(self.prompt)
        length = p + max(len(t) for t in targets)
        tgt_in = torch.full((len(targets), length), cfg.pad_id, dtype=torch.long)
        tgt_out = torch.full((len(targets), length), self.ignore_id, dtype=torch.long)
        for row, ids in enumerate(targets):
            tgt_in[row, : p + len(ids)] = torch.tensor(self.prompt + ids, dtype=torch.long)
            tgt_out[row, p - 1 : p + len(ids)] = torch.tensor(ids + [cfg.eos_id], dtype=torch.long)
        units = sum(len(t) + 1 for t in targets)
        positions = self.audio.positions_of(width) * len(feats)
        ctc_targets = torch.tensor([t for ids in targets for t in ids], dtype=torch.long)
        ctc_lengths = torch.tensor([len(ids) for ids in targets], dtype=torch.long)
        return SpeechBatch(
            features, None if self.audio.pad_to_max else mask, tgt_in, tgt_out, units,
            positions + units, indices, ctc_targets, ctc_lengths,
        )  # fmt: skip

    @property
    def has_valid(self):
        return self.valid is not None and len(self.valid) > 0

    def attention_shape(self):
        length = int(np.median(self.sizes)) if len(self.sizes) else 1
        return max(1, self.config.train.batch_tokens // length), length

    def valid_batches(self):
        per = max(1, self.config.train.batch_tokens // max(1, int(self.sizes.max())))
        order = np.argsort(self.valid.n_frames, kind="stable")
        for start in range(0, len(order), per):
            yield self._batch(self.valid, order[start : start + per].tolist())

    # model
    def new_model(self):
        if self.config.train.init_from:
            model = load_model(self.config.train.init_from)
            model.config = model.config.replace(audio=self.audio)  # train.pad_to_max
            return model
        cfg = self.config.model.replace(vocab_size=self.tokenizer.vocab_size)
        return build_model(cfg)

    def loss(self, net, model, batch, device):
        weight = self.config.train.ctc_weight if model.ctc_head is not None else 0.0
        with autocast(device, self.config.train.precision):
            if weight:
                logits, ctc_logits, positions = net(
                    batch.features, batch.tgt_in, src_mask=batch.mask, ctc=True
                )  # (B, T, V), (B, L, V), (B, L) or None
            else:
                logits = net(batch.features, batch.tgt_in, src_mask=batch.mask)  # (B, T, V)
        out = label_smoothed_cross_entropy(
            logits, batch.tgt_out, self.config.train.label_smoothing, self.ignore_id, batch.units,
            consume_logits=True,
        )  # fmt: skip
        loss = out.loss
        if weight:
            loss = (1 - weight) * loss + weight * self.ctc_loss(ctc_logits, positions, batch)
        return StepSums(loss, out.nll, out.n_tokens, batch.tokens)

    def ctc_loss(self, logits: torch.Tensor, positions: torch.Tensor | None, batch) -> torch.Tensor:
        """CTC's negative log-likelihood of each transcript over the encoder's positions, summed
        (about a sum over the transcript's tokens, as the cross entropy is); the padding id is the
        blank."""
        b, length, _ = logits.shape
        lengths = (
            torch.full((b,), length, dtype=torch.long, device=logits.device)
            if positions is None
            else positions.sum(-1)
        )
        log_probs = torch.log_softmax(logits.float(), dim=-1).transpose(0, 1)  # (L, B, V)
        return torch.nn.functional.ctc_loss(
            log_probs, batch.ctc_targets, lengths, batch.ctc_lengths,
            blank=self.model_config.pad_id, reduction="sum", zero_infinity=True,
        )  # fmt: skip

    def validate(self, model, device):
        result = validation_sums(self, model, device, self.valid_batches())
        result["valid_wer"] = self.valid_wer(model, device)
        return result

    def valid_wer(self, model, device) -> float:
        """WER of the greedy transcripts of the first train.valid_questions validation clips (the
        CTC head's best path with decode.speech_head = "ctc"; the decoder's greedy search
        otherwise, "joint" too: a beam search would cost the run's minutes)."""
        n = min(len(self.valid), self.config.train.valid_questions or len(self.valid))
        per = max(1, self.config.train.batch_tokens // max(1, int(self.sizes.max())))

        def batches():
            for start in range(0, n, per):
                b = self._batch(self.valid, list(range(start, min(n, start + per)))).to(device)
                yield b.features, b.mask

        if self.config.decode.speech_head == "ctc":
            with autocast(device, self.config.train.precision):
                return ctc_wer(model, batches(), self.valid.kept_texts[:n], self.tokenizer.decode)
        record = self.speech or {}
        return greedy_wer(
            model, batches(), self.valid.kept_texts[:n], self.tokenizer.decode, self.prompt,
            record.get("suppress_tokens", []), record.get("begin_suppress_tokens", []),
            self.config.data.max_len,
        )  # fmt: skip

    def describe(self, result):
        return (
            f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}  "
            f"WER {result['valid_wer']:.2f}"
        )

    def save_files(self):
        speech = self.speech or {"prompt": self.prompt}
        return {"tokenizer": self.tokenizer, "decode": self.config.decode, "speech": speech}
