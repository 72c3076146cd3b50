"""train.compile: the training forward traces into whole graphs (no graph break, no read of a
tensor's values back to Python), and the loop trains through torch.compile to the same losses.

TorchInductor's own code generation takes over a minute on 2 cores even for the tiny model, so
the loop's test swaps in torch.compile's "eager" backend (dynamo's tracing, torch's kernels), and
the tracing test uses torch._dynamo.explain; tests/cuda runs Inductor on a GPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import transformer
from transformer.config import cpu_tiny
from transformer.training.trainer import train


@pytest.mark.parametrize(
    "arch, positional",
    [
        ("encoder-decoder", "sinusoidal"),
        ("encoder-decoder", "rope"),
        ("encoder-decoder", "t5_bias"),
        ("decoder", "rope"),
        ("decoder", "learned"),
    ],
)
def test_the_training_forward_traces_without_graph_breaks(arch, positional):
    torch.manual_seed(0)
    model = transformer.build_model(
        cpu_tiny(vocab_size=50, arch=arch, positional=positional, dropout=0.1)
    ).train()
    ids = torch.randint(4, 50, (3, 7))
    ids[0, 5:] = 0  # padding, as real batches have
    mask = ids != 0
    args = (ids, ids[:, :6]) if arch == "encoder-decoder" else (ids,)
    kwargs = {"src_mask": mask} if arch == "encoder-decoder" else {"attention_mask": mask}
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(*args, **kwargs)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_the_loop_trains_through_torch_compile(tmp_path, tiny, runs, monkeypatch):
    calls, compile = [], torch.compile

    def compile_(module, **kwargs):
        calls.append(module)
        return compile(module, backend="eager", dynamic=True)

    def config(**train):  # dropout off: eager CPU dropout and the compiled graph's draw apart
        c = tiny(max_steps=4, **train)
        return dataclasses.replace(c, model=c.model.replace(dropout=0.0))

    plain, compiled = tmp_path / "plain", tmp_path / "compiled"
    train(config(), plain, log=lambda _: None)
    monkeypatch.setattr(torch, "compile", compile_)
    train(config(compile=True), compiled, log=lambda _: None)
    assert len(calls) == 1  # the loop compiled its model once
    a, b = runs.losses(plain), runs.losses(compiled)
    assert a.keys() == b.keys() == {1, 2, 3, 4}
    for step in a:  # batches of several shapes, the same arithmetic
        assert b[step] == pytest.approx(a[step], rel=1e-4)
