"""The allocator setting that training on a CPU makes (transformer.runtime.allocator): freed memory
kept in the heap and reused without page faults; not on a GPU, nor when turned off."""

import os
import subprocess
import sys

import pytest

from transformer.runtime import allocator

FAULTS = """
import resource, torch
from transformer.runtime import allocator
print(allocator.keep_freed_memory("cpu").kept)
def step():  # a training step's large temporaries: the logits (64 MB here) and their gradient
    logits = torch.ones(4096, 4096)
    grad = torch.empty_like(logits).fill_(2.0)
    return (logits[:8, :8] @ grad[:8, :8]).sum().item()
for _ in range(3):
    step()
windows = []  # the heap may still grow once after the warm-up (where a block lands varies): the
for _ in range(3):  # steady state is the quietest of three windows of 10 steps
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        step()
    windows.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(min(windows))
"""


@pytest.mark.skipif(allocator._glibc() is None, reason="glibc only")
def test_kept_memory_is_reused_without_page_faults():
    """Freed 64 MB blocks come back from the heap, not as 16,384 fresh pages each time (two a step)."""
    faults = {}
    for setting in ("0", "1"):
        out = subprocess.run([sys.executable, "-c", FAULTS], env={**os.environ, "TRANSFORMER_MALLOC_TUNING": setting},
                             capture_output=True, text=True, check=True).stdout.split()
        assert out[0] == ("True" if setting == "1" else "False")
        faults[setting] = int(out[1])
    assert faults["0"] > 10 * 2 * 16_000, faults  # glibc's default: every block mapped afresh
    assert faults["1"] < faults["0"] / 8, faults  # 0 to 16,384 (the heap's layout varies) against ~327,000
    allocator.release_freed_memory()


def test_not_kept_on_a_gpu_or_when_turned_off(monkeypatch):
    assert not allocator.keep_freed_memory("cuda").kept
    monkeypatch.setenv("TRANSFORMER_MALLOC_TUNING", "0")
    choice = allocator.keep_freed_memory("cpu")
    assert not choice.kept and "TRANSFORMER_MALLOC_TUNING=0" in choice.describe()
