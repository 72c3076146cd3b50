"""precision = "auto": the decision, the cache, and the real micro-benchmark."""

import json
import math
import os
import stat
import time

import pytest
import torch

from transformer.runtime.measure_cache import default_cache_file
from transformer.runtime.precision import (
    ATTENTION_IMPLS,
    MAX_ATTENTION_ELEMENTS,
    PRECISIONS,
    PrecisionChoice,
    measure_attention_speedup,
    measure_bf16_speedup,
    resolve_attention,
    resolve_precision,
)

SHAPES = (512, 2048, 8000)  # d_model, d_ff, vocab_size


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Never touch the real ~/.cache: the default cache lives in tmp_path, and is on."""
    monkeypatch.setenv("TRANSFORMER_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("TRANSFORMER_PRECISION_CACHE", raising=False)


class FakeMeasure:
    """Returns a scripted speedup and counts its calls."""

    def __init__(self, speedup):
        self.speedup = speedup
        self.calls = []

    def __call__(self, d_model, d_ff, vocab_size, tokens):
        self.calls.append((d_model, d_ff, vocab_size, tokens))
        if isinstance(self.speedup, Exception):
            raise self.speedup
        return self.speedup


def auto(measure, cache_file, **kw):
    return resolve_precision("auto", "cpu", *SHAPES, measure=measure, cache_file=cache_file, **kw)


def test_slower_bf16_chooses_fp32(tmp_path):
    choice = auto(FakeMeasure(0.6), tmp_path / "p.json")
    assert choice.precision == "fp32" and "0.60x" in choice.reason and choice.speedup == 0.6
    assert choice.describe() == "fp32 (bf16 measured 0.60x fp32 on this CPU)"


def test_faster_bf16_chooses_bf16(tmp_path):
    choice = auto(FakeMeasure(1.8), tmp_path / "p.json")
    assert choice == PrecisionChoice("bf16", "bf16 measured 1.80x fp32 on this CPU", 1.8)


@pytest.mark.parametrize("speedup, expected", [(1.49, "fp32"), (1.5, "bf16"), (1.51, "bf16"), (1.0, "fp32")])
def test_threshold(tmp_path, speedup, expected):
    assert auto(FakeMeasure(speedup), tmp_path / "p.json").precision == expected


def test_min_speedup_is_a_parameter(tmp_path):
    assert auto(FakeMeasure(1.3), tmp_path / "p.json", min_speedup=1.5).precision == "fp32"
    assert auto(FakeMeasure(1.3), tmp_path / "q.json", min_speedup=1.2).precision == "bf16"


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_explicit_precision_passes_through(precision):
    measure = FakeMeasure(2.0)
    choice = resolve_precision(precision, "cpu", *SHAPES, measure=measure)
    assert choice == PrecisionChoice(precision, "set in the config")
    assert measure.calls == []


def test_invalid_precision_names_the_allowed_values():
    with pytest.raises(ValueError, match="fp32, bf16"):
        resolve_precision("bf32", "cpu", *SHAPES)
    assert PRECISIONS == ("auto", "fp32", "bf16", "fp16")


def test_measurement_failure_chooses_fp32(tmp_path):
    choice = auto(FakeMeasure(RuntimeError("no bf16 kernel")), tmp_path / "p.json")
    assert choice.precision == "fp32" and "no bf16 kernel" in choice.reason
    assert not (tmp_path / "p.json").exists()  # a failure is not cached


@pytest.mark.parametrize("supported, expected", [(True, "bf16"), (False, "fp32")])
def test_cuda_asks_torch(monkeypatch, supported, expected):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: supported)
    measure = FakeMeasure(0.1)
    choice = resolve_precision("auto", "cuda", *SHAPES, measure=measure)
    assert choice.precision == expected and "CUDA" in choice.reason and measure.calls == []


def test_other_devices_get_fp32():
    choice = resolve_precision("auto", torch.device("meta"), *SHAPES, measure=FakeMeasure(2.0))
    assert choice.precision == "fp32" and "meta" in choice.reason


def test_cache_hit_skips_the_measurement(tmp_path):
    cache = tmp_path / "p.json"
    measure = FakeMeasure(1.8)
    first, second = auto(measure, cache), auto(measure, cache)
    assert len(measure.calls) == 1
    assert not first.reason.startswith("cached") and second.reason.startswith("cached: ")
    assert second.precision == "bf16" and second.speedup == 1.8
    (entry,) = json.loads(cache.read_text()).values()
    assert entry["speedup"] == 1.8 and "T" in entry["measured_at"]


@pytest.mark.parametrize("limit", ["ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"])
def test_a_capped_instruction_set_measures_again(tmp_path, monkeypatch, limit):
    """The same CPU limited to AVX2 (as a typical laptop's) is another machine to the cache."""
    for name in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA"):
        monkeypatch.delenv(name, raising=False)
    cache = tmp_path / "p.json"
    measure = FakeMeasure(1.8)
    auto(measure, cache)
    monkeypatch.setenv(limit, "AVX2")
    assert not auto(measure, cache).reason.startswith("cached") and len(measure.calls) == 2
    assert auto(measure, cache).reason.startswith("cached")  # and is cached under its own key
    assert len(json.loads(cache.read_text())) == 2


def test_default_cache_location_follows_the_environment(tmp_path, monkeypatch):
    assert default_cache_file() == tmp_path / "default-cache" / "precision.json"
    monkeypatch.delenv("TRANSFORMER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_file() == tmp_path / "xdg" / "transformer" / "precision.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_file() == tmp_path / "home" / ".cache" / "transformer" / "precision.json"


def test_default_cache_file_is_used(tmp_path):
    measure = FakeMeasure(1.8)
    resolve_precision("auto", "cpu", *SHAPES, measure=measure)
    assert resolve_precision("auto", "cpu", *SHAPES, measure=measure).reason.startswith("cached")
    assert len(measure.calls) == 1
    assert (tmp_path / "default-cache" / "precision.json").is_file()


def test_other_shapes_tokens_or_torch_measure_again(tmp_path, monkeypatch):
    cache = tmp_path / "p.json"
    measure = FakeMeasure(1.8)
    auto(measure, cache)
    resolve_precision("auto", "cpu", 256, 1024, 8000, measure=measure, cache_file=cache)
    auto(measure, cache, tokens=512)
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    auto(measure, cache)
    assert len(measure.calls) == 4
    assert len(json.loads(cache.read_text())) == 4  # every key kept


def test_corrupt_cache_is_measured_again_and_rewritten(tmp_path):
    cache = tmp_path / "p.json"
    cache.write_bytes(b"\xff\xfe garbage \x00{")
    measure = FakeMeasure(0.6)
    assert auto(measure, cache).precision == "fp32" and len(measure.calls) == 1
    assert list(json.loads(cache.read_text()).values())[0]["speedup"] == 0.6


@pytest.mark.parametrize("content", ["[1, 2]", '{"k": 1}', "{}"])
def test_valid_json_of_the_wrong_shape_reads_as_empty(tmp_path, content):
    cache = tmp_path / "p.json"
    cache.write_text(content)
    measure = FakeMeasure(1.8)
    assert auto(measure, cache).precision == "bf16" and len(measure.calls) == 1


def test_unwritable_cache_is_ignored(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    measure = FakeMeasure(1.8)
    assert auto(measure, blocker / "sub" / "p.json").precision == "bf16"
    assert auto(measure, blocker / "sub" / "p.json").precision == "bf16"
    assert len(measure.calls) == 2


def test_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
    cache = tmp_path / "p.json"
    measure = FakeMeasure(1.8)
    assert [auto(measure, cache).reason.startswith("cached") for _ in range(3)] == [False] * 3
    assert len(measure.calls) == 3 and not cache.exists()


def test_cache_file_mode_follows_the_umask(tmp_path):
    cache = tmp_path / "p.json"
    old = os.umask(0o022)
    try:
        auto(FakeMeasure(1.8), cache)
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]  # no temporary file left


def test_real_measurement_is_quick_and_finite():
    start = time.perf_counter()
    speedup = measure_bf16_speedup(64, 256, 1000, tokens=128)
    assert time.perf_counter() - start < 2.0
    assert isinstance(speedup, float) and math.isfinite(speedup) and speedup > 0


def test_real_measurement_leaves_global_state_alone():
    threads, rng = torch.get_num_threads(), torch.get_rng_state()
    speedup = measure_bf16_speedup(32, 64, 100, tokens=64, budget_s=0.0)  # over budget at once
    assert math.isfinite(speedup) and speedup > 0
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), rng)


# ---- attention_impl = "auto" ----

def attention(speedup, cache_file, length=17, rows=128, precision="bf16", **kw):
    calls = []

    def measure(*shape):
        calls.append(shape)
        if isinstance(speedup, Exception):
            raise speedup
        return speedup

    choice = resolve_attention("auto", "cpu", precision, 4, 32, length, rows, measure=measure, cache_file=cache_file, **kw)
    return choice, calls


@pytest.mark.parametrize("speedup, impl", [(0.4, "fused"), (1.19, "fused"), (1.2, "textbook"), (9.0, "textbook")])
def test_attention_takes_the_textbook_path_only_where_it_is_measured_faster(tmp_path, speedup, impl):
    choice, calls = attention(speedup, tmp_path / "c.json")
    assert choice.impl == impl and choice.speedup == speedup
    assert calls == [(128, 4, 17, 32, torch.bfloat16)]
    assert choice.describe() == f"{impl} (textbook measured {speedup:.2f}x fused's training speed at 17 positions on this CPU)"


def test_attention_is_measured_in_the_training_dtype_and_cached_per_shape(tmp_path):
    cache = tmp_path / "c.json"
    assert attention(3.0, cache, precision="fp32")[1][0][-1] == torch.float32
    again, calls = attention(0.1, cache, precision="fp32")
    assert calls == [] and again.impl == "textbook" and again.reason.startswith("cached: ")
    for changed in ({"length": 18}, {"rows": 64}, {"precision": "bf16"}):
        assert len(attention(0.1, cache, precision=changed.pop("precision", "fp32"), **changed)[1]) == 1
    assert all(" attention " in key for key in json.loads(cache.read_text()))


def test_attention_probe_rows_are_capped(tmp_path):
    _, calls = attention(2.0, tmp_path / "c.json", length=1024, rows=512)
    rows = calls[0][0]
    assert 1 <= rows < 512 and rows * 4 * 1024 * 1024 <= MAX_ATTENTION_ELEMENTS


def test_explicit_attention_and_other_devices_are_not_measured(tmp_path):
    for impl in ("fused", "textbook"):
        choice = resolve_attention(impl, "cpu", "bf16", 4, 32, 17, 128, measure=pytest.fail)
        assert (choice.impl, choice.reason) == (impl, "set in the config")
    assert resolve_attention("auto", "cuda", "bf16", 4, 32, 17, 128, measure=pytest.fail).impl == "fused"
    with pytest.raises(ValueError, match="unknown attention_impl 'flash': use one of " + ", ".join(ATTENTION_IMPLS)):
        resolve_attention("flash", "cpu", "bf16", 4, 32, 17, 128)


def test_attention_comparison_that_fails_keeps_the_fused_kernel(tmp_path):
    choice, _ = attention(RuntimeError("no bf16 here"), tmp_path / "c.json")
    assert choice.impl == "fused" and "no bf16 here" in choice.reason
    assert attention(float("nan"), tmp_path / "c.json")[0].impl == "fused"


def test_real_attention_measurement_is_quick_finite_and_leaves_global_state_alone():
    rng = torch.get_rng_state()
    start = time.perf_counter()
    for dtype in (torch.float32, torch.bfloat16):
        speedup = measure_attention_speedup(8, 2, 12, 16, dtype)
        assert isinstance(speedup, float) and math.isfinite(speedup) and speedup > 0
    assert time.perf_counter() - start < 3.0
    assert torch.equal(torch.get_rng_state(), rng)
