"""Llama (LlamaForCausalLM) <-> our DecoderOnly.

Llama is a pre-norm decoder with RMSNorm, rotary positions, a SwiGLU feed-forward network,
grouped-query attention and no biases. Hugging Face's rotary embedding pairs dimension i of
each head with dimension i + D/2 ("rotate half"); ours pairs (2i, 2i+1) as in RoFormer. Both
rotate the pair at the same frequency base^(-2i/D), so permuting the rows of the query and key
projections within each head (HF row i -> our row 2i, HF row i + D/2 -> our row 2i + 1) maps
one onto the other exactly; the attention scores are unchanged because q and k are permuted
alike.
"""

from __future__ import annotations

import torch

from ...config import ModelConfig
from ...model.build import build_model
from ...model.transformer import DecoderOnly
from .common import HFConversionError, first_id, load_weights, require, unsupported, weights_of


def _rope_order(head_dim: int) -> torch.Tensor:
    """(D,) index: our dimension j holds Hugging Face's dimension order[j]."""
    half = torch.arange(head_dim // 2)
    return torch.stack((half, half + head_dim // 2), dim=-1).flatten()  # 0, D/2, 1, D/2+1, ...


def rope_rows_from_hf(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Permute a q/k projection's rows (weight (H*D, C) or bias (H*D,)) from rotate-half to
    interleaved pairs."""
    head_dim = w.shape[0] // n_heads
    return w.reshape(n_heads, head_dim, -1)[:, _rope_order(head_dim)].reshape(w.shape)


def rope_rows_to_hf(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of rope_rows_from_hf."""
    head_dim = w.shape[0] // n_heads
    return w.reshape(n_heads, head_dim, -1)[:, torch.argsort(_rope_order(head_dim))].reshape(
        w.shape
    )


def _rope_theta(c) -> float:
    params = getattr(c, "rope_parameters", None) or {}
    scaling = getattr(c, "rope_scaling", None)
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type != "default":
        raise unsupported(
            "rope_parameters.rope_type" if params else "rope_scaling",
            rope_type,
            "our rotary embedding has no frequency scaling (only rope_type 'default')",
        )
    if (
        isinstance(scaling, dict)
        and scaling.get("rope_type", scaling.get("type", "default")) != "default"
    ):
        raise unsupported("rope_scaling", scaling, "our rotary embedding has no frequency scaling")
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        raise unsupported(
            "partial_rotary_factor",
            params["partial_rotary_factor"],
            "our rotary embedding rotates every dimension",
        )
    return float(params.get("rope_theta", getattr(c, "rope_theta", 10000.0)))


def config_from_hf(c) -> ModelConfig:
    """A LlamaConfig -> our ModelConfig (errors name the Llama field that cannot be expressed)."""
    if c.hidden_act != "silu":
        raise unsupported("hidden_act", c.hidden_act, "our gated feed-forward (swiglu) uses SiLU")
    if c.head_dim is not None and c.head_dim * c.num_attention_heads != c.hidden_size:
        raise unsupported(
            "head_dim",
            c.head_dim,
            f"our head dimension is hidden_size / num_attention_heads = "
            f"{c.hidden_size // c.num_attention_heads}",
        )
    if bool(c.attention_bias) != bool(c.mlp_bias):
        raise unsupported(
            "attention_bias",
            c.attention_bias,
            f"our single `bias` option needs attention_bias == mlp_bias (mlp_bias={c.mlp_bias})",
        )
    eos = first_id(c.eos_token_id)
    bos = c.bos_token_id if c.bos_token_id is not None else eos
    return ModelConfig(
        arch="decoder",
        vocab_size=c.vocab_size,
        d_model=c.hidden_size,
        n_heads=c.num_attention_heads,
        n_kv_heads=c.num_key_value_heads
        if c.num_key_value_heads != c.num_attention_heads
        else None,
        n_decoder_layers=c.num_hidden_layers,
        n_encoder_layers=0,
        d_ff=c.intermediate_size,
        dropout=0.0,
        attention_dropout=float(c.attention_dropout),
        norm_position="pre",
        norm="rmsnorm",
        norm_eps=c.rms_norm_eps,
        final_norm=True,
        positional="rope",
        rope_base=_rope_theta(c),
        max_positions=c.max_position_embeddings,
        activation="swiglu",
        bias=bool(c.attention_bias),
        tie_embeddings=bool(c.tie_word_embeddings),
        scale_embedding=False,
        pad_id=c.pad_token_id if c.pad_token_id is not None else eos,
        bos_id=bos,
        eos_id=eos,
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a LlamaConfig, or an error naming the field Llama cannot express."""
    from transformers import LlamaConfig

    family = "Llama"
    require(cfg.arch == "decoder", "arch", cfg.arch, family, "Llama is decoder-only")
    require(
        cfg.norm_position == "pre", "norm_position", cfg.norm_position, family, "Llama is pre-norm"
    )
    require(cfg.norm == "rmsnorm", "norm", cfg.norm, family, "Llama uses RMSNorm")
    require(cfg.use_final_norm, "final_norm", cfg.final_norm, family, "Llama has a final norm")
    require(
        cfg.positional == "rope",
        "positional",
        cfg.positional,
        family,
        "Llama uses rotary positions",
    )
    require(
        cfg.activation == "swiglu",
        "activation",
        cfg.activation,
        family,
        "Llama's feed-forward is SwiGLU",
    )
    require(
        not cfg.output_bias,
        "output_bias",
        cfg.output_bias,
        family,
        "Llama's output layer has no bias",
    )
    require(
        not cfg.scale_embedding,
        "scale_embedding",
        cfg.scale_embedding,
        family,
        "Llama does not scale embeddings",
    )
    require(
        not cfg.embedding_norm,
        "embedding_norm",
        cfg.embedding_norm,
        family,
        "Llama has no embedding norm",
    )
    return LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_decoder_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.kv_heads,
        head_dim=cfg.head_dim,
        hidden_act="silu",
        max_position_embeddings=cfg.max_positions,
        rms_norm_eps=cfg.norm_eps,
        rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_base},
        attention_bias=cfg.bias,
        mlp_bias=cfg.bias,
        attention_dropout=cfg.attention_dropout,
        bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id,
        pad_token_id=cfg.pad_id,
        tie_word_embeddings=cfg.tie_embeddings,
    )


_LAYER = (
    ("self_attn.v_proj", "self_attn.v_proj"),
    ("self_attn.out_proj", "self_attn.o_proj"),
    ("feed_forward.w1", "mlp.gate_proj"),
    ("feed_forward.w3", "mlp.up_proj"),
    ("feed_forward.w2", "mlp.down_proj"),
    ("norm1.weight", "input_layernorm.weight"),
    ("norm3.weight", "post_attention_layernorm.weight"),
)


def _pairs(cfg: ModelConfig) -> list[tuple[str, str, int]]:
    """(our name, Llama name, heads to permute for rotary: 0 = copy as is)."""
    pairs = [
        ("decoder.embed.tokens.weight", "model.embed_tokens.weight", 0),
        ("decoder.final_norm.weight", "model.norm.weight", 0),
    ]
    if not cfg.tie_embeddings:
        pairs.append(("lm_head.weight", "lm_head.weight", 0))
    params = ("weight", "bias") if cfg.bias else ("weight",)
    for i in range(cfg.n_decoder_layers):
        ours, theirs = f"decoder.layers.{i}", f"model.layers.{i}"
        for p in params:
            pairs.append(
                (f"{ours}.self_attn.q_proj.{p}", f"{theirs}.self_attn.q_proj.{p}", cfg.n_heads)
            )
            pairs.append(
                (f"{ours}.self_attn.k_proj.{p}", f"{theirs}.self_attn.k_proj.{p}", cfg.kv_heads)
            )
        for mine, name in _LAYER:
            if mine.endswith(".weight"):
                pairs.append((f"{ours}.{mine}", f"{theirs}.{name}", 0))
            else:
                pairs += [(f"{ours}.{mine}.{p}", f"{theirs}.{name}.{p}", 0) for p in params]
    return pairs


def from_hf(hf_model) -> DecoderOnly:
    """A LlamaForCausalLM -> our DecoderOnly with the same outputs."""
    if type(hf_model).__name__ != "LlamaForCausalLM":
        raise HFConversionError(
            f"{type(hf_model).__name__} is not supported: pass a LlamaForCausalLM"
        )
    cfg = config_from_hf(hf_model.config)
    theirs = weights_of(hf_model)
    tensors = {
        ours: rope_rows_from_hf(theirs[name], heads) if heads else theirs[name]
        for ours, name, heads in _pairs(cfg)
    }
    model = build_model(cfg)
    load_weights(model, tensors, "Llama -> DecoderOnly")
    return model.eval()


def to_hf(model: DecoderOnly):
    """Our DecoderOnly (Llama shaped) -> a LlamaForCausalLM with the same outputs."""
    from transformers import LlamaForCausalLM

    cfg = model.config
    hf_model = LlamaForCausalLM(config_to_hf(cfg))
    ours = weights_of(model)
    tensors = {
        name: rope_rows_to_hf(ours[mine], heads) if heads else ours[mine]
        for mine, name, heads in _pairs(cfg)
    }
    load_weights(hf_model, tensors, "DecoderOnly -> Llama")
    return hf_model.eval()
