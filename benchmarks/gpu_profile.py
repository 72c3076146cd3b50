"""Where a training step's time goes: torch's profiler over a few steps, each op's time put in
a category (the matrix products, attention, the loss, the optimizer, norms, dropout, embeddings,
casts, compiled kernels, other elementwise work) and the step's idle time (benchmarks/gpu_train.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from torch.profiler import ProfilerActivity, profile, record_function

from transformer.training.objectives import seq2seq

LOSS, OPTIMIZER = "bench:loss", "bench:optimizer"  # record_function ranges the profile reads


@contextlib.contextmanager
def loss_marked():
    """The objective's loss call inside a LOSS range (profiling only; the call is unchanged)."""
    original = seq2seq.label_smoothed_cross_entropy

    def marked(*args, **kwargs):
        with record_function(LOSS):
            return original(*args, **kwargs)

    seq2seq.label_smoothed_cross_entropy = marked
    try:
        yield
    finally:
        seq2seq.label_smoothed_cross_entropy = original


# ------------------------------------------------------------------------------------------------
# Where the time goes

MATMUL = {
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::addbmm",
    "aten::matmul",
    "aten::_addmm_activation",
    "aten::_scaled_mm",
}
COPIES = {"aten::copy_", "aten::_to_copy", "aten::to", "aten::clone", "aten::contiguous"}
CATEGORIES = (
    "matmul",
    "attention",
    "loss",
    "optimizer",
    "norm",
    "dropout",
    "embedding",
    "casts/copies",
    "compiled (fused)",
    "other elementwise",
)


def category(event) -> str:
    """What a kernel-launching op belongs to: its enclosing ranges first (loss, optimizer,
    attention), then its own name."""
    chain, e = [], event
    while e is not None:
        chain.append(e.name)
        e = e.cpu_parent
    if any(n == LOSS or "SmoothedCrossEntropy" in n for n in chain):
        return "loss"
    if OPTIMIZER in chain:
        return "optimizer"
    if any("attention" in n.lower() and ("aten::" in n or "Backward" in n) for n in chain):
        return "attention"
    if event.name in MATMUL:
        return "matmul"
    for word, kind in (("layer_norm", "norm"), ("dropout", "dropout"), ("embedding", "embedding")):
        if any(word in n for n in chain):
            return kind
    if any(n.startswith("triton_") or "CompiledFxGraph" in n for n in chain):
        return "compiled (fused)"  # torch.compile's generated kernels
    if event.name in COPIES:
        return "casts/copies"
    return "other elementwise"


def profile_steps(
    run: Callable[[], float], steps: int, device, step_ms: float, out_file: Path
) -> dict:
    """Profile run() (`steps` steps, returning their seconds); the step's time per category
    (kernel time on a GPU, self CPU time on the CPU) against the unprofiled step time, the top
    ops, and the full table in out_file."""
    from torch.autograd import DeviceType

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with loss_marked(), profile(activities=activities) as prof:
        seconds = run()
    split = dict.fromkeys(CATEGORIES, 0.0)  # microseconds over all profiled steps
    for e in prof.events():
        if e.device_type != DeviceType.CPU or e.is_async:
            continue
        us = sum(k.duration for k in e.kernels) if cuda else e.self_cpu_time_total
        if us:
            split[category(e)] += us
    if cuda:  # every kernel, memcpy and memset on the device (not the ranges' annotations)
        total = sum(
            e.time_range.elapsed_us()
            for e in prof.events()
            if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
        )
    else:
        total = sum(split.values())
    per_step = {k: v / steps / 1e3 for k, v in split.items()}  # ms
    busy = total / steps / 1e3
    per_step["unattributed"] = max(0.0, busy - sum(per_step.values()))
    per_step["idle (host, syncs)"] = max(0.0, step_ms - busy)
    shares = {k: v / step_ms for k, v in per_step.items()}

    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    attr = "self_device_time_total" if cuda else "self_cpu_time_total"
    ops = [
        a
        for a in prof.key_averages()
        if getattr(a, attr) > 0 and getattr(a, "device_type", DeviceType.CPU) == DeviceType.CPU
    ]
    ops.sort(key=lambda a: getattr(a, attr), reverse=True)
    top = [
        {
            "op": a.key,
            "ms_per_step": getattr(a, attr) / steps / 1e3,
            "share": getattr(a, attr) / steps / 1e3 / step_ms,
            "calls_per_step": a.count / steps,
        }
        for a in ops[:15]
    ]
    lines = [
        f"{steps} profiled steps; unprofiled step {step_ms:.2f} ms, profiled "
        f"{seconds / steps * 1e3:.2f} ms; {'kernel' if cuda else 'self CPU'} time "
        f"{busy:.2f} ms per step",
        "",
    ]
    lines += [f"{k:<22} {v:9.3f} ms  {shares[k]:6.1%}" for k, v in per_step.items()]
    lines += ["", prof.key_averages().table(sort_by=key, row_limit=80)]
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "steps": steps,
        "step_ms": step_ms,
        "profiled_step_ms": seconds / steps * 1e3,
        "busy_ms": busy,
        "ms_per_step": per_step,
        "shares": shares,
        "top_ops": top,
        "table_file": str(out_file),
    }
