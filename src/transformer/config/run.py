"""What a training run reads: [data] and [train] beside [model] and [decode] (RunConfig), and the
resolved config written back as TOML; reading a TOML file with `--set` overrides is toml.py's."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_settings, check_types, setting
from .decode import DecodeConfig
from .model import ModelConfig
from .sizing import SizingConfig

TOKENIZER_KINDS = ("bpe", "unigram", "word", "char")
"""How text is cut into tokens (transformer.data.tokenizer trains each kind)."""
DOCUMENT_KINDS = ("file", "paragraph", "line")
IMAGE_CONDITIONS = ("none", "label", "name")
"""What an image generator is conditioned on (transformer.data.pixels)."""
"""What one document of a packed language-model text is (data.documents)."""
PAIR_METRICS = ("bleu", "rouge")
"""What `evaluate --metric` scores outputs with: BLEU and chrF, or ROUGE-1/2/L (summaries)."""
MIN_BPE_VOCAB = 260
"""The smallest byte-level BPE vocabulary: 256 bytes + 4 special tokens."""


@dataclass(frozen=True)
class DataConfig:
    """Where the training text is and how to tokenize it (the `[data]` section)."""

    train_src: str | tuple[str, ...] | None = None
    """Source side of the aligned training files (translation), one sentence per line; a list of
    files is a mixture of sources (see train_weights)."""
    train_tgt: str | tuple[str, ...] | None = None
    """Target side of the aligned training files, line i translating train_src line i (a list:
    one file for each of train_src's)."""
    train_weights: tuple[float, ...] | None = None
    """A mixture's sampling weights, one per train_src file: an epoch holds weight x that source's
    examples (2 = each twice, 0.5 = a random half, drawn anew each epoch); unset = 1 each."""
    valid_src: str | tuple[str, ...] | None = None
    """Source side of the validation files (optional; a list is read as one file)."""
    valid_tgt: str | tuple[str, ...] | None = None
    """Target side of the validation files."""
    train_text: str | None = None
    """Training text of a language model (arch = "decoder"): running text, packed into blocks (see
    pack); masked-LM and span corruption read one example per line."""
    valid_text: str | None = None
    """Validation text of a language model or masked-LM (optional)."""
    train_tsv: str | None = None
    """Labelled training texts of a classifier: one `label<TAB>text` per line."""
    valid_tsv: str | None = None
    """Labelled validation texts (optional); every label must occur in train_tsv."""
    train_pairs: str | None = None
    """Text-to-text training pairs of an encoder-decoder: one `input<TAB>target` per line (e.g. a
    mixture of tasks named by a prefix of the input, as `transformer data bible-t2t` writes)."""
    valid_pairs: str | None = None
    """Text-to-text validation pairs (optional), as train_pairs."""
    train_images: str | tuple[str, ...] | None = None
    """Labelled training images of an image classifier (model.vision): a prepared split
    (.safetensors, from transformer data fashion-mnist) or a folder of class folders
    DIR/<label>/*.png|jpg. Objective contrastive takes a list of them, trained on together;
    objective caption (an encoder-decoder) learns each image's label name as its caption."""
    valid_images: str | None = None
    """Labelled validation images (optional), as train_images; every label must occur there."""
    train_squad: str | None = None
    """Extractive question answering: questions on contexts with their answers, in SQuAD's JSON
    format (data / paragraphs / context / qas / answers), for objective qa."""
    valid_squad: str | None = None
    """Validation questions (optional), as train_squad: exact match and F1 each validation."""
    train_audio: str | None = None
    """Speech recognition (model.audio): a folder of log-mel features and transcripts, as
    `transformer data speech` writes (its train/), for objective speech."""
    valid_audio: str | None = None
    """Validation speech (optional), as train_audio (its valid/): loss and greedy WER each
    validation."""
    train_detection: str | None = None
    """Object detection (model.detection): images with boxes in COCO's format, a folder holding
    annotations.json (as `transformer data detection` writes, its train/) or the JSON file, for
    objective detection."""
    valid_detection: str | None = None
    """Validation images with boxes (optional), as train_detection: loss and COCO mAP each
    validation."""
    spec_augment: bool = False
    """speech: SpecAugment's frequency and time masks on each training clip (Park et al. 2019)."""
    pack: bool | None = None
    """Language models: read the text as one token stream (each document <s> ... </s>, see
    documents) cut into blocks of block_size tokens, as GPT-style trainers do, so context crosses
    line breaks; false = one example per line (max_len). Unset: packed for objective lm."""
    documents: str = setting("file", choices=DOCUMENT_KINDS)
    """Packed text: what one document is, each <s> ... </s> in the stream: "file" (the whole file,
    line breaks kept, as nanoGPT reads it), "paragraph" (lines up to a blank line, joined by line
    breaks) or "line" (each non-empty line, as fairseq's language models read text)."""
    block_size: int | None = setting(None, gt=0)
    """Packed text: tokens of context per training row (each block predicts block_size tokens from
    the ones before them, within the block); at most model.max_positions, unset = that."""
    random_crop: int = setting(0, ge=0)
    """Images: pad each side by this many pixels (zeros) and crop back at a random place (0 =
    off)."""
    horizontal_flip: bool = False
    """Images: mirror left-right with probability 1/2 (a detector's boxes are mirrored with
    them)."""
    pixel_levels: int = setting(16, ge=2, le=256)
    """image_lm: levels each channel is quantised to; one grey level a token for one channel, one
    colour of a palette of levels^3 for RGB (8 = the 9-bit palette of 512 colours)."""
    condition: str = setting("label", choices=IMAGE_CONDITIONS)
    """image_lm: what the images are generated from: "label" (a class token), "name" (the label's
    text, character by character: emoji names) or "none"."""
    drop_condition: float = setting(0.1, ge=0, lt=1)
    """image_lm: share of training images whose condition is replaced by the unconditional start,
    so one model also generates, and scores, images without one."""
    tokenizer: str = setting("bpe", choices=TOKENIZER_KINDS)
    """How text is cut into tokens, trained on the training files: "bpe" (byte-level BPE), "unigram"
    (SentencePiece's Unigram), "word" (whole words and punctuation; the rest <unk>) or "char"
    (characters; ~5x longer sequences than BPE: set max_len for them). See
    transformer.data.tokenizer."""
    vocab_size: int = setting(8000, gt=0)
    """Size of the vocabulary to train, special tokens included (the model's vocabulary comes from
    it); "char" needs room for every character seen min_frequency times."""
    shared_vocab: bool = True
    """One joint BPE vocabulary for source and target (the paper's, §5.1); false = one per side."""
    min_frequency: int = setting(2, gt=0)
    """A pair must occur this often to become a BPE merge."""
    max_len: int = setting(256, gt=0)
    """Pairs with a side longer than this many tokens (with <s>/</s>) are dropped, and counted.
    Tokens, not words: a "char" tokenizer needs about 5x the max_len of "bpe" for the same
    sentences. Packed text has blocks instead (block_size)."""
    tokenizer_sample: int = setting(
        200_000, ge=0, error="{name}={value}: give a number of examples, or 0 for all"
    )
    """Train the tokenizer on at most this many examples, chosen at random (0: all of them); BPE's
    merge statistics settle long before millions of lines."""
    bpe_dropout: float = setting(
        0.0,
        ge=0,
        lt=1,
        error="{name}={value} must be in [0, 1): the probability of skipping a merge (0 = off; "
        "Provilkov et al. use 0.1)",
    )
    """BPE-dropout (Provilkov et al. 2020): when segmenting the training sentences, skip each merge
    with this probability (0.1 in the paper), so that a word comes in several segmentations, a
    regulariser for many epochs of a small corpus. Validation, evaluation and translation segment as
    trained. BPE tokenizers and objectives seq2seq / lm only."""
    segmentations: int = setting(8, gt=0)
    """With bpe_dropout: how many dropped segmentations of the training corpus are prepared (each a
    corpus in the cache); epoch e trains on segmentation e mod this."""
    sentinels: int = setting(100, gt=0)
    """span_corruption: the sentinel tokens <extra_id_0> ... <extra_id_{n-1}> the trained tokenizer
    reserves after its four special tokens (T5: 100); a text can have at most this many noise
    spans."""
    cache: str | None = None
    """Folder for prepared corpora (token ids in memory-mapped arrays, built on first use, see
    transformer.data.corpus); default $TRANSFORMER_CACHE_DIR/corpora, else
    ~/.cache/transformer/corpora."""

    def __post_init__(self) -> None:
        check_types(self, "data")
        for name in (
            "train_src",
            "train_tgt",
            "valid_src",
            "valid_tgt",
            "train_weights",
            "train_images",
        ):
            value = getattr(self, name)
            if isinstance(value, list):  # TOML's lists, kept as tuples (the config is frozen)
                object.__setattr__(self, name, tuple(value))
        check_settings(self, "data")
        self._check_mixture()
        if self.tokenizer == "bpe" and self.vocab_size < MIN_BPE_VOCAB:
            raise ConfigError(
                f"data.vocab_size={self.vocab_size} is too small: a byte-level BPE needs at least "
                f"{MIN_BPE_VOCAB} (256 bytes + 4 special tokens)"
            )
        if self.bpe_dropout and self.is_mixture:
            raise ConfigError(
                "data.bpe_dropout takes one training source, not a mixture (data.train_weights, "
                "or several data.train_src files): set data.bpe_dropout = 0"
            )
        if self.bpe_dropout and self.tokenizer != "bpe":
            raise ConfigError(
                f'data.bpe_dropout is for data.tokenizer = "bpe", not {self.tokenizer!r}: '
                "set data.bpe_dropout = 0"
            )
        if (self.train_src is None) != (self.train_tgt is None):
            raise ConfigError(
                "set both data.train_src and data.train_tgt (aligned files), or neither"
            )
        if (self.valid_src is None) != (self.valid_tgt is None):
            raise ConfigError(
                "set both data.valid_src and data.valid_tgt (aligned files), or neither"
            )
        given = [
            name
            for name, value in (
                ("train_src/train_tgt", self.train_src),
                ("train_text", self.train_text),
                ("train_tsv", self.train_tsv),
                ("train_images", self.train_images),
                ("train_pairs", self.train_pairs),
                ("train_squad", self.train_squad),
                ("train_audio", self.train_audio),
                ("train_detection", self.train_detection),
            )
            if value is not None
        ]
        if len(given) > 1:
            raise ConfigError(
                f"set one kind of training data, not {' and '.join('data.' + g for g in given)}: "
                "train_src/train_tgt (translation), train_pairs (text-to-text TSV), train_text "
                "(language model, masked-LM, span corruption), train_tsv (text classification), "
                "train_images (image classification), train_squad (question answering), "
                "train_audio (speech recognition) or train_detection (object detection)"
            )
        if not given:
            raise ConfigError(
                "no training data: set data.train_src and data.train_tgt (translation), "
                "data.train_pairs (text-to-text), data.train_text (language model, masked-LM), "
                "data.train_tsv (text classification), data.train_images (image classification), "
                "data.train_squad (question answering), data.train_audio (speech recognition) or "
                "data.train_detection (object detection)"
            )
        if self.valid_src is not None and self.train_src is None:
            raise ConfigError(
                "data.valid_src/valid_tgt are set but data.train_src/train_tgt are not: validation "
                "data must be of the training data's kind"
            )
        for train, valid in (
            ("train_text", "valid_text"),
            ("train_tsv", "valid_tsv"),
            ("train_images", "valid_images"),
            ("train_pairs", "valid_pairs"),
            ("train_squad", "valid_squad"),
            ("train_audio", "valid_audio"),
            ("train_detection", "valid_detection"),
        ):
            if getattr(self, valid) is not None and getattr(self, train) is None:
                raise ConfigError(
                    f"data.{valid} is set but data.{train} is not: validation data must be of the "
                    "training data's kind"
                )

    def _check_mixture(self) -> None:
        for train, valid in (("train_src", "train_tgt"), ("valid_src", "valid_tgt")):
            a, b = getattr(self, train), getattr(self, valid)
            if isinstance(a, tuple) or isinstance(b, tuple):
                a, b = (a,) if isinstance(a, str) else a, (b,) if isinstance(b, str) else b
                if a is not None and b is not None and len(a) != len(b):
                    raise ConfigError(
                        f"data.{train} has {len(a)} files but data.{valid} has {len(b)}: give one "
                        f"{valid} file for each {train} file, in the same order"
                    )
                if a == () or b == ():
                    raise ConfigError(f"data.{train}/{valid} is an empty list: give a file")
        w = self.train_weights
        if w is None:
            return
        w = tuple(float(x) for x in w)
        object.__setattr__(self, "train_weights", w)
        if self.train_src is None:
            raise ConfigError(
                "data.train_weights weighs the files of a mixture in data.train_src/train_tgt; "
                "set those, or remove data.train_weights"
            )
        if len(w) != len(self.train_sources):
            raise ConfigError(
                f"data.train_weights has {len(w)} weights for {len(self.train_sources)} "
                "data.train_src file(s): give one weight per file"
            )
        if any(not math.isfinite(x) or x < 0 for x in w) or not any(x > 0 for x in w):
            raise ConfigError(
                f"data.train_weights={list(w)} is not valid: weights are numbers >= 0, at least "
                "one of them above 0"
            )

    @property
    def train_sources(self) -> tuple[tuple[str, str], ...]:
        """The (source, target) training files of a translation, one pair per mixture source."""
        if self.train_src is None:
            return ()
        src, tgt = self.train_src, self.train_tgt
        return tuple(zip(_as_tuple(src), _as_tuple(tgt), strict=True))

    @property
    def weights(self) -> tuple[float, ...]:
        """train_weights, or 1 for each training source."""
        return self.train_weights or tuple(1.0 for _ in self.train_sources)

    @property
    def is_mixture(self) -> bool:
        return len(self.train_sources) > 1 or (
            self.train_weights is not None and self.train_weights != (1.0,)
        )

    @property
    def is_translation(self) -> bool:
        """Source -> target pairs: aligned files or a text-to-text TSV."""
        return self.train_src is not None or self.train_pairs is not None


def _as_tuple(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
"""Training precisions (transformer.runtime.precision)."""
DEVICES = ("auto", "cpu", "cuda")
OBJECTIVES = (
    "seq2seq",
    "lm",
    "mlm",
    "classify",
    "span_corruption",
    "qa",
    "speech",
    "detection",
    "image_lm",
    "contrastive",
    "caption",
)
OBJECTIVE_ARCHS = {
    "seq2seq": "encoder-decoder",
    "lm": "decoder",
    "mlm": "encoder",
    "classify": "encoder",
    "span_corruption": "encoder-decoder",
    "qa": "encoder",
    "speech": "encoder-decoder",
    "detection": "encoder-decoder",
    "image_lm": "decoder",
    "contrastive": "encoder",
    "caption": "encoder-decoder",
}
"""The model family each objective trains."""
OBJECTIVE_DATA = {
    "seq2seq": ("train_src", "train_pairs"),
    "lm": ("train_text",),
    "mlm": ("train_text",),
    "classify": ("train_tsv", "train_images"),
    "span_corruption": ("train_text",),
    "qa": ("train_squad",),
    "speech": ("train_audio",),
    "detection": ("train_detection",),
    "image_lm": ("train_images",),
    "contrastive": ("train_images",),
    "caption": ("train_images",),
}
"""The [data] keys each objective trains on (one of them set; translation's train_src goes with
train_tgt)."""
SCHEDULES = ("inverse_sqrt", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """The training recipe (the `[train]` section). Defaults are the paper's (§5.3, §5.4)."""

    seed: int = setting(1, ge=0)
    """Seed of the model's initialisation, dropout and batch shuffling."""
    batch_tokens: int = setting(4096, gt=0)
    """Padded tokens per batch on each process (the paper: ~25,000 source + 25,000 target per
    step)."""
    accumulate: int = setting(1, gt=0)
    """Batches whose gradients are summed per optimiser step (effective batch = batch_tokens x
    accumulate x processes)."""
    max_steps: int = setting(100000, gt=0)
    """Stop after this many optimiser steps (the paper: 100,000 for base, 300,000 for big)."""
    max_epochs: int = setting(0, ge=0)
    """Stop after this many passes over the data (0 = no limit)."""
    max_minutes: float = setting(0.0, ge=0)
    """Stop cleanly after this much wall-clock time, validation included (0 = no limit)."""
    objective: str | None = setting(None, choices=OBJECTIVES)
    """What to learn: "seq2seq" (translation, from train_src/train_tgt), "lm" (next token, arch =
    "decoder"), "mlm" (BERT's masked-LM, arch = "encoder", on train_text), "classify" (a label per
    text, arch = "encoder", on train_tsv), "span_corruption" (T5's pretraining, arch =
    "encoder-decoder", on train_text) or "qa" (extractive question answering: a span head on an
    encoder, on train_squad), "speech" (speech recognition, arch = "encoder-decoder" with
    model.audio, on train_audio) or "detection" (object detection, DETR: arch = "encoder-decoder"
    with model.detection, on train_detection) or "image_lm" (images generated pixel by pixel,
    Image GPT: arch = "decoder", on train_images) or "contrastive" (a text-image dual encoder,
    CLIP: arch = "encoder" with model.vision and model.contrastive, on train_images, each image's
    text its label) or "caption" (image captioning: arch = "encoder-decoder" with model.vision, on
    train_images, each image's text its label). None: from the data and arch (see
    RunConfig.objective)."""
    mlm_probability: float = setting(0.15, gt=0, lt=1)
    """mlm: share of tokens chosen for prediction; of those 80% become [MASK], 10% a random token,
    10% stay."""
    noise_density: float = setting(0.15, gt=0, lt=1)
    """span_corruption: share of each text's tokens hidden (T5: 0.15)."""
    mean_span: float = setting(3.0, ge=1)
    """span_corruption: mean length of a hidden span (T5: 3)."""
    init_from: str | None = None
    """A model directory to fine-tune from: its tokenizer and model config are used (a classifier
    takes only its head from [model]: pooling, pooler; the head is new)."""
    freeze_encoder: bool = False
    """classify with init_from: train the new head only, the pretrained encoder stays as it is."""
    schedule: str = setting("inverse_sqrt", choices=SCHEDULES)
    """inverse_sqrt: the paper's warmup then step^-0.5 decay (§5.3); cosine: linear warmup then
    cosine to min_lr, reached at max_steps or at the end of max_minutes, whichever comes first
    (under a time budget the decay follows the clock, so it ends when the run does)."""
    warmup_steps: int = setting(4000, ge=0)
    """Steps of linear warmup (the paper: 4000)."""
    lr_factor: float = setting(1.0, ge=0)
    """inverse_sqrt: multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    lr: float = setting(5e-4, ge=0)
    """cosine: the peak learning rate reached after warmup."""
    min_lr: float = setting(0.0, ge=0)
    """cosine: the learning rate at the end (max_steps or max_minutes)."""
    adam_beta1: float = setting(0.9, ge=0, lt=1)
    """Adam beta1 (the paper: 0.9)."""
    adam_beta2: float = setting(0.98, ge=0, lt=1)
    """Adam beta2 (the paper: 0.98)."""
    adam_eps: float = setting(1e-9, ge=0)
    """Adam epsilon (the paper: 1e-9)."""
    weight_decay: float = setting(0.0, ge=0)
    """Decoupled weight decay (AdamW style; the paper: none)."""
    label_smoothing: float = setting(0.1, ge=0, lt=1)
    """Label smoothing epsilon (§5.4: 0.1); spread over the vocabulary minus padding."""
    late_dropout: float = setting(0.0, ge=0, lt=1)
    """Share of training (of max_minutes when set, else of max_steps; whichever is further along)
    run with every dropout of the model off before they start at their rates (Liu et al. 2023, "late
    dropout": training.dropout); 0 = dropout from the first step."""
    clip_norm: float = setting(0.0, ge=0)
    """Clip the gradient's global L2 norm to this (0 = no clipping; the paper does not clip)."""
    precision: str = setting("auto", choices=PRECISIONS)
    """auto (bf16 where measured faster: see transformer.runtime.precision); fp32; bf16 (autocast,
    CPU or GPU); fp16 (autocast + gradient scaling, GPU only). The run's config.toml records the
    resolved one."""
    device: str = setting("auto", choices=DEVICES)
    """auto (cuda when available), cpu or cuda."""
    valid_every: int = setting(1000, gt=0)
    """Validate every this many steps (a final validation always runs)."""
    bleu_samples: int = setting(200, ge=0)
    """Translation: greedy-decode this many validation pairs at each validation for BLEU (0 =
    off)."""
    valid_questions: int = setting(200, ge=0)
    """Question answering: validate (loss, exact match, F1) on the first this many questions of
    data.valid_squad; speech: the greedy WER of the first this many clips of data.valid_audio;
    caption: the greedy captions' exact match and chrF on this many images spread evenly over
    data.valid_images (0 = all)."""
    ctc_weight: float = setting(0.3, ge=0, le=1)
    """speech, with a CTC head on the encoder (model.audio.ctc): the loss is (1 - w) x the
    decoder's cross entropy + w x CTC's (Kim et al. 2017, joint CTC-attention)."""
    pad_to_max: bool | None = None
    """speech with init_from: overrides the model's model.audio.pad_to_max (null keeps it). false
    fine-tunes a Whisper model on each clip at its own length, the padding masked, instead of a
    whole 30 s window (a 3 s clip: 150 encoder positions, not 1,500); the model it writes then
    transcribes without padding."""
    save_every: int = setting(1000, gt=0)
    """Write a checkpoint every this many steps (and at the end)."""
    keep_last: int = setting(5, gt=0)
    """Checkpoints to keep (older ones are deleted; best/ and last/ are kept apart)."""
    log_every: int = setting(100, gt=0)
    """Plain log lines every this many steps when not on a terminal (metrics.jsonl gets every
    step)."""
    num_threads: int = setting(0, ge=0)
    """CPU threads for torch (0 = torch's default)."""
    compile: bool = False
    """Run the training forward and backward through torch.compile (TorchInductor fuses the
    elementwise work into fewer kernels). The first steps, and each new batch shape until torch
    marks the shapes dynamic, spend time compiling. Measured per device in docs/benchmarks.md."""

    def __post_init__(self) -> None:
        check_types(self, "train")
        check_settings(self, "train")
        if self.schedule == "inverse_sqrt" and self.lr_factor <= 0:
            raise ConfigError(f"train.lr_factor={self.lr_factor!r} is not valid: it must be > 0")
        if self.schedule == "cosine" and self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr!r} is not valid: it must be > 0")


SECTIONS = ("model", "data", "train", "decode", "sizing")


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run reads: [model], [data], [train] and [decode] (validation and saved
    defaults).

    The model's vocab_size is not set here: it comes from the trained tokenizer.
    """

    model: ModelConfig
    data: DataConfig
    train: TrainConfig = TrainConfig()
    decode: DecodeConfig = DecodeConfig()
    sizing: SizingConfig = SizingConfig()

    def __post_init__(self) -> None:
        d, objective = self.data, self.objective
        given = [key for key in OBJECTIVE_DATA[objective] if getattr(d, key) is not None]
        needs = (given or OBJECTIVE_DATA[objective])[0], OBJECTIVE_ARCHS[objective]
        if (
            (d.train_images is not None) != (self.model.vision is not None)
            and self.train.init_from is None
            and objective != "image_lm"
        ):
            raise ConfigError(
                "data.train_images needs an image encoder ([model.vision]), and an image encoder "
                "needs data.train_images: set both or neither"
            )
        if (d.train_audio is not None) != (
            self.model.audio is not None
        ) and self.train.init_from is None:
            raise ConfigError(
                "data.train_audio needs a speech encoder ([model.audio]), and a speech encoder "
                "needs data.train_audio: set both or neither"
            )
        if (d.train_detection is not None) != (
            self.model.detection is not None
        ) and self.train.init_from is None:
            raise ConfigError(
                "data.train_detection needs a detector ([model.detection]), and a detector needs "
                "data.train_detection: set both or neither"
            )
        if d.random_crop and objective == "detection":
            raise ConfigError(
                "data.random_crop is for image classification: a detector's boxes would leave the "
                "image; remove it (data.horizontal_flip works)"
            )
        if isinstance(d.train_images, tuple) and objective != "contrastive":
            raise ConfigError(
                f"data.train_images lists {len(d.train_images)} image sets: only objective "
                "contrastive trains on several; give one"
            )
        if (objective == "contrastive") != (
            self.model.contrastive is not None
        ) and self.train.init_from is None:
            raise ConfigError(
                "objective contrastive trains a dual encoder ([model.contrastive]), and a dual "
                "encoder is trained with objective contrastive: set both or neither"
            )
        if d.spec_augment and objective != "speech":
            raise ConfigError(
                f"data.spec_augment is for objective speech, not {objective!r}: remove it"
            )
        if getattr(d, needs[0]) is None:
            raise ConfigError(
                f"train.objective={objective!r} trains on data.{needs[0]}"
                + ("/train_tgt" if needs[0] == "train_src" else "")
                + ": set it"
            )
        if d.bpe_dropout and objective not in ("seq2seq", "lm"):
            raise ConfigError(
                f"data.bpe_dropout is for objectives seq2seq and lm, not {objective!r}: "
                "set data.bpe_dropout = 0"
            )
        if d.pack and objective != "lm":
            raise ConfigError(
                f"data.pack is for language models (objective lm), not {objective!r}: remove it"
            )
        if self.packed and d.bpe_dropout:
            raise ConfigError(
                "data.bpe_dropout is not available on packed text: set data.bpe_dropout = 0, or "
                "data.pack = false (one example per line)"
            )
        if self.train.pad_to_max is not None and (
            objective != "speech" or self.train.init_from is None
        ):
            raise ConfigError(
                "train.pad_to_max is for objective speech with train.init_from (it overrides the "
                "pretrained model's); a model trained from scratch sets model.audio.pad_to_max"
            )
        if self.train.freeze_encoder and (objective != "classify" or self.train.init_from is None):
            raise ConfigError(
                'train.freeze_encoder is for objective = "classify" with train.init_from '
                "(a pretrained encoder under a new head)"
            )
        if self.train.init_from is None:
            if self.model.arch != needs[1]:
                raise ConfigError(
                    f"model.arch={self.model.arch!r} cannot be trained with objective "
                    f'{objective!r} (data.{needs[0]}): use arch = "{needs[1]}"'
                )
            if (
                not self.packed
                and self.data.max_len > self.model.max_positions
                and self.model.positional in ("sinusoidal", "learned")
                and (self.model.vision is None or objective == "caption")
                and self.model.detection is None
                and objective != "image_lm"
            ):
                raise ConfigError(
                    f"data.max_len={self.data.max_len} exceeds "
                    f"model.max_positions={self.model.max_positions}: lower data.max_len or raise "
                    "model.max_positions"
                )
            if (
                objective == "qa"
                and self.decode.answer_window > self.model.max_positions
                and self.model.positional in ("sinusoidal", "learned")
            ):
                raise ConfigError(
                    f"decode.answer_window={self.decode.answer_window} exceeds "
                    f"model.max_positions={self.model.max_positions}: lower "
                    "decode.answer_window or raise model.max_positions"
                )
            if self.packed and (self.data.block_size or 0) > self.model.max_positions:
                raise ConfigError(
                    f"data.block_size={self.data.block_size} exceeds "
                    f"model.max_positions={self.model.max_positions}: lower data.block_size or "
                    "raise model.max_positions"
                )

    @property
    def packed(self) -> bool:
        """A language model on packed text (data.pack, unset = packed for objective lm)."""
        return self.objective == "lm" and self.data.pack is not False

    @property
    def objective(self) -> str:
        """train.objective, or when unset: seq2seq for aligned files, classify for a TSV or images
        (image_lm for images and arch = "decoder", caption for images and arch =
        "encoder-decoder"), and for train_text lm (arch = "decoder") or
        mlm (arch = "encoder")."""
        if self.train.objective is not None:
            return self.train.objective
        if self.data.is_translation:
            return "seq2seq"
        if self.data.train_images is not None and self.model.arch == "decoder":
            return "image_lm"
        if self.data.train_images is not None and self.model.contrastive is not None:
            return "contrastive"
        if self.data.train_images is not None and self.model.arch == "encoder-decoder":
            return "caption"
        if self.data.train_tsv is not None or self.data.train_images is not None:
            return "classify"
        if self.data.train_squad is not None:
            return "qa"
        if self.data.train_audio is not None:
            return "speech"
        if self.data.train_detection is not None:
            return "detection"
        return "mlm" if self.model.arch == "encoder" else "lm"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        model = self.model.to_dict()
        for key in ("vocab_size", "tgt_vocab_size"):  # set by the tokenizer
            model.pop(key)
        return {
            "model": model,
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
            "decode": self.decode.to_dict(),
            **({"sizing": dataclasses.asdict(self.sizing)} if self.sizing.names else {}),
        }

    def to_toml(self) -> str:
        """The resolved config as TOML (None values are written as comments: they mean the
        default)."""
        lines = []
        for section, values in self.to_dict().items():
            lines.append(f"[{section}]")
            for key, value in values.items():
                lines.append(
                    f"# {key} is unset" if value is None else f"{key} = {_toml_value(value)}"
                )
            lines.append("")
        return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):  # a nested config, as an inline table
        return (
            "{"
            + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items() if v is not None)
            + "}"
        )
    raise TypeError(f"cannot write {value!r} to TOML")
