"""Apertium (Debian's rule-based translator, apertium-eng-spa) run over lines, and synthetic
Spanish -> English pairs made with it from everyday English (back-translation by a rule-based
system instead of a reverse model).

Running Apertium (`translate_lines`):
- The lines go in as paragraphs (an empty line between each two): with a bare newline between
  them, Apertium's text mode translates across it ("Vi la casa\\nroja" -> "I saw the
  red\\nhouse"). A line break other than \\n inside a line becomes a space; an empty or blank line
  is not sent and comes back empty. When the output is not one paragraph per line, the lines are
  translated again in halves, down to single lines (one line's output: its lines joined).
- `-u` leaves out the '*' before an unknown word (mark_unknown keeps it); the marks ('*', and
  '#' and '@': a form the generator lacks, a transfer error) are stripped at word starts, and
  runs of spaces made one (`clean`).

The synthetic pairs (`build_apertium_bt_corpus`):
- Input: English text files, each either one text per line or a fortune file (records between
  lines holding only "%", as the `fortunes` packages ship them; a record's lines are joined).
  A record's attribution ("-- Mark Twain", after a tab or two spaces and a dash pair) is cut.
- Kept: texts of MIN_WORDS to max_words words with a letter in them, at most MAX_SENTENCES
  sentence ends, no tab, no URL, no line of box drawing or ASCII art (a third or more of the
  characters neither letters, digits, spaces nor common punctuation), no dated list entry
  ("1969 - Apollo 11 lands": a chronology, not speech). Each distinct text once.
- Left out: any text that is the English side of a valid or test split of the corpora given with
  `exclude` (so no held-out reference is seen in training, as Spanish or English).
- Sampled: max_lines texts in all, shared evenly among the inputs (so a large file does not drown
  a small one; an input with fewer texts than its share leaves the rest to the others:
  `share_out`), each input's chosen by the sha256 of the text (a rebuild picks the same ones).
- Each kept text is translated English -> Spanish with `apertium eng-spa`; the pair is
  (TAG + " " + Spanish, English): the tag lets the model tell synthetic sources from human ones
  (tagged back-translation, Caswell et al. 2019). A text whose translation comes out empty, or
  with Apertium's unknown-word marks on a third or more of its words, or whose placeholders and
  tags do not all come through unchanged (Apertium translates "{application}"), is dropped.
- Only a train split is written (train.spa, train.eng) with PROVENANCE.md.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from ..markup import slots_survive
from ..text import DataError
from . import packages
from .splits import check_out, one_line, write_corpus

PACKAGE = "apertium-eng-spa"
INSTALL = f"install Apertium's English-Spanish pair: apt-get install {PACKAGE}"
TAG = "⟪bt⟫"
"""The synthetic sources' tag: no markup (data.protect_markup leaves it alone), never in text."""
MIN_WORDS = 3
MAX_SENTENCES = 3
_MARK = re.compile(r"(?<!\w)[*#@](?=[^\W\d_])")
"""Apertium's marks at a word start: '*' unknown, '#' no generated form, '@' transfer error. Only
before a letter: "#1" and "5*3" are the source's own."""
_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""What str.splitlines would take for a line break, besides \\n."""
_ATTRIBUTION = re.compile(r"(\t|\s{2,})--\s.*$|\s+--\s*[A-Z][\w .,'-]*$")
_SENTENCE_END = re.compile(r"[.!?]+(\s|$)")
_URL = re.compile(r"https?://|www\.|\S+@\S+\.\w")
_PLAIN = re.compile(r"[\w\s.,;:!?'\"()\-]")
_LETTER = re.compile(r"[^\W\d_]")
_DATED = re.compile(r"^\d{1,4}\s+[-–]\s")

Run = Callable[..., subprocess.CompletedProcess]


def clean(line: str) -> str:
    """Apertium's output line without its marks (see _MARK) and with single spaces."""
    return " ".join(_MARK.sub("", line).split())


def translate_lines(
    lines: list[str], direction: str, run: Run = subprocess.run, mark_unknown: bool = False
) -> list[str]:
    """Apertium's raw output in `direction` (spa-eng, eng-spa), one line per input line (the
    module's rules; run: subprocess.run, or a fake in tests). mark_unknown: without -u, so an
    unknown word comes out with '*' before it."""
    out = [""] * len(lines)
    todo = [i for i, line in enumerate(lines) if line.strip()]
    if not todo:
        return out
    text = "\n\n".join(_LINE_BREAKS.sub(" ", lines[i]) for i in todo) + "\n"
    command = ["apertium", direction] if mark_unknown else ["apertium", "-u", direction]
    done = run(command, input=text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise DataError(
            f"apertium {direction} failed ({done.stderr.strip() or done.returncode}): {INSTALL}"
        )
    got = done.stdout.removesuffix("\n").split("\n")
    if len(got) == 2 * len(todo) - 1 and not any(got[1::2]):
        for i, line in zip(todo, got[::2], strict=True):
            out[i] = line
        return out
    if len(todo) == 1:
        out[todo[0]] = " ".join(part for part in got if part.strip())
        return out
    half = len(lines) // 2
    return translate_lines(lines[:half], direction, run, mark_unknown) + translate_lines(
        lines[half:], direction, run, mark_unknown
    )


def ready(direction: str) -> bool:
    """Whether apertium is on the PATH and lists the pair `direction`."""
    if shutil.which("apertium") is None:
        return False
    done = subprocess.run(["apertium", "-l"], capture_output=True, text=True, check=False)
    return direction in done.stdout.split()


def version() -> str:
    """apertium-eng-spa's Debian version, or "unknown"."""
    return packages.versions([PACKAGE]).get(PACKAGE, packages.UNKNOWN)


def read_texts(path: Path) -> list[str]:
    """A file's texts: its records if it is a fortune file (lines of "%" between them), else its
    lines; each as one line with its attribution cut."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if any(line.strip() == "%" for line in lines):
        records, record = [], []
        for line in [*lines, "%"]:
            if line.strip() == "%":
                records.append(" ".join(_ATTRIBUTION.sub("", r) for r in record))
                record = []
            else:
                record.append(line)
    else:
        records = [_ATTRIBUTION.sub("", line) for line in lines]
    return [" ".join(r.split()) for r in records if r.strip()]


def reason_to_drop(text: str, max_words: int) -> str | None:
    words = len(text.split())
    if words < MIN_WORDS:
        return f"fewer than {MIN_WORDS} words"
    if words > max_words:
        return f"more than {max_words} words"
    if not _LETTER.search(text):
        return "no letter"
    if _DATED.match(text):
        return "a dated list entry (YEAR - event)"
    if _URL.search(text):
        return "a URL or an e-mail address"
    if len(_SENTENCE_END.findall(text)) > MAX_SENTENCES:
        return f"more than {MAX_SENTENCES} sentences"
    if len(_PLAIN.findall(text)) < len(text) * 2 / 3:
        return "drawing or symbols (a third or more of it)"
    return None


def held_out_english(corpora: list[Path]) -> set[str]:
    """The English of every valid and test split under these corpus folders."""
    held: set[str] = set()
    for corpus in corpora:
        for split in ("valid", "test"):
            path = corpus / f"{split}.eng"
            if path.is_file():
                held.update(
                    " ".join(t.split()) for t in path.read_text(encoding="utf-8").splitlines()
                )
    return held


def share_out(total: int, sizes: dict[str, int]) -> dict[str, int]:
    """How many of each input's texts to take: `total` shared evenly, an input with fewer than
    its share giving the rest to the others (the smallest served first)."""
    shares, left = {}, total
    order = sorted(sizes, key=lambda name: sizes[name])
    for k, name in enumerate(order):
        shares[name] = min(sizes[name], math.ceil(left / (len(order) - k)))
        left -= shares[name]
    return {name: shares[name] for name in sizes}


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_apertium_bt_corpus(
    out_dir: str | os.PathLike,
    inputs: list[str | os.PathLike],
    exclude: list[str | os.PathLike] | None = None,
    max_lines: int = 20000,
    max_words: int = 25,
    tag: str = TAG,
    run: Run = subprocess.run,
) -> dict:
    """Write OUT/train.{spa,eng} and PROVENANCE.md (the module's rules); return the report."""
    out = check_out(out_dir, "synthetic pairs")
    paths = [Path(p) for p in inputs]
    if not paths:
        raise DataError("give at least one --input file of English text")
    for path in paths:
        if not path.is_file():
            raise DataError(f"--input {path} is not a file: give files of English text")
    if tag != "".join(tag.split()) or not tag:
        raise DataError(f"--tag {tag!r}: give one word without spaces, e.g. {TAG}")
    if run is subprocess.run and not ready("eng-spa"):
        raise DataError(f"Apertium's eng-spa is not installed: {INSTALL}")
    held = held_out_english([Path(c) for c in exclude or []])
    dropped: Counter = Counter()
    seen: set[str] = set()
    eligible: dict[str, list[str]] = {}
    for path in paths:
        texts = []
        for text in read_texts(path):
            reason = reason_to_drop(text, max_words)
            if reason is None and text in held:
                reason = "a valid or test reference of an excluded corpus"
            if reason is None and text in seen:
                reason = "a duplicate"
            if reason:
                dropped[reason] += 1
                continue
            seen.add(text)
            texts.append(text)
        eligible[str(path)] = sorted(texts, key=_key)
    shares = share_out(max_lines, {name: len(texts) for name, texts in eligible.items()})
    chosen: list[str] = []
    report_inputs: dict[str, dict] = {}
    for name, texts in eligible.items():
        chosen.extend(texts[: shares[name]])
        dropped["over the input's share of --max-lines"] += len(texts) - shares[name]
        report_inputs[name] = {"eligible": len(texts), "chosen": shares[name]}
    pairs = []
    for eng, raw in zip(chosen, translate_lines(chosen, "eng-spa", run, True), strict=True):
        spa, words = clean(raw), raw.split()
        if not spa:
            dropped["empty translation"] += 1
        elif 3 * sum(w.startswith("*") for w in words) >= len(words):
            dropped["a third or more of the words unknown to Apertium"] += 1
        elif not slots_survive(eng, spa):
            dropped["a placeholder or tag changed by Apertium ({slot} -> {la ranura})"] += 1
        else:
            pairs.append((one_line(f"{tag} {spa}"), one_line(eng)))
    if not pairs:
        raise DataError("no English text was kept: give files of short English sentences")
    report = {
        "pairs": {"train": len(pairs)},
        "inputs": report_inputs,
        "dropped": dropped,
        "tag": tag,
        "version": version() if run is subprocess.run else "unknown",
    }
    write_corpus(out, {"train": pairs}, _provenance(report, max_lines, max_words, exclude or []))
    return report


def _provenance(report: dict, max_lines: int, max_words: int, exclude: list) -> str:
    rows = "\n".join(
        f"| {path} | {r['eligible']:,} | {r['chosen']:,} |" for path, r in report["inputs"].items()
    )
    drops = "\n".join(f"- {n:,}: {why}" for why, n in report["dropped"].most_common())
    held = ", ".join(str(e) for e in exclude) or "none"
    return f"""# Synthetic Spanish -> English pairs: English back-translated by Apertium

Built by `transformer data apertium-bt`: English text translated into Spanish by Apertium
(`apertium -u eng-spa`, {PACKAGE} {report["version"]}, GPL), each synthetic Spanish source tagged
`{report["tag"]} ` before it; the English is the human original. Training data only: the Spanish
is a rule-based system's, not a translator's.

Pairs: train {report["pairs"]["train"]:,}.

| input | eligible texts | chosen |
|---|---:|---:|
{rows}

Rules: texts of {MIN_WORDS} to {max_words} words, at most {MAX_SENTENCES} sentence ends, no URL,
mostly letters, no dated list entry; each distinct text once; none that is a valid or test English
line of: {held}; {max_lines:,} in all, shared evenly among the inputs (one with fewer leaves the
rest to the others), chosen by the sha256 of the text.

Dropped:

{drops}
"""
