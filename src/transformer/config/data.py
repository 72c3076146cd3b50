"""The `[data]` section: where a run's training data is and how text is cut into tokens.

Each kind of data is a nested section that checks itself: `[data.text]` (translation files,
text-to-text pairs, running text, labelled texts), `[data.images]` (labelled images and their
augmentation), `[data.audio]` (speech), `[data.detection]` (images with boxes) and `[data.squad]`
(questions on contexts). How text is tokenized (vocab_size, tokenizer, max_len, ...) stays in
`[data]` itself: every kind with text reads it.

Code reads only the nested names (`config.data.text.train_src`, `config.data.images.train`). The
flat names of earlier configs (`[data] train_src = ...`, `train_images`, `spec_augment`, ...) still
load: nest_flat_keys translates them once, where a [data] table is read (FLAT maps each to its
section). In one table a flat key given beside its section's key overrides it, as a `--set` would;
`--set`s apply in order, flat or nested.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from .checks import (
    ConfigError,
    check_language_pair,
    check_settings,
    check_types,
    setting,
    unknown_key_error,
)
from .sections import (
    AudioData,
    DetectionData,
    ImageData,
    SquadData,
    TextData,
)

TOKENIZER_KINDS = ("bpe", "unigram", "word", "char")
"""How text is cut into tokens (transformer.data.tokenizer trains each kind)."""
MIN_BPE_VOCAB = 260
"""The smallest byte-level BPE vocabulary: 256 bytes + 4 special tokens."""


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
    "train_chat": "chat fine-tuning",
    "train_images": "image classification",
    "train_squad": "question answering",
    "train_audio": "speech recognition",
    "train_detection": "object detection",
}
"""The kinds of training data a run may set one of, with what each trains."""


def nest_flat_keys(values: dict[str, Any]) -> dict[str, Any]:
    """A [data] table with the flat keys of earlier configs moved into their sections (FLAT): the
    one place they are translated; a flat key overrides its section's key beside it."""
    nested = {key: value for key, value in values.items() if key not in FLAT}
    for key, value in values.items():
        if key in FLAT:
            section, name = FLAT[key]
            table = nested.get(section, {})
            nested[section] = {**table, name: value} if isinstance(table, dict) else table
    return nested


def flat_value(data: DataConfig, key: str) -> Any:
    """The value of `key` as the check tables and their messages name it (TRAINING_DATA,
    objectives.py): a flat name (FLAT) or one of [data]'s own."""
    if key in FLAT:
        section, name = FLAT[key]
        return getattr(getattr(data, section), name)
    return getattr(data, key)


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
    protect_markup: bool = False
    """Translation: replace each placeholder (%s, {0}, $VAR ...), tag, entity, URL, e-mail address
    and <code> span of the training pairs by a slot token ｟1｠, ｟2｠ ... before the tokenizer sees
    them, so that translating puts each one of the input back exactly once (transformer.data.markup;
    the tokenizer holds the slot tokens; decode.keep_markup)."""
    source_lang: str | None = None
    """Translation: the language of the source text, as a code (es), with target_lang. Recorded in
    the model directory (languages.json), so `serve` (LibreTranslate's API), `info` and the page
    know the pair."""
    target_lang: str | None = None
    """Translation: the language of the target text, as a code (en); see source_lang."""
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
        check_language_pair(
            "data", self.source_lang, self.target_lang, 'source_lang = "es", target_lang = "en"'
        )
        if self.source_lang is not None and not self.is_translation:
            raise ConfigError(
                "data.source_lang and data.target_lang name a translation's languages: set them "
                "only with translation pairs (data.train_src/train_tgt or data.train_pairs)"
            )
        if self.protect_markup and not self.is_translation:
            raise ConfigError(
                "data.protect_markup is for translation pairs (data.train_src/train_tgt or "
                "data.train_pairs): set it false for this kind of training data"
            )
        given = [name for name in TRAINING_DATA if flat_value(self, name.split("/")[0]) is not None]
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
        """From a [data] table (flat keys of earlier configs nested first, nest_flat_keys), unknown
        keys named with the closest one."""
        values = nest_flat_keys(values)
        own = [f.name for f in fields(cls) if f.name not in SECTIONS]
        for key in values:
            if key not in own and key not in SECTIONS:
                raise unknown_key_error("data", key, [*own, *SECTIONS, *FLAT])
        built = {}
        for name, cls_ in SECTIONS.items():
            table = values.get(name, {})
            if isinstance(table, dict):  # else __post_init__ says it must be a table
                valid = [f.name for f in fields(cls_)]
                for key in table:
                    if key not in valid:
                        raise unknown_key_error(f"data.{name}", key, valid)
                table = cls_(**table)
            built[name] = table
        return cls(**built, **{key: values[key] for key in own if key in values})

    def to_dict(self) -> dict[str, Any]:
        """The [data] table, its sections nested ([data.text] ...)."""
        return dataclasses.asdict(self)

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
