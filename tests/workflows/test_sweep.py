"""transformer sweep: the grid, the runs, resuming a killed sweep, the results files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from transformer.cli import main as cli_main
from transformer.config import build_run_config, load_config
from transformer.data.sources.copy import write_copy_task
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train
from transformer.workflows.sweep import Plan, SweepError, parse_grid, run_sweep, variant_name


def test_grid_values_split_at_top_level_commas_only():
    grid = parse_grid(['model.n_heads=1,4, 8', 'data.tokenizer="bpe","word"', "train.betas=[0.9,0.98],[0.9,0.999]"],
                      zip_=False)
    assert grid == [["model.n_heads", "1", "4", "8"], ["data.tokenizer", '"bpe"', '"word"'],
                    ["train.betas", "[0.9,0.98]", "[0.9,0.999]"]]


def test_variants_are_the_product_or_the_zip_of_the_grids():
    grid = parse_grid(["model.n_heads=1,8", "model.d_ff=64,512"], zip_=False)
    product = Plan("c.toml", grid).variants()
    assert [variant_name(v) for v in product] == ["n_heads=1,d_ff=64", "n_heads=1,d_ff=512", "n_heads=8,d_ff=64",
                                                  "n_heads=8,d_ff=512"]
    zipped = Plan("c.toml", grid, zip=True).variants()
    assert zipped == [[("model.n_heads", "1"), ("model.d_ff", "64")], [("model.n_heads", "8"), ("model.d_ff", "512")]]
    assert Plan("c.toml", []).variants() == [[]] and variant_name([]) == "base"
    assert variant_name([("data.tokenizer", '"bpe"'), ("model.vision.positions", '"none"')]) == "tokenizer=bpe,positions=none"


def test_a_zip_may_repeat_values_and_names_leave_out_the_unchanged(copy_setup):
    _, config = copy_setup
    grid = parse_grid(["model.n_heads=1,2,2", "model.d_ff=64,64,128"], zip_=True)
    base = load_config(str(config))
    assert [variant_name(v, base) for v in Plan(str(config), grid, zip=True).variants()] == ["n_heads=1", "base", "d_ff=128"]
    same = Plan(str(config), parse_grid(["model.n_heads=2,2"], zip_=True), zip=True)
    with pytest.raises(SweepError, match=r"two variants are the same config \(base\)"):
        run_sweep(same, Path("unused"), log=lambda _: None)


@pytest.mark.parametrize("texts, zip_, message", [
    (["model.n_heads"], False, r"--grid 'model.n_heads': write KEY=VALUE1,VALUE2"),
    (["model.n_heads=1,,4"], False, r"has an empty value"),
    (["model.n_heads=1,1"], False, r"repeats a value: use --repeats"),
    (["model.n_heads=1,2", "model.n_heads=4"], False, r"--grid model.n_heads is given twice"),
    (["model.n_heads=1,2", "model.d_ff=64"], True,
     r"--zip pairs .* model.n_heads has 2, model.d_ff has 1"),
])
def test_bad_grids_are_one_line_errors(texts, zip_, message):
    with pytest.raises(SweepError, match=message) as info:
        parse_grid(texts, zip_)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def copy_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    write_copy_task(root / "data", n_train=300, n_valid=12, n_test=12, n_symbols=8, max_len=6)
    values = {
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64,
                  "dropout": 0.1, "max_positions": 32},
        "data": {"train_src": str(root / "data/train.src"), "train_tgt": str(root / "data/train.tgt"),
                 "valid_src": str(root / "data/valid.src"), "valid_tgt": str(root / "data/valid.tgt"),
                 "vocab_size": 300, "max_len": 16},
        "train": {"batch_tokens": 256, "max_steps": 4, "warmup_steps": 2, "valid_every": 4, "save_every": 2,
                  "keep_last": 3, "log_every": 2, "precision": "fp32", "bleu_samples": 0},
        "decode": {"beam_size": 1},
    }
    config = root / "copy.toml"
    config.write_text(build_run_config(values).to_toml())
    return root, config


class Killed(Exception):
    pass


def test_a_killed_sweep_resumes_without_rerunning_finished_runs(tmp_path, copy_setup):
    """A 2 x 2 grid. The first attempt dies inside the third run's training, after its step-2
    checkpoint; --resume trains only what is left (the third run from its checkpoint), and
    results.csv ends with every row."""
    root, config = copy_setup
    plan = Plan(str(config), parse_grid(["model.n_heads=1,2", "train.label_smoothing=0.0,0.1"], zip_=False),
                average=2, test=[str(root / "data/test.src"), str(root / "data/test.tgt")])
    calls = []

    def dies_in_third(cfg, run_dir, resume=False, log=print):
        calls.append((run_dir.parent.name, resume))
        if len(calls) == 3:
            def crash(step, record):
                if step == 3:
                    raise Killed
            return train(cfg, run_dir, resume=resume, log=log, on_step=crash)
        return train(cfg, run_dir, resume=resume, log=log)

    out = tmp_path / "sweep"
    with pytest.raises(Killed):
        run_sweep(plan, out, log=lambda _: None, train_fn=dies_in_third)
    rows = list(csv.DictReader((out / "results.csv").open()))
    # names leave out what keeps the config's value (n_heads 2, label_smoothing 0.1)
    names = ["n_heads=1,label_smoothing=0.0", "n_heads=1", "label_smoothing=0.0", "base"]
    assert [r["variant"] for r in rows] == names[:2]
    third = out / "runs" / "label_smoothing=0.0" / "seed-1"
    assert [p.name for p in step_dirs(third)] == ["step-000002"]

    calls.clear()
    rows = run_sweep(plan, out, resume=True, log=lambda _: None, train_fn=dies_in_third)
    assert calls == [("label_smoothing=0.0", True), ("base", False)]
    table = list(csv.DictReader((out / "results.csv").open()))
    assert [r["variant"] for r in table] == names
    assert [(r["model.n_heads"], r["train.label_smoothing"]) for r in table] == [("1", "0.0"), ("1", "0.1"), ("2", "0.0"), ("2", "0.1")]
    for r in table:
        assert r["steps"] == "4" and r["averaged"] == "2" and r["seed"] == "1"
        assert 0 <= float(r["test_bleu"]) <= 100 and 0 <= float(r["valid_chrf"]) <= 100 and float(r["valid_loss"]) > 0
        assert int(r["parameters"]) > 0 and int(r["tokens_per_s"]) > 0
    config_of = json.loads((out / "runs" / "n_heads=1" / "seed-1" / "averaged" / "config.json")
                           .read_text())
    assert config_of["n_heads"] == 1
    md = (out / "results.md").read_text()
    assert all(f"| {name} | 1 |" in md for name in names) and "test_bleu" in md
    assert (out / "results.png").stat().st_size > 1000

    calls.clear()  # all done: a further resume trains nothing
    assert len(run_sweep(plan, out, resume=True, log=lambda _: None, train_fn=dies_in_third)) == 4 and calls == []


def test_repeats_use_consecutive_seeds_and_the_table_shows_the_spread(tmp_path, copy_setup):
    root, config = copy_setup
    plan = Plan(str(config), [], repeats=2, average=1, sets=["train.max_steps=2"])
    rows = run_sweep(plan, tmp_path / "s", log=lambda _: None)
    assert [(r["variant"], r["seed"]) for r in rows] == [("base", 1), ("base", 2)]
    line = next(line for line in (tmp_path / "s" / "results.md").read_text().splitlines() if line.startswith("| base"))
    assert "| base | 2 |" in line and " ± " in line


def test_sweep_cli_and_its_one_line_errors(tmp_path, copy_setup, capsys):
    root, config = copy_setup
    out = tmp_path / "s"
    args = ["sweep", str(config), "--grid", "model.d_ff=32,64", "--set", "train.max_steps=2", "--average", "1",
            "--out", str(out)]
    assert cli_main(args) == 0
    assert "2 runs scored" in capsys.readouterr().out
    for extra, message in ((["--out", str(out)], "already holds a sweep: pass --resume"),
                           (["--resume", "--grid", "model.n_heads=1,2"], "started with other settings (grid differ)"),
                           (["--test", str(root / "data/test.src")], "--test takes SRC REF (two files)"),
                           (["--repeats", "0"], "--repeats 0: give a positive number"),
                           (["--zip", "--grid", "model.n_heads=1"], "--zip pairs")):
        assert cli_main([*args, *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    assert cli_main([*args, "--resume"]) == 0  # the same command resumes: nothing left to run
    assert "2 runs scored" in capsys.readouterr().out


def test_at_scores_each_run_along_the_way_as_a_shorter_run_would_score(tmp_path, copy_setup):
    """--at 2 4 on 6-step runs: a row at steps 2, 4 and the end; the step-2 row equals the end row
    of the same sweep stopped at step 2 (inverse_sqrt: nothing depends on the run's length)."""
    root, config = copy_setup
    sets = ["train.save_every=2", "train.keep_last=10", "train.valid_every=2"]
    grid = parse_grid(["model.d_ff=64,128"], zip_=False)
    long = Plan(str(config), grid, average=1, sets=[*sets, "train.max_steps=6"], at=[2, 4])
    rows = run_sweep(long, tmp_path / "long", log=lambda _: None)
    assert [(r["variant"], r.get("at"), r["steps"]) for r in rows] == [
        ("base", 2, 2), ("base", 4, 4), ("base", None, 6),
        ("d_ff=128", 2, 2), ("d_ff=128", 4, 4), ("d_ff=128", None, 6)]
    short = Plan(str(config), grid, average=1, sets=[*sets, "train.max_steps=2"])
    ends = run_sweep(short, tmp_path / "short", log=lambda _: None)
    for at_2, end in zip([rows[0], rows[3]], ends, strict=True):
        assert (at_2["valid_loss"], at_2["valid_bleu"], at_2["valid_chrf"]) == (
            end["valid_loss"], end["valid_bleu"], end["valid_chrf"])
    odd = Plan(str(config), [], average=1, sets=[*sets[:2], "train.max_steps=6", "train.valid_every=4"], at=[2])
    no_loss = run_sweep(odd, tmp_path / "odd", log=lambda _: None)[0]
    assert no_loss["at"] == 2 and no_loss["valid_loss"] is None  # not validated at step 2: no loss of step 4
    table = (tmp_path / "long" / "results.md").read_text()
    assert "| base @ 2 |" in table and "| d_ff=128 @ 4 |" in table and "| base |" in table
    again = run_sweep(long, tmp_path / "long", resume=True, log=lambda _: None,
                      train_fn=lambda *a, **k: pytest.fail("nothing is left to train"))
    assert len(again) == 6


def test_at_is_refused_where_training_depends_on_the_runs_length(tmp_path, copy_setup):
    _, config = copy_setup
    plan = Plan(str(config), [], sets=['train.schedule="cosine"', "train.lr=1e-3"], at=[2])
    with pytest.raises(SweepError, match=r"--at .* schedule 'cosine'.*inverse_sqrt"):
        run_sweep(plan, tmp_path / "s", log=lambda _: None)
    missing = Plan(str(config), [], sets=["train.save_every=4"], at=[2])
    with pytest.raises(SweepError, match=r"no checkpoint at step 2 for --at: set train.save_every"):
        run_sweep(missing, tmp_path / "m", log=lambda _: None)


def test_several_validation_files_are_scored_together_and_each_by_its_folder(tmp_path):
    from transformer.tasks.translation import translation_scores as _translation_scores

    lines = {"bible": ["in the beginning was the word"] * 3, "ui": ["could not open the file"] * 2}
    for name, text in lines.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "valid.spa").write_text("\n".join(text) + "\n")
        (tmp_path / name / "valid.eng").write_text("\n".join(text) + "\n")

    class Echo:  # right on the Bible lines, wrong on the UI lines
        def translate(self, sources):
            return [s if s.startswith("in the") else "nothing at all here" for s in sources]

    src = tuple(str(tmp_path / n / "valid.spa") for n in lines)
    ref = tuple(str(tmp_path / n / "valid.eng") for n in lines)
    scores = _translation_scores(Echo(), src, ref, "valid")
    assert scores["valid_bleu_bible"] == 100.0 and scores["valid_bleu_ui"] == 0.0
    assert scores["valid_bleu_mean"] == 50.0 and 0 < scores["valid_bleu"] < 100
    assert "valid_bleu_mean" not in _translation_scores(Echo(), src[0], ref[0], "valid")
