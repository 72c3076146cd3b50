"""[data]'s nested sections, one per kind of data, each checking itself: [data.text],
[data.images], [data.audio], [data.detection], [data.squad] (see data.py for [data] itself)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_settings, check_types, setting

DOCUMENT_KINDS = ("file", "paragraph", "line")
"""What one document of a packed language-model text is (data.text.documents)."""
IMAGE_CONDITIONS = ("none", "label", "name")
"""What an image generator is conditioned on (transformer.data.pixels)."""


def _tuples(obj: Any, names: tuple[str, ...]) -> None:
    """TOML's lists kept as tuples (the configs are frozen)."""
    for name in names:
        if isinstance(getattr(obj, name), list):
            object.__setattr__(obj, name, tuple(getattr(obj, name)))


def _valid_needs_train(obj: Any, section: str, pairs: tuple[tuple[str, str], ...]) -> None:
    for train, valid in pairs:
        if getattr(obj, valid) is not None and getattr(obj, train) is None:
            raise ConfigError(
                f"data.{section}{valid} is set but data.{section}{train} is not: validation data "
                "must be of the training data's kind"
            )


@dataclass(frozen=True)
class TextData:
    """`[data.text]`: translation files, text-to-text pairs, running text, labelled texts."""

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
    train_chat: str | None = None
    """Conversations to fine-tune a chat model on (objective chat, with train.init_from): JSONL, one
    {"messages": [{"role": "system" | "user" | "assistant", "content": ...}, ...]} per line (the
    OpenAI and Hugging Face format), rendered with the model's chat template; the loss is on the
    assistant's turns only."""
    valid_chat: str | None = None
    """Validation conversations (optional), as train_chat."""
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

    def __post_init__(self) -> None:
        _tuples(self, ("train_src", "train_tgt", "valid_src", "valid_tgt", "train_weights"))
        check_types(self, "data.text")
        check_settings(self, "data.text")
        self._check_mixture()
        for a, b in (("train_src", "train_tgt"), ("valid_src", "valid_tgt")):
            if (getattr(self, a) is None) != (getattr(self, b) is None):
                raise ConfigError(f"set both data.{a} and data.{b} (aligned files), or neither")
        if self.valid_src is not None and self.train_src is None:
            raise ConfigError(
                "data.valid_src/valid_tgt are set but data.train_src/train_tgt are not: "
                "validation data must be of the training data's kind"
            )
        _valid_needs_train(
            self,
            "",
            (
                ("train_text", "valid_text"),
                ("train_tsv", "valid_tsv"),
                ("train_chat", "valid_chat"),
                ("train_pairs", "valid_pairs"),
            ),
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
        return tuple(zip(_as_tuple(self.train_src), _as_tuple(self.train_tgt), strict=True))


@dataclass(frozen=True)
class ImageData:
    """`[data.images]`: labelled images (classifiers, generators, captioners, dual encoders) and
    the augmentation of training images (a detector's too)."""

    train: str | tuple[str, ...] | None = None
    """Labelled training images of an image classifier (model.vision): a prepared split
    (.safetensors, from transformer data fashion-mnist) or a folder of class folders
    DIR/<label>/*.png|jpg. Objective contrastive takes a list of them, trained on together;
    objective caption (an encoder-decoder) learns each image's label name as its caption."""
    valid: str | None = None
    """Labelled validation images (optional), as train; every label must occur there."""
    random_crop: int = setting(0, ge=0)
    """Pad each side by this many pixels (zeros) and crop back at a random place (0 = off)."""
    horizontal_flip: bool = False
    """Mirror left-right with probability 1/2 (a detector's boxes are mirrored with them)."""
    pixel_levels: int = setting(16, ge=2, le=256)
    """image_lm: levels each channel is quantised to; one grey level a token for one channel, one
    colour of a palette of levels^3 for RGB (8 = the 9-bit palette of 512 colours)."""
    condition: str = setting("label", choices=IMAGE_CONDITIONS)
    """image_lm: what the images are generated from: "label" (a class token), "name" (the label's
    text, character by character: emoji names) or "none"."""
    drop_condition: float = setting(0.1, ge=0, lt=1)
    """image_lm: share of training images whose condition is replaced by the unconditional start,
    so one model also generates, and scores, images without one."""

    def __post_init__(self) -> None:
        _tuples(self, ("train",))
        check_types(self, "data.images")
        check_settings(self, "data.images")
        _valid_needs_train(self, "images.", (("train", "valid"),))


@dataclass(frozen=True)
class AudioData:
    """`[data.audio]`: speech recognition (model.audio)."""

    train: str | None = None
    """A folder of log-mel features and transcripts, as `transformer data speech` writes (its
    train/), for objective speech."""
    valid: str | None = None
    """Validation speech (optional), as train (its valid/): loss and greedy WER each validation."""
    spec_augment: bool = False
    """SpecAugment's frequency and time masks on each training clip (Park et al. 2019)."""

    def __post_init__(self) -> None:
        check_types(self, "data.audio")
        _valid_needs_train(self, "audio.", (("train", "valid"),))


@dataclass(frozen=True)
class DetectionData:
    """`[data.detection]`: object detection (model.detection)."""

    train: str | None = None
    """Images with boxes in COCO's format, a folder holding annotations.json (as `transformer data
    detection` writes, its train/) or the JSON file, for objective detection."""
    valid: str | None = None
    """Validation images with boxes (optional), as train: loss and COCO mAP each validation."""

    def __post_init__(self) -> None:
        check_types(self, "data.detection")
        _valid_needs_train(self, "detection.", (("train", "valid"),))


@dataclass(frozen=True)
class SquadData:
    """`[data.squad]`: extractive question answering."""

    train: str | None = None
    """Questions on contexts with their answers, in SQuAD's JSON format (data / paragraphs /
    context / qas / answers), for objective qa."""
    valid: str | None = None
    """Validation questions (optional), as train: exact match and F1 each validation."""

    def __post_init__(self) -> None:
        check_types(self, "data.squad")
        _valid_needs_train(self, "squad.", (("train", "valid"),))


def _as_tuple(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value
