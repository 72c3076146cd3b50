"""`transformer data chat` (data/sources/chat_sets.py): each kind of task dataset becomes one
conversation per example, split by split, that objective chat reads back; a directory with no
dataset is refused in one line."""

from __future__ import annotations

import json

import pytest

from tests.cli.common import run
from transformer.data.chat import read_conversations
from transformer.data.sources.chat_sets import build_chat_corpus
from transformer.data.text import DataError


def test_pairs_translation_and_questions(tmp_path):
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    (pairs / "train.tsv").write_text("a long lead\tThe sentence.\nanother\tTwo.\n", encoding="utf-8")
    (pairs / "test.tsv").write_text("held out\tThree.\n", encoding="utf-8")
    r = build_chat_corpus(tmp_path / "c1", pairs, system="Be brief.")
    assert r["kind"] == "pairs" and r["conversations"] == {"train": 2, "test": 1}
    first = read_conversations(tmp_path / "c1" / "train.jsonl")[0]
    assert first == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Summarize this text in one sentence.\n\na long lead"},
        {"role": "assistant", "content": "The sentence."},
    ]

    pair = tmp_path / "translation"
    pair.mkdir()
    (pair / "train.spa").write_text("De quién es\nHola\n", encoding="utf-8")
    (pair / "train.eng").write_text("Whose is it\nHello\n", encoding="utf-8")
    build_chat_corpus(tmp_path / "c2", pair)
    assert read_conversations(tmp_path / "c2" / "train.jsonl")[0] == [
        {"role": "user", "content": "Translate to English: De quién es"},
        {"role": "assistant", "content": "Whose is it"},
    ]
    build_chat_corpus(tmp_path / "c3", pair, reverse=True, instruction="Say it in {target}:")
    assert read_conversations(tmp_path / "c3" / "train.jsonl")[1][0]["content"] == (
        "Say it in Spanish: Hello"
    )

    qa = tmp_path / "qa"
    qa.mkdir()
    context = "In the beginning God created the heaven and the earth."
    squad = {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
        {"id": "1", "question": "What was created?",
         "answers": [{"text": "the heaven and the earth", "answer_start": 29}]}]}]}]}
    (qa / "valid.json").write_text(json.dumps(squad), encoding="utf-8")
    build_chat_corpus(tmp_path / "c4", qa)
    (user, assistant), = [read_conversations(tmp_path / "c4" / "valid.jsonl")[0]]
    assert user["content"].endswith(context + "\n\nQuestion: What was created?")
    assert assistant["content"] == "the heaven and the earth"


def test_no_dataset_is_one_line(tmp_path, capsys):
    with pytest.raises(DataError, match="holds no dataset to turn into conversations"):
        build_chat_corpus(tmp_path / "out", tmp_path)
    rc, _, err = run(["data", "chat", "--source", tmp_path / "missing", "--out", tmp_path / "o"],
                     capsys)
    assert rc != 0 and "is not a directory" in err and len(err.strip().splitlines()) == 1
