"""Read a Hugging Face model directory or a GGUF file (through transformers' reader), with its
tokenizer."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ...config import DecodeConfig
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


TOKENIZER_FILE = "tokenizer.json"


def _adds_eos(tokenizer) -> bool:
    """Whether the Hugging Face tokenizer ends an encoded text with its eos token (T5 and Marian
    do)."""
    if tokenizer is None or getattr(tokenizer, "eos_token_id", None) is None:
        return False
    ids = tokenizer("a").input_ids
    return bool(ids) and ids[-1] == tokenizer.eos_token_id


def _adds_bos(tokenizer) -> bool:
    """Whether the Hugging Face tokenizer starts an encoded text with its bos token (Llama does,
    GPT-2 does not)."""
    if tokenizer is None or getattr(tokenizer, "bos_token_id", None) is None:
        return False
    ids = tokenizer("a").input_ids
    return bool(ids) and ids[0] == tokenizer.bos_token_id


@dataclass
class ImportResult:
    """What `import_hf` wrote."""

    model_type: str
    """The Hugging Face model_type (marian, gpt2, llama, bert)."""
    files: list[str]
    """The files written into the model directory."""
    model: torch.nn.Module
    """Our model (eval mode)."""


def import_hf(path: str | os.PathLike, out: str | os.PathLike) -> ImportResult:
    """Convert a Hugging Face directory or .gguf file into one of our model directories.

    Writes config.json + model.safetensors, the fast tokenizer as tokenizer.json when the
    source has one, the chat template (with the bos/eos token strings it refers to) as
    chat_template.json when it has one, and a README.md saying where the model came from.
    """
    from ...data.tokenizer import ENCODER_ROLES
    from ...files import atomic_write, atomic_write_text
    from ...model_dir import CHAT_TEMPLATE_FILE, save_model
    from . import from_hf

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise HFConversionError(f"--out {out} is a file: pass a directory to write the model into")
    source = load_hf(path)
    model = from_hf(source.model)
    chat = None
    if source.chat_template:
        chat = {
            "chat_template": source.chat_template,
            "bos_token": getattr(source.tokenizer, "bos_token", None),
            "eos_token": getattr(source.tokenizer, "eos_token", None),
        }
    specials = labels = None
    if model.config.arch == "encoder":  # [CLS] text [SEP]: the roles classify and fine-tuning read
        specials = {role: getattr(source.tokenizer, role, None) for role in ENCODER_ROLES}
        specials = {
            role: token for role, token in specials.items() if isinstance(token, str)
        } or None
        id2label = getattr(source.model.config, "id2label", None) or {}
        if model.config.n_classes and len(id2label) == model.config.n_classes:
            labels = [str(id2label[i]) for i in range(model.config.n_classes)]
    add_eos = model.config.arch == "encoder-decoder" and _adds_eos(source.tokenizer)
    save_model(
        model,
        out,
        decode=DecodeConfig(add_bos=_adds_bos(source.tokenizer), add_eos=add_eos),
        chat=chat,
        labels=labels,
        special_tokens=specials,
    )
    files = (
        ["config.json", "model.safetensors", "decode.json"]
        + ([CHAT_TEMPLATE_FILE] if chat else [])
        + (["labels.json"] if labels else [])
        + (["special_tokens.json"] if specials else [])
    )
    backend = getattr(source.tokenizer, "backend_tokenizer", None)
    if backend is not None:
        atomic_write(out / TOKENIZER_FILE, lambda tmp: backend.save(tmp))
        files.append(TOKENIZER_FILE)
    model_type = source.model.config.model_type
    tokenizer_line = (
        f"The tokenizer is Hugging Face's fast tokenizer ({TOKENIZER_FILE})."
        if backend is not None
        else "The source has no fast tokenizer, so none was written."
    )
    atomic_write_text(
        out / "README.md",
        (
            f"# Imported from Hugging Face\n\nConverted from `{path}` "
            f"({type(source.model).__name__}, "
            f"model_type `{model_type}`) with `transformer import-hf`; outputs match the Hugging "
            "Face "
            f"implementation.\n\n{tokenizer_line}\n"
        ),
    )
    files.append("README.md")
    return ImportResult(model_type, files, model)
