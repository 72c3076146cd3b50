"""GPT-2 (GPT2LMHeadModel / GPT2Model) <-> our DecoderOnly.

GPT-2 is a pre-norm decoder with learned positions, a final LayerNorm, tanh-approximated
GELU ("gelu_new") and an output layer tied to the token embedding. Its linear layers are
Conv1D: y = x W + b with W stored (in, out), the transpose of nn.Linear; the query, key and
value projections are one (C, 3C) matrix, c_attn.
"""

from __future__ import annotations

import torch

from ...config import ModelConfig
from ...model.build import build_model
from ...model.transformer import DecoderOnly
from .common import (
    activation_from_hf,
    activation_to_hf,
    bias_or_zeros,
    first_id,
    load_weights,
    require,
    unsupported,
    weights_of,
)

# Per layer: our name <-> GPT-2's, for the Conv1D layers (stored transposed) and the norms.
_CONV1D = (
    ("self_attn.out_proj", "attn.c_proj"),
    ("feed_forward.w1", "mlp.c_fc"),
    ("feed_forward.w2", "mlp.c_proj"),
)
_NORMS = (("norm1", "ln_1"), ("norm3", "ln_2"))


def config_from_hf(c) -> ModelConfig:
    """A GPT2Config -> our ModelConfig (errors name the GPT-2 field that cannot be expressed)."""
    if not getattr(c, "scale_attn_weights", True):
        raise unsupported(
            "scale_attn_weights", False, "our attention always divides by sqrt(head dim)"
        )
    if getattr(c, "scale_attn_by_inverse_layer_idx", False):
        raise unsupported(
            "scale_attn_by_inverse_layer_idx", True, "our attention has no per-layer score scaling"
        )
    if getattr(c, "add_cross_attention", False):
        raise unsupported(
            "add_cross_attention", True, "a decoder-only model has no cross-attention"
        )
    eos = first_id(c.eos_token_id)
    return ModelConfig(
        arch="decoder",
        vocab_size=c.vocab_size,
        d_model=c.n_embd,
        n_heads=c.n_head,
        n_decoder_layers=c.n_layer,
        n_encoder_layers=0,
        d_ff=c.n_inner or 4 * c.n_embd,
        dropout=float(c.resid_pdrop),
        attention_dropout=float(c.attn_pdrop),
        norm_position="pre",
        norm="layernorm",
        norm_eps=c.layer_norm_epsilon,
        final_norm=True,
        positional="learned",
        max_positions=c.n_positions,
        activation=activation_from_hf("activation_function", c.activation_function),
        bias=True,
        tie_embeddings=bool(c.tie_word_embeddings),
        scale_embedding=False,
        pad_id=c.pad_token_id if c.pad_token_id is not None else eos,
        bos_id=c.bos_token_id if c.bos_token_id is not None else eos,
        eos_id=eos,
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a GPT2Config, or an error naming the field GPT-2 cannot express."""
    from transformers import GPT2Config

    family = "GPT-2"
    require(cfg.arch == "decoder", "arch", cfg.arch, family, "GPT-2 is decoder-only")
    require(
        cfg.norm_position == "pre", "norm_position", cfg.norm_position, family, "GPT-2 is pre-norm"
    )
    require(cfg.norm == "layernorm", "norm", cfg.norm, family, "GPT-2 uses LayerNorm")
    require(
        cfg.use_final_norm,
        "final_norm",
        cfg.final_norm,
        family,
        "GPT-2 has a final LayerNorm (ln_f)",
    )
    require(
        cfg.positional == "learned",
        "positional",
        cfg.positional,
        family,
        "GPT-2 uses learned positions",
    )
    require(
        not cfg.output_bias,
        "output_bias",
        cfg.output_bias,
        family,
        "GPT-2's output layer has no bias",
    )
    require(
        not cfg.scale_embedding,
        "scale_embedding",
        cfg.scale_embedding,
        family,
        "GPT-2 does not scale embeddings",
    )
    require(
        not cfg.embedding_norm,
        "embedding_norm",
        cfg.embedding_norm,
        family,
        "GPT-2 has no embedding norm",
    )
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "GPT-2 has no grouped-query attention",
    )
    return GPT2Config(
        vocab_size=cfg.vocab_size,
        n_positions=cfg.max_positions,
        n_embd=cfg.d_model,
        n_layer=cfg.n_decoder_layers,
        n_head=cfg.n_heads,
        n_inner=cfg.d_ff,
        activation_function=activation_to_hf(cfg.activation, family),
        resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout,
        attn_pdrop=cfg.attention_dropout,
        layer_norm_epsilon=cfg.norm_eps,
        bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id,
        pad_token_id=cfg.pad_id,
        tie_word_embeddings=cfg.tie_embeddings,
    )


def _prefix(hf_model) -> str:
    return "" if type(hf_model).__name__ == "GPT2Model" else "transformer."


def from_hf(hf_model) -> DecoderOnly:
    """A GPT2LMHeadModel (or a bare GPT2Model, whose head is the tied embedding) -> our
    DecoderOnly."""
    cfg = config_from_hf(hf_model.config)
    p = _prefix(hf_model)
    if not p and not cfg.tie_embeddings:
        raise unsupported(
            "tie_word_embeddings",
            False,
            "a bare GPT2Model has no output layer: pass GPT2LMHeadModel",
        )
    theirs = weights_of(hf_model)
    c = cfg.d_model
    t = {
        "decoder.embed.tokens.weight": theirs[f"{p}wte.weight"],
        "decoder.embed.positions.weight": theirs[f"{p}wpe.weight"],
        "decoder.final_norm.weight": theirs[f"{p}ln_f.weight"],
        "decoder.final_norm.bias": theirs[f"{p}ln_f.bias"],
    }
    if not cfg.tie_embeddings:
        t["lm_head.weight"] = theirs["lm_head.weight"]
    for i in range(cfg.n_decoder_layers):
        ours, h = f"decoder.layers.{i}", f"{p}h.{i}"
        w, b = theirs[f"{h}.attn.c_attn.weight"], theirs[f"{h}.attn.c_attn.bias"]  # (C, 3C), (3C,)
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            t[f"{ours}.self_attn.{name}.weight"] = w[:, j * c : (j + 1) * c].T
            t[f"{ours}.self_attn.{name}.bias"] = b[j * c : (j + 1) * c]
        for mine, conv in _CONV1D:
            t[f"{ours}.{mine}.weight"] = theirs[f"{h}.{conv}.weight"].T
            t[f"{ours}.{mine}.bias"] = theirs[f"{h}.{conv}.bias"]
        for mine, norm in _NORMS:
            for q in ("weight", "bias"):
                t[f"{ours}.{mine}.{q}"] = theirs[f"{h}.{norm}.{q}"]
    model = build_model(cfg)
    load_weights(model, {k: v.contiguous() for k, v in t.items()}, "GPT-2 -> DecoderOnly")
    return model.eval()


def to_hf(model: DecoderOnly):
    """Our DecoderOnly (GPT-2 shaped) -> a GPT2LMHeadModel with the same outputs."""
    from transformers import GPT2LMHeadModel

    cfg = model.config
    hf_model = GPT2LMHeadModel(config_to_hf(cfg))
    ours = weights_of(model)

    def bias(name: str) -> torch.Tensor:
        return bias_or_zeros(ours, name)

    t = {
        "transformer.wte.weight": ours["decoder.embed.tokens.weight"],
        "transformer.wpe.weight": ours["decoder.embed.positions.weight"],
        "transformer.ln_f.weight": ours["decoder.final_norm.weight"],
        "transformer.ln_f.bias": bias("decoder.final_norm"),
    }
    if not cfg.tie_embeddings:
        t["lm_head.weight"] = ours["lm_head.weight"]
    for i in range(cfg.n_decoder_layers):
        mine, h = f"decoder.layers.{i}", f"transformer.h.{i}"
        attn = [f"{mine}.self_attn.{n}" for n in ("q_proj", "k_proj", "v_proj")]
        t[f"{h}.attn.c_attn.weight"] = torch.cat([ours[f"{a}.weight"].T for a in attn], dim=1)
        t[f"{h}.attn.c_attn.bias"] = torch.cat([bias(a) for a in attn])
        for ourname, conv in _CONV1D:
            t[f"{h}.{conv}.weight"] = ours[f"{mine}.{ourname}.weight"].T
            t[f"{h}.{conv}.bias"] = bias(f"{mine}.{ourname}")
        for ourname, norm in _NORMS:
            t[f"{h}.{norm}.weight"] = ours[f"{mine}.{ourname}.weight"]
            t[f"{h}.{norm}.bias"] = bias(f"{mine}.{ourname}")
    load_weights(hf_model, {k: v.contiguous() for k, v in t.items()}, "DecoderOnly -> GPT-2")
    return hf_model.eval()
