"""Parameter and FLOP accounting.

FLOPs count multiply-adds as 2 (one multiply, one add) and cover the matrix products:
the attention and feed-forward layers and the output projection. Embedding lookups,
norms, softmax and residual additions are left out (each is O(d_model) per token, under 1%).
"""

from __future__ import annotations

from torch import nn

from ..config import GATED_ACTIVATIONS, ModelConfig


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters: a tied embedding/output matrix counts once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def attention_flops(
    d_model: int,
    seq_len: int,
    n_heads: int | None = None,
    n_kv_heads: int | None = None,
    d_k: int | None = None,
    d_v: int | None = None,
) -> int:
    """Forward FLOPs of one multi-head attention, per query token, over seq_len keys.

    With h heads of query/key size d_k and value size d_v (default d/h), and K key/value heads:
    projections Q 2·d·h·d_k, K 2·d·K·d_k, V 2·d·K·d_v, output 2·d·h·d_v; scores Q K^T 2·L·h·d_k,
    weights·V 2·L·h·d_v. With d_k = d_v = d/h and K = h this is 4·d·(2d + L), i.e.
    4·B·d·L·(2d + L) for B sequences of L tokens.
    """
    h = n_heads or 1
    d_v = d_v or d_model // h
    qk = h * (d_k or d_v)  # all heads' query (and, with K = h, key) width
    kv = n_kv_heads or h
    return (
        2 * d_model * qk
        + 2 * d_model * kv * (d_k or d_v)
        + 2 * d_model * kv * d_v
        + 2 * d_model * h * d_v
        + 2 * seq_len * qk
        + 2 * seq_len * h * d_v
    )


def feed_forward_flops(d_model: int, d_ff: int, activation: str) -> int:
    """Forward FLOPs of the position-wise FFN per token: 2 matrices (3 when gated: SwiGLU, GEGLU) of
    d x d_ff."""
    return (3 if activation in GATED_ACTIVATIONS else 2) * 2 * d_model * d_ff


def flops_per_token(config: ModelConfig, seq_len: int) -> dict[str, int]:
    """Forward and training FLOPs per token for sequences of seq_len tokens.

    An encoder-decoder is counted per target token with a source of the same length (as in
    translation, where the two are close): encoder + decoder + output projection. Training is
    3x forward (the backward pass costs twice the forward). Attention over all seq_len keys is
    counted even where a causal mask hides half of them, as in the usual 6·N·D estimates.
    """
    attn = attention_flops(
        config.d_model, seq_len, config.n_heads, config.kv_heads, config.d_k, config.d_v
    )
    ffn = feed_forward_flops(config.d_model, config.d_ff, config.activation)
    encoder = decoder = 0
    if config.arch in ("encoder-decoder", "encoder"):
        encoder = config.n_encoder_layers * (attn + ffn)
    if config.arch == "encoder-decoder":
        decoder = config.n_decoder_layers * (2 * attn + ffn)  # self + cross attention
    elif config.arch == "decoder":
        decoder = config.n_decoder_layers * (attn + ffn)
    output = 0 if config.arch == "encoder" else 2 * config.d_model * config.target_vocab_size
    forward = encoder + decoder + output
    return {
        "encoder": encoder,
        "decoder": decoder,
        "output": output,
        "forward": forward,
        "training": 3 * forward,
    }


def flops_per_image(config: ModelConfig, caption_tokens: int = 16) -> dict[str, int]:
    """Forward and training FLOPs per image of an image encoder (config.vision): the patch
    projection, the encoder over [CLS] + the patches (attention over all 1 + P positions), and the
    classifier. An image captioner (arch encoder-decoder): the same encoder, then the decoder and
    output projection for a caption of caption_tokens tokens (self-attention over the caption,
    cross-attention over the 1 + P positions; teacher forcing, as in training). A detector
    (config.detection): see _detector_flops."""
    if config.detection is not None:
        return _detector_flops(config)
    v = config.vision
    if v is None:
        raise ValueError(
            "flops_per_image needs an image model (a config with model.vision or model.detection)"
        )
    positions = v.n_patches + 1
    patches = v.n_patches * 2 * v.channels * v.patch_size**2 * config.d_model
    encoder = positions * flops_per_token(config, positions)["encoder"]
    head = 2 * config.d_model * config.n_classes + (
        2 * config.d_model * config.d_model if config.pooler else 0
    )
    decoder = output = 0
    if config.arch == "encoder-decoder":  # a captioner
        decoder, output = _caption_flops(config, positions, caption_tokens)
    forward = patches + encoder + head + decoder + output
    return {
        "patches": patches,
        "encoder": encoder,
        "head": head,
        **({"decoder": decoder, "output": output} if config.arch == "encoder-decoder" else {}),
        "forward": forward,
        "training": 3 * forward,
    }


def _caption_flops(config: ModelConfig, positions: int, tokens: int) -> tuple[int, int]:
    """A captioner's decoder and output projection over a caption of `tokens` tokens: per token,
    self-attention over the caption, cross-attention over the encoder's `positions` (their keys and
    values counted per token, as flops_per_token counts a source) and the feed-forward network."""

    def attention(keys: int) -> int:
        return attention_flops(
            config.d_model, keys, config.n_heads, config.kv_heads, config.d_k, config.d_v
        )

    ffn = feed_forward_flops(config.d_model, config.d_ff, config.activation)
    decoder = tokens * config.n_decoder_layers * (attention(tokens) + attention(positions) + ffn)
    return decoder, tokens * 2 * config.d_model * config.target_vocab_size


def _detector_flops(config: ModelConfig) -> dict[str, int]:
    """A detector (DETR) per image: the backbone (each 3 x 3 convolution's multiply-adds at its
    output size, or the patch projection), the encoder over the P feature-map positions, the
    decoder's Q queries (self-attention over Q, cross-attention over P; the memory's keys and values
    counted per query, as flops_per_token counts a source), the class head of the last layer and
    the box head of every layer (each layer's box is the next one's reference with refine_boxes);
    the dense head of model.detection.dense_aux in training, and in inference too for dense queries
    (with their start's projection). Norms and activations are not counted."""
    d, c = config.detection, config.d_model
    positions = d.grid**2
    if d.backbone == "cnn":
        backbone, c_in, side = 0, d.channels, d.image_size
        for i in range(d.stride.bit_length() - 1):
            c_out, side = d.backbone_channels * 2**i, side // 2
            backbone += 2 * 9 * (c_in + c_out) * c_out * side * side
            c_in = c_out
        backbone += 2 * c_in * c * positions
    else:
        backbone = positions * 2 * d.channels * d.stride**2 * c
    ffn = feed_forward_flops(c, config.d_ff, config.activation)
    encoder = positions * flops_per_token(config, positions)["encoder"]

    def attention(keys: int) -> int:
        return attention_flops(c, keys, config.n_heads, config.kv_heads, config.d_k, config.d_v)

    decoder = (
        d.n_queries
        * config.n_decoder_layers
        * (attention(d.n_queries) + attention(positions) + ffn)
    )
    box_head = 2 * 2 * c * c + 2 * 4 * c
    outputs = config.n_classes + (d.class_loss == "softmax")  # "no object": softmax's only
    head = d.n_queries * (2 * c * outputs + config.n_decoder_layers * box_head)
    # Co-DETR's dense head: two 3 x 3 convolutions and the 1 x 1 outputs
    dense = positions * (2 * 2 * 9 * c * c + 2 * c * (config.n_classes + 4)) if d.dense_aux else 0
    if d.queries == "dense":  # inference runs the dense head to choose the queries
        head += dense + d.n_queries * 2 * c * c
        dense = 0
    forward = backbone + encoder + decoder + head
    return {
        "backbone": backbone,
        "encoder": encoder,
        "decoder": decoder,
        "head": head,
        "forward": forward,
        "training": 3 * (forward + dense),
    }
