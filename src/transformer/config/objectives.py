"""What each training objective is: its model family, the [data] keys it trains on, the front end
a kind of data needs, and the settings only some objectives read. RunConfig checks a run against
these tables; the tasks (transformer.tasks) name the objectives that train them."""

from __future__ import annotations

OBJECTIVES = (
    "seq2seq",
    "lm",
    "mlm",
    "classify",
    "span_corruption",
    "qa",
    "qa_sentences",
    "speech",
    "detection",
    "image_lm",
    "contrastive",
    "caption",
    "chat",
)
OBJECTIVE_ARCHS = {
    "seq2seq": "encoder-decoder",
    "lm": "decoder",
    "mlm": "encoder",
    "classify": "encoder",
    "span_corruption": "encoder-decoder",
    "qa": "encoder",
    "qa_sentences": "encoder",
    "speech": "encoder-decoder",
    "detection": "encoder-decoder",
    "image_lm": "decoder",
    "contrastive": "encoder",
    "caption": "encoder-decoder",
    "chat": "decoder",
}
"""The model family each objective trains."""
OBJECTIVE_DATA = {
    "seq2seq": ("train_src", "train_pairs"),
    "lm": ("train_text",),
    "mlm": ("train_text",),
    "classify": ("train_tsv", "train_images"),
    "span_corruption": ("train_text",),
    "qa": ("train_squad",),
    "qa_sentences": ("train_squad",),
    "speech": ("train_audio",),
    "detection": ("train_detection",),
    "image_lm": ("train_images",),
    "contrastive": ("train_images",),
    "caption": ("train_images",),
    "chat": ("train_chat",),
}
"""The [data] keys each objective trains on (one of them set; translation's train_src goes with
train_tgt)."""
FRONT_ENDS = (
    ("train_images", "vision", "an image encoder"),
    ("train_audio", "audio", "a speech encoder"),
    ("train_detection", "detection", "a detector"),
)
"""(data key, [model] part, what it is): a kind of data and the front end that reads it."""
APPLIES = {
    "data.spec_augment": (("speech",), "remove it"),
    "data.pack": (("lm",), "remove it"),
    "data.bpe_dropout": (("seq2seq", "lm"), "set data.bpe_dropout = 0"),
    "train.freeze_encoder": (("classify", "speech"), "remove it"),
}
"""Settings only some objectives read -> (those objectives, the fix for the others)."""
