"""Reduced precision for inference: a trained fp32 model run in bf16, or with int8 linear layers.

Rules:
- "fp32": the model as trained; the reference every other mode is measured against.
- "bf16": every weight and activation in bfloat16 (the model is converted once). Products run
  at the hardware's bf16 speed where it has native support (AMX, AVX512-BF16, recent GPUs);
  elsewhere bf16 is emulated and slower than fp32, which is why "auto" measures before
  choosing it. Decoding still ranks hypotheses with fp32 log-probabilities (decoding/step.py).
- "int8": dynamic quantization of the linear layers (Jacob et al. 2018): weights stored as int8
  with one scale per output row, activations quantized per call from their observed range,
  products in int8 with int32 accumulation (torch's x86 backend: fbgemm / oneDNN), outputs fp32.
  Embeddings, norms and attention stay fp32. CPU only: GPUs get bf16 instead.
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


def model_precision(model: nn.Module) -> str:
    """ "int8" when linear layers are quantized, else the floating dtype of the weights ("fp32",
    "bf16", ...)."""
    if any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in model.modules()):
        return "int8"
    dtype = next(model.parameters()).dtype
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
        dtype, str(dtype)
    )
