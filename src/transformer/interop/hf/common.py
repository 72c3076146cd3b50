"""Shared pieces of the Hugging Face converters: errors, activation names, checked weight loading.

Each family module (marian, gpt2, llama, bert) maps a Hugging Face config to a ModelConfig
and back, and names which of our tensors corresponds to which of theirs. What our config
cannot express raises HFConversionError naming the Hugging Face config field.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class HFConversionError(ValueError):
    """A model cannot be converted; the message names the config field and why."""


def unsupported(field: str, value, why: str) -> HFConversionError:
    return HFConversionError(f"Hugging Face config {field}={value!r} is not supported: {why}")


# Hugging Face activation names (transformers.activations.ACT2FN) -> ours, and back.
_ACTIVATIONS = {
    "relu": "relu",
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
}
_TO_HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


def activation_from_hf(field: str, name: str) -> str:
    if name not in _ACTIVATIONS:
        raise unsupported(
            field, name, f"supported activations are {', '.join(sorted(_ACTIVATIONS))}"
        )
    return _ACTIVATIONS[name]


def activation_to_hf(activation: str, family: str) -> str:
    if activation not in _TO_HF_ACTIVATIONS:
        raise HFConversionError(
            f"activation={activation!r} has no {family} equivalent: "
            f"use one of {', '.join(_TO_HF_ACTIVATIONS)}"
        )
    return _TO_HF_ACTIVATIONS[activation]


def first_id(value) -> int | None:
    """Hugging Face allows a list of end ids; we keep the first."""
    if isinstance(value, (list, tuple)):
        return value[0] if value else None
    return value


def require(condition: bool, field: str, value, family: str, fix: str) -> None:
    """Raise when our config cannot be written as this Hugging Face family."""
    if not condition:
        raise HFConversionError(f"{field}={value!r} cannot be exported as {family}: {fix}")


def load_weights(
    module: nn.Module,
    tensors: dict[str, torch.Tensor],
    what: str,
    ignore: Callable[[str], bool] = lambda name: False,
) -> None:
    """Load `tensors` into `module`, checking names and shapes; tied names count as one.

    Every tensor of the module's state dict must be given under at least one of the names
    it is known by (tied weights share storage), unless `ignore(name)` says it is derived
    (e.g. a fixed position table).
    """
    state = module.state_dict()
    unknown = sorted(set(tensors) - set(state))
    if unknown:
        raise HFConversionError(f"{what}: unexpected tensors {', '.join(unknown[:5])}")
    groups: dict[tuple, list[str]] = {}
    for name, tensor in state.items():
        groups.setdefault((tensor.data_ptr(), tuple(tensor.shape), tensor.stride()), []).append(
            name
        )
    missing = [
        names[0]
        for names in groups.values()
        if not any(n in tensors for n in names) and not all(ignore(n) for n in names)
    ]
    if missing:
        raise HFConversionError(f"{what}: no weights for {', '.join(missing[:5])}")
    wrong = [
        f"{k} {tuple(v.shape)} (needs {tuple(state[k].shape)})"
        for k, v in tensors.items()
        if v.shape != state[k].shape
    ]
    if wrong:
        raise HFConversionError(f"{what}: wrong shapes for {', '.join(wrong[:5])}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            state[name].copy_(tensor)


def weights_of(module: nn.Module) -> dict[str, torch.Tensor]:
    """The state dict as fp32 tensors detached from autograd (tied names included)."""
    return {
        k: v.detach().float() if v.is_floating_point() else v.detach()
        for k, v in module.state_dict().items()
    }


ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def bart_layer_pairs(
    n_encoder_layers: int, n_decoder_layers: int, key_bias: bool = True
) -> list[tuple[str, str]]:
    """(our name, Hugging Face name) of every tensor of the encoder and decoder layers in BART's
    layout (Marian, Whisper): model.{encoder,decoder}.layers.i.{self_attn,encoder_attn}.{q,k,v,
    out}_proj, *_layer_norm, fc1, fc2. key_bias=False leaves out the key projections' biases
    (Whisper has none)."""
    pairs = []
    for side, n_layers in (("encoder", n_encoder_layers), ("decoder", n_decoder_layers)):
        for i in range(n_layers):
            ours, theirs = f"{side}.layers.{i}", f"model.{side}.layers.{i}"
            blocks = [("self_attn", "self_attn", "norm1", "self_attn_layer_norm")]
            if side == "decoder":
                blocks.append(("cross_attn", "encoder_attn", "norm2", "encoder_attn_layer_norm"))
            ffn_norm = "norm3" if side == "decoder" else "norm2"
            for attn, hf_attn, norm, hf_norm in blocks:
                for proj in ATTENTION_PROJECTIONS:
                    params = ("weight", "bias") if key_bias or proj != "k_proj" else ("weight",)
                    pairs += [
                        (f"{ours}.{attn}.{proj}.{p}", f"{theirs}.{hf_attn}.{proj}.{p}")
                        for p in params
                    ]
                pairs += [
                    (f"{ours}.{norm}.{p}", f"{theirs}.{hf_norm}.{p}") for p in ("weight", "bias")
                ]
            for p in ("weight", "bias"):
                pairs.append((f"{ours}.feed_forward.w1.{p}", f"{theirs}.fc1.{p}"))
                pairs.append((f"{ours}.feed_forward.w2.{p}", f"{theirs}.fc2.{p}"))
                pairs.append((f"{ours}.{ffn_norm}.{p}", f"{theirs}.final_layer_norm.{p}"))
    return pairs


def bias_or_zeros(weights: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """A layer's bias from a state dict; zeros where it has none (bias = false): the same outputs
    in a target whose layers always have one (GPT-2's)."""
    weight = weights[f"{name}.weight"]
    return weights.get(f"{name}.bias", torch.zeros(weight.shape[0], dtype=weight.dtype))
