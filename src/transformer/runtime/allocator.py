"""Keep freed memory in the process while training on a CPU (glibc's malloc on Linux).

Why: glibc hands every block above its mmap threshold (128 KiB, raised by its own rule to at most
32 MiB) straight back to the kernel when it is freed, and the next block of that size comes back
as fresh pages, each zeroed by the kernel on its first touch (a minor page fault). A training step
allocates and frees the same large tensors every step: in the Bible recipe the (N, V) logits and
their gradient, ~50 MB each: a page fault per 4 KiB page of them, every step
(benchmarks/loop_speed.py; the counts and what they cost a step are in
docs/benchmarks/training.md).

What: mallopt(M_MMAP_THRESHOLD, 1 GiB) and mallopt(M_TRIM_THRESHOLD, 2 GiB - 1), so that freed
blocks stay in the heap and the next step reuses them (fewer page faults and faster steps:
benchmarks/loop_speed.py, docs/benchmarks/training.md). It is what jemalloc or tcmalloc under
LD_PRELOAD do for PyTorch on CPUs, without a library to install. Batches differ in shape, so
freed blocks do not always fit the next request and the heap's free fragments add up (without
trimming, the resident memory keeps growing over an hour's run: docs/benchmarks/training.md):
every TRIM_EVERY_STEPS steps and when training ends, release_freed_memory() gives the free pages
back to the kernel (malloc_trim), which costs one step's page faults per TRIM_EVERY_STEPS.
The thresholds stay as set: glibc has no call that restores its adaptive rule.

Where not: other C libraries (musl, macOS: mallopt is absent or does nothing), GPU runs (their
large tensors live in the CUDA allocator), and TRANSFORMER_MALLOC_TUNING=0.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from dataclasses import dataclass

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30  # blocks below 1 GiB come from the heap
TRIM_THRESHOLD = (1 << 31) - 1  # the heap's free top is kept up to 2 GiB (mallopt takes an int)
TRIM_EVERY_STEPS = 100  # training steps between malloc_trim calls


@dataclass(frozen=True)
class AllocatorChoice:
    """Whether freed memory is kept for reuse, and why."""

    kept: bool
    reason: str

    def describe(self) -> str:
        """E.g. "keeps freed memory (glibc mallopt)"."""
        return f"{'keeps freed memory' if self.kept else 'as the C library has it'} ({self.reason})"


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def keep_freed_memory(device_type: str) -> AllocatorChoice:
    """Raise glibc's mmap and trim thresholds for a CPU training run (module docstring)."""
    if device_type != "cpu":
        return AllocatorChoice(False, f"{device_type}: tensors are not in malloc's heap")
    if os.environ.get("TRANSFORMER_MALLOC_TUNING", "1") == "0":
        return AllocatorChoice(False, "TRANSFORMER_MALLOC_TUNING=0")
    libc = _glibc()
    if libc is None:
        return AllocatorChoice(False, "not glibc")
    if (
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1
        or libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1
    ):
        return AllocatorChoice(False, "glibc refused the thresholds")
    return AllocatorChoice(True, "glibc mallopt; TRANSFORMER_MALLOC_TUNING=0 turns it off")


def release_freed_memory() -> None:
    """Give the heap's free pages back to the kernel (glibc malloc_trim); nothing elsewhere."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
