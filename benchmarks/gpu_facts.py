"""What a benchmark on a GPU (or a CPU) needs to know of the machine: timing with CUDA events,
and the measured ceilings: the bf16, fp32 and TF32 matrix-product rates and the copy bandwidth
(benchmarks/gpu_train.py, benchmarks/gpu_decode.py)."""

from __future__ import annotations

import contextlib
import platform
import statistics
import time
from collections.abc import Callable

import torch

from transformer.runtime.measure_cache import cpu_name


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_calls(fn: Callable[[], object], device, warmup: int, repeats: int) -> list[float]:
    """Seconds per call of fn after warm-up: CUDA events around each call on a GPU (calls queued
    back to back), perf_counter on the CPU."""
    for _ in range(warmup):
        fn()
    sync(device)
    if device.type != "cuda":
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return times
    events = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize(device)
    return [s.elapsed_time(e) / 1e3 for s, e in events]


@contextlib.contextmanager
def matmul_precision(value: str):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def matmul_tflops(device, dtype, n: int, repeats: int, tf32: bool = False) -> float:
    """Median TFLOP/s of an n x n x n matmul on random data (2 n^3 FLOPs)."""
    g = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, device=device, dtype=dtype, generator=g) for _ in range(2))
    c = torch.empty(n, n, device=device, dtype=dtype)
    with matmul_precision("high" if tf32 else "highest"):
        times = time_calls(lambda: torch.mm(a, b, out=c), device, warmup=3, repeats=repeats)
    return 2 * n**3 / statistics.median(times) / 1e12


def copy_gbs(device, n_bytes: int, repeats: int) -> float:
    """Median device-to-device copy bandwidth, GB/s counting bytes read + written."""
    src = torch.randn(n_bytes // 4, device=device)
    dst = torch.empty_like(src)
    times = time_calls(lambda: dst.copy_(src), device, warmup=3, repeats=repeats)
    return 2 * n_bytes / statistics.median(times) / 1e9


def machine(device) -> dict:
    """What the benchmark ran on: torch, Python, the GPU (or the CPU and its threads)."""
    facts = {"torch": torch.__version__, "python": platform.python_version()}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        facts.update(
            name=p.name,
            sm_count=p.multi_processor_count,
            cuda=torch.version.cuda,
            memory_gb=round(p.total_memory / 1e9, 1),
            capability=f"{p.major}.{p.minor}",
            cudnn=torch.backends.cudnn.version(),
        )
    else:
        facts.update(name=cpu_name(), threads=torch.get_num_threads())
    return facts


def device_facts(device, args, full: bool) -> dict:
    """The machine and the measured ceilings (bf16 matmul always: it is MFU's denominator)."""
    facts = machine(device)
    n, reps = args.matmul_size, args.matmul_repeats
    facts["matmul_size"] = n
    facts["bf16_tflops"] = args.peak_tflops or matmul_tflops(device, torch.bfloat16, n, reps)
    if full:
        facts["fp32_tflops"] = matmul_tflops(device, torch.float32, n, reps)
        if device.type == "cuda":
            facts["tf32_tflops"] = matmul_tflops(device, torch.float32, n, reps, tf32=True)
        facts["copy_gbs"] = copy_gbs(device, args.copy_mb << 20, reps)
    return facts
