"""Cleaning one gettext entry (English msgid, Spanish msgstr) into a training pair, or the reason to
drop it. The rules, in the order clean_pair applies them:

1. Empty msgstr: dropped (untranslated).
2. Size: more than 3 non-blank lines or 400 characters on either side: dropped (help screens,
   licence texts).
3. Markup: the inline tags of Pango and HTML (<b>, <i>, <span ...>, <a href=...>, <br> ...; see
   MARKUP) are stripped from both sides when both have the same tags, and `&amp;` then reads `&`;
   a self-closing <p/> or <em/> is a tag named in the text and stays.
   Different tags on the two sides, or more than 6 tags: dropped. Other angle-bracket words
   (<file>, <options> of usage lines) are text and stay. The entities &lt; &gt; &quot; &apos;
   and numeric ones are decoded on both sides.
4. Accelerators: GTK's `_` and Qt's `&` before a letter or digit mark a keyboard shortcut
   ("Save _As", "&File"). A side loses its mark when it has exactly one such mark (`&&` and
   entities aside), the word holding it starts with it or is neither on the other side nor
   lowercase (so identifiers such as sh_link, local_schema or AT&T stay; a lowercase mid-word
   mnemonic like pre_view stays too), and the other side has a mark too or none of that
   character at all.
5. Placeholders: those that translation protects (data.markup's rule 1): printf as gettext's
   c-format reads it (%s, %d, %1$s, %-10lu, %'d, %*d, %.*s, %<PRId64>, %m), Python (%(name)s),
   Qt (%1, %L1) and brace ({name}, {0}, {}, {0:.2f}) placeholders stay as they are, and the pair
   is kept only when both sides have the same multiset of them (a reordered %1$s/%2$s is the
   same multiset; %s against %1$s is not). `%%` is a literal percent sign, not a placeholder,
   and so is a `%` and a space before a bare letter ("100% of", "% del total").
6. Whitespace: every run, line breaks included, becomes one space.
7. No letters on a side once placeholders are removed ("%s: %s", "%H:%M", "; "): dropped.
8. msgstr = msgid: kept when at most 3 words (names, "Error", "Normal", "Total": Spanish too),
   dropped when longer (an untranslated sentence).
"""

from __future__ import annotations

import html
import re
from collections import Counter

from ..markup import PLACEHOLDER  # rule 5's placeholders: translation's protected ones
from .splits import one_line

MAX_LINES = 3
MAX_CHARS = 400
MAX_TAGS = 6
MAX_SAME_WORDS = 3

MARKUP = re.compile(
    r"</?(b|i|u|s|tt|big|small|span|a|sub|sup|em|strong|p|code|kbd)\b(?:\s[^<>]*)?>|<(br)\s*/?>",
    re.I,
)  # a self-closing <p/> or <em/> is a tag named in the text, not markup
_ENTITY = re.compile(r"&(lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);")
_WORD = re.compile(r"[\w&'’-]+")


def placeholders(text: str) -> Counter:
    """The multiset of placeholders in text (`%%` not counted)."""
    return Counter(m for m in PLACEHOLDER.findall(text) if m != "%%")


def has_letters(text: str) -> bool:
    """Whether any letter is left once the placeholders are removed."""
    return any(c.isalpha() for c in PLACEHOLDER.sub(" ", text))


def _accelerator(text: str, mark: str, other: str) -> int | None:
    """Where the one accelerator `mark` of text is (see the module's rule 4), or None."""
    masked = text.replace(mark * 2, "\0\0")
    if mark == "&":
        masked = re.sub(r"&[#\w]+;", lambda m: "\0" * len(m.group()), masked)
    spots = [i for i, c in enumerate(masked) if c == mark]
    if len(spots) != 1:
        return None
    i = spots[0]
    if i + 1 >= len(text) or not text[i + 1].isalnum():
        return None
    word = next(m for m in _WORD.finditer(text) if m.start() <= i < m.end())
    if word.start() != i and (word.group() in other or word.group().replace(mark, "").islower()):
        return None  # an identifier: both sides have it (sh_link, AT&T) or it is lowercase_only
    return i


def strip_accelerators(eng: str, spa: str) -> tuple[str, str]:
    """Both sides without their keyboard-shortcut marks (rule 4)."""
    for mark in ("_", "&"):
        at_eng, at_spa = _accelerator(eng, mark, spa), _accelerator(spa, mark, eng)
        strip_eng = at_eng is not None and (at_spa is not None or mark not in spa)
        strip_spa = at_spa is not None and (at_eng is not None or mark not in eng)
        if strip_eng:
            eng = eng[:at_eng] + eng[at_eng + 1 :]
        if strip_spa:
            spa = spa[:at_spa] + spa[at_spa + 1 :]
        if mark == "&":
            eng = eng.replace("&&", "&") if strip_eng else eng
            spa = spa.replace("&&", "&") if strip_spa else spa
    return eng, spa


def _tags(text: str) -> Counter:
    return Counter(
        ("/" if m.group(0).startswith("</") else "") + (m.group(1) or m.group(2)).lower()
        for m in MARKUP.finditer(text)
    )


def _unmark(text: str) -> str:
    """Tags removed (<br> becomes a space), then `&amp;` read as `&`."""
    return MARKUP.sub(lambda m: " " if m.group(2) else "", text).replace("&amp;", "&")


def strip_markup(eng: str, spa: str) -> tuple[str | None, str, str]:
    """(reason to drop or None, eng, spa) after rule 3."""
    tags_eng, tags_spa = _tags(eng), _tags(spa)
    if tags_eng != tags_spa:
        return "markup differs between the sides", eng, spa
    if sum(tags_eng.values()) > MAX_TAGS:
        return f"markup-heavy (more than {MAX_TAGS} tags)", eng, spa
    if tags_eng:
        eng, spa = _unmark(eng), _unmark(spa)
    eng, spa = (_ENTITY.sub(lambda m: html.unescape(m.group()), s) for s in (eng, spa))
    return None, eng, spa


def clean_pair(eng: str, spa: str) -> tuple[str | None, str, str]:
    """(reason to drop or None, English, Spanish) for one msgid/msgstr (the module's rules)."""
    if not spa.strip():
        return "untranslated (empty msgstr)", eng, spa
    for side in (eng, spa):
        if sum(1 for line in side.splitlines() if line.strip()) > MAX_LINES:
            return f"more than {MAX_LINES} lines", eng, spa
        if len(side) > MAX_CHARS:
            return f"longer than {MAX_CHARS} characters", eng, spa
    reason, eng, spa = strip_markup(eng, spa)
    if reason:
        return reason, eng, spa
    eng, spa = strip_accelerators(eng, spa)
    if placeholders(eng) != placeholders(spa):
        return "placeholders differ between the sides", eng, spa
    eng, spa = one_line(eng), one_line(spa)
    if not has_letters(eng) or not has_letters(spa):
        return "no letters besides placeholders (a format or punctuation)", eng, spa
    if eng == spa and len(eng.split()) > MAX_SAME_WORDS:
        return f"msgstr = msgid and more than {MAX_SAME_WORDS} words (untranslated)", eng, spa
    return None, eng, spa
