"""Plots are written as PNG files from a run's metrics."""

import json

import pytest

from transformer.viz.curves import plot_training_curves, read_metrics


def test_training_curves_png(tmp_path):
    records = [{"step": s, "split": "train", "loss": 9 - s / 20, "elapsed_s": 6.0 * s, "tokens": 100, "tokens_per_s": 50}
               for s in range(1, 101)]
    records += [{"step": s, "split": "valid", "valid_loss": 8 - s / 25, "valid_bleu": s / 10} for s in (25, 50, 100)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    train, valid = read_metrics(tmp_path)
    assert len(train) == 100 and len(valid) == 3
    out = plot_training_curves(tmp_path, tmp_path / "plots" / "curves.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_metrics_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl not found"):
        read_metrics(tmp_path)
