"""The line syntax of voice-assistant skill files (OpenVoiceOS / Neon / Mycroft `*.intent`,
`*.voc`, `*.dialog`): reading a file's lines, expanding its alternations, and its `{slot}`
placeholders. Used by skills.py; pure functions on strings.

Rules:
- A file's lines: each line stripped; empty lines and lines starting with `#` (comments such as
  "# auto translated from en-us to es-es") are not lines. A file holding such an
  "auto translated" comment is marked machine-translated.
- Slots: `{{name}}` (the Mustache form of older dialogs) and `{ name }` become `{name}`; every
  `{name}` is kept verbatim, so that placeholders survive as `{name}` on both sides.
- Markup: simple SSML/HTML tags (`<speak>`, `</speak>`, `<break time="1s"/>`) are removed.
- Alternations: `(a|b|c)` is a group of alternatives, an empty one included (`(my |)` makes the
  words optional); a `|` outside any parenthesis makes the whole line one group (`.voc` lines
  such as `dime|di|decir`). Parentheses without a `|` inside are ordinary text ("(d. 1458)").
  No installed skill writes `[optional]` words in an intent (brackets occur only in prose
  dialogs, as Wikipedia's citation marks): `[citation needed]` and `[12]` are removed, other
  brackets are left as text.
- A line's groups are the alternations at its top level, left to right; a group with another
  alternation inside it is "nested".
- Expanding a line: choices are the tuples (alternative of group 1, of group 2, ...). They are
  taken diagonal first (choice k picks alternative k mod n_i of group i, for k below the largest
  n_i, so that every alternative of every group appears early), then the rest in product order,
  without repeats, at most MAX_EXPANSIONS per line; nested groups expand inside. The texts are
  made one line (whitespace runs one space); repeated texts are kept once.
- Two lines expand together (expand_pair) when both have the same number of groups, the same
  number of alternatives in each, and no nested group: choice k of one side is paired with
  choice k of the other. Otherwise each side takes the first alternative of every group (one
  pair), which keeps the line: on the pinned skills 56 of the 65 paired lines with alternations
  differ in shape, and skipping them would lose them all.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass

from ..splits import one_line

MAX_EXPANSIONS = 8
"""At most this many texts from one line (or one pair of lines)."""

AUTO_TRANSLATED = re.compile(r"^#.*auto[- ]?translated", re.I)
_DOUBLE_SLOT = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_SLOT = re.compile(r"\{\s*([^{}\s][^{}]*?)\s*\}")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_CITATION = re.compile(r"\s*\[(?:citation needed|\d+)\]", re.I)


@dataclass(frozen=True)
class Group:
    """An alternation: each alternative is a sequence of text and groups."""

    options: tuple[tuple, ...]

    @property
    def nested(self) -> bool:
        return any(isinstance(part, Group) for option in self.options for part in option)


def read_lines(text: str) -> tuple[list[str], bool]:
    """The lines of a file (stripped, no empty lines, no comments) and whether a comment marks
    it machine-translated."""
    lines, auto = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            auto = auto or bool(AUTO_TRANSLATED.match(line))
        elif line:
            lines.append(line)
    return lines, auto


def normalize(line: str) -> str:
    """Slots as `{name}`, tags and citation marks removed."""
    line = _DOUBLE_SLOT.sub(r"{\1}", line)
    line = _SLOT.sub(r"{\1}", line)
    line = _TAG.sub(" ", line)
    return _CITATION.sub("", line)


def slots(text: str) -> Counter:
    """The multiset of `{name}` placeholders in a text."""
    return Counter(_SLOT.findall(text))


def parse(line: str) -> tuple:
    """A normalized line as a sequence of text and Groups (the module's alternation rules)."""
    if _top_level_bar(line):
        line = f"({line})"
    sequence, end = _parse_sequence(line, 0)
    if end < len(line):  # an unmatched ")": the rest is text
        sequence = (*sequence, line[end:])
    return sequence


def _top_level_bar(line: str) -> bool:
    depth = 0
    for c in line:
        depth += (c == "(") - (c == ")")
        if c == "|" and depth <= 0:
            return True
    return False


def _parse_sequence(line: str, i: int) -> tuple[tuple, int]:
    """Parts from i up to an unmatched `)` or `|` (not consumed), and where it stopped."""
    parts: list = []
    text = ""
    while i < len(line) and line[i] not in ")|":
        if line[i] == "(":
            options, j = _parse_group(line, i + 1)
            if options is None:  # no closing ")": text
                text += line[i:]
                i = len(line)
            elif len(options) == 1:  # "(d. 1458)": ordinary parentheses
                text += "(" + _flat(options[0]) + ")"
                i = j
            else:
                if text:
                    parts.append(text)
                    text = ""
                parts.append(Group(tuple(options)))
                i = j
        else:
            text += line[i]
            i += 1
    if text:
        parts.append(text)
    return tuple(parts), i


def _parse_group(line: str, i: int) -> tuple[list | None, int]:
    """The alternatives after a `(` at i-1, and the index after its `)`; None without one."""
    options = []
    while True:
        option, i = _parse_sequence(line, i)
        options.append(option)
        if i >= len(line):
            return None, i
        if line[i] == ")":
            return options, i + 1
        i += 1  # past "|"


def _flat(sequence: tuple) -> str:
    """A sequence written back as text (for ordinary parentheses holding no alternation)."""
    return "".join(
        part
        if isinstance(part, str)
        else "(" + "|".join(_flat(option) for option in part.options) + ")"
        for part in sequence
    )


def groups(sequence: tuple) -> list[Group]:
    return [part for part in sequence if isinstance(part, Group)]


def choices(sizes: list[int], limit: int = MAX_EXPANSIONS) -> list[tuple[int, ...]]:
    """Up to `limit` choice tuples for groups of these sizes: diagonal first, then product
    order, no repeats."""
    if not sizes:
        return [()]
    picked: list[tuple[int, ...]] = []
    diagonal = (tuple(k % n for n in sizes) for k in range(max(sizes)))
    for choice in itertools.chain(diagonal, itertools.product(*(range(n) for n in sizes))):
        if choice not in picked:
            picked.append(choice)
            if len(picked) == limit:
                break
    return picked


def _render(sequence: tuple, choice: tuple[int, ...], limit: int) -> list[str]:
    """The texts of a sequence with its top-level groups fixed by `choice` (nested groups expand,
    within `limit`)."""
    texts = [""]
    picks = iter(choice)
    for part in sequence:
        if isinstance(part, str):
            tails = [part]
        else:
            tails = _texts(part.options[next(picks)], limit)
        texts = [head + tail for head in texts for tail in tails][:limit]
    return texts


def _texts(sequence: tuple, limit: int) -> list[str]:
    """Every text of a sequence (up to `limit`), spaces as written."""
    sizes = [len(g.options) for g in groups(sequence)]
    return [text for choice in choices(sizes, limit) for text in _render(sequence, choice, limit)]


def expand(sequence: tuple, limit: int = MAX_EXPANSIONS) -> list[str]:
    """Every text of one side alone (up to `limit`), one line each, without repeats."""
    found: list[str] = []
    for text in map(one_line, _texts(sequence, limit)):
        if text not in found:
            found.append(text)
    return found[:limit]


def first(sequence: tuple) -> str:
    """The text with the first alternative of every group (nested ones too)."""
    return _render(sequence, tuple(0 for _ in groups(sequence)), 1)[0]


def same_shape(a: tuple, b: tuple) -> bool:
    """Whether two lines can expand together: the same group sizes in order, none nested."""
    ga, gb = groups(a), groups(b)
    return [len(g.options) for g in ga] == [len(g.options) for g in gb] and not any(
        g.nested for g in ga + gb
    )


def expand_pair(eng: str, spa: str) -> tuple[list[tuple[str, str]], bool]:
    """(English, Spanish) texts of two lines at the same position (the module's rules), and
    whether they expanded together (False: first alternatives, or no group at all)."""
    a, b = parse(normalize(eng)), parse(normalize(spa))
    if not groups(a) and not groups(b):
        return [(one_line(_flat(a)), one_line(_flat(b)))], False
    if same_shape(a, b):
        pairs: list[tuple[str, str]] = []
        for choice in choices([len(g.options) for g in groups(a)]):
            pair = (one_line(_render(a, choice, 1)[0]), one_line(_render(b, choice, 1)[0]))
            if pair not in pairs:
                pairs.append(pair)
        return pairs, True
    return [(one_line(first(a)), one_line(first(b)))], False


def expand_one(line: str) -> list[str]:
    """The texts of one line alone (English with no Spanish counterpart)."""
    return expand(parse(normalize(line)))
