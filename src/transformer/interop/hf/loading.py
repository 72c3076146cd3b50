"""Read a Hugging Face model directory or a GGUF file (through transformers' reader), with its
tokenizer."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from .common import HFConversionError

# model_type -> the transformers class to load when config.architectures names none we support.
_DEFAULT_CLASS = {
    "marian": "MarianMTModel",
    "t5": "T5ForConditionalGeneration",
    "whisper": "WhisperForConditionalGeneration",
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
    "bert": "BertModel",
}
_CLASSES = {
    "marian": ("MarianMTModel",),
    "t5": ("T5ForConditionalGeneration",),
    "whisper": ("WhisperForConditionalGeneration", "WhisperModel"),
    "gpt2": ("GPT2LMHeadModel", "GPT2Model"),
    "llama": ("LlamaForCausalLM",),
    "bert": (
        "BertModel",
        "BertForMaskedLM",
        "BertForSequenceClassification",
        "BertForPreTraining",
        "BertForQuestionAnswering",
    ),
}

# Files whose presence means a Hugging Face directory ships a tokenizer (without them,
# transformers builds an empty one rather than failing).
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "source.spm",
    "tokenizer.model",
    "sentencepiece.bpe.model",
)


@dataclass
class HFSource:
    """What was read from a Hugging Face path."""

    model: torch.nn.Module
    """The transformers model, fp32, in eval mode."""
    tokenizer: object | None
    """The transformers tokenizer, or None when the source has none."""
    chat_template: str | None
    """The tokenizer's chat template (a Jinja string), or None."""


def _locate(path: str | os.PathLike) -> tuple[Path, dict]:
    """(folder, extra from_pretrained kwargs) for a directory or a .gguf file."""
    path = Path(path)
    if path.is_file() and path.suffix == ".gguf":
        return path.parent, {"gguf_file": path.name}
    if path.is_dir():
        if (path / "config.json").is_file():
            return path, {}
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return path, {"gguf_file": ggufs[0].name}
        raise HFConversionError(
            f"{path} has no config.json"
            + (
                f" and {len(ggufs)} .gguf files: pass one of them"
                if ggufs
                else ": pass a Hugging Face model directory or a .gguf file"
            )
        )
    if not path.exists():
        raise FileNotFoundError(
            f"{path} does not exist: pass a Hugging Face model directory or a .gguf file"
        )
    raise HFConversionError(f"{path} is neither a directory nor a .gguf file")


def load_hf(path: str | os.PathLike, tokenizer: bool = True) -> HFSource:
    """Load the model (fp32, offline: nothing is downloaded) and, when asked, the tokenizer."""
    folder, extra = _locate(path)  # a wrong path is reported before the slow import
    try:
        import transformers
    except ImportError:
        raise HFConversionError(
            "Hugging Face import needs transformers: pip install 'transformer[hf]'"
        ) from None
    try:
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True, **extra)
    except (OSError, ValueError, KeyError) as e:
        raise HFConversionError(f"cannot read a Hugging Face config from {path}: {e}") from None
    model_type = config.model_type
    if model_type not in _CLASSES:
        raise HFConversionError(
            f"Hugging Face model_type={model_type!r} is not supported: "
            f"import-hf reads {', '.join(_CLASSES)} models"
        )
    named = [a for a in (config.architectures or []) if a in _CLASSES[model_type]]
    cls = getattr(transformers, named[0] if named else _DEFAULT_CLASS[model_type])
    try:
        model = cls.from_pretrained(
            folder, config=config, dtype=torch.float32, local_files_only=True, **extra
        ).eval()
    except (OSError, ValueError) as e:  # no weights, or weights that do not fit the config
        raise HFConversionError(
            f"cannot read the Hugging Face weights in {path}: {' '.join(str(e).split())}"
        ) from None
    tok = None
    if tokenizer and (
        "gguf_file" in extra or any((folder / f).is_file() for f in _TOKENIZER_FILES)
    ):
        try:
            tok = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
        except (OSError, ValueError, KeyError, TypeError):
            tok = None  # tokenizer files transformers cannot read
        if tok is not None and len(tok) < 2:
            tok = None  # transformers builds an empty tokenizer when it finds no vocabulary
    return HFSource(model, tok, getattr(tok, "chat_template", None) if tok is not None else None)
