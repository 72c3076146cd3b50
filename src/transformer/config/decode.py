"""How to decode: DecodeConfig, the `[decode]` section and a model directory's decode.json.

Each setting is defined once here: type, default, allowed values and one-line doc (the docstring
under it), and for those the command line takes, the flag and the phrase of its error.
`transformer translate/generate/...` flags and the server's request fields are derived from these
definitions (see config.checks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_settings, check_types, from_values, setting

LENGTH_PENALTY_KINDS = ("wu", "power")
SPEECH_HEADS = ("decoder", "ctc", "joint")
"""wu: ((5 + |Y|) / 6)^alpha (Wu et al. 2016); power: |Y|^alpha (see
transformer.decoding.search.penalties)."""
INFERENCE_PRECISIONS = ("fp32", "bf16", "int8", "q8", "q4")
"""What a model can run in (transformer.model.quantize); decode.precision adds "auto"."""
EARLY_STOPPING = (True, False, "never")
ATTENTION_KINDS = ("cross", "self", "encoder")
"""Which attention `transformer attention` and /v1/attention show: cross (output over source), self
(decoder over its inputs), encoder (source over source); see transformer.viz.attention."""


class MoreThanTheBeam(ConfigError):
    """n_best > beam_size, the one rule between two decoding settings: a beam returns at most as
    many hypotheses as it keeps. It carries both values, so that a command can say it with its
    flags (transformer translate)."""

    def __init__(self, n_best: int, beam_size: int):
        super().__init__(
            f"n_best={n_best} is larger than beam_size={beam_size}: a beam cannot return more "
            "hypotheses than it keeps; raise beam_size or lower n_best"
        )
        self.n_best, self.beam_size = n_best, beam_size


@dataclass(frozen=True)
class DecodeConfig:
    """How to decode: search and sampling settings (the `[decode]` section; saved with a model as
    decode.json). Temperature 0 is greedy decoding, everywhere (transformer.decoding.sampling)."""

    beam_size: int = setting(4, gt=0, flag="--beam", give="a beam size of at least 1 (1 = greedy)")
    """Beam width (1 = greedy). The paper uses 4 (§6.1)."""
    length_penalty: float = setting(
        0.6, finite=True, flag="--lenpen", give="a number (the paper: 0.6; 0 = none)"
    )
    """Length penalty alpha (the paper: 0.6); 0 turns it off."""
    length_penalty_kind: str = setting("wu", choices=LENGTH_PENALTY_KINDS, flag="--lenpen-kind")
    """wu: ((5 + |Y|) / 6)^alpha (Wu et al. 2016, the paper's); power: |Y|^alpha (fairseq, Hugging
    Face)."""
    length_counts_eos: bool = setting(True)
    """Whether |Y| in the length penalty counts </s> (fairseq, Hugging Face); false: only the output
    tokens, as CTranslate2's Whisper.generate (an imported Whisper's decode.json)."""
    max_len_a: float = setting(1.0, ge=0, finite=True, flag="--max-len-a", give="a number >= 0")
    """Maximum output length is max_len_a * source_length + max_len_b (the paper: input + 50)."""
    max_len_b: int = setting(50, ge=0, flag="--max-len-b", give="a number of tokens >= 0")
    """See max_len_a (the paper: +50)."""
    min_len: int = setting(0, ge=0, flag="--min-len", give="a number of tokens >= 0")
    """Minimum output length in tokens (</s> is blocked before it)."""
    n_best: int = setting(1, gt=0, flag="--n-best", give="a number of hypotheses of at least 1")
    """Hypotheses returned per input (at most beam_size)."""
    early_stopping: bool | str = setting(True, choices=EARLY_STOPPING)
    """True: stop once beam_size hypotheses are finished; "never": stop when none can still
    improve."""
    keep_markup: bool = setting(True, flag="--no-keep-markup")
    """Models trained with data.protect_markup: mask each input line's placeholders, tags, URLs ...
    with slot tokens and put each one back exactly once in the output (transformer.data.markup);
    false (--no-keep-markup) feeds the line as it is. Other models: no effect."""
    temperature: float = setting(
        1.0, ge=0, finite=True, flag="--temperature", give="a temperature >= 0 (0 = greedy)"
    )
    """Sampling temperature (language models); 0 = greedy (transformer.decoding.sampling)."""
    top_k: int = setting(0, ge=0, flag="--top-k", give="a number of tokens >= 0 (0 = all)")
    """Sample among the k most likely tokens (0 = all)."""
    top_p: float = setting(
        1.0, gt=0, le=1, flag="--top-p", give="a probability above 0 and at most 1 (1 = all)"
    )
    """Sample from the smallest set of tokens whose probability reaches p (1 = all)."""
    guidance_scale: float = setting(
        1.0, ge=0, finite=True, flag="--guidance-scale", give="a number >= 0 (1 = off)"
    )
    """Image generators: classifier-free guidance towards the label or text, log p_uncond + s *
    (log p_cond - log p_uncond); 1 = off, > 1 = closer to the condition."""
    no_repeat_ngram_size: int = setting(
        0, ge=0, flag="--no-repeat-ngram", give="a number of tokens >= 0 (0 = off)"
    )
    """Never repeat an n-gram of this size within an output (fairseq, CTranslate2); 0 = off."""
    repetition_penalty: float = setting(
        1.0, gt=0, finite=True, flag="--repetition-penalty", give="a number > 0 (1 = off)"
    )
    """Penalise tokens already output: logit / this, or * this if negative (CTRL); 1 = off."""
    max_new_tokens: int = setting(
        50, gt=0, flag="--max-new-tokens", give="a positive number of tokens"
    )
    """New tokens to generate from a prompt (language models)."""
    answer_window: int = setting(384, ge=8, flag="--answer-window", give="a number of tokens >= 8")
    """Extractive question answering: tokens per window, [CLS] question [SEP] context [SEP]; a
    longer context is read in overlapping windows (training and answering; at most the model's
    max_positions)."""
    answer_stride: int = setting(128, gt=0, flag="--answer-stride", give="a number of tokens > 0")
    """Extractive question answering: context tokens each window moves past the one before."""
    max_answer_tokens: int = setting(
        30, gt=0, flag="--max-answer-tokens", give="a number of tokens > 0"
    )
    """Extractive question answering: the longest answer span, in tokens (SQuAD's script: 30)."""
    sentence_threshold: float = setting(
        0.5, gt=0, lt=1, flag="--sentence-threshold", give="a probability between 0 and 1"
    )
    """Answer-sentence selection: the probability above which a sentence counts for the answer;
    the answer is the run of sentences with the highest sum of log-odds above it (lower: longer
    answers). Training with validation questions saves the F1-best threshold with the model."""
    add_bos: bool = True
    """Start a prompt with <s> (bos_id), as our language models are trained; imported models follow
    their tokenizer."""
    add_eos: bool = False
    """End each source of an encoder-decoder with </s> (eos_id), as T5's and Marian's tokenizers do:
    imported models follow their tokenizer; models trained here read sources without it."""
    speech_head: str = setting("decoder", choices=SPEECH_HEADS, flag="--speech-head")
    """What writes a speech model's transcript: decoder (the search above, over the attention
    decoder), ctc (the CTC head's best path, model.audio.ctc: no decoder, no search) or joint (a
    beam search over both, ctc_weight x CTC's prefix score + the rest x the decoder's; Watanabe et
    al. 2017); see transformer.decoding.ctc."""
    ctc_weight: float = setting(
        0.3, ge=0, le=1, finite=True, flag="--ctc-weight", give="a number from 0 to 1"
    )
    """speech_head = joint: the weight of CTC's prefix score (ESPnet's default 0.3)."""
    threshold: float = setting(0.5, ge=0, le=1, flag="--threshold", give="a probability")
    """detect: report the objects whose probability is at least this."""
    batch_size: int | None = setting(None, gt=0, flag="--batch-size", give="a number of inputs")
    """Images or 30 s audio windows run together (caption, detect, transcribe, classify and embed
    images); unset: the task's own (transformer.tasks: 8 windows, 64 images to caption or detect,
    256 to classify or embed)."""
    precision: str = setting("fp32", choices=(*INFERENCE_PRECISIONS, "auto"), flag="--precision")
    """Inference precision: fp32 (exact), bf16, int8 (linear layers, CPU only), q8 / q4 (8- or 4-bit
    weights dequantized in the product: batch 1 and small batches, CPU only) or auto (bf16 where
    measured faster)."""
    compile: str = setting("off", choices=("off", "on"), flag="--compile")
    """on: a language model decodes one prompt at a time through one compiled step (CPU; the first
    run compiles for a minute or more, later runs load the compiled step from the cache); off: the
    eager step."""

    def __post_init__(self) -> None:
        check_types(self, None)
        check_settings(self, None)
        if self.n_best > self.beam_size:
            raise MoreThanTheBeam(self.n_best, self.beam_size)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], section: str = "decode") -> DecodeConfig:
        return from_values(cls, values, section)


REPETITION_SETTINGS = ("no_repeat_ngram_size", "repetition_penalty")
"""The guards against repetition loops (transformer.decoding.search.repetition): every search takes
them."""
TRANSLATE_SETTINGS = (
    "beam_size",
    "length_penalty",
    "length_penalty_kind",
    "n_best",
    "max_len_a",
    "max_len_b",
    "min_len",
    *REPETITION_SETTINGS,
    "keep_markup",
)
"""The decoding settings one translation takes: translate's flags, /v1/translate's fields."""
SAMPLING_SETTINGS = ("max_new_tokens", "temperature", "top_k", "top_p", *REPETITION_SETTINGS)
"""The settings of sampling from a language model: generate's flags, /v1/generate's fields."""
IMAGE_SAMPLING_SETTINGS = ("temperature", "top_k", "top_p", "guidance_scale")
"""The settings of sampling images: generate --image's flags, evaluate --classifier's samples."""
TRANSCRIBE_SETTINGS = (
    "beam_size",
    "length_penalty",
    "length_penalty_kind",
    "max_len_b",
    "min_len",
    *REPETITION_SETTINGS,
    "speech_head",
    "ctc_weight",
)
"""The settings of transcribing speech: transcribe's flags, /v1/transcribe's fields."""
CAPTION_SETTINGS = TRANSCRIBE_SETTINGS[:-2]
"""The settings of captioning images (the same as transcribing): caption's flags."""
EVALUATE_SEARCH = ("beam_size", "length_penalty", "length_penalty_kind", "keep_markup")
"""The decoding settings evaluate takes for a text model's search (--src, --pairs, --chat)."""
SPEECH_SEARCH = ("speech_head", "ctc_weight")
"""And with --audio, beside the search's: a speech model's heads."""
ANSWER_SETTINGS = ("answer_window", "answer_stride", "max_answer_tokens", "sentence_threshold")
DETECT_SETTINGS = ("threshold", "batch_size")
"""The settings of detecting objects: detect's flags, /v1/detect's fields (threshold)."""
"""The settings of extractive question answering: answer's flags."""
