"""benchmarks/detection_baseline.py --dense-head-of: a trained DETR's encoder and dense head read
as the baseline reads its CNN (the same heatmap and box layout, the same decoding and scoring),
and a detector without a dense head refused in one line."""

import importlib.util
from pathlib import Path

import pytest
import torch

from tests.training.test_detection_training import config, write_coco
from transformer.config import build_run_config
from transformer.data.image_tensors import to_pixels
from transformer.model_dir import load_model
from transformer.training.trainer import train

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "detection_baseline.py"
spec = importlib.util.spec_from_file_location("detection_baseline", BENCHMARK)
baseline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(baseline)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("detr")
    write_coco(root / "data" / "train", 16, 1)
    write_coco(root / "data" / "valid", 4, 2)
    write_coco(root / "data" / "test", 6, 3)
    train(build_run_config(config(root / "data", 4)), root / "run", log=lambda _: None)
    return root


def test_a_detrs_dense_head_is_read_as_the_cnns(trained, capsys):
    detr = load_model(trained / "run" / "best").eval()
    cnn = baseline.CenterDetector(1, 8, 3, 32, 2)  # stride 8, as the detector's
    pixels = to_pixels(torch.randint(0, 256, (3, 1, 32, 32), dtype=torch.uint8))
    with torch.no_grad():
        heat, boxes = baseline.DetrDenseHead(detr)(pixels)
        cnn_heat, cnn_boxes = cnn(pixels)
        want_heat, want_boxes = detr.dense_head(detr.encode(pixels))
    assert heat.shape == cnn_heat.shape == (3, 2, 4, 4) and boxes.shape == cnn_boxes.shape == (3, 4, 4, 4)
    assert torch.equal(heat, want_heat.float()) and torch.equal(boxes, want_boxes.float())
    baseline.score_dense_head(str(trained / "run" / "best"), trained / "data", 32)
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{trained / 'run' / 'best'}'s dense head alone (no decoder): test mAP ")
    assert 0 <= float(line.split("test mAP ")[1].split()[0]) <= 1


def test_a_detector_without_a_dense_head_is_refused(trained, tmp_path):
    cfg = build_run_config(config(trained / "data", 1, dense_aux=False))
    train(cfg, tmp_path / "plain", log=lambda _: None)
    with pytest.raises(SystemExit, match="has no dense head: train it with model.detection.dense_aux"):
        baseline.score_dense_head(str(tmp_path / "plain" / "best"), trained / "data", 32)
