"""Linear layers at inference time on a CPU: the same float32 product through oneDNN's matmul.

torch's default CPU path for `nn.Linear` is a BLAS call (MKL). For the small batches of
incremental decoding (16-80 rows x 256-1024 features, an 8k-way output layer), oneDNN's
float32 matmul, which torch ships and uses for its own compiled graphs, is about twice as fast
on the project's AMD EPYC machine (docs/benchmarks.md). It is still IEEE float32 arithmetic; only
the summation order differs (results agree to ~1e-6 relative). It is used only where nothing
needs gradients, on CPU float32 tensors and plain `nn.Linear` modules; everything else, and
training, takes the ordinary `layer(x)`, and so do small layers (under 256 x 256 weights), where
oneDNN's per-call overhead outweighs its speed. Switch it off with `set_onednn_linear(False)`.
"""

from __future__ import annotations

import torch
from torch import nn

MIN_WEIGHT = 256 * 256  # smaller layers take the plain path
_enabled = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def set_onednn_linear(enabled: bool) -> bool:
    """Use (or stop using) oneDNN for inference-time CPU linear layers; returns the previous setting."""
    global _enabled
    previous = _enabled
    _enabled = bool(enabled) and torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    return previous


def linear(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """layer(x) for an nn.Linear (..., in) -> (..., out); through oneDNN when nothing needs gradients on a CPU."""
    if (_enabled and type(layer) is nn.Linear and not torch.is_grad_enabled()
            and x.dtype == torch.float32 and x.device.type == "cpu" and layer.weight.dtype == torch.float32
            and layer.weight.numel() >= MIN_WEIGHT and not layer._forward_hooks and not layer._forward_pre_hooks):
        return torch.ops.mkldnn._linear_pointwise(x, layer.weight, layer.bias, "none", [], "")
    return layer(x)
