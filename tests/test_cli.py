"""The `transformer` command: output and one-line errors."""

import transformer
from transformer.cli import main
from transformer.config import cpu_tiny


def test_info_prints_config_parameters_and_flops(tmp_path, capsys):
    model = transformer.build_model(cpu_tiny(vocab_size=40))
    transformer.save_model(model, tmp_path / "m")
    assert main(["info", str(tmp_path / "m"), "--seq-len", "32"]) == 0
    out = capsys.readouterr().out
    assert "d_model = 64" in out
    assert f"parameters: {transformer.count_parameters(model):,}" in out
    assert f"forward {transformer.flops_per_token(model.config, 32)['forward']:,}" in out


def test_info_on_a_missing_directory_is_one_line(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("transformer info: error:") and "is not a directory" in err
    assert len(err.splitlines()) == 1
