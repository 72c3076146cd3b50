"""Adding a task is one module and one line of the table: a task the library has never seen
(reversing the words of a line) is defined here, in this file only, added to TASKS at run time, and
runs train -> evaluate -> infer -> serve through the library's own commands, with no other file
touched. The development guide ("Tasks, and adding one") walks the same steps."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from transformer.tasks import TASKS
from transformer.tasks.base import Route, Scored, Task
from transformer.tasks.evaluation import Evaluation, EvaluationError
from transformer.tasks.figures import TEXT

WORDS = "sun moon star rain snow wind fire leaf rock tree".split()


# ---- the task's module: what a user writes ----


def prepare(config, run_dir, dist, say, resume):
    """Its training objective: teacher forcing on (line, its words reversed) pairs."""
    from transformer.training.corpora import prepare_data
    from transformer.training.objectives import Seq2Seq

    return Seq2Seq(config, prepare_data(config, run_dir, dist, say, resume))


def infer(pipeline, lines, **settings):
    """`pipeline(lines)`: each line with its words reversed, by the model (greedy by default)."""
    sources, _ = pipeline.encode_sources(list(lines), True)
    ids = pipeline.search(sources, pipeline.settings(**{"beam_size": 1, **settings}))
    return [pipeline.target_tokenizer.decode(row).strip() for row in ids.tolist()]


def evaluate_reversal(e: Evaluation) -> None:
    """`evaluate --pairs FILE`: the share of lines whose words come out exactly reversed."""
    pairs = [line.split("\t") for line in Path(e.pairs).read_text(encoding="utf-8").splitlines()]
    if any(len(p) != 2 for p in pairs):
        raise EvaluationError(f"--pairs {e.pairs}: give line<TAB>its words reversed, one a line")
    pipeline = e.models.open(e.model_dir, e.device, e.threads, e.precision, "evaluate", TASK)
    outputs = pipeline([source for source, _ in pairs], **e.decode)
    hits = sum(out == target for out, (_, target) in zip(outputs, pairs, strict=True))
    print(f"reversed exactly: {hits / len(pairs):.1%} ({hits:,} of {len(pairs):,} lines)")


def answer(pipeline, body: dict) -> dict:
    """POST /v1/reverse {"lines": [...]} -> {"reversed": [...]}."""
    lines = body.get("lines")
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise ValueError("send 'lines': a list of strings")
    return {"reversed": pipeline(lines)}


TASK = Task(
    name="word-reversal",
    summary="word reversal: each line's words in the opposite order",
    described="a word reverser",
    objectives=("seq2seq",),
    family="encoder-decoder",
    runs=lambda model, pixels: False,  # its models say so themselves (task.json)
    prepare=prepare,
    infer=infer,
    attention=TEXT,
    routes=(Route("/v1/reverse", answer),),
    evaluate=(Scored("--pairs", "reversal", "a word reverser's exact reversals", evaluate_reversal),),
)


# ---- the proof ----


@pytest.fixture
def with_the_task(monkeypatch):
    monkeypatch.setitem(TASKS, TASK.name, TASK)  # the one line of the table


def _pairs(path: Path, n: int, seed: int) -> Path:
    r = random.Random(seed)
    lines = []
    for _ in range(n):
        ws = [r.choice(WORDS) for _ in range(r.randint(2, 4))]
        lines.append(f"{' '.join(ws)}\t{' '.join(reversed(ws))}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _config(root: Path) -> Path:
    config = root / "reverse.toml"
    config.write_text(f"""
[model]
arch = "encoder-decoder"
d_model = 32
n_heads = 2
n_encoder_layers = 1
n_decoder_layers = 1
d_ff = 64
dropout = 0.0
norm_position = "pre"
max_positions = 16

[data]
tokenizer = "word"
vocab_size = 20
max_len = 8
cache = "{root / 'cache'}"

[data.text]
train_pairs = "{_pairs(root / 'train.tsv', 400, 1)}"
valid_pairs = "{_pairs(root / 'valid.tsv', 30, 2)}"

[train]
task = "word-reversal"
objective = "seq2seq"
batch_tokens = 300
max_steps = 40
warmup_steps = 10
valid_every = 20
save_every = 40
log_every = 20
bleu_samples = 0
precision = "fp32"
""", encoding="utf-8")
    return config


def test_a_new_task_trains_evaluates_infers_and_serves_from_its_module_and_one_table_line(
    tmp_path, capsys, with_the_task
):
    import json

    from transformer import Pipeline
    from transformer.cli import main

    run = tmp_path / "run"
    assert main(["train", str(_config(tmp_path)), "--out", str(run)]) == 0
    model_dir = run / "last"
    assert json.loads((model_dir / "task.json").read_text()) == {"task": "word-reversal"}
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    valid = [m["valid_loss"] for m in metrics if m.get("split") == "valid"]
    assert len(valid) == 2 and valid[-1] < valid[0]  # its objective trains
    capsys.readouterr()

    # infer: the task's entry, through Pipeline
    pipeline = Pipeline.load(model_dir)
    assert pipeline.task is TASK
    sources = [line.split("\t")[0] for line in (tmp_path / "valid.tsv").read_text().splitlines()]
    targets = [line.split("\t")[1] for line in (tmp_path / "valid.tsv").read_text().splitlines()]
    outputs = pipeline(sources)
    assert len(outputs) == len(sources) and all(set(o.split()) <= set(WORDS) for o in outputs)
    assert pipeline(sources, beam_size=2) == [pipeline(s, beam_size=2)[0] for s in [[x] for x in sources]]

    # evaluate: the task's own function on its own input, its score the plain count
    assert main(["evaluate", str(model_dir), "--pairs", str(tmp_path / "valid.tsv")]) == 0
    hits = sum(o == t for o, t in zip(outputs, targets, strict=True))
    assert capsys.readouterr().out.strip() == (
        f"reversed exactly: {hits / len(targets):.1%} ({hits:,} of {len(targets):,} lines)"
    )
    assert main(["evaluate", str(model_dir), "--text", str(tmp_path / "valid.tsv")]) == 2
    assert "this is a word reverser: use --pairs (reversal)" in capsys.readouterr().err

    # a command of another task names what runs it
    assert main(["translate", str(model_dir), "--input", str(tmp_path / "valid.tsv")]) == 2
    err = capsys.readouterr().err
    assert "this is a word reverser: run it as Pipeline.load(MODEL_DIR)(inputs)" in err, err

    # serve: its route, answered by its function on the worker thread
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from transformer.serve.app import ServeConfig, create_app

    with TestClient(create_app(pipeline, ServeConfig())) as client:
        reply = client.post("/v1/reverse", json={"lines": sources[:3]})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"reversed": outputs[:3]}
        bad = client.post("/v1/reverse", json={"lines": "sun moon"})
        assert bad.status_code == 422 and "send 'lines'" in bad.json()["error"]["message"]
        other = client.post("/v1/translate", json={"text": "sun moon"})
        assert other.status_code == 400 and "this one is a word reverser" in other.text
        model = client.get("/v1/model").json()
        assert model["task"] == "word-reversal" and model["endpoints"] == ["/v1/reverse"]
        assert 'endpoint="/v1/reverse"' in client.get("/metrics").text


def test_a_recorded_task_missing_from_the_table_is_named_with_the_fix(with_the_task):
    from transformer.config import ConfigError
    from transformer.tasks import model_task

    with pytest.raises(ConfigError) as e:
        model_task(None, False, "word-reversal-2")
    assert str(e.value) == (
        "the model was trained for task 'word-reversal-2' (its task.json), which is not in "
        f"transformer.tasks.TASKS ({', '.join(TASKS)}): add the task's module to the table"
    )


def test_train_task_must_be_in_the_table_and_train_with_the_objective(tmp_path, with_the_task, monkeypatch, capsys):
    import dataclasses

    from transformer.cli import main
    from transformer.config import ConfigError, load_config
    from transformer.tasks import run_task

    config = load_config(str(_config(tmp_path)), [])
    assert run_task(config) is TASK
    with pytest.raises(ConfigError, match=r"train.task='nope' is not a task .*: give one of .*word-reversal"):
        run_task(load_config(str(_config(tmp_path)), ['train.task="nope"']))
    assert main(["train", str(_config(tmp_path)), "--out", str(tmp_path / "nope"), "--set", 'train.task="nope"']) == 2
    assert "train.task='nope' is not a task" in capsys.readouterr().err
    assert not (tmp_path / "nope").exists()  # refused before anything is written
    monkeypatch.setitem(TASKS, "lm-reversal", dataclasses.replace(TASK, name="lm-reversal", objectives=("lm",)))
    with pytest.raises(ConfigError, match=r"train.task='lm-reversal' trains with objective 'lm', not 'seq2seq'"):
        run_task(load_config(str(_config(tmp_path)), ['train.task="lm-reversal"']))
