"""The `[data]` section: where a run's training data is and how text is cut into tokens.

Each kind of data is a nested section that checks itself: `[data.text]` (translation files,
text-to-text pairs, running text, labelled texts), `[data.images]` (labelled images and their
augmentation), `[data.audio]` (speech), `[data.detection]` (images with boxes) and `[data.squad]`
(questions on contexts). How text is tokenized (vocab_size, tokenizer, max_len, ...) stays in
`[data]` itself: every kind with text reads it.

The flat names of earlier configs (`[data] train_src = ...`, `train_images`, `spec_augment`, ...)
still read and still work as attributes (`config.data.train_src`): FLAT maps each to its section.
In a TOML file a flat key given beside its section's key overrides it, as a `--set` would.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any

from .checks import ConfigError, check_settings, check_types, setting, unknown_key_error

TOKENIZER_KINDS = ("bpe", "unigram", "word", "char")
"""How text is cut into tokens (transformer.data.tokenizer trains each kind)."""
DOCUMENT_KINDS = ("file", "paragraph", "line")
"""What one document of a packed language-model text is (data.text.documents)."""
IMAGE_CONDITIONS = ("none", "label", "name")
"""What an image generator is conditioned on (transformer.data.pixels)."""
MIN_BPE_VOCAB = 260
"""The smallest byte-level BPE vocabulary: 256 bytes + 4 special tokens."""


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


SECTIONS = {
    "text": TextData,
    "images": ImageData,
    "audio": AudioData,
    "detection": DetectionData,
    "squad": SquadData,
}
"""[data]'s nested sections, by name."""
FLAT = {
    **{name: ("text", name) for name in (f.name for f in fields(TextData))},
    "train_images": ("images", "train"),
    "valid_images": ("images", "valid"),
    "random_crop": ("images", "random_crop"),
    "horizontal_flip": ("images", "horizontal_flip"),
    "pixel_levels": ("images", "pixel_levels"),
    "condition": ("images", "condition"),
    "drop_condition": ("images", "drop_condition"),
    "train_audio": ("audio", "train"),
    "valid_audio": ("audio", "valid"),
    "spec_augment": ("audio", "spec_augment"),
    "train_detection": ("detection", "train"),
    "valid_detection": ("detection", "valid"),
    "train_squad": ("squad", "train"),
    "valid_squad": ("squad", "valid"),
}
"""Each flat [data] name of earlier configs -> (its section, its name there)."""
TRAINING_DATA = {
    "train_src/train_tgt": "translation",
    "train_pairs": "text-to-text",
    "train_text": "language model, masked-LM, span corruption",
    "train_tsv": "text classification",
    "train_images": "image classification",
    "train_squad": "question answering",
    "train_audio": "speech recognition",
    "train_detection": "object detection",
}
"""The kinds of training data a run may set one of, with what each trains."""


@dataclass(frozen=True)
class DataConfig:
    """Where the training data is and how to tokenize it (the `[data]` section)."""

    text: TextData = TextData()
    """[data.text]: translation files, text-to-text pairs, running text, labelled texts."""
    images: ImageData = ImageData()
    """[data.images]: labelled images and the augmentation of training images."""
    audio: AudioData = AudioData()
    """[data.audio]: speech."""
    detection: DetectionData = DetectionData()
    """[data.detection]: images with boxes."""
    squad: SquadData = SquadData()
    """[data.squad]: questions on contexts."""
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
        for name, cls in SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"data.{name} must be a [data.{name}] table of key = value lines")
        check_types(self, "data")
        check_settings(self, "data")
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
        given = [name for name in TRAINING_DATA if getattr(self, name.split("/")[0]) is not None]
        kinds = ", ".join(f"{n} ({what})" for n, what in TRAINING_DATA.items())
        if len(given) > 1:
            raise ConfigError(
                f"set one kind of training data, not {' and '.join('data.' + g for g in given)}: "
                + kinds
            )
        if not given:
            raise ConfigError("no training data: set one of data." + kinds.replace(", ", ", data."))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> DataConfig:
        """From a [data] table: nested sections ([data.text] ...) and the flat names of earlier
        configs (a flat key overrides its section's), unknown keys named with the closest one."""
        own = [f.name for f in fields(cls) if f.name not in SECTIONS]
        top: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        for key, value in values.items():
            if key in SECTIONS and isinstance(value, dict):
                sections[key] = {**value, **sections[key]}
            elif key in FLAT:
                section, name = FLAT[key]
                sections[section][name] = value
            elif key in own:
                top[key] = value
            else:
                raise unknown_key_error("data", key, [*own, *SECTIONS, *FLAT])
        built = {}
        for name, cls_ in SECTIONS.items():
            valid = [f.name for f in fields(cls_)]
            for key in sections[name]:
                if key not in valid:
                    raise unknown_key_error(f"data.{name}", key, valid)
            built[name] = cls_(**sections[name])
        return cls(**built, **top)

    def to_dict(self) -> dict[str, Any]:
        """The [data] table, its sections nested ([data.text] ...)."""
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> DataConfig:
        """A copy with changes, by flat or [data] names (`train_src=...`, `vocab_size=...`)."""
        values = self.to_dict()
        for key, value in changes.items():
            if key in FLAT:
                section, name = FLAT[key]
                values[section][name] = value
            else:
                values[key] = value
        return DataConfig.from_dict(values)

    def __getattr__(self, name: str) -> Any:
        """The flat names of earlier configs: config.data.train_src is config.data.text.train_src
        (FLAT)."""
        if name in FLAT:
            section, key = FLAT[name]
            return getattr(getattr(self, section), key)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def train_sources(self) -> tuple[tuple[str, str], ...]:
        """The (source, target) training files of a translation, one pair per mixture source."""
        return self.text.train_sources

    @property
    def weights(self) -> tuple[float, ...]:
        """train_weights, or 1 for each training source."""
        return self.text.train_weights or tuple(1.0 for _ in self.train_sources)

    @property
    def is_mixture(self) -> bool:
        w = self.text.train_weights
        return len(self.train_sources) > 1 or (w is not None and w != (1.0,))

    @property
    def is_translation(self) -> bool:
        """Source -> target pairs: aligned files or a text-to-text TSV."""
        return self.text.train_src is not None or self.text.train_pairs is not None


def _as_tuple(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value
