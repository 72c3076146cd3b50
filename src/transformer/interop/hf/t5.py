"""T5 (T5ForConditionalGeneration) <-> our EncoderDecoder.

T5 is a pre-norm encoder-decoder with RMSNorm without bias, no biases anywhere, no position
embeddings but a bucketed relative position bias (one table per stack, in the first layer of
Hugging Face's blocks, added in every layer), unscaled attention scores, unscaled embeddings
shared by encoder and decoder, and decoding that starts from the pad token. v1.0 ties the
output layer to the embedding and scales the decoder's last state by d_model^-1/2 before it
(feed-forward ReLU); v1.1 unties it, without the scale (feed-forward gated GELU, tanh form).
"""

from __future__ import annotations

from torch import nn

from ...config import ModelConfig
from ...model.build import build_model
from ...model.transformer import EncoderDecoder
from .common import (
    HFConversionError,
    activation_from_hf,
    first_id,
    load_weights,
    require,
    unsupported,
    weights_of,
)

_ATTN = (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o"))
# Gated feed_forward_proj ("gated-<act>") -> our gated activation, by Hugging Face's activation
# name.
_GATED = {
    "gelu_new": "geglu_tanh",
    "gelu_pytorch_tanh": "geglu_tanh",
    "gelu": "geglu",
    "silu": "swiglu",
    "swish": "swiglu",
}
_TO_HF = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_tanh": "gelu_new",
    "silu": "silu",
    "geglu_tanh": "gated-gelu",
    "swiglu": "gated-silu",
}


def _tied(hf_model) -> bool:
    return hf_model.lm_head.weight.data_ptr() == hf_model.shared.weight.data_ptr()


def config_from_hf(c, tied: bool) -> ModelConfig:
    """A T5Config -> our ModelConfig; tied says whether the model's lm_head is its shared
    embedding."""
    if c.dense_act_fn is None:
        raise unsupported("feed_forward_proj", c.feed_forward_proj, "it names no activation")
    if c.is_gated_act:
        if c.dense_act_fn not in _GATED:
            raise unsupported(
                "feed_forward_proj",
                c.feed_forward_proj,
                f"gated feed-forward activations supported: {', '.join(sorted(_GATED))}",
            )
        activation = _GATED[c.dense_act_fn]
    else:
        activation = activation_from_hf("feed_forward_proj", c.dense_act_fn)
    # transformers >= 5 keeps T5 v1.0's output scale as scale_decoder_outputs; before,
    # tie_word_embeddings meant both
    scale_output = bool(getattr(c, "scale_decoder_outputs", c.tie_word_embeddings))
    heads_width = c.d_kv * c.num_heads
    pad = c.pad_token_id if c.pad_token_id is not None else 0
    start = getattr(c, "decoder_start_token_id", None)
    start = pad if start is None else start
    return ModelConfig(
        arch="encoder-decoder",
        vocab_size=c.vocab_size,
        d_model=c.d_model,
        n_heads=c.num_heads,
        d_k=None if heads_width == c.d_model else c.d_kv,
        d_v=None if heads_width == c.d_model else c.d_kv,
        n_encoder_layers=c.num_layers,
        n_decoder_layers=c.num_decoder_layers if c.num_decoder_layers is not None else c.num_layers,
        d_ff=c.d_ff,
        dropout=float(c.dropout_rate),
        attention_dropout=float(c.dropout_rate),
        activation_dropout=float(c.dropout_rate),
        norm_position="pre",
        norm="rmsnorm",
        norm_eps=float(c.layer_norm_epsilon),
        final_norm=True,
        positional="t5_bias",
        relative_bias={
            "buckets": c.relative_attention_num_buckets,
            "max_distance": c.relative_attention_max_distance,
        },
        max_positions=max(int(getattr(c, "n_positions", 512) or 512), 512),
        activation=activation,
        bias=False,
        output_bias=False,
        tie_embeddings=tied,
        share_embeddings=True,
        scale_embedding=False,
        scale_attention=False,
        scale_output=scale_output,
        pad_id=pad,
        bos_id=start,
        eos_id=first_id(c.eos_token_id) if c.eos_token_id is not None else 1,
        decoder_start_id=start,
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a T5Config, or an error naming the field T5 cannot express."""
    from transformers import T5Config

    _check_expressible(cfg)
    config = T5Config(
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        d_kv=cfg.head_dim,
        d_ff=cfg.d_ff,
        num_layers=cfg.n_encoder_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        num_heads=cfg.n_heads,
        relative_attention_num_buckets=cfg.relative_bias.buckets,
        relative_attention_max_distance=cfg.relative_bias.max_distance,
        dropout_rate=cfg.dropout,
        layer_norm_epsilon=cfg.norm_eps,
        feed_forward_proj=_TO_HF[cfg.activation],
        tie_word_embeddings=cfg.tie_embeddings,
        pad_token_id=cfg.pad_id,
        eos_token_id=cfg.eos_id,
        decoder_start_token_id=cfg.start_id,
    )
    config.decoder_start_token_id = cfg.start_id
    return config


def _check_expressible(cfg: ModelConfig) -> None:
    """An HFConversionError naming the first field of `cfg` that T5 cannot express."""
    family = "T5"
    require(cfg.arch == "encoder-decoder", "arch", cfg.arch, family, "T5 is an encoder-decoder")
    require(
        cfg.positional == "t5_bias",
        "positional",
        cfg.positional,
        family,
        "T5 uses positional = 't5_bias'",
    )
    require(
        cfg.norm_position == "pre" and cfg.use_final_norm,
        "norm_position/final_norm",
        f"{cfg.norm_position}/{cfg.final_norm}",
        family,
        "T5 is pre-norm with a final norm in each stack",
    )
    require(cfg.norm == "rmsnorm", "norm", cfg.norm, family, "T5 uses RMSNorm")
    require(
        not cfg.bias and not cfg.output_bias,
        "bias/output_bias",
        f"{cfg.bias}/{cfg.output_bias}",
        family,
        "T5 has no biases",
    )
    require(
        not cfg.scale_embedding,
        "scale_embedding",
        cfg.scale_embedding,
        family,
        "T5 does not scale embeddings",
    )
    require(
        not cfg.scale_attention,
        "scale_attention",
        cfg.scale_attention,
        family,
        "T5 does not divide the scores by sqrt(d_k)",
    )
    _check_sharing_and_widths(cfg)


def _check_sharing_and_widths(cfg: ModelConfig) -> None:
    """_check_expressible's second half: shared embeddings, the output scale, heads, activation,
    dropout."""
    family = "T5"
    require(
        cfg.shares_embeddings and cfg.tgt_vocab_size is None,
        "share_embeddings",
        cfg.share_embeddings,
        family,
        "T5's encoder and decoder share one embedding",
    )
    require(
        cfg.scale_output == cfg.tie_embeddings,
        "scale_output",
        cfg.scale_output,
        family,
        f"T5 scales the output exactly when it is tied (tie_embeddings={cfg.tie_embeddings})",
    )
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "T5 has no grouped-query attention",
    )
    require(
        cfg.qk_dim == cfg.head_dim,
        "d_k",
        cfg.d_k,
        family,
        f"T5's heads have one size (d_kv) for queries, "
        f"keys and values: d_k must equal d_v = {cfg.head_dim}",
    )
    require(
        not cfg.embedding_norm,
        "embedding_norm",
        cfg.embedding_norm,
        family,
        "T5 has no embedding norm",
    )
    require(
        cfg.activation in _TO_HF,
        "activation",
        cfg.activation,
        family,
        f"T5's feed-forward takes one of {', '.join(_TO_HF)}",
    )
    drops = {cfg.dropout, cfg.attention_dropout, cfg.activation_dropout}
    require(
        len(drops) == 1,
        "dropout/attention_dropout/activation_dropout",
        f"{cfg.dropout}/{cfg.attention_dropout}/{cfg.activation_dropout}",
        family,
        "T5 has one dropout_rate",
    )


def _pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our name, T5's name) for every tensor."""
    gated = cfg.activation in ("geglu_tanh", "geglu", "swiglu")
    ffn = [("w1", "wi_0"), ("w3", "wi_1"), ("w2", "wo")] if gated else [("w1", "wi"), ("w2", "wo")]
    pairs = [("encoder.embed.tokens.weight", "shared.weight")]
    for side, n_layers in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        pairs.append(
            (
                f"{side}.relative.table.weight",
                f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
            )
        )
        for i in range(n_layers):
            ours, theirs = f"{side}.layers.{i}", f"{side}.block.{i}.layer"
            blocks = [("self_attn", "SelfAttention", "norm1")]
            if side == "decoder":
                blocks.append(("cross_attn", "EncDecAttention", "norm2"))
            for k, (attn, hf_attn, norm) in enumerate(blocks):
                pairs += [
                    (f"{ours}.{attn}.{p}.weight", f"{theirs}.{k}.{hf_attn}.{q}.weight")
                    for p, q in _ATTN
                ]
                pairs.append((f"{ours}.{norm}.weight", f"{theirs}.{k}.layer_norm.weight"))
            k = len(blocks)
            pairs += [
                (f"{ours}.feed_forward.{p}.weight", f"{theirs}.{k}.DenseReluDense.{q}.weight")
                for p, q in ffn
            ]
            pairs.append(
                (
                    f"{ours}.{'norm3' if side == 'decoder' else 'norm2'}.weight",
                    f"{theirs}.{k}.layer_norm.weight",
                )
            )
        pairs.append((f"{side}.final_norm.weight", f"{side}.final_layer_norm.weight"))
    if not cfg.tie_embeddings:
        pairs.append(("lm_head.weight", "lm_head.weight"))
    return pairs


def from_hf(hf_model) -> EncoderDecoder:
    """A T5ForConditionalGeneration -> our EncoderDecoder with the same outputs."""
    if not hasattr(hf_model, "lm_head"):
        raise HFConversionError(
            f"{type(hf_model).__name__} has no language-model head: from_hf converts "
            "T5ForConditionalGeneration"
        )
    cfg = config_from_hf(hf_model.config, _tied(hf_model))
    theirs = weights_of(hf_model)
    model = build_model(cfg)
    load_weights(model, {ours: theirs[name] for ours, name in _pairs(cfg)}, "T5 -> EncoderDecoder")
    return model.eval()


def to_hf(model: EncoderDecoder):
    """Our EncoderDecoder (T5 layout) -> a T5ForConditionalGeneration with the same outputs."""
    from transformers import T5ForConditionalGeneration

    cfg = model.config
    hf_model = T5ForConditionalGeneration(config_to_hf(cfg))
    hf_model.generation_config.decoder_start_token_id = cfg.start_id
    # transformers >= 5 ties T5's head unless both weights differ
    if not cfg.tie_embeddings and _tied(hf_model):
        hf_model.lm_head.weight = nn.Parameter(hf_model.lm_head.weight.detach().clone())
    ours = weights_of(model)
    load_weights(
        hf_model,
        {name: ours[mine] for mine, name in _pairs(cfg)},
        "EncoderDecoder -> T5",
        ignore=lambda name: name in ("encoder.embed_tokens.weight", "decoder.embed_tokens.weight"),
    )
    return hf_model.eval()
