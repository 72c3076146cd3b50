"""import_hf: a Hugging Face directory or .gguf file written as one of our model directories.

The rules: the model converts through from_hf (identical outputs); the fast tokenizer is kept as
tokenizer.json when the source has one, the chat template with the bos / eos strings it names;
decode.json says whether the tokenizer adds bos (Llama) or, for encoder-decoders, eos (T5,
Marian); an encoder keeps its [CLS] / [SEP] roles and its class labels; a README.md says where the
model came from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ...config import DecodeConfig
from .common import HFConversionError
from .convert import from_hf
from .loading import load_hf

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
    from ...model_dir import save_model
    from ...model_records import CHAT_TEMPLATE_FILE

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
