"""The compiled decoding step (decoding/search/compiled.py) against the eager step: the same tokens
and log-probabilities over lengths that cross the attention buckets and grow the buffers, for the
model shapes a language model takes; the compiled graph is built once and never again within and
across generations."""

from __future__ import annotations

import pytest
import torch

import transformer
from transformer.config import ModelConfig, cpu_tiny
from transformer.decoding.beam import beam_search
from transformer.decoding.sampling import sample
from transformer.decoding.search import compiled
from transformer.decoding.search.compiled import compile_steps, stop_compiling
from transformer.model.linear import one_row_product

SHAPES = {
    "paper": dict(),  # sinusoidal positions, post-norm LayerNorm, ReLU
    "gpt": dict(positional="learned", norm_position="pre", activation="gelu_tanh"),
    "llama": dict(
        positional="rope",
        norm_position="pre",
        norm="rmsnorm",
        activation="swiglu",
        n_kv_heads=2,
        bias=False,
    ),
}


def language_model(shape: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = cpu_tiny(97, arch="decoder", d_model=32, d_ff=64, max_positions=1024, **SHAPES[shape])
    return transformer.build_model(cfg).eval()


@pytest.fixture
def small_buckets(monkeypatch):
    """Buckets of 16 positions and buffers grown by 32: a short run crosses both."""
    monkeypatch.setattr(compiled, "BUCKET", 16)
    monkeypatch.setattr(compiled, "GROW", 32)


def greedy(model, prompt: list[int], n: int) -> list[int]:
    return sample(model, [prompt], max_new_tokens=n, temperature=0.0, min_new_tokens=n)[0].tolist()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_static_step_gives_the_eager_tokens_and_scores(shape, small_buckets):
    """The static step run eagerly (the compiled step's twin, the same function): identical greedy
    tokens over 70 steps (four buckets, buffers grown twice) and log-probabilities within
    rounding, against the model's own eager cache."""
    model = language_model(shape)
    prompt = [5, 17, 3, 42, 8]
    with torch.inference_mode():
        want, want_scores = sample(
            model, [prompt], max_new_tokens=70, temperature=0.0, return_scores=True
        )
        compile_steps(model, compiled=False)
        try:
            got, got_scores = sample(
                model, [prompt], max_new_tokens=70, temperature=0.0, return_scores=True
            )
            step = compiled.compiled_step(model)
            assert step.capacity == 96  # grown from 32 to fit 5 + 70 positions
        finally:
            stop_compiling(model)
    assert got.tolist() == want.tolist()
    torch.testing.assert_close(got_scores, want_scores, rtol=1e-5, atol=1e-4)


def test_static_step_samples_as_the_eager_step(small_buckets):
    """Sampling draws outside the step from the same log-probabilities: the same seed, the same
    tokens."""
    model = language_model("llama", seed=1)
    prompt = [1, 2, 3]

    def draw():
        g = torch.Generator().manual_seed(7)
        return sample(model, [prompt], max_new_tokens=40, temperature=0.9, top_p=0.95, generator=g)

    want = draw()
    compile_steps(model, compiled=False)
    try:
        got = draw()
    finally:
        stop_compiling(model)
    assert got.tolist() == want.tolist()


def test_batches_beams_and_attention_stay_eager(small_buckets):
    """Several prompts, beam search of one prompt, or attention weights asked for: the eager step,
    the same outputs."""
    model = language_model("gpt")
    prompts = [[4, 5, 6], [7, 8]]
    want = sample(model, prompts, max_new_tokens=12, temperature=0.0)
    want_beam = beam_search(model, [prompts[0]], beam_size=4, max_len_a=0, max_len_b=12)
    compile_steps(model, compiled=False)
    try:
        got = sample(model, prompts, max_new_tokens=12, temperature=0.0)
        got_beam = beam_search(model, [prompts[0]], beam_size=4, max_len_a=0, max_len_b=12)
        ids, attention = sample(
            model, [prompts[0]], max_new_tokens=5, temperature=0.0, return_attention=True
        )
    finally:
        stop_compiling(model)
    assert got.tolist() == want.tolist()
    assert got_beam.tolist() == want_beam.tolist()
    assert attention["self"].shape[3] == ids.shape[1]


def test_models_without_a_compiled_step_say_why():
    translation = transformer.build_model(
        ModelConfig(vocab_size=50, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1,
                    n_decoder_layers=1)
    )
    assert compile_steps(translation) == "only language models (decoder-only) have a compiled step"
    assert compiled.compiled_step(translation) is None


def test_one_row_product_is_the_linear_product():
    torch.manual_seed(0)
    w, x = torch.randn(300, 70), torch.randn(1, 1, 70)
    torch.testing.assert_close(one_row_product(x, w), torch.nn.functional.linear(x, w))
    wb, xb = w.bfloat16(), x.bfloat16()
    torch.testing.assert_close(
        one_row_product(xb, wb).float(),
        torch.nn.functional.linear(xb.float(), wb.float()),
        rtol=1e-2,
        atol=1e-2,
    )


@pytest.mark.slow
def test_compiled_step_gives_the_eager_tokens_and_compiles_once(small_buckets):
    """Compiled (Inductor, on the CPU): the greedy tokens of the eager step, fp32, for prompts of
    several lengths and runs that cross buckets and grow the buffers; after the first call no
    generation recompiles (Dynamo's guards checked on every call, recompiling an error)."""
    model = language_model("llama", seed=2)
    prompts, n = [[3], [9, 8, 7, 6, 5, 4, 3], list(range(1, 20))], 50
    want = [greedy(model, p, n) for p in prompts]
    assert compile_steps(model) is None
    step = compiled.compiled_step(model)
    step.skip_guards = False
    try:
        got = [greedy(model, prompts[0], n)]  # compiles
        assert step.compile_seconds is not None
        with torch._dynamo.config.patch(error_on_recompile=True):
            got += [greedy(model, p, n) for p in prompts[1:]]
            got += [greedy(model, prompts[2], 120)]  # 139 positions: buffers grown, 9 buckets
        step.skip_guards = True
        again = greedy(model, prompts[1], n)
        # A fresh compile that finds the graph in the on-disk caches has guards of its own: a
        # run as long as the first buffers (and a bucket as long as them) needs no other graph.
        torch._dynamo.reset()
        compile_steps(model)
        compiled.compiled_step(model).skip_guards = False
        greedy(model, prompts[0], 5)
        with torch._dynamo.config.patch(error_on_recompile=True):
            long = greedy(model, prompts[0], 100)
    finally:
        stop_compiling(model)
    assert got[:3] == want
    assert got[3][:n] == want[2]
    assert again == want[1]
    assert long[:n] == want[0]


def test_no_compiler_says_so_and_stays_eager(monkeypatch):
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    model = language_model("gpt")
    assert compile_steps(model) == "torch.compile needs a C++ compiler on the CPU (install g++)"
    assert compiled.compiled_step(model) is None
