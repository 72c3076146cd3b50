"""What each training objective is, one record each (OBJECTIVES): the model family it trains, the
[data] keys it trains on, the settings it reads that most objectives do not, and how its texts
are tokenized. RunConfig checks a run against these records; the tasks (transformer.tasks) name the
objectives that train them.

Why the records are here and not in the tasks' modules: config/ is the ground floor, and a run's
config is checked where it is made (a TOML file read, a --set applied, a sweep's variant), below
the table of tasks, which stands on training/ and decoding/. So the facts of an objective that the
check reads stay in config/, one record each; a new task on an existing objective touches nothing
here, and a new objective adds one record.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Objective:
    """One training objective (train.objective)."""

    arch: str
    """The model family it trains (model.arch)."""
    data: tuple[str, ...]
    """The [data] keys it trains on, by their flat names (one of them set; translation's train_src
    goes with train_tgt)."""
    reads: tuple[str, ...] = ()
    """The settings of GATED it reads: refused for the objectives that do not."""
    encoder_tokens: bool = False
    """Its texts are read as BERT's [CLS] ... [SEP]: a tokenizer trained for it starts with BERT's
    special tokens, and a text takes one token more than a language model's <s>."""
    sentinels: bool = False
    """A tokenizer trained for it holds T5's sentinel tokens (data.sentinels of them)."""


OBJECTIVES = {
    "seq2seq": Objective("encoder-decoder", ("train_src", "train_pairs"), ("data.bpe_dropout",)),
    "lm": Objective("decoder", ("train_text",), ("data.pack", "data.bpe_dropout")),
    "mlm": Objective("encoder", ("train_text",), encoder_tokens=True),
    "classify": Objective(
        "encoder", ("train_tsv", "train_images"), ("train.freeze_encoder",), encoder_tokens=True
    ),
    "span_corruption": Objective("encoder-decoder", ("train_text",), sentinels=True),
    "qa": Objective("encoder", ("train_squad",), encoder_tokens=True),
    "qa_sentences": Objective("encoder", ("train_squad",), encoder_tokens=True),
    "speech": Objective(
        "encoder-decoder", ("train_audio",), ("data.spec_augment", "train.freeze_encoder")
    ),
    "detection": Objective("encoder-decoder", ("train_detection",)),
    "image_lm": Objective("decoder", ("train_images",)),
    "contrastive": Objective("encoder", ("train_images",)),
    "caption": Objective("encoder-decoder", ("train_images",)),
    "chat": Objective("decoder", ("train_chat",)),
}
"""Every train.objective value and what it is."""
GATED = {
    "data.spec_augment": "remove it",
    "data.pack": "remove it",
    "data.bpe_dropout": "set data.bpe_dropout = 0",
    "train.freeze_encoder": "remove it",
}
"""Settings only the objectives that name them in `reads` take -> the fix for the others."""
FRONT_ENDS = (
    ("train_images", "vision", "an image encoder"),
    ("train_audio", "audio", "a speech encoder"),
    ("train_detection", "detection", "a detector"),
)
"""(data key, [model] part, what it is): a kind of data and the front end that reads it."""
