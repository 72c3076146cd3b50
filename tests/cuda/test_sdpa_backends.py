"""Which of torch's SDPA kernels run each call the model makes of `fused_attention`.

Each call is tried with torch restricted to one backend (torch.nn.attention.sdpa_kernel): a backend
that cannot take the call raises (and warns why). On an Ampere-or-later GPU in bf16 and fp16 with
head dim 64, the decoder's training self-attention (is_causal, no mask, T = S) must run on flash
attention, and the encoder's padded self-attention and the cross-attention (boolean key masks,
which flash does not take) on the memory-efficient kernel: none of them falls back to the math
path. `pytest -s` prints the whole table (call x dtype -> the backends that run it) for the docs.

This module runs last (conftest.py, RUN_LAST): forcing torch onto a kernel it would not choose
itself (cuDNN comes after math in its order) is the one thing here that could break the CUDA
context for the tests after it.

Legend (model/__init__.py): B batch, H query heads, K key/value heads, T query length, S key
length, D head dim; N sentences and G beams in beam search's prefix tree.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from transformer.model.attention import fused_attention
from transformer.model.masks import attention_mask

pytestmark = pytest.mark.cuda
RUN_LAST = True

B, H, D, L = 4, 8, 64, 45
BACKENDS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DECODER_TRAINING = "decoder self-attention, training: is_causal, no mask, T = S"
ENCODER_PADDED = "encoder self-attention, padded: bool (B, 1, 1, S)"
CROSS = "cross-attention: bool (B, 1, 1, S), T != S"


def calls(device, dtype) -> dict[str, tuple[Callable[[], torch.Tensor], bool]]:
    """Each call the model makes of fused_attention, with its arguments as the model builds them:
    name -> (a function that makes the call on fresh inputs, whether training runs it backward)."""
    g = torch.Generator().manual_seed(0)

    def draw(length, heads=H, train=True):
        x = torch.randn(B, length, heads, D, generator=g).transpose(1, 2)  # (B, heads, L, D)
        return x.to(device=device, dtype=dtype).requires_grad_(train)

    lengths = torch.tensor([L, 30, 17, 5])
    right = (torch.arange(L)[None] < lengths[:, None]).to(device)  # (B, S) real keys, right-padded
    left = right.flip(-1)  # left-padded (decoder-only prompts)
    ancestors = torch.rand(B, 1, 4, L, generator=g) < 0.5  # (N, 1, G, S) each beam's path
    ancestors[..., -4:] = torch.eye(4, dtype=torch.bool)  # every beam sees its own new cell
    bias = torch.randn(1, H, L, L, generator=g).to(device)  # T5's relative bias, fp32

    def call(t, s, mask=None, is_causal=False, kv_heads=H, bias=None, train=True):
        def run():
            q = draw(t, train=train)
            k, v = draw(s, kv_heads, train), draw(s, kv_heads, train)
            if not train:  # decoding runs in inference mode
                with torch.inference_mode():
                    return fused_attention(q, k, v, mask, is_causal, bias=bias)
            out = fused_attention(q, k, v, mask, is_causal, bias=bias)
            out.backward(torch.ones_like(out))
            return out

        return run, train

    return {
        DECODER_TRAINING: call(L, L, is_causal=True),
        ENCODER_PADDED: call(L, L, attention_mask(right, L)),
        CROSS: call(12, L, attention_mask(right, 12)),
        "decoder self-attention, left-padded: bool (B, 1, T, S), causal": call(
            L, L, attention_mask(left, L, causal=True)
        ),
        "grouped-query (K = H / 4): is_causal": call(L, L, is_causal=True, kv_heads=H // 4),
        "T5 relative bias: float (1, H, T, S), is_causal": call(
            L, L, is_causal=True, bias=bias.requires_grad_()
        ),
        "decoding step over the cache: T = 1, no mask": call(1, L, train=False),
        "T5 decoding step: float (B, H, 1, S)": call(
            1, L, bias=torch.randn(B, H, 1, L, generator=g).to(device), train=False
        ),
        "decoding step, padded cache: bool (B, 1, 1, S), T = 1": call(
            1, L, attention_mask(left, 1), train=False
        ),
        "prompt after a cache: bool (1, 1, T, S) causal, T < S": call(
            6, L, attention_mask(None, 6, causal=True, offset=L - 6).to(device), train=False
        ),
        "beam search's prefix tree: bool (N, 1, G, S)": call(
            4, L, ancestors.to(device), train=False
        ),
    }


def runs_under(backend: SDPBackend, run: Callable[[], torch.Tensor], device) -> tuple[bool, str]:
    """Whether run() (forward, and backward where it trains) works with torch restricted to
    backend; if not, why (torch's warnings, or the error)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel([backend]):
                run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except Exception as err:  # whatever stops it, the table says it did not run
            reasons = [str(w.message) for w in caught] + [f"{type(err).__name__}: {err}"]
            return False, " | ".join(reasons)
    return True, ""


def test_which_backends_run_each_call(device, dry_run):
    table, why_not, names = {}, {}, []
    for label, dtype in DTYPES.items():
        for name, (run, _) in calls(device, dtype).items():
            names += [] if name in names else [name]
            ran = []
            for backend_name, backend in BACKENDS.items():
                ok, reason = runs_under(backend, run, device)
                if ok:
                    ran.append(backend_name)
                else:
                    why_not[name, label, backend_name] = reason
            table[name, label] = ran
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (dry run)"
    print(
        f"\nSDPA backends that run fused_attention's calls on {where}, torch {torch.__version__} "
        f"(head dim {D}, {H} heads; training calls forward and backward):\n"
    )
    print("| call (mask) | " + " | ".join(DTYPES) + " |")
    print("|---|" + "---|" * len(DTYPES))
    for name in names:
        cells = [", ".join(table[name, label]) or "none" for label in DTYPES]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for (name, label), ran in table.items():
        assert "math" in ran, (name, label, why_not.get((name, label, "math")))  # always a way
    if dry_run:
        pytest.skip("dry run: flash and memory-efficient attention are CUDA kernels; table only")
    if torch.cuda.get_device_capability(device) < (8, 0):
        pytest.skip("flash attention needs an Ampere or later GPU (compute capability 8.0)")
    for label in ("bf16", "fp16"):
        for name, backend in (
            (DECODER_TRAINING, "flash"),
            (ENCODER_PADDED, "efficient"),
            (CROSS, "efficient"),
        ):
            assert backend in table[name, label], (
                f"{name} in {label} does not run on {backend}: "
                f"{why_not.get((name, label, backend))}"
            )
