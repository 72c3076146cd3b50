"""A detector is not exported (neither CTranslate2 nor transformers has its shape): one line each,
nothing written; its model directory saves and loads whole, with the default config."""

import torch

from tests.cli.common import run
from tests.viz.detector import LABELS, tiny_detector
from transformer.model_dir import load_model, save_model
from transformer.model_records import load_labels


def test_a_detector_round_trips_and_is_not_exported(tmp_path, capsys):
    path = tiny_detector(tmp_path / "detr")
    loaded = load_model(path).eval()
    again = load_model(save_model(loaded, tmp_path / "again", labels=LABELS)).eval()
    for (name, p), q in zip(loaded.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    pixels = torch.rand(2, 1, 32, 32) * 2 - 1
    for a, b in zip(loaded(pixels), again(pixels), strict=True):
        torch.testing.assert_close(a, b)
    assert load_labels(tmp_path / "again") == LABELS
    for target, message in (
        ("ct2", "cannot be exported with --to ct2"),
        ("hf", "no Hugging Face export"),
    ):
        rc, _, err = run(["export", path, "--to", target, "--out", tmp_path / target], capsys)
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / target).exists()
