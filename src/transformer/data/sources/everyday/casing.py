"""Casing of game dialogue: adventure games write emphasis in CAPS ("Where did you FIND them?")
or whole lines in capitals (Drascula: "¿Y A QUIEN LLAMO A ESTAS HORAS?"). Two pure functions
make both ordinary text, the same way on the Spanish and the English side.

Words are runs of letters and digits (apostrophes inside: DON'T, I'M); a word is capitalised
when it has a cased letter and no lowercase one.

soften_caps(text), for a line with a lowercase letter (a line without one is returned as is):
- Kept as written: "I"; a word with a digit (MP5, 9MM); a Roman numeral (II, XVII); the words
  of ACRONYMS (OK, TV, USA, LINC ...); a word without a vowel (a e i o u y, accented too: CBM,
  FMJ, NPC; no English or Spanish word is spelt so, and interjections such as HMM stay too).
- A run of consecutive capitalised words (only spaces and punctuation between them) holding a
  *shouted* word (three letters or more, not kept as above) has its other words lowered, the
  short ones included ("NOT TO" -> "not to", "DARLE DE COMER" -> "darle de comer"). A run
  without one stays, so a lone capitalised word of one or two letters (OK, TV, AI, UK, XL)
  stays: measured on Cataclysm: DDA's kept pairs, such words are acronyms far more often than
  emphasis, hence this run rule rather than a length threshold.
- With a vocabulary (lowercase_words of the whole corpus, both languages), a word of three
  letters or more is lowered only when the corpus also writes it in lowercase. On Cataclysm:
  DDA's 31,080 kept pairs (62,160 sides), soften_caps alone changes 981 sides and lowers 1,354
  words, 472 of them never written in lowercase there (STANAG, CRIT, EMP, UPS: acronyms); with
  the vocabulary it changes 583 sides (ERROR, REAL, HELL, ACTIVADO lowered). Use one on
  acronym-rich text; BASS and Drascula dialogue has few acronyms.
- A lowered word that opens a sentence (the line's first word, or the first after . ! ? … and
  a space; opening ¿ ¡ " ' ( « skipped; the dot of an initial such as B.J. ends no sentence)
  gets its first letter back up, and the English I forms (I'M, I'LL ...) read I'm, I'll.

sentence_case(text), for a line wholly in capitals (a line with a lowercase letter is returned
as is): every word is lowered except words with a digit, the words of ACRONYMS and initialisms
with dots (B.J., S.A.); then the first letter of each sentence (as above) is raised and the
English I forms read I, I'm, I'll. Names are lowered with the rest ("JOHN" -> "john"): no
dictionary is used.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

ACRONYMS = frozenset(
    "OK TV UK USA EU UFO FBI CIA DNA NASA NATO OTAN FEMA SWAT LCD USB CPU PC CD DVD ID HQ CEO "
    "DJ VIP AI IA LINC".split()
)  # fmt: skip
"""Capitalised words kept as written: common acronyms of English and Spanish text and the LINC
network of Beneath a Steel Sky. Not here: words that are also common words (US/us, UN/un,
LED/led, SOS/sos)."""

WORD = re.compile(r"\w+(?:['’]\w+)*")
INITIALISM = re.compile(r"\b(?:[^\W\d_]\.){2,}")  # B.J., S.A., U.S.A.
ROMAN = re.compile(r"(?=[IVXLC]{2,}$)C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
VOWELS = frozenset("aeiouyáéíóúàèìòùäëïöüâêîôûAEIOUYÁÉÍÓÚÀÈÌÒÙÄËÏÖÜÂÊÎÔÛ")
OPENING = "¿¡\"'“‘«([-—"
SENTENCE_END = re.compile(r"[.!?…]['\"”’»)\]]*\s+$")
AFTER_INITIAL = re.compile(r"(?:^|[\s.])[^\W\d_]\.\s+$")  # "B.J. " ends no sentence


def is_capitalised(word: str) -> bool:
    """A word with a cased letter and no lowercase one: FIND, DON'T, MP5, ESTÁS."""
    return word.isupper()


def keeps_capitals(word: str) -> bool:
    """A capitalised word that is probably an acronym or a number-like code, kept as written."""
    return (
        word == "I"
        or any(ch.isdigit() for ch in word)
        or word.replace("’", "'") in ACRONYMS
        or ROMAN.fullmatch(word) is not None
        or not any(ch in VOWELS for ch in word)
    )


def is_shouted(word: str) -> bool:
    """A capitalised word of three letters or more that is not kept as an acronym."""
    letters = sum(ch.isalpha() for ch in word)
    return is_capitalised(word) and letters >= 3 and not keeps_capitals(word)


def opens_sentence(text: str, start: int) -> bool:
    """Whether the word at `start` opens a sentence: nothing but opening punctuation before it
    since the line's start or since . ! ? … and a space."""
    before = text[:start].rstrip(OPENING)
    if not before.strip():
        return True
    return SENTENCE_END.search(before) is not None and not AFTER_INITIAL.search(before)


def _lowered(text: str, start: int, word: str) -> str:
    low = word.lower()
    if low == "i" or low.startswith(("i'", "i’")):
        return "I" + low[1:]
    if opens_sentence(text, start):
        return low[:1].upper() + low[1:]
    return low


def lowercase_words(texts: Iterable[str]) -> set[str]:
    """The words written in lowercase somewhere in texts: soften_caps' vocabulary for a corpus."""
    return {word for text in texts for word in WORD.findall(text) if word.islower()}


def soften_caps(text: str, vocabulary: Collection[str] | None = None) -> str:
    """The shouted words of a mixed-case line lowered ("Where did you FIND them?" -> "Where did
    you find them?"), acronyms kept; a line without lowercase letters is returned unchanged.
    With a vocabulary, a word of three letters or more is lowered only when its lowercase form is
    in it."""
    if not any(ch.islower() for ch in text):
        return text

    def lowers(word: str) -> bool:
        if keeps_capitals(word):
            return False
        letters = sum(ch.isalpha() for ch in word)
        return vocabulary is None or letters < 3 or word.lower() in vocabulary

    words = list(WORD.finditer(text))
    lower: set[int] = set()  # indices into words
    run: list[int] = []
    for index, match in enumerate([*words, None]):
        if match is not None and is_capitalised(match.group()):
            run.append(index)
            continue
        if any(is_shouted(words[i].group()) and lowers(words[i].group()) for i in run):
            lower.update(i for i in run if lowers(words[i].group()))
        run = []
    pieces, last = [], 0
    for index in sorted(lower):
        match = words[index]
        pieces += [text[last : match.start()], _lowered(text, match.start(), match.group())]
        last = match.end()
    return "".join(pieces) + text[last:]


def sentence_case(text: str) -> str:
    """A line wholly in capitals in sentence case ("¿DÓNDE ESTÁS?" -> "¿Dónde estás?"); a line
    with a lowercase letter is returned unchanged."""
    if any(ch.islower() for ch in text) or not any(ch.isupper() for ch in text):
        return text
    kept = [m.span() for m in INITIALISM.finditer(text)]
    pieces, last = [], 0
    for match in WORD.finditer(text):
        word = match.group()
        inside = any(a <= match.start() < b for a, b in kept)
        if (
            inside
            or word != "I"
            and (any(ch.isdigit() for ch in word) or word.replace("’", "'") in ACRONYMS)
        ):
            new = word
        else:
            new = _lowered(text, match.start(), word)
        pieces += [text[last : match.start()], new]
        last = match.end()
    return "".join(pieces) + text[last:]
