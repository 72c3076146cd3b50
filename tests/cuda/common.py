"""What the CUDA tests share: the comparison they all make, and its tolerance per dtype."""

from __future__ import annotations

import torch

TOLERANCE = {torch.float32: 1e-5, torch.float16: 1e-2, torch.bfloat16: 2e-2}
"""Relative to the reference's largest magnitude (assert_rel_close). fp32 kernels (cuBLAS without
TF32, the memory-efficient kernel's 3xTF32 emulation) agree to ~1e-6; fp16 and bf16 inputs keep
their own rounding, and what the kernels round on the way (the softmax weights before P V, the
output) costs ~5e-4 in fp16 and ~5e-3 in bf16 (measured on the CPU kernel and the textbook in
those dtypes against float64): the bounds leave a margin of 4x or more."""


def assert_rel_close(ours: torch.Tensor, ref: torch.Tensor, tol: float, what: str = "") -> None:
    """max |ours - ref| <= tol * max |ref|, computed in float64 on the CPU; both must be finite."""
    ours, ref = ours.detach().double().cpu(), ref.detach().double().cpu()
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} vs {tuple(ref.shape)}"
    assert torch.isfinite(ref).all(), f"{what}: the reference is not finite"
    assert torch.isfinite(ours).all(), f"{what}: not finite (NaN or inf) where the reference is"
    err = (ours - ref).abs().max().item() if ref.numel() else 0.0
    scale = ref.abs().max().item() if ref.numel() else 0.0
    relative = err / max(scale, 1e-30)
    assert err <= tol * scale, (
        f"{what}: max abs error {err:.3g} vs scale {scale:.3g} (relative {relative:.3g} > {tol})"
    )
