"""Whisper (WhisperForConditionalGeneration) <-> our speech EncoderDecoder (model.audio).

Whisper is a pre-norm encoder-decoder with GELU and final LayerNorms on both stacks. Its encoder
reads a log-mel spectrogram through two convolutions (transformer.model.audio) and adds a fixed
sinusoidal table (stored in the weights: it is copied as is); its decoder has learned positions,
unscaled token embeddings and an output layer tied to them (proj_out).

Whisper's key projections have no bias. A key bias adds q . b_k to every score of a query's row,
which the softmax cancels, so the import gives ours a zero bias and the export drops whatever bias a
model trained here learned: the outputs are the same either way.
"""

from __future__ import annotations

from ...config import AudioConfig, ModelConfig
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

WHISPER_LAYERNORM_EPS = 1e-5  # torch's nn.LayerNorm default, which Whisper uses


def config_from_hf(c) -> ModelConfig:
    """A WhisperConfig -> our ModelConfig (errors name the Whisper field that cannot be
    expressed)."""
    if c.decoder_attention_heads != c.encoder_attention_heads:
        raise unsupported(
            "decoder_attention_heads",
            c.decoder_attention_heads,
            f"our encoder and decoder share n_heads (encoder_attention_heads="
            f"{c.encoder_attention_heads})",
        )
    if c.decoder_ffn_dim != c.encoder_ffn_dim:
        raise unsupported(
            "decoder_ffn_dim",
            c.decoder_ffn_dim,
            f"our encoder and decoder share d_ff (encoder_ffn_dim={c.encoder_ffn_dim})",
        )
    if not getattr(c, "tie_word_embeddings", True):
        raise unsupported("tie_word_embeddings", False, "our Whisper ties proj_out to the tokens")
    if getattr(c, "use_weighted_layer_sum", False):
        raise unsupported("use_weighted_layer_sum", True, "that is for audio classification")
    return ModelConfig(
        arch="encoder-decoder",
        vocab_size=c.vocab_size,
        d_model=c.d_model,
        n_heads=c.encoder_attention_heads,
        n_encoder_layers=c.encoder_layers,
        n_decoder_layers=c.decoder_layers,
        d_ff=c.encoder_ffn_dim,
        dropout=float(c.dropout),
        attention_dropout=float(c.attention_dropout),
        activation_dropout=float(c.activation_dropout),
        norm_position="pre",
        norm="layernorm",
        norm_eps=WHISPER_LAYERNORM_EPS,
        final_norm=True,
        positional="learned",
        max_positions=c.max_target_positions,
        activation=activation_from_hf("activation_function", c.activation_function),
        bias=True,
        output_bias=False,
        tie_embeddings=True,
        scale_embedding=False,  # transformers' Whisper ignores its scale_embedding field
        pad_id=c.pad_token_id,
        bos_id=c.bos_token_id,
        eos_id=first_id(c.eos_token_id),
        decoder_start_id=c.decoder_start_token_id,
        audio=AudioConfig(
            n_mels=c.num_mel_bins,
            max_frames=2 * c.max_source_positions,
            positions="sinusoidal",
            pad_to_max=True,
        ),
    )


def config_to_hf(cfg: ModelConfig):
    """Our ModelConfig -> a WhisperConfig, or an error naming the field Whisper cannot express."""
    from transformers import WhisperConfig

    family = "Whisper"
    require(cfg.audio is not None, "audio", cfg.audio, family, "Whisper reads audio (model.audio)")
    require(
        cfg.audio.stride == 2,
        "model.audio.stride",
        cfg.audio.stride,
        family,
        "Whisper's first convolution has stride 1 (stride = 2)",
    )
    require(
        cfg.audio.pad_to_max,
        "model.audio.pad_to_max",
        cfg.audio.pad_to_max,
        family,
        "Hugging Face's Whisper pads every input to 30 s, and this model reads each clip at its "
        "own length (fine-tune it with train.pad_to_max = true to export it)",
    )
    require(
        cfg.norm_position == "pre",
        "norm_position",
        cfg.norm_position,
        family,
        "Whisper is pre-norm",
    )
    require(cfg.norm == "layernorm", "norm", cfg.norm, family, "Whisper uses LayerNorm")
    require(
        cfg.norm_eps == WHISPER_LAYERNORM_EPS,
        "norm_eps",
        cfg.norm_eps,
        family,
        f"Whisper's LayerNorms use {WHISPER_LAYERNORM_EPS}",
    )
    require(cfg.use_final_norm, "final_norm", cfg.final_norm, family, "Whisper has final norms")
    require(cfg.bias, "bias", cfg.bias, family, "Whisper's layers have biases")
    require(
        cfg.kv_heads == cfg.n_heads,
        "n_kv_heads",
        cfg.n_kv_heads,
        family,
        "Whisper has no grouped-query attention",
    )
    require(
        cfg.positional == "learned",
        "positional",
        cfg.positional,
        family,
        "Whisper's decoder learns its positions",
    )
    require(
        cfg.d_k is None and cfg.d_v is None,
        "d_k",
        cfg.d_k or cfg.d_v,
        family,
        "Whisper's heads have d_model / n_heads dimensions",
    )
    require(cfg.tie_embeddings, "tie_embeddings", False, family, "Whisper ties proj_out")
    require(not cfg.output_bias, "output_bias", True, family, "Whisper's output has no bias")
    require(
        not cfg.scale_embedding,
        "scale_embedding",
        True,
        family,
        "Whisper does not scale its token embeddings",
    )
    require(not cfg.embedding_norm, "embedding_norm", True, family, "Whisper has no embedding norm")
    return WhisperConfig(
        vocab_size=cfg.target_vocab_size,
        num_mel_bins=cfg.audio.n_mels,
        d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers,
        decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff,
        activation_function=activation_to_hf(cfg.activation, family),
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        max_source_positions=cfg.audio.n_positions,
        max_target_positions=cfg.max_positions,
        pad_token_id=cfg.pad_id,
        bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id,
        decoder_start_token_id=cfg.start_id,
        tie_word_embeddings=True,
        suppress_tokens=None,
        begin_suppress_tokens=None,
    )


def _pairs(cfg: ModelConfig) -> list[tuple[str, str]]:
    """(our name, Whisper name) for every tensor that is copied as is (all but the key biases)."""
    pairs = [
        ("encoder.front.positions", "model.encoder.embed_positions.weight"),
        ("decoder.embed.tokens.weight", "model.decoder.embed_tokens.weight"),
        ("decoder.embed.positions.weight", "model.decoder.embed_positions.weight"),
    ]
    for conv in ("conv1", "conv2"):
        pairs += [
            (f"encoder.front.{conv}.{p}", f"model.encoder.{conv}.{p}") for p in ("weight", "bias")
        ]
    for side in ("encoder", "decoder"):
        pairs += [
            (f"{side}.final_norm.{p}", f"model.{side}.layer_norm.{p}") for p in ("weight", "bias")
        ]
    pairs += bart_layer_pairs(cfg.n_encoder_layers, cfg.n_decoder_layers, key_bias=False)
    return pairs


def key_biases(cfg: ModelConfig) -> list[str]:
    """Our key-projection biases, which Whisper does not have (zero on import)."""
    names = [f"encoder.layers.{i}.self_attn.k_proj.bias" for i in range(cfg.n_encoder_layers)]
    for i in range(cfg.n_decoder_layers):
        names += [f"decoder.layers.{i}.{a}.k_proj.bias" for a in ("self_attn", "cross_attn")]
    return names


def from_hf(hf_model) -> EncoderDecoder:
    """A WhisperForConditionalGeneration (or WhisperModel) -> our EncoderDecoder with the same
    logits."""
    import torch

    cfg = config_from_hf(hf_model.config)
    theirs = weights_of(hf_model)
    if type(hf_model).__name__ == "WhisperModel":
        theirs = {f"model.{k}": v for k, v in theirs.items()}
    tensors = {ours: theirs[name] for ours, name in _pairs(cfg)}
    tensors.update({name: torch.zeros(cfg.d_model) for name in key_biases(cfg)})
    model = build_model(cfg)
    load_weights(model, tensors, "Whisper -> EncoderDecoder")
    return model.eval()


def to_hf(model: EncoderDecoder):
    """Our speech EncoderDecoder -> a WhisperForConditionalGeneration with the same logits."""
    from transformers import WhisperForConditionalGeneration

    cfg = model.config
    hf_model = WhisperForConditionalGeneration(config_to_hf(cfg))
    ours = weights_of(model)
    tensors = {name: ours[mine] for mine, name in _pairs(cfg)}
    load_weights(hf_model, tensors, "EncoderDecoder -> Whisper")
    return hf_model.eval()
