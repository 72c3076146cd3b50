"""Reduced precision for inference: a trained fp32 model run in bf16, or with int8 linear layers.

Rules:
- "fp32": the model as trained; the reference every other mode is measured against.
- "bf16": every weight and activation in bfloat16 (the model is converted once). Products run
  at the hardware's bf16 speed where it has native support (AMX, AVX512-BF16, recent GPUs);
  elsewhere bf16 is emulated and slower than fp32, which is why "auto" measures before
  choosing it. Decoding still ranks hypotheses with fp32 log-probabilities
  (decoding/search/step.py).
- "int8": dynamic quantization of the linear layers (Jacob et al. 2018): weights stored as int8
  with one scale per output row, activations quantized per call from their observed range,
  products in int8 with int32 accumulation (torch's x86 backend: fbgemm / oneDNN), outputs fp32.
  Embeddings, norms and attention stay fp32. CPU only: GPUs get bf16 instead.
- "q8" and "q4": weight-only quantization for small batches (one chat, one sentence), where
  decoding reads every weight once per token and the time is the bytes read (the memory wall):
  each large linear layer's weight is stored in 8 bits (one scale per output row, symmetric) or 4
  bits (groups of 32 along the input, a scale and a minimum each: llama.cpp's Q8- and Q4_1-class
  weights) and dequantized inside the product; activations stay floating point (bf16 inside the
  product, the layer's output in the model's dtype) and so do embeddings, norms, attention and the
  KV cache. A fourth (q8) or an eighth (q4) of fp32's weight bytes a token. torch's CPU kernels
  (aten._weight_int8pack_mm, aten._weight_int4pack_mm_for_cpu). The output layer (lm_head) stays
  fp32: those kernels return bf16, and logits rounded to bf16 are 1/8 apart between 16 and 32,
  enough to flip greedy choices and move sampling probabilities by 12% (SmolLM2-135M in q4: its
  agreement with fp32 and its speed with either output layer, benchmarks/lm_generate.py, are in
  docs/benchmarks/serving.md, "Language model at batch 1"). Layers under MIN_WEIGHT elements,
  and for q4 those whose input width is not a multiple of 32 or whose output width is not a
  multiple of 16 (the kernel's packing), stay fp32 too.
- The conversion happens in place, on a model that will not be trained again.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from ..config import INFERENCE_PRECISIONS  # decode.precision's choice list, less "auto"


class PrecisionError(ValueError):
    """The precision cannot run here (int8 on a GPU, a torch without dynamic quantization)."""


def set_inference_precision(model: nn.Module, precision: str) -> nn.Module:
    """Convert `model` (in eval mode, fp32 weights) to run in `precision`; returns the model."""
    device = next(model.parameters()).device
    match precision:
        case "fp32":
            return model.float()
        case "bf16":
            return model.to(torch.bfloat16)
        case "int8":
            if device.type != "cpu":
                raise PrecisionError(
                    f"precision int8 runs on the CPU only (the model is on {device.type}): "
                    "use bf16 on a GPU"
                )
            return quantize_linear_int8(model.float())
        case "q8" | "q4":
            if device.type != "cpu":
                raise PrecisionError(
                    f"precision {precision} runs on the CPU only (the model is on "
                    f"{device.type}): use bf16 on a GPU"
                )
            return quantize_weights(model.float(), bits=8 if precision == "q8" else 4)
        case _:
            raise PrecisionError(
                f"unknown inference precision {precision!r}: use one of "
                f"{', '.join(INFERENCE_PRECISIONS)} or auto"
            )


def quantize_linear_int8(model: nn.Module) -> nn.Module:
    """Replace each nn.Linear of `model` by a dynamically quantized int8 one (in place)."""
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:
        raise PrecisionError(
            f"precision int8 needs torch.ao.quantization, which torch {torch.__version__} "
            "does not have: use bf16 or fp32"
        ) from None
    if "x86" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "x86"
    # torch announces a move of this API to torchao; it works as documented
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)


Q4_GROUP = 32  # input features sharing one 4-bit scale and minimum (llama.cpp's Q4_1 block)
MIN_WEIGHT = 256 * 256  # smaller layers stay fp32: their bytes are few, their rounding is not


class WeightOnlyLinear(nn.Module):
    """y = x W^T + b with W stored in `bits` (8 or 4) bits and dequantized inside the product.

    8 bits: W[n] ~ q[n] * scale[n], q in [-127, 127], scale = max|W[n]| / 127.
    4 bits: within each group of Q4_GROUP inputs, W ~ q * scale + minimum, q in [0, 15],
    scale = (max - min) / 15 (torch's kernel stores scale and zero = minimum + 8 * scale).
    dequantized() gives the weight the product uses, for checks against the plain computation.
    """

    def __init__(self, layer: nn.Linear, bits: int):
        super().__init__()
        if bits not in (8, 4):
            raise ValueError(f"bits must be 8 or 4, not {bits}")
        weight = layer.weight.detach().float()  # (N, K)
        self.bits = bits
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.bias = None if layer.bias is None else nn.Parameter(layer.bias.detach().float(), False)
        if bits == 8:
            scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127  # (N,)
            q = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8)
            self.register_buffer("qweight", q)
            self.register_buffer("scales", scale.to(torch.bfloat16))
        else:
            n, k = weight.shape
            groups = weight.view(n, k // Q4_GROUP, Q4_GROUP)
            low, high = groups.amin(dim=-1), groups.amax(dim=-1)  # (N, K/G)
            scale = ((high - low) / 15).clamp(min=1e-12)
            q = torch.round((groups - low[..., None]) / scale[..., None]).clamp(0, 15)
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
                q.to(torch.int32).view(n, k), 1
            )
            self.register_buffer("qweight", packed)
            zero = low + 8 * scale  # the kernel computes (q - 8) * scale + zero
            self.register_buffer(
                "scales", torch.stack([scale.t(), zero.t()], dim=-1).to(torch.bfloat16).contiguous()
            )  # (K/G, N, 2)

    def dequantized(self) -> torch.Tensor:
        """The (N, K) fp32 weight the product computes with."""
        if self.bits == 8:
            return self.qweight.float() * self.scales.float()[:, None]
        eye = torch.eye(self.in_features, dtype=torch.bfloat16)
        return (
            torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.qweight, Q4_GROUP, self.scales)
            .float()
            .t()
            .contiguous()
        )  # x = I gives W^T row by row (bf16: exact for these values)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)
        if self.bits == 8:
            out = torch.ops.aten._weight_int8pack_mm(flat, self.qweight, self.scales)
        else:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(
                flat, self.qweight, Q4_GROUP, self.scales
            )
        out = out.to(x.dtype)
        if self.bias is not None:
            out = out + self.bias.to(x.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}"


def quantizable(layer: nn.Module, bits: int) -> bool:
    """Whether `quantize_weights` converts this layer (see the module docstring)."""
    return type(layer) is nn.Linear and _fits(layer.in_features, layer.out_features, bits)


def _fits(inputs: int, outputs: int, bits: int) -> bool:
    return inputs * outputs >= MIN_WEIGHT and (
        bits == 8 or (inputs % Q4_GROUP == 0 and outputs % 16 == 0)
    )


def quantize_weights(model: nn.Module, bits: int) -> nn.Module:
    """Replace each large nn.Linear of `model` by a WeightOnlyLinear of `bits` bits (in place)."""
    ops = torch.ops.aten
    needed = "_weight_int8pack_mm" if bits == 8 else "_weight_int4pack_mm_for_cpu"
    if not hasattr(ops, needed):
        raise PrecisionError(
            f"precision q{bits} needs torch's {needed} kernel, which torch {torch.__version__} "
            "does not have: use int8, bf16 or fp32"
        )
    fuse_projections(model, bits)
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name != "lm_head" and quantizable(child, bits):  # the logits stay fp32: see above
                setattr(parent, name, WeightOnlyLinear(child, bits))
    return model


def fuse_projections(model: nn.Module, bits: int) -> None:
    """Products that read one input, made one (in place), so that a decoding step calls fewer
    kernels: a gated feed-forward's W1 and W3 (they are replaced), and self-attention's W^Q,
    W^K, W^V (qkv_proj, used by the decoder's self-attention at every step, beam trees included;
    the three stay for the module's own forward). Rows are stacked, so each output is what its
    own layer would give: quantization is per row (8 bits) or per group of inputs (4 bits)."""
    from .attention import MultiHeadAttention
    from .layers import DecoderLayer, FeedForward

    def stacked(*layers: nn.Linear) -> nn.Linear:
        out = nn.Linear(layers[0].in_features, sum(m.out_features for m in layers))
        out.weight = nn.Parameter(torch.cat([m.weight.detach() for m in layers]), False)
        has_bias = [m.bias is not None for m in layers]
        out.bias = None
        if any(has_bias):
            out.bias = nn.Parameter(
                torch.cat(
                    [
                        m.bias.detach()
                        if m.bias is not None
                        else m.weight.new_zeros(m.out_features)
                        for m in layers
                    ]
                ),
                False,
            )
        return WeightOnlyLinear(out, bits)

    for m in list(model.modules()):
        if isinstance(m, FeedForward) and m.w3 is not None:
            if all(type(p) is nn.Linear for p in (m.w1, m.w3)) and _fits(
                m.w1.in_features, 2 * m.w1.out_features, bits
            ):
                m.w13 = stacked(m.w1, m.w3)
                m.w1 = m.w3 = None
        elif isinstance(m, DecoderLayer) and isinstance(m.self_attn, MultiHeadAttention):
            a = m.self_attn
            parts = (a.q_proj, a.k_proj, a.v_proj)
            if all(type(p) is nn.Linear for p in parts) and _fits(
                a.q_proj.in_features, sum(p.out_features for p in parts), bits
            ):
                a.qkv_proj = stacked(*parts)


def model_precision(model: nn.Module) -> str:
    """ "int8", "q8" or "q4" when linear layers are quantized, else the floating dtype of the
    weights ("fp32", "bf16", ...)."""
    if any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in model.modules()):
        return "int8"
    bits = {m.bits for m in model.modules() if isinstance(m, WeightOnlyLinear)}
    if bits:
        return f"q{min(bits)}"
    dtype = next(model.parameters()).dtype
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
        dtype, str(dtype)
    )
