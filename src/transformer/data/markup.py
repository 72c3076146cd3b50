"""Placeholders and markup kept through translation: each protected span of a line is replaced by a
reserved slot token before tokenizing, the model is trained on that form, and after decoding each
slot token becomes its span again, so that every placeholder and tag of the input appears exactly
once in the output (OpenNMT's placeholders, with its ｟ ｠ brackets).

The rules, in the order they apply:

1. Protected spans, found left to right (the leftmost match wins; at one spot the first kind below
   that matches): a whole `<code>…</code>`, `<kbd>…</kbd>`, `<tt>…</tt>` or `<var>…</var>` span
   (one span: its content is not translated); an HTML/XML tag (opening `<a href="…">`, closing
   `</b>`, self-closing `<br/>`; `<` must be followed by a letter: "a < b" is text); an entity
   (`&amp;`, `&lt;`, `&#169;`, `&#xA9;`); a URL (http, https, ftp or file scheme, or www.; a
   trailing . , ; : ! ? ' " and an unbalanced ) are left out of it); an e-mail address; a Python
   placeholder (`%(name)s`, `%(count)05d`, `%(name)-10s`: flags - + # 0 and space, width,
   precision, h l L); a Qt one (`%L1`); a printf placeholder as gettext's c-format reads it:
   `%`, an argument number (`%2$s`), flags ' - + # 0 I and space, a width (digits, `*`, `*1$`),
   a precision (`.` then digits, `*` or `*2$`; a bare `.` only after a width: `%*.s`), a length
   (hh h l ll L q j z Z t, w8 … wf64, I64 I32) and a conversion letter (any letter: `%'d`,
   `%-*.*s`, `%*1$d`, `%I64u`, `%Lf`, `%m`, strftime's `%H` alike) or an inttypes macro
   (`%<PRId64>`, `%5<PRIuMAX>`); a Qt `%1`; a brace placeholder (`{name}`, `{0}`, `{}`,
   `{0:.2f}`, `{0!r:>10}`); a shell variable (`$VAR`, `${VAR}`); and a slot token already in the
   text (`｟3｠`: it is kept as the literal it is). `%%` is a literal percent sign, never a span
   nor half of one (`%%'d` is `%%` then text). The space flag counts only where the directive
   cannot be ordinary text: in a Python placeholder (`%(n) d`), and in a printf one that has an
   argument number (`%1$ d`), or flags that end with one of - + # 0 (`% -d`, `% +d`), or a width
   or a precision right after its flags (`% 5d`, `% .3f`). A `%`, flags that end with a space
   and a bare conversion letter are text (`% d`, `% s`, `% a`, `% ld`, `%+ d`, `% - S`): "100% de
   descuento", "50 % más", "del 10 % a 20 %", "50 % - Silenciado" (xgettext, too, does not count
   a directive with a space as intended).
2. protect(text): the k-th span (k = 1, 2, … in order of appearance) is replaced by the token
   `｟k｠` exactly (the spaces around it stay as they were); from span MAX_SLOTS + 1 on, spans stay
   literal text. The Slots returned hold each span's text, the source's spacing around it and
   the `%` signs right before and after it (rule 4).
3. protect_pair(source, target), for training: the source is masked as protect masks it, and a
   target span equal to a source span that is masked takes that source span's token (identical
   spans are matched in order: the first such target span with the first unmatched source one); a
   target span with no source counterpart stays literal. A source span with no counterpart in the
   target keeps its token all the same: inference masks every source span, so training does too.
4. restore(output, slots): each slot token of the output that names a slot of the input and was not
   used yet becomes its span; a repeated or unknown slot token is removed (with the space it
   leaves doubled, and one `%` of an odd run of them glued to it on either side: that `%` was
   the slot's, and would glue to what is left); each slot missing from the output is inserted,
   in slot order: at the start if it began the source, else right after the slot that preceded
   it in the source when that one is in the output, else at the end, with a space on the side
   where the source had whitespace next to it. Then the `%` signs the model wrote against a span
   put back (a run of them in its text touching the span, up to the next span) are made even
   where an odd run would lose or make a placeholder, by one `%`, toward the source's run at
   that side of that slot (one added when the source's run there is longer: the model wrote half
   of its `%%`; else one dropped: a stray):
   (a) right before a span, unless the source's run there is odd: before one that begins with
   `%` always (`%` + `%'d` would read `%%'d`, the placeholder gone), before any other only when
   the last `%` would begin a placeholder with it (`%` + `https://…` would read `%ht`);
   (b) right after a span, unless the source's run there is odd: after a printf or Python
   placeholder always (`%d` + `%c…` would make `%c`; ` [ %i%%% ]` leaves a lone `%` in a
   format string), after any other only when its last `%` would begin a placeholder with what
   follows (`{0}` + `%s`).
   An even run (the source's `%%` as the model wrote it) and an odd run where the source has one
   (`%1%` of Qt, "{0}% hecho") stay as they are. Last, a span put back that rule 1 no longer
   reads as itself in the output, the model's text glued to it (`%1` + `dias` reads `%1d`, a URL
   + `files` one longer URL), is set apart from that text by a space: after it, then before it
   if still needed. So every slot of the input appears exactly once, no `%` of the model's next
   to a slot token takes a placeholder away or makes one, and restore(protect(x)) == x.
5. slots_survive(source, output): whether every protected span of the source (rule 1, all of them,
   beyond MAX_SLOTS too) occurs in the output exactly as often as in the source, the output read
   by rule 1 too (`%%'d` holds no `%'d`): the measurement of `transformer evaluate` and
   benchmarks/apertium.py ("placeholders kept").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

MAX_SLOTS = 32
"""Slot tokens a line may use (｟1｠ … ｟32｠); a tokenizer trained with protection holds them."""
OPEN, CLOSE = "\uff5f", "\uff60"  # ｟ ｠: never in real text


def slot_token(k: int) -> str:
    """The reserved token of slot k (1-based): ｟k｠."""
    return f"{OPEN}{k}{CLOSE}"


SLOT_TOKENS = tuple(slot_token(k) for k in range(1, MAX_SLOTS + 1))
SLOT = re.compile(f"{OPEN}(\\d+){CLOSE}")
"""A slot token in text: its group 1 is the slot number."""

_ARG = r"(?:[1-9]\d*\$)"  # an argument number: 1$
_WIDTH = rf"(?:\*{_ARG}?|\d+)"  # 10, *, *2$
_PRECISION = rf"(?:\.(?:\*{_ARG}?|\d+))"  # .2, .*, .*3$
_SIZED = rf"(?:{_WIDTH}(?:\.(?:\*{_ARG}?|\d*))?|{_PRECISION})"  # a bare . only after a width: %*.s
_CONVERSION = (
    r"(?:<PRI[diouxX](?:(?:LEAST|FAST)?(?:8|16|32|64)|MAX|PTR)>"  # %<PRId64>
    r"|(?:hh|ll|wf?(?:8|16|32|64)|I64|I32|[hlLqjzZt])?[a-zA-Z])"  # %lu, %I64d, %m, %H
)
_FLAGS = "-+#0'I"
_PRINTF = (
    rf"(?:%{_ARG}?[{_FLAGS}]*{_SIZED}?{_CONVERSION}"  # no space flag
    rf"|%(?:{_ARG}[{_FLAGS} ]*{_SIZED}?"  # the space flag (rule 1): an argument number,
    rf"|[{_FLAGS} ]*[-+#0]{_SIZED}?"  # flags that end with - + # 0,
    rf"|[{_FLAGS} ]*{_SIZED}){_CONVERSION})"  # or a width or precision after them
)
"""A printf placeholder as rule 1 takes it (gettext's c-format, its space flag restricted)."""
_PYTHON = r"%\([A-Za-z_]\w*\)[-+ #0]*\d*(?:\.\d+)?[hlL]?[a-zA-Z]"  # %(name)s, %(count)05d
_PERCENT = rf"{_PYTHON}|%L\d+|{_PRINTF}|%\d+"  # the placeholders that begin with %, Qt's among them
_BRACE = r"\{(?:[A-Za-z_]\w*|\d*)(?:![rsa])?(?::[^{}]*)?\}"  # {name}, {0}, {}, {0:.2f}, {0!r:>10}

PLACEHOLDER = re.compile(rf"%%|{_PERCENT}|{_BRACE}")
"""The placeholders of rule 1 (and `%%`, matched first so that it is never half of one), as
data.sources.ui_clean compares the two sides of a gettext entry (its rule 5)."""

_ATTRIBUTE = r"""\s+[\w:.-]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>=`]+))?"""
SPAN = re.compile(
    r"(?P<percent>%%)"
    r"|(?i:(?P<code><(?P<name>code|kbd|tt|var)\b[^<>]*>.*?</(?P=name)\s*>))"
    rf"|</?[A-Za-z][\w:.-]*(?:{_ATTRIBUTE})*\s*/?>"
    r"|&(?:[A-Za-z][A-Za-z0-9]{1,31}|#\d{1,7}|#[xX][0-9A-Fa-f]{1,6});"
    r"|(?P<url>(?<![\w.@/])(?:(?i:https?|ftp|file)://|(?i:www)\.)[^\s<>\"'`]+)"
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    rf"|{_PERCENT}|{_BRACE}"
    r"|\$\{[A-Za-z_]\w*\}|\$[A-Za-z_]\w*"  # shell: ${VAR}, $VAR
    rf"|{OPEN}\d+{CLOSE}",  # a slot token in the text: a literal, kept
    re.S,
)
"""Rule 1's spans, one alternative per kind (the group "percent" is `%%`, never a span)."""
_TRAILING = ".,;:!?'\")"


def spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each protected span of text, in order (rule 1)."""
    for m in SPAN.finditer(text):
        if m.group("percent"):
            continue
        start, end = m.span()
        if m.group("url"):  # trailing punctuation is the sentence's, not the URL's
            url = m.group()
            while url[-1] in _TRAILING and (url[-1] != ")" or url.count("(") < url.count(")")):
                url = url[:-1]
            end = start + len(url)
            if end - start <= len("www."):
                continue
        yield start, end


def span_texts(text: str) -> list[str]:
    """The protected spans of text, in order."""
    return [text[a:b] for a, b in spans(text)]


@dataclass(frozen=True)
class Slot:
    """One protected span of a source line: its text and the source's characters around it."""

    text: str
    starts: bool
    """It began the source (only spaces before it)."""
    before: str
    """The source's character right before it ("" at the start)."""
    after: str
    """The source's character right after it ("" at the end)."""
    percents_before: int = 0
    """The `%` signs right before it in the source, up to the slot before (rule 4's percents)."""
    percents_after: int = 0
    """The `%` signs right after it in the source, up to the slot after."""


def protect(text: str) -> tuple[str, list[Slot]]:
    """(text with its first MAX_SLOTS spans replaced by ｟1｠, ｟2｠, …, the slots) (rule 2)."""
    return _mask(text, list(spans(text))[:MAX_SLOTS])


def _mask(
    text: str, chosen: list[tuple[int, int]], tokens: list[str] | None = None
) -> tuple[str, list[Slot]]:
    out, slots, last = [], [], 0
    for k, (a, b) in enumerate(chosen):
        out += [text[last:a], tokens[k] if tokens else slot_token(k + 1)]
        upto = chosen[k + 1][0] if k + 1 < len(chosen) else len(text)
        before, after = text[last:a], text[b:upto]
        percents = len(before) - len(before.rstrip("%")), len(after) - len(after.lstrip("%"))
        slots.append(
            Slot(text[a:b], not text[:a].strip(), text[a - 1 : a], text[b : b + 1], *percents)
        )
        last = b
    out.append(text[last:])
    return "".join(out), slots


def protect_pair(source: str, target: str) -> tuple[str, str]:
    """(masked source, masked target) of a training pair (rule 3)."""
    masked, slots = protect(source)
    waiting: dict[str, list[str]] = {}
    for k, slot in enumerate(slots, 1):
        waiting.setdefault(slot.text, []).append(slot_token(k))
    chosen, tokens = [], []
    for a, b in spans(target):
        queue = waiting.get(target[a:b])
        if queue:
            chosen.append((a, b))
            tokens.append(queue.pop(0))
    return masked, _mask(target, chosen, tokens)[0] if chosen else target


def restore(output: str, slots: list[Slot]) -> str:
    """The output with each slot token replaced by its span, every slot exactly once (rule 4)."""
    if not slots and SLOT.search(output) is None:
        return output
    pieces: list[str | int | None] = []  # texts, and between two a slot or None: a token removed
    used: set[int] = set()
    last = 0
    for m in SLOT.finditer(output):
        k = int(m.group(1)) - 1
        if 0 <= k < len(slots) and k not in used:
            used.add(k)
        else:
            k = None
        pieces += [output[last : m.start()], k]
        last = m.end()
    pieces.append(output[last:])
    pieces[::2] = _percents(pieces[::2], pieces[1::2], slots)
    inserted = set()
    for k in range(len(slots)):
        if k in used:
            continue
        if k == 0 and slots[0].starts:
            at = 0
        elif k - 1 in used:
            at = pieces.index(k - 1) + 1
        else:
            at = len(pieces)
        pieces.insert(at, k)
        used.add(k)
        inserted.add(k)
    out, placed = _join(pieces, slots, inserted)
    ends = [0, *(end for a, b, _ in placed for end in (a, b)), len(out)]
    texts = [out[ends[i] : ends[i + 1]] for i in range(0, len(ends), 2)]  # the model's, between
    texts = _percents(texts, [k for _, _, k in placed], slots)  # what the inserted slots touch
    out, at = texts[0], []
    for (a, b, k), text in zip(placed, texts[1:], strict=True):
        at.append((len(out), len(out) + b - a))
        out += slots[k].text + text
    return _apart(out, at)


def _spaced(source: str, output: str) -> bool:
    """Whether an inserted span and its neighbour in the output (a character) take a space
    between them: the source had whitespace on that side, or the neighbour is a letter or digit
    where the source had none (a word is not glued to a span the source did not glue it to)."""
    if not output or output.isspace():
        return False
    return source.isspace() or (output.isalnum() and not source.isalnum())


def _join(
    pieces: list[str | int | None], slots: list[Slot], inserted: set[int]
) -> tuple[str, list[tuple[int, int, int]]]:
    """(the output, (start, end, slot) of each span put back in it, in order)."""
    out = ""
    placed = []
    waiting: Slot | None = None  # an inserted slot whose right-hand side is not settled yet
    dropped = False  # a slot token was removed and no text came after it yet
    for piece in pieces:
        if piece is None:
            dropped = True
            continue
        if isinstance(piece, int) and piece in inserted:
            slot = slots[piece]
            if waiting is None and _spaced(slot.before, out[-1:]):
                out += " "
            elif waiting is not None and _spaced(waiting.after, slot.text[:1]):
                out += " "
            out += slot.text
            placed.append((len(out) - len(slot.text), len(out), piece))
            waiting = slot
            continue
        text = slots[piece].text if isinstance(piece, int) else piece
        if dropped and (not out or out[-1].isspace()):
            text = text.lstrip()
        if waiting is not None and text:
            text = (" " if _spaced(waiting.after, text[0]) else "") + text
            waiting = None
        if text:
            dropped = False
        out += text
        if isinstance(piece, int):
            placed.append((len(out) - len(slots[piece].text), len(out), piece))
    return out.rstrip() if dropped else out, placed


_PERCENT_SPAN = re.compile(_PERCENT)
_QT = re.compile(r"%L?\d+")


def _even(run: int, source: int) -> int:
    """How many `%` an odd run of the model's becomes: one more when the source's run there is
    longer (the model wrote half of its `%%`), else one fewer (a stray)."""
    return run + 1 if source > run else run - 1


def _percents(texts: list[str], between: list[int | None], slots: list[Slot]) -> list[str]:
    """The model's texts with their runs of `%` against the slot tokens between them made even
    (rule 4); between[j], a slot or None (a token removed), stands after texts[j]."""
    texts = list(texts)
    for j, k in enumerate(between):
        before, after = texts[j], texts[j + 1]
        ran, run = len(before) - len(before.rstrip("%")), len(after) - len(after.lstrip("%"))
        if k is None:  # the removed token's own %
            texts[j], texts[j + 1] = before[: len(before) - ran % 2], after[run % 2 :]
            continue
        slot = slots[k]
        if ran % 2 and slot.percents_before % 2 == 0:  # (a)
            if slot.text.startswith("%") or _PERCENT_SPAN.match("%" + slot.text):
                texts[j] = before[: len(before) - ran] + "%" * _even(ran, slot.percents_before)
        if run % 2 and slot.percents_after % 2 == 0:  # (b)
            printf = slot.text.startswith("%") and not _QT.fullmatch(slot.text)
            if printf or _PERCENT_SPAN.match(after, run - 1):
                texts[j + 1] = "%" * _even(run, slot.percents_after) + after[run:]
    return texts


def _apart(out: str, placed: list[tuple[int, int]]) -> str:
    """The output with each span put back that rule 1 no longer reads as itself set apart from
    the model's text glued to it by a space: after it, then before it if still needed (rule 4)."""
    found = set(spans(out))
    for a, b in reversed(placed):  # from the right: the spans to the left keep their place
        if (a, b) not in found and b < len(out) and not out[b].isspace():
            out = out[:b] + " " + out[b:]
            found = set(spans(out))
        if (a, b) not in found and a > 0 and not out[a - 1].isspace():
            out = out[:a] + " " + out[a:]
            found = set(spans(out))
    return out


def has_spans(text: str) -> bool:
    """Whether text holds a protected span (rule 1)."""
    return next(spans(text), None) is not None


def slots_survive(source: str, output: str) -> bool:
    """Whether every protected span of source occurs in output exactly as often (rule 5)."""
    want = Counter(span_texts(source))
    got = Counter(span_texts(output))
    return all(got[text] == n for text, n in want.items())


def kept_share(sources: list[str], outputs: list[str]) -> tuple[int, int]:
    """(lines whose spans all survive, lines with at least one span) over aligned sources and
    outputs: the "placeholders kept" measurement."""
    lines = [(s, o) for s, o in zip(sources, outputs, strict=True) if has_spans(s)]
    return sum(slots_survive(s, o) for s, o in lines), len(lines)


def strip_slot_tokens(text: str) -> str:
    """Text without slot tokens (a tokenizer trainer's view of masked text is its pieces: see
    split_at_slots)."""
    return SLOT.sub("", text)


def split_at_slots(texts) -> Iterator[str]:
    """The non-empty pieces of each text between its slot tokens: what a tokenizer with the slot
    tokens as added tokens encodes of it, so what its trainer should count."""
    for text in texts:
        for piece in SLOT.split(text)[::2]:
            if piece:
                yield piece
