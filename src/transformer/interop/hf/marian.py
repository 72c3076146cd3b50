"""Marian (MarianMTModel) <-> our EncoderDecoder.

Marian is the paper's post-norm encoder-decoder with a few choices of its own: sinusoidal
positions laid out as all sines then all cosines ("halves"), token embeddings scaled by
sqrt(d_model), no final norm, a bias on the logits (final_logits_bias), and decoding that
starts from the pad token (decoder_start_token_id).
"""

from __future__ import annotations

import torch

from ...config import ModelConfig
from ...model.build import build_model
from ...model.transformer import EncoderDecoder
from .common import (
    activation_from_hf,
    activation_to_hf,
    bart_layer_pairs,
    first_id,
    load_weights,
    require,
    unsupported,
    weights_of,
)

_MARIAN_LAYERNORM_EPS = 1e-5  # torch's nn.LayerNorm default, which Marian uses


def config_from_hf(c) -> ModelConfig:
    """A MarianConfig -> our ModelConfig (errors name the Marian field that cannot be expressed)."""
    if c.decoder_attention_heads != c.encoder_attention_heads:
        raise unsupported(
            "decoder_attention_heads",
            c.decoder_attention_heads,
            "our encoder and decoder share n_heads "
            f"(encoder_attention_heads={c.encoder_attention_heads})",
        )
    if c.decoder_ffn_dim != c.encoder_ffn_dim:
        raise unsupported(
            "decoder_ffn_dim",
            c.decoder_ffn_dim,
            f"our encoder and decoder share d_ff (encoder_ffn_dim={c.encoder_ffn_dim})",
        )
    shared = c.share_encoder_decoder_embeddings
    if shared and not c.tie_word_embeddings:
        raise unsupported(
            "tie_word_embeddings",
            False,
            "with share_encoder_decoder_embeddings=True our model "
            "ties the output layer to the shared embedding too",
        )
    eos = first_id(c.eos_token_id)
    start = c.decoder_start_token_id if c.decoder_start_token_id is not None else c.pad_token_id
    return ModelConfig(
        arch="encoder-decoder",
        vocab_size=c.vocab_size,
        tgt_vocab_size=None if shared else (c.decoder_vocab_size or c.vocab_size),
        d_model=c.d_model,
        n_heads=c.encoder_attention_heads,
        n_encoder_layers=c.encoder_layers,
        n_decoder_layers=c.decoder_layers,
        d_ff=c.encoder_ffn_dim,
        dropout=float(c.dropout),
        attention_dropout=float(c.attention_dropout),
        activation_dropout=float(c.activation_dropout),
        norm_position="post",
        norm="layernorm",
        norm_eps=_MARIAN_LAYERNORM_EPS,
        final_norm=False,
        positional="sinusoidal",
        sinusoidal_layout="halves",
        max_positions=c.max_position_embeddings,
        activation=activation_from_hf("activation_function", c.activation_function),
        bias=True,
        output_bias=True,
        tie_embeddings=bool(c.tie_word_embeddings),
        scale_embedding=bool(c.scale_embedding),
        pad_id=c.pad_token_id,
        bos_id=c.bos_token_id if c.bos_token_id is not None else start,
        eos_id=eos,
        decoder_start_id=start,
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a MarianConfig, or an error naming the field Marian cannot express."""
    from transformers import MarianConfig

    family = "Marian"
    require(cfg.arch == "encoder-decoder", "arch", cfg.arch, family, "Marian is an encoder-decoder")
    require(
        cfg.norm_position == "post",
        "norm_position",
        cfg.norm_position,
        family,
        "Marian is post-norm",
    )
    require(cfg.norm == "layernorm", "norm", cfg.norm, family, "Marian uses LayerNorm")
    require(
        cfg.norm_eps == _MARIAN_LAYERNORM_EPS,
        "norm_eps",
        cfg.norm_eps,
        family,
        "Marian's LayerNorm eps is 1e-5",
    )
    require(
        not cfg.use_final_norm, "final_norm", cfg.final_norm, family, "Marian has no final norm"
    )
    require(
        cfg.positional == "sinusoidal" and cfg.sinusoidal_layout == "halves",
        "positional/sinusoidal_layout",
        f"{cfg.positional}/{cfg.sinusoidal_layout}",
        family,
        "Marian uses sinusoidal positions with layout 'halves'",
    )
    require(cfg.bias, "bias", cfg.bias, family, "Marian's linear layers and norms have biases")
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "Marian has no grouped-query attention",
    )
    require(
        not cfg.embedding_norm,
        "embedding_norm",
        cfg.embedding_norm,
        family,
        "Marian has no embedding norm",
    )
    shared = cfg.tgt_vocab_size is None and cfg.tie_embeddings
    return MarianConfig(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.target_vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        activation_function=activation_to_hf(cfg.activation, family),
        max_position_embeddings=cfg.max_positions,
        scale_embedding=cfg.scale_embedding,
        pad_token_id=cfg.pad_id,
        eos_token_id=cfg.eos_id,
        forced_eos_token_id=cfg.eos_id,
        decoder_start_token_id=cfg.start_id,
        share_encoder_decoder_embeddings=shared,
        tie_word_embeddings=cfg.tie_embeddings,
    )


def _pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our name, Marian name) for every tensor that is copied as is."""
    pairs = bart_layer_pairs(cfg.n_encoder_layers, cfg.n_decoder_layers)
    shared = cfg.tgt_vocab_size is None and cfg.tie_embeddings
    if shared:
        pairs.append(("encoder.embed.tokens.weight", "model.shared.weight"))
    else:
        pairs.append(("encoder.embed.tokens.weight", "model.encoder.embed_tokens.weight"))
        pairs.append(("decoder.embed.tokens.weight", "model.decoder.embed_tokens.weight"))
    if not cfg.tie_embeddings:
        pairs.append(("lm_head.weight", "lm_head.weight"))
    return pairs


def from_hf(hf_model) -> EncoderDecoder:
    """A MarianMTModel -> our EncoderDecoder with the same outputs."""
    cfg = config_from_hf(hf_model.config)
    theirs = weights_of(hf_model)
    tensors = {ours: theirs[name] for ours, name in _pairs(cfg)}
    tensors["lm_head.bias"] = theirs["final_logits_bias"][0]
    model = build_model(cfg)
    load_weights(model, tensors, "Marian -> EncoderDecoder")
    return model.eval()


def to_hf(model: EncoderDecoder):
    """Our EncoderDecoder -> a MarianMTModel with the same outputs."""
    from transformers import MarianMTModel

    cfg = model.config
    hf_model = MarianMTModel(config_to_hf(cfg))
    ours = weights_of(model)
    tensors = {name: ours[mine] for mine, name in _pairs(cfg)}
    if cfg.output_bias:
        tensors["final_logits_bias"] = ours["lm_head.bias"][None]
    else:
        tensors["final_logits_bias"] = torch.zeros(1, cfg.target_vocab_size)
    load_weights(
        hf_model, tensors, "EncoderDecoder -> Marian", ignore=lambda name: "embed_positions" in name
    )
    return hf_model.eval()
