"""What benchmarks/gpu_train.py keeps and prints: the JSON written after every cell, a cell's
errors recorded instead of raised, and the tables at the end (the facts, one row per measured cell
(model, precision, levers), the peer's ratio, and each profile's split of the step)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path


def print_tables(results: dict) -> None:
    f = results["facts"]
    print(
        f"\n# {f['name']}; torch {f['torch']}"
        + (f", CUDA {f['cuda']}, {f['sm_count']} SMs" if "cuda" in f else "")
        + f"; bf16 matmul {f['bf16_tflops']:.1f} TFLOP/s"
        + (f", fp32 {f['fp32_tflops']:.1f}" if "fp32_tflops" in f else "")
        + (f", tf32 {f['tf32_tflops']:.1f}" if "tf32_tflops" in f else "")
        + (f"; copy {f['copy_gbs']:,.0f} GB/s" if "copy_gbs" in f else "")
    )
    if results["cells"]:
        print(
            f"{'model':<6} {'prec':<5} {'levers':<20} {'rows':>5} {'pad':>5} {'ms/step':>8} "
            f"{'tgt tok/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'peak GB':>8} {'warm-up s':>10}"
        )
        for c in results["cells"]:
            print(
                f"{c['model']:<6} {c['precision']:<5} {c['mode']:<20} {c.get('rows', 0):>5.0f} "
                f"{c.get('padding', 0):>5.1%} {c['step_ms']:>8.1f} {c['tokens_per_s']:>10,.0f} "
                f"{c['tflops']:>8.1f} {c['mfu']:>6.1%} {c.get('peak_memory_gb', 0):>8.1f} "
                f"{sum(c['warmup_step_s']):>10.1f}"
            )
    if results["peer"]:
        print(f"\n{'peer':<6} {'prec':<5} {'ours tok/s':>11} {'HF tok/s':>10} {'ours/HF':>8}")
        for p in results["peer"]:
            print(
                f"{p['model']:<6} {p['precision']:<5} {p['ours']['tokens_per_s']:>11,.0f} "
                f"{p['hf']['tokens_per_s']:>10,.0f} {p['ratio']:>8.2f}"
            )
    for key, p in results["profile"].items():
        print(
            f"\nprofile {key}: step {p['step_ms']:.2f} ms (profiled {p['profiled_step_ms']:.2f}); "
            f"table: {p['table_file']}"
        )
        for k, v in p["ms_per_step"].items():
            print(f"  {k:<22} {v:8.2f} ms {p['shares'][k]:7.1%}")
        print(f"  {'top ops':<60} {'ms/step':>8} {'share':>7} {'calls':>6}")
        for op in p["top_ops"]:
            print(
                f"  {op['op'][:60]:<60} {op['ms_per_step']:>8.2f} {op['share']:>7.1%} "
                f"{op['calls_per_step']:>6.0f}"
            )
    for error in results["errors"]:
        print(f"error: {error}")


@contextlib.contextmanager
def guarded(results: dict, what: str):
    """An error inside (out of memory, a failed compile) is recorded and printed, not fatal: one
    failed cell must not lose the others."""
    try:
        yield
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        results["errors"].append(f"{what}: {type(e).__name__}: {e}")
        print(f"  {what} failed: {type(e).__name__}: {str(e)[:200]}", flush=True)


def write_json(results: dict, path: str, started: float) -> None:
    """Written after every cell, so that a run cut short keeps what it measured."""
    results["seconds"] = round(time.perf_counter() - started, 1)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
