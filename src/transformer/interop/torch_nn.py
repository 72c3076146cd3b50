"""Load the weights of a `torch.nn.Transformer` into our encoder-decoder.

nn.Transformer is only the two stacks: it has no embeddings, positions or output layer, and
it always ends each stack with a norm. The model returned here has those stacks' exact
weights; its embeddings and output layer are new (initialised as `build_model` does), so
a user migrating from nn.Transformer copies their own embedding/generator weights after.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..model.attention import MultiHeadAttention
from ..model.build import build_model
from ..model.layers import FeedForward
from ..model.transformer import EncoderDecoder


def _activation(layer: nn.Module) -> str:
    act = layer.activation
    if act is F.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or isinstance(act, nn.GELU) and act.approximate == "none":
        return "gelu"
    raise ValueError(
        f"nn.Transformer activation {act!r} has no equivalent here: use 'relu' or 'gelu'"
    )


def config_from_torch_nn(ref: nn.Transformer, vocab_size: int, **changes: Any) -> ModelConfig:
    """The ModelConfig whose stacks match `ref` (positions, embeddings etc. from `changes`)."""
    enc = ref.encoder.layers[0]
    values = dict(
        arch="encoder-decoder",
        vocab_size=vocab_size,
        d_model=enc.self_attn.embed_dim,
        n_heads=enc.self_attn.num_heads,
        n_encoder_layers=len(ref.encoder.layers),
        n_decoder_layers=len(ref.decoder.layers),
        d_ff=enc.linear1.out_features,
        dropout=enc.dropout.p,
        attention_dropout=enc.self_attn.dropout,
        activation_dropout=enc.dropout.p,  # nn.Transformer reuses one dropout inside the FFN too
        norm_position="pre" if enc.norm_first else "post",
        norm_eps=enc.norm1.eps,
        final_norm=ref.encoder.norm is not None,
        activation=_activation(enc),
        bias=enc.linear1.bias is not None,
    )
    return ModelConfig(**{**values, **changes})


@torch.no_grad()
def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    q, k, v = theirs.in_proj_weight.chunk(3, dim=0)
    ours.q_proj.weight.copy_(q)
    ours.k_proj.weight.copy_(k)
    ours.v_proj.weight.copy_(v)
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    if theirs.in_proj_bias is not None:
        qb, kb, vb = theirs.in_proj_bias.chunk(3)
        ours.q_proj.bias.copy_(qb)
        ours.k_proj.bias.copy_(kb)
        ours.v_proj.bias.copy_(vb)
        ours.out_proj.bias.copy_(theirs.out_proj.bias)


@torch.no_grad()
def _copy_module(ours: nn.Module, theirs: nn.Module) -> None:
    ours.load_state_dict(theirs.state_dict())


@torch.no_grad()
def _copy_ffn(ours: FeedForward, layer: nn.Module) -> None:
    _copy_module(ours.w1, layer.linear1)
    _copy_module(ours.w2, layer.linear2)


def from_torch_nn(ref: nn.Transformer, vocab_size: int, **changes: Any) -> EncoderDecoder:
    """Our EncoderDecoder with the encoder and decoder stacks of `ref` (an nn.Transformer).

    `changes` set the parts nn.Transformer does not have (positional, scale_embedding, ...).
    Given the same input embeddings, both produce the same stack outputs.
    """
    if (
        type(ref.encoder.layers[0]) is not nn.TransformerEncoderLayer
        or type(ref.decoder.layers[0]) is not nn.TransformerDecoderLayer
    ):
        raise ValueError(
            "only nn.Transformer built from the standard nn.TransformerEncoderLayer/DecoderLayer "
            "can be loaded"
        )
    config = config_from_torch_nn(ref, vocab_size, **changes)
    model = build_model(config)
    for ours, theirs in zip(model.encoder.layers, ref.encoder.layers, strict=True):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_ffn(ours.feed_forward, theirs)
        _copy_module(ours.norm1, theirs.norm1)
        _copy_module(ours.norm2, theirs.norm2)
    for ours, theirs in zip(model.decoder.layers, ref.decoder.layers, strict=True):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.multihead_attn)
        _copy_ffn(ours.feed_forward, theirs)
        _copy_module(ours.norm1, theirs.norm1)
        _copy_module(ours.norm2, theirs.norm2)
        _copy_module(ours.norm3, theirs.norm3)
    if ref.encoder.norm is not None:
        _copy_module(model.encoder.final_norm, ref.encoder.norm)
    if ref.decoder.norm is not None:
        _copy_module(model.decoder.final_norm, ref.decoder.norm)
    return model
