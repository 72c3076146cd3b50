"""The text blocks of one manual page, in reading order, for `transformer data manuals`: Mallard
(.page XML, read with xml.etree), HTML (DocBook's and LibreOffice help's, read with html.parser)
and man pages (roff, read by a small reader of the man macros).

Rules (the same for both languages, so that the two sides of a page give matching blocks):
- A block is a paragraph, a list item, a term, a title or heading, one line of text: every run of
  whitespace becomes one space (splits.one_line).
- Code and commands are dropped: Mallard <code> <screen> <synopsis> <media> and the <info> header
  (but its <desc>, the page's one-line summary, is a block); HTML <pre>, <table>, <head>,
  <script>, <style> and the page furniture (<header> <footer> <nav> <aside>, DocBook's navheader /
  navfooter / toc divisions); roff .nf/.fi, .EX/.EE and .TS/.TE blocks, comments, and the
  sections in SKIP_SECTIONS (SYNOPSIS, SEE ALSO, the translators' credits ...). Tables are
  dropped whole: cells are not sentences.
- Inline code inside a paragraph (<cmd> <file> <code> <span class="literal"> \\fB...\\fR) is kept
  verbatim: it is part of the sentence. A block whose text outside inline code has no letter
  (a paragraph that is only a command or a file name) is dropped as code.
- A Mallard block holding an empty <link xref="..."/> (the viewer fills in the target's title)
  is dropped: its sentence has a hole.
- roff: .SH / .SS headings are blocks; .PP .LP .P .sp .br .IP .TP .RS .RE end a paragraph; a
  .TP / .TQ tag line and an .IP tag are blocks of their own; font macros (.B .I .BR .IR ...) give
  their arguments (the alternating ones joined without spaces); font and size escapes
  (\\fB \\fI \\fR \\fP \\f(CW \\s-1) are removed; \\- is -, \\(em and \\[em] a dash, \\(bu a
  bullet, \\e a backslash, \\& \\% \\| \\^ nothing, \\[uXXXX] its character. A page that is only
  `.so other-page` (a link) gives no block.
- A block keeps the id of the HTML element that opened it (its key), for pairing by id.
Each reader counts what it dropped in the Counter it is given.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from typing import NamedTuple

from ..splits import one_line


class Block(NamedTuple):
    """One block's text and its key: the HTML element's id (LibreOffice's par_id..., the same in
    every language), "" where the format has none."""

    text: str
    key: str = ""


# ---- Mallard ----

MALLARD_BLOCKS = {"p", "title", "subtitle", "desc", "item", "td"}
MALLARD_DROP = {"code", "screen", "synopsis", "media", "table", "comment", "links"}
MALLARD_INLINE_CODE = {"cmd", "code", "file", "sys", "input", "output", "var", "app", "key"}


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _letters(text: str) -> bool:
    return any(c.isalpha() for c in text)


def mallard_blocks(data: bytes, dropped: Counter) -> list[Block]:
    """The blocks of one Mallard page (see the module's rules)."""
    root = ET.fromstring(data)
    blocks: list[Block] = []

    def prose(el: ET.Element) -> str:  # the text outside inline code
        parts = [el.text or ""]
        for child in el:
            if _local(child.tag) not in MALLARD_INLINE_CODE:
                parts.append(prose(child))
            parts.append(child.tail or "")
        return "".join(parts)

    def walk(el: ET.Element, in_info: bool) -> None:
        tag = _local(el.tag)
        if tag in MALLARD_DROP or tag == "td":  # tables (and table cells) are not prose
            if tag in ("code", "screen", "synopsis"):
                dropped["code block"] += 1
            elif tag in ("table", "td"):
                dropped["table"] += 1
            return
        if in_info and tag != "desc":
            for child in el:
                walk(child, True)
            return
        if tag in MALLARD_BLOCKS and not any(_local(c.tag) in MALLARD_BLOCKS for c in el):
            if any(
                _local(c.tag) == "link" and not "".join(c.itertext()).strip() for c in el.iter()
            ):
                dropped[
                    "block with an empty cross-reference (its text is filled in on display)"
                ] += 1
                return
            text = one_line("".join(el.itertext()))
            if text and _letters(prose(el)):
                blocks.append(Block(text))
            elif text:
                dropped["block of code only (a command, a file name)"] += 1
            return
        for child in el:
            walk(child, in_info or tag == "info")

    walk(root, False)
    return blocks


# ---- HTML ----

HTML_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "blockquote"}
HTML_DROP = {"head", "script", "style", "pre", "table", "header", "footer", "nav", "aside"}
HTML_DROP_CLASSES = {"navheader", "navfooter", "toc", "list-of-tables", "list-of-figures"}
HTML_INLINE_CODE = {"code", "tt", "kbd", "samp", "var"}
HTML_CODE_CLASSES = {"literal", "command", "filename", "computeroutput", "userinput", "option"}
VOID = {"br", "img", "meta", "link", "input", "hr", "col", "area", "base", "wbr", "source"}


class _HtmlBlocks(HTMLParser):
    def __init__(self, dropped: Counter) -> None:
        super().__init__(convert_charrefs=True)
        self.dropped = dropped
        self.blocks: list[Block] = []
        self.key = ""  # the id of the element that opened the current block
        self.stack: list[tuple[str, bool]] = []  # (tag, is inline code)
        self.skip: list[str] = []  # the tag that opened each dropped region
        self.text: list[str] = []
        self.prose: list[str] = []  # the text outside inline code

    def flush(self) -> None:
        text = one_line("".join(self.text))
        if text and _letters("".join(self.prose)):
            self.blocks.append(Block(text, self.key))
        elif text:
            self.dropped["block of code only (a command, a file name)"] += 1
        self.text, self.prose, self.key = [], [], ""

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in VOID:
            if tag == "br" and not self.skip:
                self.text.append(" ")
            return
        classes = set((dict(attrs).get("class") or "").split())
        if self.skip or tag in HTML_DROP or classes & HTML_DROP_CLASSES:
            if not self.skip:
                self.flush()
                if tag == "pre":
                    self.dropped["code block"] += 1
                elif tag == "table":
                    self.dropped["table"] += 1
            self.skip.append(tag)
            return
        if tag in HTML_BLOCKS:
            self.flush()
            self.key = dict(attrs).get("id") or ""
        self.stack.append((tag, tag in HTML_INLINE_CODE or bool(classes & HTML_CODE_CLASSES)))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.skip:
            if tag in self.skip:  # close the innermost open element of that name
                del self.skip[len(self.skip) - 1 - self.skip[::-1].index(tag) :]
            return
        names = [t for t, _ in self.stack]
        if tag in names:
            del self.stack[len(names) - 1 - names[::-1].index(tag) :]
        if tag in HTML_BLOCKS:
            self.flush()

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        self.text.append(data)
        if not any(code for _, code in self.stack):
            self.prose.append(data)


def html_blocks(data: bytes, dropped: Counter) -> list[Block]:
    """The blocks of one HTML page (see the module's rules): text outside a block element (a
    heading, a paragraph, an item) ends at the next block's start."""
    parser = _HtmlBlocks(dropped)
    parser.feed(data.decode("utf-8", errors="replace"))
    parser.close()
    parser.flush()
    return parser.blocks


# ---- roff (man pages) ----

SKIP_SECTIONS = {
    "SYNOPSIS", "SINOPSIS", "SEE ALSO", "VÉASE TAMBIÉN", "VEA TAMBIÉN", "VÉASE TAMBIEN",
    "COLOPHON", "COLOFÓN", "TRANSLATION", "TRADUCCIÓN", "TRADUCCION",
}  # fmt: skip
ROFF_BREAKS = {"PP", "LP", "P", "sp", "br", "RS", "RE", "in", "HP", "PD", "ne", "bp"}
ROFF_CODE = {"nf": "fi", "EX": "EE", "TS": "TE", "EQ": "EN", "ig": ".."}
ROFF_FONTS = {"B", "I", "SM", "SB", "BR", "BI", "IB", "IR", "RB", "RI"}
NAMED = {
    "em": "—", "en": "–", "bu": "•", "aq": "'", "dq": '"', "lq": "“", "rq": "”", "oq": "‘",
    "cq": "’", "co": "©", "rg": "®", "hy": "-", "mi": "-", "ti": "~", "ha": "^", "rs": "\\",
    "lh": "☜", "rh": "☞", "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "mu": "×", "de": "°",
    "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<-": "←", "ga": "`", "sq": "▪", "pl": "+",
}  # fmt: skip
_ESCAPE = re.compile(
    r"\\(?:f(?:\[[^\]]*\]|\(..|.)|s[+-]?(?:\d|\(\d\d|\[\d+\])|\[(u[0-9A-Fa-f]{4,5})\]"
    r"|\[([^\]]*)\]|\((..)|\*(?:\[([^\]]*)\]|\((..)|(.))|(.))"
)


def _unescape(text: str) -> str:
    def one(m: re.Match) -> str:
        code, named, two, s_long, s_two, s_one, char = m.groups()
        if code:
            return chr(int(code[1:], 16))
        name = named or two or s_long or s_two or s_one
        if name is not None:
            return {"lq": "“", "rq": "”", "R": "®", "Tm": "™"}.get(name, NAMED.get(name, ""))
        if char is None:  # a font or size change
            return ""
        return {"-": "-", "e": "\\", "~": " ", " ": " ", "0": " ", "t": " "}.get(char, "")

    return _ESCAPE.sub(one, text)


def _arguments(line: str) -> list[str]:
    """A macro line's arguments: words, or "quoted strings" ("" is a quote inside one)."""
    return [
        (q.replace('""', '"') if q or w == "" else w)
        for q, w in re.findall(r'"((?:[^"]|"")*)"|(\S+)', line)
    ]


def roff_blocks(text: str, dropped: Counter) -> list[Block]:
    """The blocks of one man page's source (see the module's rules)."""
    blocks: list[Block] = []
    lines: list[str] = []  # the open paragraph
    skipping = ""  # the closing request of an open code block
    section_skipped = False
    tag_next = False  # the next text line is a .TP tag

    def flush() -> None:
        text = one_line(_unescape(" ".join(lines)))
        lines.clear()
        if text and not section_skipped:
            blocks.append(Block(text))

    source = text.splitlines()
    if (
        any(line.startswith(".so ") for line in source)
        and len(
            [line for line in source if line.strip() and not line.startswith(('.\\"', "'\\\""))]
        )
        <= 2
    ):
        return []  # a link to another page
    for raw in source:
        line = raw.rstrip()
        if line.startswith(('.\\"', "'\\\"", '\\"')) or line in (".", "'"):
            continue
        if skipping:
            if line == ".." if skipping == ".." else re.match(rf"[.']\s*{skipping}\b", line):
                skipping = ""
            continue
        added = False
        if line[:1] not in (".", "'"):
            lines.append(line)
            added = True
        else:
            request, _, rest = line[1:].strip().partition(" ")
            rest = re.sub(r'\\".*$', "", rest).strip()
            if request in ROFF_CODE:
                flush()
                dropped["code block"] += request in ("nf", "EX")
                dropped["table"] += request == "TS"
                skipping = ROFF_CODE[request]
            elif request in ("SH", "SS"):
                flush()
                heading = one_line(_unescape(" ".join(_arguments(rest))))
                if request == "SH":
                    section_skipped = heading.upper() in SKIP_SECTIONS
                    dropped["section skipped (synopsis, see also, credits)"] += section_skipped
                if not section_skipped and heading:
                    blocks.append(Block(heading))
            elif request in ("TP", "TQ"):
                flush()
                tag_next = True
            elif request == "IP":
                flush()
                tag = one_line(_unescape(" ".join(_arguments(rest)[:1])))
                if tag and _letters(tag) and not section_skipped:
                    blocks.append(Block(tag))
            elif request in ROFF_BREAKS:
                flush()
            elif request in ROFF_FONTS:
                lines.append(("" if len(request) == 2 else " ").join(_arguments(rest)))
                added = True
            elif request in ("UE", "ME") and rest:  # the punctuation after a link
                lines[-1:] = [(lines[-1] if lines else "") + rest]
            # other requests (.TH .UR .ds .nr .ta .ad .ft ...) carry no text
        if tag_next and added:  # the line after .TP is its tag
            tag_next = False
            flush()
    flush()
    return blocks
