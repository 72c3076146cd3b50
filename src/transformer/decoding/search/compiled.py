"""One decoding step with static shapes and an in-place cache, compiled once per model and machine.

A language model's step at batch 1 is ~30 layers of small products and ~900 small operators; run
eagerly, the operators and the Python that calls them cost more than the products (docs/benchmarks/
decoding.md, "The compiled step"). Here the whole step (embedding, every layer, the output layer)
is one function that torch.compile turns into one graph of fused kernels:

- The keys and values live in preallocated buffers (1, K, capacity, D) per layer, written in place
  at the step's slot (`index_copy_`); the slot and the position are tensors, never Python ints, so
  no step specialises the graph.
- Attention reads a bucketed prefix of the buffers (a multiple of BUCKET positions, marked dynamic),
  so its cost follows the real length, not the capacity, and a longer run needs no new graph. The
  buffers grow (by copying into larger ones, also marked dynamic) when a run needs more room.
- The prompt is read by the eager model (one call over its tokens, as before); its keys and values
  are then copied into the buffers, and every later token goes through the compiled step.
- The layers are the model's own modules, called with a StaticLayerCache in place of the eager
  cache: there is one definition of a layer, and the eager path is its twin.

Where it applies: decoder-only models, one row (a prompt at a time: `Pipeline.generate`, `sample`
and greedy search of one prompt), no attention weights asked for, no T5 relative bias. Everything
else, and every model that was not compiled, steps eagerly. `compile_steps(model)` turns it on for a
model; `stop_compiling(model)` off. Where torch cannot compile here (no C++ compiler, a torch
without Inductor), `compile_steps` returns why in one line: decoding stays eager.

Dynamo's guards (~1 ms a call) run on the first call of each kind of buffers (their dtype) and are
skipped after: nothing else that reaches the graph changes between tokens (the dynamic sizes are
symbols of the one graph; the test counts recompiles with the guards on).

Compiled artifacts go to Inductor's on-disk cache, kept beside the user's cache (CACHE_DIR, unless
TORCHINDUCTOR_CACHE_DIR names another; the process's other compiled code then shares it), so the
kernels are generated once per model shape and machine; later processes trace the step again and
load its kernels (the warm start: docs/benchmarks/decoding.md, "The compiled step").
"""

from __future__ import annotations

import os
import shutil
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...model.transformer import DecoderOnly

BUCKET = 128
"""Attention reads the cache in multiples of this many positions."""
GROW = 512
"""The buffers' capacity is a multiple of this many positions."""
CACHE_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "transformer" / "inductor"
)
_GIVEN_CACHE_DIR = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # the user's choice wins

_steps: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> CompiledDecoder


class StaticLayerCache:
    """One layer's keys and values in fixed buffers, for DecoderLayer's `cache.append`: the new
    position is written at `slot` in place and the first `length` positions are returned."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, slot: torch.Tensor, length: int):
        self.keys, self.values, self.slot, self.length = keys, values, slot, length
        self.cross_kv = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys.index_copy_(2, self.slot, k)
        self.values.index_copy_(2, self.slot, v)
        return self.keys[:, :, : self.length], self.values[:, :, : self.length]


def step_logits(
    model: DecoderOnly,
    ids: torch.Tensor,
    slot: torch.Tensor,
    bucket: torch.Tensor,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
) -> torch.Tensor:
    """The step itself, eager or compiled: ids (1, 1) at cache slot `slot` (1,) (also its position:
    one row, no padding) -> logits (1, 1, V). Attention reads the first len(bucket) positions of
    the buffers; keys beyond the slot are masked."""
    decoder = model.decoder
    length = bucket.shape[0]
    positions = slot.view(1, 1)
    mask = (torch.arange(length, device=ids.device) <= slot).view(1, 1, 1, length)
    x = decoder.embed(ids, positions)
    for layer, k, v in zip(decoder.layers, keys, values, strict=True):
        x, _ = layer(x, mask, False, positions, cache=StaticLayerCache(k, v, slot, length))
    if decoder.final_norm is not None:
        x = decoder.final_norm(x)
    return model.output_logits(x)


@dataclass
class CompiledDecoder:
    """A model's compiled step and its buffers (module docstring)."""

    model: DecoderOnly
    compiled: bool = True  # False: the same step, eager (the twin the tests compare with)
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)
    compile_seconds: float | None = None  # the first call's compile (or cache load), once known
    skip_guards: bool = True  # after the first call, Dynamo's guards are not run (module doc)

    def __post_init__(self):
        self._slot = torch.zeros(1, dtype=torch.long)
        self._buckets: dict[int, torch.Tensor] = {}
        self._fn = None
        self._guarded: set = set()  # the buffers' dtypes a call has run the guards for

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0

    def _function(self):
        if self._fn is None:
            if self.compiled:
                # Inductor reads (and sets) this variable whenever it opens its cache
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = _GIVEN_CACHE_DIR or str(CACHE_DIR)
                self._fn = torch.compile(step_logits, fullgraph=True, dynamic=False)
            else:
                self._fn = step_logits
        return self._fn

    def _room(self, like: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        """Buffers with room for `length` positions, shaped after the eager cache's (1, K, S, D),
        and longer than the bucket that holds them."""
        if self.capacity >= length and self.keys[0].dtype == like[0][0].dtype:
            return
        length = max(length, -(-length // BUCKET) * BUCKET + 1)
        capacity = -(-length // GROW) * GROW
        old = (self.keys, self.values)
        self.keys, self.values = [], []
        for i, (k, v) in enumerate(like):
            self.keys.append(k.new_zeros(1, k.shape[1], capacity, k.shape[3]))
            self.values.append(v.new_zeros(1, v.shape[1], capacity, v.shape[3]))
            if old[0] and old[0][i].dtype == k.dtype:
                self.keys[i][:, :, : old[0][i].shape[2]] = old[0][i]
                self.values[i][:, :, : old[1][i].shape[2]] = old[1][i]
        for t in self.keys + self.values:
            torch._dynamo.mark_dynamic(t, 2)

    def start(self, cache, length: int) -> None:
        """Take over a one-row eager cache holding `length` positions (the prompt)."""
        kv = [layer.self_kv for layer in cache.layers]
        self._room(kv, length + 1)
        for i, (k, v) in enumerate(kv):
            self.keys[i][:, :, :length] = k
            self.values[i][:, :, :length] = v

    def __call__(self, ids: torch.Tensor, slot: int) -> torch.Tensor:
        """Logits (1, 1, V) of the token ids (1, 1) written at cache slot `slot`."""
        length = -(-(slot + 1) // BUCKET) * BUCKET
        if length >= self.capacity:  # the buffers stay longer than any bucket read from them: a
            # bucket as long as the buffers would be a graph of its own (Dynamo guards on it)
            self._room(list(zip(self.keys, self.values, strict=True)), length + 1)
        bucket = self._buckets.get(length)
        if bucket is None:
            bucket = self._buckets[length] = torch.empty(length, dtype=torch.bool)
            torch._dynamo.mark_dynamic(bucket, 0)
        self._slot.fill_(slot)
        fn = self._function()
        if self.compile_seconds is None and self.compiled:
            start = time.perf_counter()
            out = fn(self.model, ids, self._slot, bucket, self.keys, self.values)
            self.compile_seconds = time.perf_counter() - start
            return out
        if not self.compiled or not self.skip_guards or self.keys[0].dtype not in self._guarded:
            self._guarded.add(self.keys[0].dtype)
            return fn(self.model, ids, self._slot, bucket, self.keys, self.values)
        # one graph, compiled: its guards need not run on every token (they cost ~1 ms a step)
        with torch.compiler.set_stance(skip_guard_eval_unsafe=True):
            return fn(self.model, ids, self._slot, bucket, self.keys, self.values)


def why_not(model: torch.nn.Module) -> str | None:
    """Why this model's steps cannot be compiled here, in one line; None when they can."""
    if not isinstance(model, DecoderOnly):
        return "only language models (decoder-only) have a compiled step"
    if model.decoder.relative is not None:
        return "T5's relative position bias has no compiled step"
    device = next(model.parameters()).device
    if device.type != "cpu":
        return f"the compiled step runs on the CPU; this model is on {device.type}"
    if any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in model.modules()):
        return "precision int8 (dynamic quantization) has no compiled step: use q8"
    if not hasattr(torch, "compile") or not hasattr(torch, "_inductor"):
        return f"torch {torch.__version__} cannot compile"
    if shutil.which(os.environ.get("CXX", "g++")) is None and shutil.which("c++") is None:
        return "torch.compile needs a C++ compiler on the CPU (install g++)"
    return None


def compile_steps(model: torch.nn.Module, compiled: bool = True) -> str | None:
    """Decode this model's one-row steps through the compiled step from now on; returns why not
    (one line) when it cannot here, None when on. compiled=False: the same static step, eager."""
    reason = why_not(model)
    if reason is None:
        _steps[model] = CompiledDecoder(model, compiled=compiled)
    return reason


def stop_compiling(model: torch.nn.Module) -> None:
    """Back to the eager step for this model."""
    _steps.pop(model, None)


def compiled_step(model: torch.nn.Module) -> CompiledDecoder | None:
    """The model's compiled step, if compile_steps turned it on."""
    return _steps.get(model)
