"""Checkpoints: atomic save, resume, keep the last K, and averaging (§6.1: the paper averages the
last 5 or 20).

A checkpoint `checkpoints/step-NNNNNN/` is a model directory (config.json, model.safetensors,
tokenizer, decode.json) plus `optimizer.safetensors` (Adam's moments) and `state.json` (step,
data position, RNG states, schedule and scaler state). It is written into a temporary
directory and renamed into place, so a crash (even kill -9) never leaves a half-written one.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..files import atomic_write, atomic_write_text
from ..model.io import ModelFileError
from ..model.transformer import Model
from ..model_dir import WEIGHTS_FILE, has_tokenizer, load_model, load_tokenizers, save_model
from ..model_records import model_files

OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "state.json"
STEP_DIR = re.compile(r"^step-(\d+)$")
STATE_KEYS = ("step", "epoch", "position", "best_metric", "elapsed_s", "rng", "optimizer")
"""What resume needs from state.json (precision, attention, scaler and the schedule's clock are
optional). best_metric is the best validation value of the metric best_key names (a loss, or a
classifier's accuracy); checkpoints written before it was named so call it best_valid_loss."""


def optimizer_to_tensors(
    optimizer: torch.optim.Optimizer,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split an optimizer's state dict into tensors (safetensors) and plain values (JSON)."""
    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for index, state in sd["state"].items():
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{name}"] = value.detach().cpu().contiguous()
            else:
                scalars[f"{index}.{name}"] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def optimizer_from_tensors(
    optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]
) -> None:
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        _, index, name = key.split(".", 2)
        state.setdefault(int(index), {})[name] = value
    for key, value in meta["scalars"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def rng_state() -> dict[str, str]:
    """This process's torch RNG states (CPU and current CUDA device), base64 for JSON."""
    enc = lambda t: base64.b64encode(t.numpy().tobytes()).decode("ascii")
    out = {"cpu": enc(torch.get_rng_state())}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = enc(torch.cuda.get_rng_state())
    return out


def set_rng_state(state: dict[str, str]) -> None:
    dec = lambda s: torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)
    torch.set_rng_state(dec(state["cpu"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(dec(state["cuda"]))


def step_dirs(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [
        (int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name)) and p.is_dir()
    ]
    return [p for _, p in sorted(found)]


def save_checkpoint(
    run_dir: str | os.PathLike,
    step: int,
    model: Model,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    keep_last: int = 5,
    **files,
) -> Path:
    """Write checkpoints/step-NNNNNN atomically, then delete all but the newest keep_last.
    files: what save_model writes besides the weights (tokenizer, decode, labels,
    special_tokens)."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".step-{step:06d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_model(model, tmp, **files)
    tensors, meta = optimizer_to_tensors(optimizer)
    atomic_write(tmp / OPTIMIZER_FILE, lambda f: save_file(tensors, f, metadata={"format": "pt"}))
    atomic_write_text(tmp / STATE_FILE, json.dumps({**state, "optimizer": meta}, indent=1) + "\n")
    replace_dir(tmp, final)
    for old in step_dirs(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def replace_dir(src: Path, dst: Path) -> None:
    """Move directory src onto dst, replacing it; dst is always either the old or the new one."""
    if dst.exists():
        old = dst.with_name(f".{dst.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(src, dst)


def load_training_state(
    path: str | os.PathLike, optimizer: torch.optim.Optimizer | None = None
) -> dict[str, Any]:
    """A checkpoint's state.json; restores the optimizer's moments when one is given.

    A damaged file (truncated, not JSON, not UTF-8, missing what resume needs) is a ModelFileError
    that names it and says how to resume from the checkpoint before.
    """
    path = Path(path)
    file = path / STATE_FILE
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
        raise damaged_checkpoint(file, e) from None
    if isinstance(state, dict) and "best_metric" not in state and "best_valid_loss" in state:
        state["best_metric"] = state.pop("best_valid_loss")  # as older checkpoints name it
    missing = (
        [key for key in STATE_KEYS if key not in state]
        if isinstance(state, dict)
        else list(STATE_KEYS)
    )
    if missing:
        raise damaged_checkpoint(file, f"no {', '.join(missing)}")
    if optimizer is not None:
        file = path / OPTIMIZER_FILE
        try:
            optimizer_from_tensors(optimizer, load_file(file), state["optimizer"])
        except (OSError, SafetensorError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise damaged_checkpoint(file, e) from None
    return state


def damaged_checkpoint(file: Path, reason: object) -> ModelFileError:
    """The one-line error for an unreadable file of a checkpoint: what, and how to go on."""
    reason = (
        "not found" if isinstance(reason, FileNotFoundError) else " ".join(str(reason).splitlines())
    )
    return ModelFileError(
        f"{file} cannot be read ({reason}): the checkpoint is damaged; delete {file.parent} "
        "to resume from the checkpoint before it"
    )


def average_checkpoints(paths: list[str | os.PathLike]) -> Model:
    """A model whose every parameter is the mean of the checkpoints' (§6.1); configs must match.

    The mean is taken in fp32 and the result stored in the dtype the last checkpoint's weights
    are stored in (bf16 checkpoints give a bf16 model; load_model itself always gives fp32).
    """
    if not paths:
        raise ValueError("no checkpoints to average")
    models = [load_model(p) for p in paths]
    first = models[0]
    for p, m in zip(paths[1:], models[1:], strict=True):
        if m.config != first.config:
            raise ModelFileError(
                f"{p} has a different model config from {paths[0]}: only checkpoints of one run "
                "can be averaged"
            )
    states = [m.state_dict() for m in models]
    averaged = {}
    for name, value in states[0].items():
        if value.is_floating_point():
            averaged[name] = torch.stack([s[name].float() for s in states]).mean(0).to(value.dtype)
        else:
            averaged[name] = value
    first.load_state_dict(averaged)
    dtype = stored_dtype(paths[-1])
    return first if dtype is None else first.to(dtype)


SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}


def stored_dtype(path: str | os.PathLike) -> torch.dtype | None:
    """The floating-point dtype of a model directory's stored weights (read from the header);
    None when mixed."""
    with safe_open(Path(path) / WEIGHTS_FILE, framework="pt") as f:
        found = {SAFETENSORS_DTYPES.get(f.get_slice(name).get_dtype()) for name in f.keys()} - {
            None
        }
    return found.pop() if len(found) == 1 else None


def average_into(paths: list[str | os.PathLike], out: str | os.PathLike) -> Path:
    """Average checkpoints into the model directory `out`, with the last one's tokenizer, decoding
    defaults, labels and special tokens."""
    model = average_checkpoints(paths)
    tokenizer = None
    if has_tokenizer(paths[-1]):
        src, tgt = load_tokenizers(paths[-1])
        tokenizer = src if src is tgt else (src, tgt)
    return save_model(model, out, tokenizer=tokenizer, **model_files(paths[-1]))
