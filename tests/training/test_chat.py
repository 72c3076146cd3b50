"""Chat fine-tuning (objective chat, data/chat.py, objectives/chat.py): a conversation renders into
pieces that join to the template's whole rendering, the loss is on the assistant's tokens and on
nothing else (the end-of-turn token included, even where it is the padding id), a run trains and
writes a chat model (with LoRA too), and bad conversations are named with their line."""

from __future__ import annotations

import json
import math

import pytest
import torch

import transformer
from tests.cli.common import run
from transformer.config import ConfigError, DecodeConfig, build_run_config, cpu_tiny
from transformer.data.chat import ChatDataError, chat_pieces, read_conversations, render_chat
from transformer.data.tokenizer import train_bpe
from transformer.decoding.pipeline import Pipeline
from transformer.model_records import CHAT_TEMPLATE_FILE, load_chat_template
from transformer.tasks import prepare_objective
from transformer.training import distributed as D
from transformer.training.trainer import train

SOLO = D.DistInfo(0, 1, 0, torch.device("cpu"))
END = "<|end|>"
TEMPLATE = (  # ChatML-like, with a default system turn as SmolLM2's template has
    "{% for m in messages %}{% if loop.first and m.role != 'system' %}<|system|>be brief" + END
    + "\n{% endif %}<|{{ m.role }}|>{{ m.content }}" + END + "\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CHAT = {"chat_template": TEMPLATE, "eos_token": END}
CONVERSATIONS = [
    [{"role": "user", "content": "hola"}, {"role": "assistant", "content": "hello"}],
    [{"role": "system", "content": "translate"}, {"role": "user", "content": "gato"},
     {"role": "assistant", "content": "cat"}, {"role": "user", "content": "perro"},
     {"role": "assistant", "content": "dog"}],
    [{"role": "user", "content": "the sun"}, {"role": "assistant", "content": "is warm today"}],
]


def test_pieces_join_to_the_rendering_and_learn_the_assistant_turns():
    for messages in CONVERSATIONS:
        pieces = chat_pieces(CHAT, messages)
        assert "".join(t for t, _ in pieces) == render_chat(CHAT, messages, False)
        learned = [t for t, learn in pieces if learn]
        assert learned == [m["content"] + END + "\n" for m in messages if m["role"] == "assistant"]


@pytest.fixture
def chat_model(tmp_path):
    """A tiny decoder whose padding id is its end-of-turn token (as SmolLM2's is), a chat template,
    and conversation files."""
    texts = [m["content"] for c in CONVERSATIONS for m in c] * 20
    tokenizer = train_bpe(texts + [TEMPLATE], vocab_size=300)
    tokenizer.tokenizer.add_special_tokens([END, "<|system|>", "<|user|>", "<|assistant|>"])
    end = tokenizer.token_to_id(END)
    torch.manual_seed(0)
    cfg = cpu_tiny(vocab_size=tokenizer.vocab_size, arch="decoder", max_positions=64)
    model = transformer.build_model(cfg.replace(pad_id=end, eos_id=end))
    transformer.save_model(model, tmp_path / "base", tokenizer=tokenizer,
                           decode=DecodeConfig(max_new_tokens=8), chat=CHAT)
    for name, rows in (("train", CONVERSATIONS * 10), ("valid", CONVERSATIONS)):
        with open(tmp_path / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for messages in rows:
                f.write(json.dumps({"messages": messages}) + "\n")
    return tmp_path


def chat_config(path, lora=None, **train):
    values = {
        "model": {"arch": "decoder"},
        "data": {"train_chat": str(path / "train.jsonl"), "valid_chat": str(path / "valid.jsonl"),
                 "max_len": 64},
        "train": {"init_from": str(path / "base"), "batch_tokens": 256, "max_steps": 6,
                  "valid_every": 3, "save_every": 3, "schedule": "cosine", "lr": 1e-3,
                  "warmup_steps": 1, "label_smoothing": 0.0, "precision": "fp32", **train},
    }
    if lora:
        values["train"]["lora"] = lora
    return build_run_config(values)


def test_the_loss_is_on_the_assistant_tokens_only(chat_model, tmp_path):
    cfg = chat_config(chat_model)
    assert cfg.objective == "chat"
    task = prepare_objective(cfg, tmp_path / "run", SOLO, lambda _: None)
    batch = task.collate(list(range(len(task.train_rows))))
    end = task.tokenizer.token_to_id(END)
    assert task.pad == end and (batch.targets == end).sum() > 0  # the end of turn is learned
    learned_text = []
    for r, (ids, learn) in enumerate(task.train_rows):
        picked = [int(ids[j + 1]) for j in range(len(ids) - 1) if batch.learned[r, j]]
        assert picked == [int(t) for t, keep in zip(ids, learn, strict=True) if keep][:len(picked)]
        learned_text.append(task.tokenizer.tokenizer.decode(picked, skip_special_tokens=False))
    for text, messages in zip(learned_text, CONVERSATIONS * 10, strict=True):
        answers = [m["content"] + END + "\n" for m in messages if m["role"] == "assistant"]
        assert text.replace(" ", "") == "".join(answers).replace(" ", "")
    assert batch.units == len(batch.targets) == task.units(list(range(len(task.train_rows))), None)


@pytest.mark.parametrize("lora", [None, {"rank": 4, "targets": ["q_proj", "v_proj"]}])
def test_a_run_writes_a_chat_model(chat_model, tmp_path, lora, capsys):
    said = []
    result = train(chat_config(chat_model, lora), tmp_path / "run", log=said.append)
    assert any("of them the assistant's" in line for line in said)
    assert result.best is not None and math.isfinite(result.best)
    assert (result.best_dir / CHAT_TEMPLATE_FILE).is_file()
    assert load_chat_template(result.best_dir) == CHAT
    pipeline = Pipeline.load(result.best_dir)
    assert isinstance(pipeline.generate("gato", chat=True), str)
    conversation = CONVERSATIONS[1]
    reply = pipeline.generate(conversation[:-1], chat=True, temperature=0.0)
    rc, out, err = run(["evaluate", result.best_dir, "--chat", chat_model / "valid.jsonl",
                        "--metric", "rouge", "--output", tmp_path / "replies.txt"], capsys)
    assert rc == 0, err
    assert "ROUGE-L" in out and out.splitlines()[1].split()[1] == "3"  # three conversations
    replies = (tmp_path / "replies.txt").read_text(encoding="utf-8").splitlines()
    assert replies[1] == " ".join(reply.split())  # the conversation up to its last turn


def test_bad_conversations_are_named_with_their_line(tmp_path, chat_model):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    with pytest.raises(ChatDataError, match="line 1: no assistant turn"):
        read_conversations(bad)
    bad.write_text('{"messages": [{"role": "bot", "content": "hi"}]}\n', encoding="utf-8")
    with pytest.raises(ChatDataError, match="line 1: each message needs a role"):
        read_conversations(bad)
    cfg = chat_config(chat_model, **{})
    values = cfg.to_dict()
    values["data"]["text"]["train_chat"] = str(bad)
    with pytest.raises(ConfigError, match="data.train_chat: .*bad.jsonl line 1"):
        prepare_objective(build_run_config(values), tmp_path / "r", SOLO, lambda _: None)
    values["train"]["init_from"] = None
    with pytest.raises(ConfigError, match="objective chat tunes a pretrained model"):
        build_run_config(values)
