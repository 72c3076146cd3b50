"""The CUDA tests (`pytest -m cuda tests/cuda`): each GPU path against the plain computation.

Every test in this folder is marked `cuda`, and where torch sees no CUDA GPU each one is skipped
with the reason ("needs a CUDA GPU: torch sees none"), so CI without a GPU stays green.

The device is "cuda" unless the environment variable TRANSFORMER_TEST_CUDA_DEVICE names another:
"cuda:1" for a second GPU, or "cpu" for a developer's dry run on a machine without a GPU:

    TRANSFORMER_TEST_CUDA_DEVICE=cpu pytest -m cuda tests/cuda

runs the same tests with "cpu" in place of "cuda". The comparisons then become cpu-vs-cpu and
prove nothing about a GPU; the dry run checks the tests' own logic (their inputs, references,
tolerances, fixtures and subprocesses) before the one run on a GPU. What only a GPU has is
left out of it, and says so: the assertions on torch's flash and memory-efficient kernels are
skipped (their table still prints), and the checkpoints are checked to hold no CUDA RNG state.
The trainer's tests (test_training.py, test_torchrun.py) set train.device to the device's type:
"cuda" takes the first GPU whatever the variable's index.

Matmuls and convolutions run in full fp32 here (no TF32, made sure of around every test), so
that fp32 comparisons can be tight.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from transformer.data.sources.copy import write_copy_task

HERE = Path(__file__).resolve().parent
DEVICE_VARIABLE = "TRANSFORMER_TEST_CUDA_DEVICE"


def device_under_test() -> torch.device:
    """The device these tests run on: "cuda", or what TRANSFORMER_TEST_CUDA_DEVICE says."""
    name = os.environ.get(DEVICE_VARIABLE, "cuda")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise pytest.UsageError(
            f"{DEVICE_VARIABLE}={name!r} is not a torch device: use cuda, cuda:N, or cpu for a "
            "dry run"
        ) from None
    if device.type not in ("cuda", "cpu"):
        raise pytest.UsageError(
            f"{DEVICE_VARIABLE}={name!r}: these tests run on cuda (or cuda:N), or on cpu as a "
            "dry run"
        )
    return device


def _missing_device(device: torch.device) -> str | None:
    """Why the tests cannot run on `device`, or None when they can."""
    if device.type != "cuda":
        return None
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch sees none"
    if device.index is not None and device.index >= torch.cuda.device_count():
        return f"needs {device}: torch sees {torch.cuda.device_count()} CUDA GPU(s)"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark this folder's tests `cuda` and skip them without a GPU; run the backend probe last.

    (The hook sees the whole session's items: only those under this folder are touched.)
    """
    ours = [item for item in items if item.path.is_relative_to(HERE)]
    if not ours:
        return
    reason = _missing_device(device_under_test())
    for item in ours:
        item.add_marker(pytest.mark.cuda)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
    # Forcing torch onto one kernel (cuDNN among them) is the one thing here that could leave the
    # CUDA context broken: the module that does it (RUN_LAST) runs after every other test.
    last = {id(item) for item in ours if getattr(getattr(item, "module", None), "RUN_LAST", False)}
    items[:] = [item for item in items if id(item) not in last] + [
        item for item in items if id(item) in last
    ]


@pytest.fixture(scope="session")
def device() -> torch.device:
    """The device under test: cuda (or TRANSFORMER_TEST_CUDA_DEVICE's)."""
    return device_under_test()


@pytest.fixture(scope="session")
def dry_run(device) -> bool:
    """Whether this is the cpu dry run (see the module docstring)."""
    return device.type != "cuda"


@pytest.fixture(scope="session")
def copy_data(tmp_path_factory) -> Path:
    """A copy task for the trainer (tests/training's): 400 training and 20 validation pairs of up
    to 8 of 10 symbols."""
    out = tmp_path_factory.mktemp("copy")
    write_copy_task(out, n_train=400, n_valid=20, n_test=20, n_symbols=10, max_len=8)
    return out


@pytest.fixture(autouse=True)
def _fp32_matmuls():
    """Full-precision fp32 matmuls and cuDNN convolutions (no TF32; torch lets convolutions use it
    by default, which the matmul setting does not reach) for the duration of a test; the settings
    are restored."""
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]
