"""What a run learns: each objective's data, batches, model, loss and validation, behind one interface
that the loop (trainer.py) drives.

- seq2seq (translation, §5) and lm (next token): teacher forcing, label-smoothed cross entropy over
  target tokens; validation loss, perplexity and (translation) greedy BLEU; best/ by loss.
- mlm (BERT's masked-LM): [CLS] text [SEP], tokens chosen and corrupted as data.noising says,
  cross entropy on the chosen positions only; validation on a fixed masking of the validation
  texts: loss, perplexity and masked-token accuracy; best/ by loss.
- classify: [CLS] text [SEP] -> pooled -> classes, cross entropy per text; validation accuracy and
  macro-F1; best/ by accuracy.
- span_corruption (T5's pretraining): each text's noise spans replaced by sentinels in the input,
  the target the sentinels with the spans they hide (data.noising), then as seq2seq; validation
  on a fixed corruption of the validation texts: loss and perplexity; best/ by loss.

The loss is summed over a step's units (target tokens, chosen tokens or texts) and divided by
their count over the whole step (all accumulated batches, all processes). Masking draws from a
generator seeded by (seed, epoch, batch), never the global one, so a resumed run masks as the
uninterrupted one did.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..config import OBJECTIVE_ARCHS, ConfigError, RunConfig
from ..data.batching import Batch, Example, batch_indices, collate, pad_rows, padding_share
from ..data.images import augment, load_images, to_pixels
from ..data.noising import IGNORE, corrupt_spans, mask_tokens, noise_counts, span_corruption_lengths
from ..data.text import DataError, iter_labelled
from ..data.tokenizer import SENTINEL, EncoderTokens, Tokenizer
from ..evaluation.metrics import classification_scores
from ..model.io import load_config, load_model
from ..model.transformer import EncoderOnly, Model, build_model, tie_weights
from ..model_dir import load_labels, load_special_tokens
from . import distributed as D
from .checkpoint import step_dirs
from .corpora import TrainingData, prepare_data, run_tokenizers
from .loss import label_smoothed_cross_entropy
from .validation import evaluate_bleu


def autocast(device: torch.device, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


@dataclass
class StepSums:
    """A batch's summed loss (to optimise) and NLL (to report), the units they are summed over, and
    the input tokens it processed (for tokens/s)."""

    loss: torch.Tensor
    nll: torch.Tensor
    units: int
    tokens: int
    logits: torch.Tensor | None = None
    """mlm and classify: the (detached) logits the loss was taken on, for validation's accuracy."""


class Objective:
    """The interface the loop uses; see the module doc for the four objectives."""

    name = ""
    best_key, higher_is_better = "valid_loss", False

    def __init__(self, config: RunConfig):
        self.config = config
        self.model_config = None  # set by bind(), once the model exists

    # data
    def batches(self, epoch: int) -> Sequence[list[int]]:
        raise NotImplementedError

    def padding_share(self, batches: Sequence[list[int]]) -> float:
        raise NotImplementedError

    def units(self, indices: list[int], key: tuple[int, int]) -> int:
        """What the loss of this batch is summed over; key = (epoch, batch number) as given to collate."""
        raise NotImplementedError

    def collate(self, indices: list[int], key: tuple[int, int]):
        raise NotImplementedError

    def attention_shape(self) -> tuple[int, int]:
        """(rows, positions) of a typical training batch: where attention_impl = "auto" is measured
        (here from `sizes`, the padded row of each example, which the token-batched objectives keep)."""
        return typical_shape(self.sizes, self.config.train.batch_tokens)

    @property
    def has_valid(self) -> bool:
        raise NotImplementedError

    # model
    def new_model(self) -> Model:
        """A fresh model for the run, or the one train.init_from names (with a new head where the objective needs one)."""
        raise NotImplementedError

    def bind(self, model: Model) -> None:
        self.model_config = model.config

    def loss(self, net: torch.nn.Module, model: Model, batch, device: torch.device) -> StepSums:
        raise NotImplementedError

    def validate(self, model: Model, device: torch.device) -> dict[str, float]:
        raise NotImplementedError

    def describe(self, result: dict[str, float]) -> str:
        return f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}"

    def improved(self, result: dict[str, float], best: float | None) -> bool:
        value = result[self.best_key]
        return best is None or (value > best if self.higher_is_better else value < best)

    def save_files(self) -> dict:
        """What save_model writes besides the weights: tokenizer(s) and the objective's records."""
        raise NotImplementedError


def typical_shape(sizes, batch_tokens: int) -> tuple[int, int]:
    """The median padded row length of token-count batches, and how many such rows a batch holds."""
    length = max(1, int(np.median(np.asarray(sizes)))) if len(sizes) else 1
    return max(1, batch_tokens // length), length


def prepare_objective(config: RunConfig, run_dir: Path, dist: D.DistInfo, say: Callable[[str], None],
                      resume: bool = False) -> Objective:
    """The run's objective with its data prepared (tokenizers trained or loaded, corpora built)."""
    objective = config.objective
    if config.train.init_from and not resume:
        _check_init_from(config)
    if objective == "classify" and config.data.train_images:
        return ImageClassify(config, run_dir, say, resume)
    if objective == "classify":
        return Classify(config, run_dir, dist, say, resume)
    data = prepare_data(config, run_dir, dist, say, resume)
    if objective == "span_corruption":
        return SpanCorruption(config, data)
    return MaskedLM(config, data, _init_dir(config, run_dir, resume)) if objective == "mlm" else Seq2Seq(config, data)


def _check_init_from(config: RunConfig) -> None:
    """init_from must be a model of the family the objective trains."""
    cfg = load_config(config.train.init_from)
    needs = OBJECTIVE_ARCHS[config.objective]
    if cfg.arch != needs:
        raise ConfigError(f"train.init_from={config.train.init_from} is an arch={cfg.arch!r} model: objective "
                          f"{config.objective!r} needs arch={needs!r}")


# ------------------------------------------------------------------------------------------------
# seq2seq and lm


class Seq2Seq(Objective):
    """Translation (encoder-decoder) or next-token language modelling (decoder-only)."""

    def __init__(self, config: RunConfig, data: TrainingData):
        super().__init__(config)
        self.name = config.objective
        self.data = data

    def batches(self, epoch):
        return self.data.train_batches(epoch)

    def attention_shape(self):
        return typical_shape(self.data.train.sizes, self.config.train.batch_tokens)

    def padding_share(self, batches):
        return self.data.padding_share(batches)

    def units(self, indices, key):
        return self.data.target_tokens(indices, epoch=key[0])

    def collate(self, indices, key):
        return self.data.collate(indices, self.model_config, epoch=key[0])

    @property
    def has_valid(self):
        return bool(self.data.valid)

    def new_model(self):
        if self.config.train.init_from:
            return load_model(self.config.train.init_from)
        data = self.data
        cfg = self.config.model.replace(vocab_size=data.source_tokenizer.vocab_size,
                                        tgt_vocab_size=None if data.shared else data.target_tokenizer.vocab_size)
        return build_model(cfg)

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = _forward(net, batch)
        out = label_smoothed_cross_entropy(logits, batch.tgt_out, self.config.train.label_smoothing, model.config.pad_id)
        return StepSums(out.loss, out.nll, out.n_tokens, out.n_tokens)

    def validate(self, model, device):
        result = self._valid_loss(model, device, self.data.valid_batches(self.config.train.batch_tokens, model.config))
        return {**result, **evaluate_bleu(model, self.data, self.config)}

    @torch.no_grad()
    def _valid_loss(self, model, device, batches) -> dict[str, float]:
        """Loss, NLL and perplexity per target token over validation batches, in eval mode."""
        was_training = model.training
        model.eval()
        loss = nll = tokens = 0.0
        for batch in batches:
            out = self.loss(model, model, batch.to(device), device)
            loss, nll, tokens = loss + out.loss.item(), nll + out.nll.item(), tokens + out.units
        model.train(was_training)
        return {"valid_loss": loss / tokens, "valid_nll": nll / tokens, "valid_ppl": math.exp(min(nll / tokens, 50.0))}

    def describe(self, result):
        scores = f"  BLEU {result['valid_bleu']:.2f}  exact {result['valid_exact']:.1%}" if "valid_bleu" in result else ""
        return f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  ppl {result['valid_ppl']:.2f}{scores}"

    def save_files(self):
        return {"tokenizer": self.data.tokenizers, "decode": self.config.decode}


def sentinel_ids(tokenizer: Tokenizer) -> list[int]:
    """The tokenizer's sentinels <extra_id_0>, <extra_id_1>, ... in order (as many as it has)."""
    ids = []
    while (i := tokenizer.token_to_id(SENTINEL.format(len(ids)))) is not None:
        ids.append(i)
    return ids


class SpanCorruption(Seq2Seq):
    """T5's span-corruption pretraining of an encoder-decoder on one text per line (data.train_text).

    Each text is corrupted afresh every epoch (a generator seeded by seed, epoch and batch, so a
    resumed run corrupts as the uninterrupted one did); batches are formed by the corrupted lengths,
    which follow from each text's length (noising.span_corruption_lengths)."""

    name = "span_corruption"

    def __init__(self, config: RunConfig, data: TrainingData):
        super().__init__(config, data)
        self.sentinels = sentinel_ids(data.target_tokenizer)
        t = config.train
        longest = max(int(data.train.tgt_lengths.max()) if len(data.train) else 0, config.data.max_len)
        needed = noise_counts(longest, t.noise_density, t.mean_span)[1]  # the spans of the longest text
        if len(self.sentinels) < needed:
            raise ConfigError(f"span corruption of texts up to {longest} tokens needs {needed} sentinel tokens "
                              f"({SENTINEL.format(0)} ...) but the tokenizer has {len(self.sentinels)}: train it here "
                              "with objective span_corruption (data.sentinels), or lower data.max_len")
        lengths = [span_corruption_lengths(int(n), t.noise_density, t.mean_span) for n in data.train.tgt_lengths]
        self.sizes = np.array([max(i, o + 1) for i, o in lengths], dtype=np.int64)
        self._cache: dict[tuple[int, int], Batch] = {}
        gen = torch.Generator().manual_seed(0)  # one fixed corruption of the validation texts
        self.valid = [self._corrupt(e.tgt, gen) for e in data.valid]

    def _corrupt(self, ids: list[int], generator: torch.Generator) -> Example:
        t = self.config.train
        inputs, targets = corrupt_spans(ids, self.sentinels, generator, t.noise_density, t.mean_span)
        return Example(inputs, targets)

    def batches(self, epoch):
        return batch_indices(self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch)

    def attention_shape(self):
        return typical_shape(self.sizes, self.config.train.batch_tokens)

    def padding_share(self, batches):
        return padding_share(batches, self.sizes)

    def _batch(self, examples: list[Example]) -> Batch:
        m = self.model_config
        return collate(examples, m.pad_id, m.start_id, m.eos_id)

    def collate(self, indices, key):
        if key not in self._cache:
            if len(self._cache) > 64:  # only the current step's batches are ever asked for again
                self._cache.clear()
            gen = torch.Generator().manual_seed((self.config.train.seed * 1_000_003 + key[0]) * 1_000_003 + key[1])
            self._cache[key] = self._batch([self._corrupt(self.data.train[i].tgt, gen) for i in indices])
        return self._cache[key]

    def units(self, indices, key):
        return self.collate(indices, key).n_tokens  # each target and its </s>

    def validate(self, model, device):
        sizes = [e.size for e in self.valid]
        return self._valid_loss(model, device, (self._batch([self.valid[i] for i in indices]) for indices in
                                                batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False)))

    def describe(self, result):
        return f"valid loss {result['valid_loss']:.4f}  nll {result['valid_nll']:.4f}  ppl {result['valid_ppl']:.2f}"

    def save_files(self):
        return {**super().save_files(),
                "special_tokens": {"sentinels": " ".join(SENTINEL.format(k) for k in range(len(self.sentinels)))}}


def _forward(model: torch.nn.Module, batch) -> torch.Tensor:
    """Logits (B, T, V) for a batch (teacher forcing)."""
    if batch.src is not None:
        return model(batch.src, batch.tgt_in, src_mask=batch.src_mask)
    return model(batch.tgt_in)


# ------------------------------------------------------------------------------------------------
# The encoder family


@dataclass
class EncoderBatch:
    """[CLS] text [SEP] rows, right-padded: ids and mask (B, L); MLM labels (B, L) or class labels (B,)."""

    ids: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> EncoderBatch:
        return EncoderBatch(self.ids.to(device), self.mask.to(device), self.labels.to(device), self.units, self.tokens)


def encoder_model(config: RunConfig, tokenizer: Tokenizer, tokens: EncoderTokens, heads: dict) -> EncoderOnly:
    """A fresh encoder from [model] with these heads, or train.init_from's encoder under them (see pretrained_under)."""
    init_from = config.train.init_from
    if init_from is None:
        cfg = config.model.replace(vocab_size=tokenizer.vocab_size, pad_id=tokens.pad, bos_id=tokens.cls,
                                   eos_id=tokens.sep, **heads)
        return build_model(cfg)
    init = load_model(init_from)
    if tokenizer.vocab_size > init.config.vocab_size:
        raise ConfigError(f"train.init_from={init_from}: its tokenizer has {tokenizer.vocab_size:,} tokens but the model's "
                          f"vocab_size is {init.config.vocab_size:,}: the tokenizer and weights do not belong together")
    return pretrained_under(init, heads, init_from)


def pretrained_under(init: EncoderOnly, heads: dict, init_from: str) -> EncoderOnly:
    """The pretrained encoder `init` rebuilt with these heads: every tensor the new model has under the
    same name is copied (a shape mismatch is an error), except a classifier's, which is always new
    (so are heads the pretrained model lacks)."""
    model = build_model(init.config.replace(**heads))
    theirs, mine = init.state_dict(), model.state_dict()
    copied = {name: tensor for name, tensor in theirs.items()
              if name in mine and not name.startswith("pooler.classifier.")}
    for name, tensor in copied.items():
        if tensor.shape != mine[name].shape:
            raise ConfigError(f"train.init_from={init_from}: {name} has shape {tuple(tensor.shape)}, the new model "
                              f"{tuple(mine[name].shape)}")
    model.load_state_dict(copied, strict=False)
    tie_weights(model)
    return model


class _EncoderObjective(Objective):
    def __init__(self, config: RunConfig, tokenizer: Tokenizer, init_dir: Path | None):
        super().__init__(config)
        self.tokenizer = tokenizer
        self.tokens = EncoderTokens(tokenizer, load_special_tokens(init_dir) if init_dir else None)

    def save_files(self):
        return {"tokenizer": self.tokenizer, "decode": self.config.decode, "special_tokens": self.tokens.record()}


def _init_dir(config: RunConfig, run_dir: Path, resume: bool) -> Path | None:
    """Where the run's special-token record comes from: the pretrained model's (init_from), or the
    newest checkpoint's on resume; None: the tokenizer was trained here with ENCODER_SPECIALS."""
    if resume and step_dirs(run_dir):
        return step_dirs(run_dir)[-1]
    return Path(config.train.init_from) if config.train.init_from else None


class MaskedLM(_EncoderObjective):
    """BERT's masked-LM pretraining on one text per line (data.train_text)."""

    name = "mlm"

    def __init__(self, config: RunConfig, data: TrainingData, init_dir: Path | None = None):
        super().__init__(config, data.target_tokenizer, init_dir)
        if self.tokens.mask is None:
            raise ConfigError("the tokenizer has no [MASK] token: masked-LM pretraining needs one "
                              "(train the tokenizer here, or start from a BERT-style model)")
        self.data = data
        self.sizes = data.train.sizes + 1  # [CLS] ids [SEP]: one more than the corpus's <s> ids
        self.special = torch.tensor(sorted(self.tokens.ids))
        self._cache: dict[tuple[int, int], EncoderBatch] = {}

    def batches(self, epoch):
        return batch_indices(self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch)

    def padding_share(self, batches):
        return padding_share(batches, self.data.train.tgt_lengths + 1)

    def _mask(self, rows: list[list[int]], seed: int) -> EncoderBatch:
        ids, mask = pad_rows([self.tokens.wrap(r) for r in rows], self.tokens.pad)
        generator = torch.Generator().manual_seed(seed)
        vocab = self.model_config.vocab_size if self.model_config else self.tokenizer.vocab_size
        inputs, labels = mask_tokens(ids, self.special, self.tokens.mask, vocab, self.config.train.mlm_probability,
                                     generator)
        return EncoderBatch(inputs, mask, labels, int((labels != IGNORE).sum()), int(mask.sum()))

    def collate(self, indices, key):
        if key not in self._cache:
            if len(self._cache) > 64:  # only the current step's batches are ever asked for again
                self._cache.clear()
            seed = (self.config.train.seed * 1_000_003 + key[0]) * 1_000_003 + key[1]
            self._cache[key] = self._mask([self.data.train[i].tgt for i in indices], seed)
        return self._cache[key]

    def units(self, indices, key):
        return self.collate(indices, key).units

    @property
    def has_valid(self):
        return bool(self.data.valid)

    def new_model(self):
        return encoder_model(self.config, self.tokenizer, self.tokens, dict(mlm_head=True, pooler=False, n_classes=0))

    def loss(self, net, model, batch, device):
        chosen = batch.labels != IGNORE  # (B, L)
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask)  # (B, L, C)
            logits = model.mlm_head(hidden[chosen])  # (N, V): the head runs on the chosen positions only
        target = batch.labels[chosen]
        nll = F.cross_entropy(logits.float(), target, reduction="sum")
        eps = self.config.train.label_smoothing
        loss = F.cross_entropy(logits.float(), target, reduction="sum", label_smoothing=eps) if eps else nll
        return StepSums(loss, nll, batch.units, batch.tokens, logits.detach())

    @torch.no_grad()
    def validate(self, model, device):
        """On one fixed masking of the validation texts (the same at every validation)."""
        was_training = model.training
        model.eval()
        loss = nll = correct = units = 0.0
        sizes = [e.size + 1 for e in self.data.valid]
        order = batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False)
        for number, indices in enumerate(order):
            batch = self._mask([self.data.valid[i].tgt for i in indices], seed=number).to(device)
            out = self.loss(model, model, batch, device)
            loss, nll, units = loss + out.loss.item(), nll + out.nll.item(), units + out.units
            correct += int((out.logits.argmax(-1) == batch.labels[batch.labels != IGNORE]).sum())
        model.train(was_training)
        return {"valid_loss": loss / units, "valid_nll": nll / units, "valid_ppl": math.exp(min(nll / units, 50.0)),
                "valid_accuracy": correct / units}

    def describe(self, result):
        return (f"valid loss {result['valid_loss']:.4f}  ppl {result['valid_ppl']:.2f}  "
                f"masked-token accuracy {result['valid_accuracy']:.1%}")


class _Labelled:
    """What text and image classifiers share: the loss on class logits, validation accuracy and
    macro-F1, best/ by accuracy."""

    name = "classify"
    best_key, higher_is_better = "valid_accuracy", True

    def heads(self) -> dict:
        """A new classifier over self.labels, pooled as [model] says."""
        m = self.config.model
        return dict(n_classes=len(self.labels), pooling=m.pooling, pooler=m.pooler, mlm_head=False)

    def class_loss(self, logits: torch.Tensor, labels: torch.Tensor, units: int, tokens: int) -> StepSums:
        logits = logits.float()
        nll = F.cross_entropy(logits, labels, reduction="sum")
        eps = self.config.train.label_smoothing
        loss = F.cross_entropy(logits, labels, reduction="sum", label_smoothing=eps) if eps else nll
        return StepSums(loss, nll, units, tokens, logits.detach())

    @torch.no_grad()
    def validate(self, model, device):
        was_training = model.training
        model.eval()
        loss = nll = 0.0
        predicted, gold = [], []
        for batch in self.valid_batches():
            batch = batch.to(device)
            out = self.loss(model, model, batch, device)
            loss, nll = loss + out.loss.item(), nll + out.nll.item()
            predicted += out.logits.argmax(-1).tolist()
            gold += batch.labels.tolist()
        model.train(was_training)
        scores = classification_scores(predicted, gold, self.labels)
        n = len(gold)
        return {"valid_loss": loss / n, "valid_nll": nll / n, "valid_ppl": math.exp(min(nll / n, 50.0)),
                "valid_accuracy": scores.accuracy, "valid_macro_f1": scores.macro_f1}

    def describe(self, result):
        return (f"valid loss {result['valid_loss']:.4f}  accuracy {result['valid_accuracy']:.2%}  "
                f"macro-F1 {result['valid_macro_f1']:.4f}")


class Classify(_Labelled, _EncoderObjective):
    """A label per text (data.train_tsv: label<TAB>text), through the pooled encoder and a classifier."""

    def __init__(self, config: RunConfig, run_dir: Path, dist: D.DistInfo, say: Callable[[str], None], resume: bool):
        d = config.data
        if dist.is_main:
            tok, _ = run_tokenizers(config, run_dir, dist, say, resume)
        D.barrier(dist)
        if not dist.is_main:
            tok, _ = run_tokenizers(config, run_dir, dist, say, resume)
        super().__init__(config, tok, _init_dir(config, run_dir, resume))
        if resume:
            labels = load_labels(step_dirs(run_dir)[-1])
        else:
            labels = sorted({label for _, label, _ in iter_labelled(d.train_tsv)})
        if len(labels) < 2:
            raise DataError(f"{d.train_tsv} has {len(labels)} label ({', '.join(labels)}): a classifier needs at least 2")
        self.labels = labels
        self.train_ids, self.train_labels, dropped = self._read(d.train_tsv)
        if not self.train_ids:
            raise DataError(f"no text of {d.train_tsv} is at most data.max_len={d.max_len} tokens with [CLS] and [SEP]: "
                            "raise data.max_len")
        if dropped:
            say(f"dropped {dropped:,} training text(s) longer than data.max_len={d.max_len} tokens with [CLS] and [SEP]")
        self.valid_ids, self.valid_labels = [], []
        if d.valid_tsv:
            self.valid_ids, self.valid_labels, dropped = self._read(d.valid_tsv)
            if dropped:
                say(f"dropped {dropped:,} validation text(s) longer than data.max_len={d.max_len} tokens")
        self.sizes = np.fromiter(map(len, self.train_ids), np.int64, len(self.train_ids))
        counts = np.bincount(self.train_labels, minlength=len(labels))
        say(f"data: {len(self.train_ids):,} training and {len(self.valid_ids):,} validation texts; {len(labels)} labels "
            f"(training counts: {', '.join(f'{name} {n:,}' for name, n in zip(labels, counts, strict=True))})")

    def _read(self, path: str) -> tuple[list[list[int]], np.ndarray, int]:
        index = {label: i for i, label in enumerate(self.labels)}
        lines, texts, labels = [], [], []
        for line, label, text in iter_labelled(path):
            if label not in index:
                raise DataError(f"{path} line {line + 1}: label {label!r} does not occur in the training data "
                                f"({self.config.data.train_tsv}): a classifier can only predict the labels it was trained on")
            lines.append(line)
            texts.append(text)
            labels.append(index[label])
        rows, kept, dropped = [], [], 0
        limit = self.config.data.max_len - 2
        for start in range(0, len(texts), 10_000):
            for i, ids in enumerate(self.tokenizer.encode_batch(texts[start:start + 10_000]), start):
                if len(ids) > limit:
                    dropped += 1
                else:
                    rows.append(self.tokens.wrap(ids))
                    kept.append(labels[i])
        return rows, np.asarray(kept, dtype=np.int64), dropped

    def batches(self, epoch):
        return batch_indices(self.sizes, self.config.train.batch_tokens, self.config.train.seed, epoch)

    def padding_share(self, batches):
        return padding_share(batches, self.sizes - 1)

    def units(self, indices, key):
        return len(indices)

    def collate(self, indices, key=None, rows=None, labels=None):
        rows = self.train_ids if rows is None else rows
        labels = self.train_labels if labels is None else labels
        ids, mask = pad_rows([rows[i] for i in indices], self.tokens.pad)
        return EncoderBatch(ids, mask, torch.as_tensor(labels[indices]), len(indices), int(mask.sum()))

    @property
    def has_valid(self):
        return bool(self.valid_ids)

    def new_model(self):
        return encoder_model(self.config, self.tokenizer, self.tokens, self.heads())

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            hidden = net(batch.ids, attention_mask=batch.mask)
            logits = model.pooler(hidden, batch.mask)  # (B, n_classes)
        return self.class_loss(logits, batch.labels, batch.units, batch.tokens)

    def valid_batches(self):
        sizes = [len(r) for r in self.valid_ids]
        for indices in batch_indices(sizes, self.config.train.batch_tokens, 0, 0, shuffle=False):
            yield self.collate(indices, rows=self.valid_ids, labels=self.valid_labels)

    def save_files(self):
        return {**super().save_files(), "labels": self.labels}


# ------------------------------------------------------------------------------------------------
# Images


@dataclass
class ImageBatch:
    """Pixels (B, C, H, W) scaled to [-1, 1] (data.images.to_pixels) and class labels (B,)."""

    pixels: torch.Tensor
    labels: torch.Tensor
    units: int
    tokens: int

    def to(self, device) -> ImageBatch:
        return ImageBatch(self.pixels.to(device), self.labels.to(device), self.units, self.tokens)


class ImageClassify(_Labelled, Objective):
    """A label per image (data.train_images), through the image encoder (model.vision) and a classifier.

    Batches hold train.batch_tokens // (1 + patches) images (the positions the encoder sees), in an
    order shuffled per epoch from (seed, epoch); augmentation (data.random_crop, data.horizontal_flip)
    draws from a generator seeded per batch, so a resumed run sees the same images."""

    def __init__(self, config: RunConfig, run_dir: Path, say: Callable[[str], None], resume: bool):
        super().__init__(config)
        d = config.data
        vision = config.model.vision if not config.train.init_from else load_config(config.train.init_from).vision
        if vision is None:
            raise ConfigError(f"train.init_from={config.train.init_from} is not an image encoder: it has no model.vision")
        self.vision = vision
        train = load_images(d.train_images, vision.channels, vision.image_size)
        self.labels = load_labels(step_dirs(run_dir)[-1]) if resume else train.names
        if len(self.labels) < 2:
            raise DataError(f"{d.train_images} has {len(self.labels)} label: a classifier needs at least 2")
        self.train_images, self.train_labels = train.images, train.labels
        self.valid_images = self.valid_labels = None
        if d.valid_images:
            valid = load_images(d.valid_images, vision.channels, vision.image_size)
            index = {name: i for i, name in enumerate(self.labels)}
            unknown = sorted(set(valid.names) - set(index))
            if unknown:
                raise DataError(f"{d.valid_images}: label {unknown[0]!r} does not occur in the training images "
                                f"({d.train_images}): a classifier can only predict the labels it was trained on")
            remap = torch.tensor([index[name] for name in valid.names], dtype=torch.long)
            self.valid_images, self.valid_labels = valid.images, remap[valid.labels]
        self.per_batch = max(1, config.train.batch_tokens // (vision.n_patches + 1))
        counts = torch.bincount(self.train_labels, minlength=len(self.labels)).tolist()
        say(f"data: {len(self.train_labels):,} training and {0 if self.valid_labels is None else len(self.valid_labels):,} "
            f"validation images of {vision.channels} x {vision.image_size} x {vision.image_size}, {len(self.labels)} labels; "
            f"{self.per_batch} images per batch (training counts: "
            + ", ".join(f"{name} {n:,}" for name, n in zip(self.labels, counts, strict=True)) + ")")

    def batches(self, epoch):
        g = torch.Generator().manual_seed(self.config.train.seed * 1_000_003 + epoch)
        order = torch.randperm(len(self.train_labels), generator=g)
        n = len(order) // self.per_batch  # whole batches only: the rest waits for another epoch's order
        return [order[k * self.per_batch:(k + 1) * self.per_batch].tolist() for k in range(n)]

    def padding_share(self, batches):
        return 0.0

    def attention_shape(self):
        return self.per_batch, self.vision.n_patches + 1

    def units(self, indices, key):
        return len(indices)

    def collate(self, indices, key):
        d = self.config.data
        images = self.train_images[indices]
        if d.random_crop or d.horizontal_flip:
            seed = (self.config.train.seed * 1_000_003 + key[0]) * 1_000_003 + key[1]
            images = augment(images, d.random_crop, d.horizontal_flip, torch.Generator().manual_seed(seed))
        return self._batch(images, self.train_labels[indices])

    def _batch(self, images: torch.Tensor, labels: torch.Tensor) -> ImageBatch:
        return ImageBatch(to_pixels(images), labels, len(labels), len(labels) * (self.vision.n_patches + 1))

    @property
    def has_valid(self):
        return self.valid_labels is not None and len(self.valid_labels) > 0

    def valid_batches(self):
        for start in range(0, len(self.valid_labels), self.per_batch):
            yield self._batch(self.valid_images[start:start + self.per_batch],
                              self.valid_labels[start:start + self.per_batch])

    def new_model(self):
        init_from = self.config.train.init_from
        if init_from is None:  # no tokens: vocabulary and special ids unused
            return build_model(self.config.model.replace(vocab_size=1, pad_id=0, bos_id=0, eos_id=0, **self.heads()))
        return pretrained_under(load_model(init_from), self.heads(), init_from)

    def loss(self, net, model, batch, device):
        with autocast(device, self.config.train.precision):
            logits = model.pooler(net(batch.pixels))
        return self.class_loss(logits, batch.labels, batch.units, batch.tokens)

    def save_files(self):
        return {"decode": self.config.decode, "labels": self.labels}
