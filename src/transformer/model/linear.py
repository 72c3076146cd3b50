"""Linear layers at inference time on a CPU: the same float32 product through oneDNN's matmul.

torch's default CPU path for `nn.Linear` is a BLAS call (MKL). For the small batches of
incremental decoding (16-80 rows x 256-1024 features, an 8k-way output layer), oneDNN's
float32 matmul, which torch ships and uses for its own compiled graphs, can be faster (by how
much depends on the CPU: benchmarks/decode.py --linear onednn|default,
docs/benchmarks/decoding.md), and faster again when the weight is handed to it already in its
blocked layout ("packed") instead of being reordered on every call.
It is still IEEE float32 arithmetic; only the summation order differs (results agree to ~1e-6
relative). It is used only where nothing needs gradients, on CPU float32 tensors and plain
`nn.Linear` modules; everything else, and training, takes the ordinary `layer(x)`, and so do
small layers (under 256 x 256 weights), where oneDNN's per-call overhead outweighs its speed.

Row buckets (`set_row_buckets(True)`, per thread; a server's decoding thread turns them on through
the runtime switch, `transformer.runtime.onednn`, which sets the state this module owns):
oneDNN builds (and keeps) a kernel per input shape, each holding memory of its own, so a server
whose batches change size at every step (continuous batching: rows join and leave; prefills of any
length) builds kernels for hours, its memory creeping up with them (the server's memory with
and without buckets: docs/benchmarks/serving.md, "Small batches"). With buckets, the rows are
padded with zeros up to the next multiple of the step for their range (ROW_BUCKETS: up to 16 rows
exact, as at batch 1 and small beams; then the step doubles with each doubling of the rows, 2 up
to 32, ..., 16 up to 256, and 64 beyond): 48 shapes up to 256 rows instead of 256, padding under
1/8 of the rows up to 256. Each real row's
result is unchanged. Off by default: one-off batch jobs meet few shapes.

Packed weights are a derived copy (the same number of floats as the weight), made on first use
and remade when the weight changes (an optimizer step, `load_state_dict`, a new Parameter): the
copy is tagged with the weight's identity and version counter. They are held weakly per layer,
so they go away with the model. Switch the whole path off (and drop the packed copies) with
`set_onednn_linear(False)`.
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch import nn

MIN_WEIGHT = 256 * 256  # smaller layers take the plain path
ROW_BUCKETS = ((16, 1), (32, 2), (64, 4), (128, 8), (256, 16), (None, 64))
"""(up to this many rows, round up to a multiple of this): see the module's doc."""


def row_bucket(rows: int) -> int:
    """The number of rows oneDNN sees for `rows` input rows (ROW_BUCKETS)."""
    for limit, step in ROW_BUCKETS:
        if limit is None or rows <= limit:
            return -(-rows // step) * step
    return rows


def _available() -> bool:
    mkldnn = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_linear_pointwise")
        and hasattr(mkldnn, "_reorder_linear_weight")
    )


_enabled = _available()
_local = threading.local()  # .buckets: this thread pads rows to ROW_BUCKETS
# layer -> (weak reference to the weight that was packed, its version, the packed weight)
_packed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_onednn_linear(enabled: bool) -> bool:
    """Use (or stop using) oneDNN for inference-time CPU linear layers; returns the previous
    setting."""
    global _enabled
    previous = _enabled
    _enabled = bool(enabled) and _available()
    if not _enabled:
        _packed.clear()
    return previous


def set_row_buckets(enabled: bool) -> bool:
    """Pad the rows of oneDNN's linear layers to ROW_BUCKETS (see the module's doc) in the calling
    thread (a server's decoding thread); returns the previous setting."""
    previous = getattr(_local, "buckets", False)
    _local.buckets = bool(enabled)
    return previous


def _packed_weight(layer: nn.Linear) -> torch.Tensor:
    """The layer's weight in oneDNN's layout, packed once per weight version; the plain weight if it
    cannot be tracked."""
    weight = layer.weight
    try:
        version = weight._version
    except RuntimeError:  # an inference-mode tensor keeps no version counter: nothing to tag
        return weight
    entry = _packed.get(layer)
    if entry is not None and entry[0]() is weight and entry[1] == version:
        return entry[2]
    packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None)
    _packed[layer] = (weakref.ref(weight), version, packed)
    return packed


def one_row_product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (..., in) of one row times weight (out, in)^T, written as a weighted sum over each row
    of the weight, accumulated in float32 (x's dtype out)."""
    return (
        (weight.float() * x.reshape(1, -1).float()).sum(-1).reshape(*x.shape[:-1], -1).to(x.dtype)
    )


def one_row_sums(x: torch.Tensor) -> bool:
    """Whether a product with input x is written as one_row_product: inside a compiled graph, on
    the CPU, one row, no gradients. Inductor turns that sum into one vectorised loop that streams
    the weight, about twice the bandwidth of MKL's GEMV at batch 1 (docs/benchmarks/decoding.md,
    "The compiled step")."""
    return (
        torch.compiler.is_compiling()
        and x.device.type == "cpu"
        and not x.requires_grad
        and x.numel() == x.shape[-1]
    )


def linear(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """layer(x) for an nn.Linear (..., in) -> (..., out); through oneDNN when nothing needs
    gradients on a CPU."""
    if type(layer) is nn.Linear and one_row_sums(x):
        out = one_row_product(x, layer.weight)
        return out if layer.bias is None else out + layer.bias.to(out.dtype)
    if (
        _enabled
        and not torch.compiler.is_compiling()  # a compiled graph packs its weights itself
        and type(layer) is nn.Linear
        and not torch.is_grad_enabled()
        and x.dtype == torch.float32
        and x.device.type == "cpu"
        and layer.weight.dtype == torch.float32
        and layer.weight.numel() >= MIN_WEIGHT
        and not layer._forward_hooks
        and not layer._forward_pre_hooks
    ):
        width = x.shape[-1]
        rows = x.numel() // width if width else 0
        if getattr(_local, "buckets", False) and row_bucket(rows) != rows:
            flat = x.reshape(rows, width)
            flat = torch.cat([flat, flat.new_zeros(row_bucket(rows) - rows, width)])
            out = torch.ops.mkldnn._linear_pointwise(
                flat, _packed_weight(layer), layer.bias, "none", [], ""
            )
            return out[:rows].reshape(*x.shape[:-1], out.shape[-1])
        return torch.ops.mkldnn._linear_pointwise(
            x, _packed_weight(layer), layer.bias, "none", [], ""
        )
    return layer(x)
