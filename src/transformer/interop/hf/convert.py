"""from_hf and to_hf: one Hugging Face model to ours and back, through the family module that its
model_type (or our config) names.

The rules: from_hf takes a transformers model object, a Hugging Face model directory or a .gguf
file (read by loading.load_hf); to_hf picks the family from our config (audio: Whisper; T5's
relative bias: T5; vision: ViT; else Marian, BERT, GPT-2 or Llama by arch and positions); what a
family cannot express is one HFConversionError naming the field.
"""

from __future__ import annotations

import os

from ...model.transformer import Model
from . import bert, gpt2, llama, marian, t5, vit, whisper
from .common import HFConversionError

FAMILIES = {
    "marian": marian,
    "t5": t5,
    "whisper": whisper,
    "gpt2": gpt2,
    "llama": llama,
    "bert": bert,
    "vit": vit,
}
"""Hugging Face's model_type -> the module whose from_hf converts it."""


def from_hf(model_or_path, with_tokenizer: bool = False):
    """A transformers model (or a path to one) -> our model with the same outputs, in eval mode.

    With with_tokenizer=True returns (model, tokenizer): the transformers tokenizer read from
    the path, or None (always None for a model object).
    """
    hf_model, tokenizer = model_or_path, None
    if isinstance(model_or_path, (str, os.PathLike)):
        from .loading import load_hf

        source = load_hf(model_or_path, tokenizer=with_tokenizer)
        hf_model, tokenizer = source.model, source.tokenizer
    model = _convert(hf_model)
    return (model, tokenizer) if with_tokenizer else model


def _convert(hf_model) -> Model:
    model_type = getattr(getattr(hf_model, "config", None), "model_type", None)
    family = FAMILIES.get(model_type)
    if family is None:
        raise HFConversionError(
            f"Hugging Face model_type={model_type!r} is not supported: "
            f"from_hf converts {', '.join(FAMILIES)} models"
        )
    return family.from_hf(hf_model)


def to_hf(model: Model):
    """Our model -> the matching transformers model (Marian, T5, Whisper, GPT-2, Llama, BERT or
    ViT) with the same outputs."""
    cfg = model.config
    if cfg.detection is not None:
        raise HFConversionError(
            "a detector (model.detection) has no Hugging Face export: transformers' DETR takes a "
            "ResNet backbone, not this model's small CNN or patch projection; use the model "
            "directory itself"
        )
    if cfg.audio is not None:
        return whisper.to_hf(model)
    if cfg.vision is not None and cfg.arch == "encoder-decoder":
        raise HFConversionError(
            "an image captioner (arch encoder-decoder with model.vision) has no Hugging Face "
            "export: use the model directory itself (transformer caption, Pipeline.caption)"
        )
    if cfg.arch == "encoder-decoder" and cfg.positional == "t5_bias":
        return t5.to_hf(model)
    if cfg.qk_dim != cfg.head_dim:
        raise HFConversionError(
            f"d_k={cfg.d_k} has no Hugging Face export: its models give queries and keys "
            f"d_model / n_heads = {cfg.head_dim} dimensions per head, as values"
        )
    if cfg.d_v is not None and cfg.d_v * cfg.n_heads != cfg.d_model and cfg.positional != "rope":
        raise HFConversionError(
            f"d_v={cfg.d_v} has no Hugging Face export outside T5 and Llama: the others give "
            f"each head d_model / n_heads = {cfg.d_model // cfg.n_heads} dimensions"
        )
    if cfg.vision is not None:
        return vit.to_hf(model)
    match cfg.arch:
        case "encoder-decoder":
            return marian.to_hf(model)
        case "encoder":
            return bert.to_hf(model)
        case "decoder" if cfg.positional == "learned":
            return gpt2.to_hf(model)
        case "decoder" if cfg.positional == "rope":
            return llama.to_hf(model)
        case "decoder":
            raise HFConversionError(
                f"positional={cfg.positional!r} has no Hugging Face export: decoder-only "
                "models export as GPT-2 (positional='learned') or Llama (positional='rope')"
            )
        case _:
            raise HFConversionError(f"arch={cfg.arch!r} has no Hugging Face export")
