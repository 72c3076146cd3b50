"""The demo path end to end on a tiny budget: train, average, score the test split, translate."""

from pathlib import Path

import pytest

from transformer.demo import EXAMPLES, run_demo


@pytest.mark.slow
def test_demo_end_to_end_on_a_tiny_budget(tmp_path):
    data = tmp_path / "bible"
    data.mkdir()
    spa = ["En el principio crió Dios los cielos y la tierra.", "Y dijo Dios: Sea la luz: y fué la luz.",
           "Y vió Dios que la luz era buena.", "Y llamó Dios á la luz Día."] * 30
    eng = ["In the beginning, God created the heavens and the earth.", "God said, “Let there be light,” and there was light.",
           "God saw the light, and saw that it was good.", "God called the light “day”."] * 30
    for split, n in (("train", 120), ("valid", 8), ("test", 6)):
        (data / f"{split}.spa").write_text("\n".join(spa[:n]) + "\n", encoding="utf-8")
        (data / f"{split}.eng").write_text("\n".join(eng[:n]) + "\n", encoding="utf-8")
    lines = []
    result = run_demo(
        minutes=2, data_dir=data, run_dir=tmp_path / "run", average_last=2, log=lines.append,
        overrides=("model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_encoder_layers=1",
                   "model.n_decoder_layers=1", "data.vocab_size=300", "train.max_steps=40", "train.warmup_steps=10",
                   "train.batch_tokens=400", "train.valid_every=20", "train.save_every=20", "train.log_every=20",
                   "decode.beam_size=2", "decode.max_len_b=5"),
    )
    assert result["steps"] == 40
    assert 0 <= result["scores"]["bleu"].score <= 100 and "nrefs:1" in result["scores"]["bleu"].signature
    assert set(result["examples"]) == set(EXAMPLES) and "¿De quién es?" in EXAMPLES
    assert Path(result["model_dir"], "model.safetensors").is_file()
    printed = "\n".join(lines)
    assert "averaged the last 2 checkpoints" in printed and "BLEU = " in printed and "¿De quién es?" in printed


def test_demo_reports_a_missing_config(tmp_path, monkeypatch):
    import transformer.demo as demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "REPO", tmp_path)
    with pytest.raises(demo.DemoError, match="configs/bible-es-en.toml not found"):
        demo.config_path()
