"""What CTranslate2's Transformer spec cannot express, refused before anything is written: each
refusal names the model field and what to do instead (export/ct2.py writes the rest)."""

from __future__ import annotations

from ..config import ModelConfig
from .common import ExportError


def check_exportable(cfg: ModelConfig) -> None:
    """Raise ExportError naming the field when CTranslate2's Transformer spec cannot express
    `cfg`."""

    def refuse(field: str, why: str) -> None:
        raise ExportError(
            f"{field}={getattr(cfg, field)!r} cannot be exported to CTranslate2: {why}"
        )

    if cfg.arch == "encoder":
        refuse(
            "arch",
            "CTranslate2 runs encoder-decoder and decoder-only models here; "
            "export encoder-only models with --to hf",
        )
    if cfg.detection is not None:
        raise ExportError(
            "a detector (model.detection) cannot be exported with --to ct2, which writes text "
            "models: use the model directory itself (transformer detect, serve, Pipeline.detect)"
        )
    if cfg.vision is not None:
        raise ExportError(
            "an image captioner (model.vision) cannot be exported with --to ct2, which writes text "
            "models: use the model directory itself (transformer caption, Pipeline.caption)"
        )
    if cfg.audio is not None:
        raise ExportError(
            "a speech model (model.audio) cannot be exported with --to ct2, which writes text "
            "models: export it with --to hf, then convert that with CTranslate2's "
            "ct2-transformers-converter"
        )
    if cfg.positional == "none":
        refuse(
            "positional",
            "CTranslate2 adds its own sinusoidal positions to a model without any; "
            "use sinusoidal, learned or rope",
        )
    if cfg.positional == "t5_bias":
        refuse(
            "positional",
            "this exporter writes CTranslate2's Transformer spec, which has no relative "
            "position bias; export T5-layout models with --to hf",
        )
    if not cfg.scale_attention:
        refuse(
            "scale_attention",
            "CTranslate2's Transformer spec always divides the scores by sqrt(d_k)",
        )
    if cfg.scale_output:
        refuse("scale_output", "CTranslate2's Transformer spec does not scale the decoder output")
    if cfg.norm_position == "post" and cfg.use_final_norm:
        refuse("final_norm", "CTranslate2 applies a final norm only in pre-norm models")
    if cfg.n_token_types:
        refuse("n_token_types", "CTranslate2's decoders have no token-type embeddings")
    if cfg.qk_dim != cfg.head_dim:
        refuse(
            "d_k",
            f"CTranslate2 gives queries, keys and values d_model / n_heads = {cfg.head_dim} "
            "dimensions per head",
        )
    if cfg.head_dim * cfg.n_heads != cfg.d_model:
        refuse(
            "d_v", f"CTranslate2 gives each head d_model / n_heads dimensions, not {cfg.head_dim}"
        )
