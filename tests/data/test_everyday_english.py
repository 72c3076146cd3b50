"""`transformer data everyday-english` and its readers (chitchat-dataset's JSON, WordNet's data
files, chatterbot-corpus's YAML) on small files written here, and on the real packages when they
are installed (WordNet under / or TRANSFORMER_TEST_DEB_ROOT)."""

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.cli.common import run as run_cli
from transformer.data.sources.apertium import read_texts
from transformer.data.sources.everyday import english
from transformer.data.sources.everyday.english import (
    build_everyday_english,
    chatterbot_lines,
    chitchat_utterances,
    read_conversations,
    wordnet_examples,
)
from transformer.data.text import DataError

CHATS = {
    "a07e": {
        "prompt": "What did you do today?",
        "messages": [
            [
                {"text": "Hello there friend", "sender": "1"},
                {"text": "how are\nyou?", "sender": "1"},
            ],
            [{"text": "Hello there friend", "sender": "2"}, {"text": ":)", "sender": "2"}],
        ],
    },
    "b13c": {"messages": [[{"text": "%", "sender": "3"}, {"text": "I took a nap", "sender": "3"}]]},
}
NOUNS = """\
  1 This software and database is being provided to you, the LICENSEE, by  
  2 Princeton University under the following license.  "quoted licence text here"; 
00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived "not an example at all" 
07411851 11 n 02 jump 0 leap 0 001 @ 07309781 n 0000 | a sudden "jerky" rise; "the jump in prices"; "a jump"; "the leap was too high" 
07888888 11 n 01 bondage 0 000 | servitude; "he was in bondage to fear:; "he sought release" 
"""  # noqa: W291
VERBS = """\
00001740 29 v 01 breathe 0 000 | draw air into the lungs; "I can breathe better when the air is clean"; "the jump in prices" 
"""  # noqa: W291
CONVERSATIONS = """\
categories:
- conversations
conversations:
- - Good morning, how are you?
  - I am doing well, how about you?
- - Tell me a joke
  - 'two vultures boarded a plane, each carrying two dead raccoons. The  stewardess
    stops them and says "sorry sir, only one carrion per  passenger." '
  - No
- - Good morning, how are you?
  - '42'
- In a game of bingo, which number is "two little ducks"?
  - '22'
"""
CODING = "categories:\n- coding\nconversations:\n- - What is Python?\n  - A programming language.\n"


def fake_packages(base: Path) -> tuple[Path, Path, Path]:
    """(chitchat's folder, chatterbot's folder, a root holding WordNet's data files)."""
    chitchat, chatterbot, root = (
        base / "chitchat_dataset",
        base / "chatterbot_corpus",
        base / "root",
    )
    chitchat.mkdir(parents=True)
    (chitchat / "__init__.py").write_text("")
    (chitchat / "dataset.json").write_text(json.dumps(CHATS))
    (chatterbot / "data/english").mkdir(parents=True)
    (chatterbot / "__init__.py").write_text("")
    (chatterbot / "data/english/conversations.yml").write_text(CONVERSATIONS)
    (chatterbot / "data/english/coding.yml").write_text(CODING)
    wordnet = root / english.WORDNET_DIR
    wordnet.mkdir(parents=True)
    for name, text in zip(english.WORDNET_FILES, (NOUNS, VERBS, "", ""), strict=True):
        (wordnet / name).write_text(text)
    return chitchat, chatterbot, root


def test_chitchat_utterances_one_line_each_distinct(tmp_path):
    chitchat, _, _ = fake_packages(tmp_path)
    dropped = Counter()
    assert chitchat_utterances(chitchat, dropped) == [
        "Hello there friend",
        "how are you?",
        "I took a nap",
    ]
    assert dropped == {"chitchat: repeated": 1, "chitchat: no letter": 2}  # ":)" and "%"
    (chitchat / "dataset.json").write_text('{"a": {"messages": [["hi"]]}}')
    with pytest.raises(DataError, match="not conversations of messages with a text"):
        chitchat_utterances(chitchat)


def test_wordnet_examples_are_the_quoted_texts_after_the_definition(tmp_path):
    _, _, root = fake_packages(tmp_path)
    dropped = Counter()
    assert wordnet_examples(root, dropped) == [
        "the jump in prices",
        "the leap was too high",
        "I can breathe better when the air is clean",
    ]
    assert dropped == {
        "wordnet: fewer than 3 words": 1,  # "a jump"
        "wordnet: quotes that do not close": 1,
        "wordnet: repeated": 1,
    }
    with pytest.raises(DataError, match="apt-get install wordnet-base"):
        wordnet_examples(tmp_path / "nothing")


@pytest.mark.parametrize("use_yaml", [True, False])
def test_chatterbot_conversations_by_yaml_and_by_the_small_reader(use_yaml):
    if use_yaml:
        pytest.importorskip("yaml")
    assert read_conversations(CONVERSATIONS, use_yaml) == [
        ["Good morning, how are you?", "I am doing well, how about you?"],
        [
            "Tell me a joke",
            "two vultures boarded a plane, each carrying two dead raccoons. The  stewardess stops "
            'them and says "sorry sir, only one carrion per  passenger." ',
            "No",
        ],
        ["Good morning, how are you?", "42"],
    ]


def test_chatterbot_lines_leave_out_code_and_repeats(tmp_path, monkeypatch):
    _, chatterbot, _ = fake_packages(tmp_path)
    monkeypatch.setitem(sys.modules, "yaml", None)  # the small reader
    dropped = Counter()
    lines = chatterbot_lines(chatterbot, dropped)
    assert lines[:3] == [
        "Good morning, how are you?",
        "I am doing well, how about you?",
        "Tell me a joke",
    ]
    assert lines[3].startswith("two vultures") and lines[3].endswith('per passenger."')
    assert lines[4:] == ["No"]
    assert dropped == {
        "chatterbot: file of an excluded topic": 1,
        "chatterbot: repeated": 1,
        "chatterbot: no letter": 1,  # "42"
    }


def test_build_writes_one_text_a_line_for_apertium_bt(tmp_path):
    chitchat, chatterbot, root = fake_packages(tmp_path)
    report = build_everyday_english(tmp_path / "out", root, chitchat, chatterbot)
    assert report["lines"] == {"chitchat.eng": 3, "wordnet.eng": 3, "chatterbot.eng": 5}
    assert report["skipped"] == [] and report["licences"]["chitchat.eng"] == "MIT"
    assert (tmp_path / "out/chitchat.eng").read_text() == (
        "Hello there friend\nhow are you?\nI took a nap\n"
    )
    assert read_texts(tmp_path / "out/wordnet.eng") == wordnet_examples(root)
    provenance = (tmp_path / "out/PROVENANCE.md").read_text()
    assert "| wordnet.eng | wordnet-base: " in provenance and "--input " in provenance


def test_missing_sources_are_skipped_and_none_says_what_to_install(tmp_path, monkeypatch):
    chitchat, _, _ = fake_packages(tmp_path)
    gone = english.CHATTERBOT[0], "no_such_module_x", *english.CHATTERBOT[2:]
    monkeypatch.setattr(english, "CHATTERBOT", gone)
    (tmp_path / "bare").mkdir()
    report = build_everyday_english(tmp_path / "out", tmp_path / "bare", chitchat)
    assert list(report["lines"]) == ["chitchat.eng"]
    assert report["skipped"] == ["wordnet-base", "chatterbot-corpus"]
    assert report["install"] == (
        "apt-get install wordnet-base; pip install --no-deps chatterbot-corpus==1.3.3"
    )
    gone = english.CHITCHAT[0], "no_such_module_y", *english.CHITCHAT[2:]
    monkeypatch.setattr(english, "CHITCHAT", gone)
    with pytest.raises(DataError, match="pip install --no-deps chitchat-dataset==0.9.0"):
        build_everyday_english(tmp_path / "out", tmp_path / "bare")
    with pytest.raises(DataError, match="is not installed: pip install --no-deps chitchat"):
        chitchat_utterances()


def test_cli_row_finds_the_packages_where_python_would(tmp_path, capsys, monkeypatch):
    _, _, root = fake_packages(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    argv = ["data", "everyday-english", "--out", tmp_path / "out", "--root", root]
    rc, out, _ = run_cli(argv, capsys)
    assert rc == 0, out
    assert out.startswith(
        f"wrote {tmp_path / 'out'}: chitchat.eng 3, wordnet.eng 3, chatterbot.eng 5 English lines;"
    )
    argv = ["data", "everyday-english", "--out", tmp_path / "o2", "--root", tmp_path / "none"]
    rc, _, err = run_cli(argv, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and "--root" in err


def test_real_everyday_english(tmp_path):
    root = next(
        (Path(r) for r in ("/", os.environ.get("TRANSFORMER_TEST_DEB_ROOT"))
         if r and (Path(r) / english.WORDNET_DIR / "data.noun").is_file()),
        None,
    )  # fmt: skip
    if root is None:
        pytest.skip("wordnet-base is not installed (apt-get install, or TRANSFORMER_TEST_DEB_ROOT)")
    report = build_everyday_english(tmp_path / "out", root)
    if report["skipped"]:
        pytest.skip(f"not installed: {report['install']}")
    lines = report["lines"]
    assert 200_000 <= lines["chitchat.eng"] <= 235_000  # 222,803 distinct utterances
    assert 40_000 <= lines["wordnet.eng"] <= 45_000  # 42,337 examples of 3 words or more
    assert 1_400 <= lines["chatterbot.eng"] <= 1_900  # 1,607
    wordnet = (tmp_path / "out/wordnet.eng").read_text().splitlines()
    assert "I can breathe better when the air is clean" in wordnet
