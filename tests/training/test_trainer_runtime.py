"""What the trainer does with the run-time choices (transformer.runtime): precision and attention
kernel measured, logged, recorded and kept on resume; freed memory kept and trimmed."""

from __future__ import annotations

import json

import pytest
import torch

from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train


def test_precision_auto_is_measured_logged_recorded_and_kept_on_resume(tmp_path, monkeypatch, tiny, runs):
    """precision = "auto": the (here faked) measurement decides; the run's header says what and why,
    config.toml and the checkpoints record it, the logits really are bf16 or fp32, and a resumed run
    keeps what its checkpoint recorded even where a new measurement would decide otherwise."""
    import transformer.runtime.precision
    import transformer.training.objectives.seq2seq as trainer

    seen = []
    loss = trainer.label_smoothed_cross_entropy
    monkeypatch.setattr(trainer, "label_smoothed_cross_entropy", lambda logits, *a, **k: seen.append(logits.dtype) or loss(logits, *a, **k))
    for speedup, precision, dtype in ((0.5, "fp32", torch.float32), (3.0, "bf16", torch.bfloat16)):
        monkeypatch.setattr(transformer.runtime.precision, "measure_bf16_speedup", lambda *a, s=speedup: s)
        monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
        lines, seen[:] = [], []
        run = tmp_path / precision
        with pytest.raises(runs.Crash):
            train(tiny(precision="auto", max_steps=6, valid_every=100, bleu_samples=0), run,
                  log=lines.append, on_step=runs.crash_at(5))
        header = next(line for line in lines if line.startswith("model: "))
        assert f"precision {precision} (bf16 measured {speedup:.2f}x fp32 on this CPU); attention " in header
        assert f'precision = "{precision}"' in (run / "config.toml").read_text()
        assert json.loads((step_dirs(run)[-1] / "state.json").read_text())["precision"] == precision
        assert set(seen) == {dtype}
        # resumed where the measurement now says the opposite: the run keeps its own precision
        monkeypatch.setattr(transformer.runtime.precision, "measure_bf16_speedup", lambda *a, s=speedup: 3.5 - s)
        lines, seen[:] = [], []
        train(tiny(precision="auto", max_steps=6, valid_every=100, bleu_samples=0), run, resume=True,
              log=lines.append)
        assert any(f"precision {precision} (as the run recorded it); " in line for line in lines)
        assert set(seen) == {dtype} and f'precision = "{precision}"' in (run / "config.toml").read_text()


def test_attention_auto_is_measured_used_recorded_and_kept_on_resume(tmp_path, monkeypatch, tiny, runs):
    """attention_impl = "auto": the (here faked) comparison at the objective's typical batch decides the
    path every attention layer trains with; the header says which and why, checkpoints record it, a
    resumed run keeps it, and the saved model still says "auto" (inference takes the fused kernel)."""
    import transformer.model.attention as attention
    import transformer.runtime.precision

    used = []
    for name in ("scaled_dot_product_attention", "fused_attention"):
        real = getattr(attention, name)
        monkeypatch.setattr(attention, name,
                            lambda *a, _real=real, _name=name, **kw: used.append(_name) or _real(*a, **kw))
    monkeypatch.setenv("TRANSFORMER_PRECISION_CACHE", "0")
    for speedup, impl, path in ((0.5, "fused", "fused_attention"), (3.0, "textbook", "scaled_dot_product_attention")):
        asked = []
        monkeypatch.setattr(transformer.runtime.precision, "measure_attention_speedup",
                            lambda *a, s=speedup, _asked=asked: _asked.append(a) or s)
        lines, used[:] = [], []
        run = tmp_path / impl
        cfg = tiny(max_steps=6, valid_every=100, bleu_samples=0)
        with pytest.raises(runs.Crash):
            train(cfg, run, log=lines.append, on_step=runs.crash_at(5))
        header = next(line for line in lines if line.startswith("model: "))
        assert f"; attention {impl} (textbook measured {speedup:.2f}x fused's training speed at " in header
        (rows, heads, length, head_dim, dtype), = asked
        assert (heads, head_dim, dtype) == (2, 16, torch.float32) and 1 <= length <= 10 and rows == 256 // length
        assert set(used) == {path}
        assert json.loads((step_dirs(run)[-1] / "state.json").read_text())["attention"] == impl
        assert json.loads((step_dirs(run)[-1] / "config.json").read_text())["attention_impl"] == "auto"
        monkeypatch.setattr(transformer.runtime.precision, "measure_attention_speedup", lambda *a, s=speedup: 3.5 - s)
        lines, used[:] = [], []
        train(cfg, run, resume=True, log=lines.append)
        assert any(f"; attention {impl} (as the run recorded it); allocator " in line for line in lines)
        assert set(used) == {path}


def test_cpu_training_keeps_freed_memory_and_gives_it_back_every_trim_steps_and_at_the_end(tmp_path, monkeypatch, tiny):
    """transformer.runtime.allocator: kept while training (the model: line says so), trimmed every TRIM_EVERY_STEPS steps
    so that the heap's fragments do not add up, and trimmed once more when training ends."""
    import transformer.training.loop as loop_module
    import transformer.training.trainer as trainer_module
    from transformer.runtime.allocator import AllocatorChoice

    asked, trims = [], []
    monkeypatch.setattr(trainer_module, "keep_freed_memory",
                        lambda device_type: asked.append(device_type) or AllocatorChoice(True, "glibc, in a test"))
    for module in (trainer_module, loop_module):  # the end of the run trims; so does the loop every few steps
        monkeypatch.setattr(module, "release_freed_memory", lambda: trims.append(1))
    monkeypatch.setattr(loop_module, "TRIM_EVERY_STEPS", 4)
    lines = []
    train(tiny(max_steps=10, valid_every=100, save_every=100), tmp_path / "run", log=lines.append)
    assert asked == ["cpu"]
    assert any(line.startswith("model: ") and line.endswith("; allocator keeps freed memory (glibc, in a test)")
               for line in lines)
    assert len(trims) == 3  # steps 4 and 8, then the end


def test_fused_adamw_is_the_plain_update():
    """The loop's AdamW takes the fused kernel on CPU floats: 20 steps of it on random parameters
    and gradients land where torch's per-tensor AdamW does, to float rounding."""
    from transformer.training.loop import fused_adam

    torch.manual_seed(0)
    shapes = [(68, 128), (384, 128), (128,), (512, 128)]
    plain = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    fused = [torch.nn.Parameter(p.detach().clone()) for p in plain]
    assert fused_adam(fused) and not fused_adam([]) and not fused_adam([torch.zeros(2, dtype=torch.long)])
    settings = dict(lr=1e-3, betas=(0.9, 0.99), eps=1e-9, weight_decay=0.1)
    a = torch.optim.AdamW(plain, foreach=False, **settings)
    b = torch.optim.AdamW(fused, fused=True, **settings)
    for _ in range(20):
        for p, q in zip(plain, fused, strict=True):
            p.grad = torch.randn_like(p)
            q.grad = p.grad.clone()
        a.step()
        b.step()
    for p, q in zip(plain, fused, strict=True):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)
