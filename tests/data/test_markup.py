"""Placeholders and markup through slot tokens (transformer.data.markup): which spans are protected
(every printf form of gettext's c-format, and which percent signs are text), protect -> restore is
the identity, restore of any scrambled output gives each slot exactly once and the model's `%`
signs next to slot tokens neither lose nor make a placeholder (scripted models, and the installed
catalogs), training pairs share the source's slot numbers, and the tokenizers keep slot tokens
whole."""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from transformer.data.markup import (
    MAX_SLOTS,
    SLOT,
    SLOT_TOKENS,
    Slot,
    kept_share,
    protect,
    protect_pair,
    restore,
    slot_token,
    slots_survive,
    span_texts,
    spans,
    split_at_slots,
)
from transformer.data.sources.gettext_ui import find_catalogs, read_catalog
from transformer.data.text import DataError
from transformer.data.tokenizer import Tokenizer, train_tokenizer, with_slot_tokens

SPANS = [
    ("Hello %s, you have %d new files", ["%s", "%d"]),
    ("%1$s of %2$s: %-10lu %.2f %5.1f%%", ["%1$s", "%2$s", "%-10lu", "%.2f", "%5.1f"]),
    ("%(name)s y %(count)d", ["%(name)s", "%(count)d"]),
    ("Qt: %1 de %2, %L3", ["%1", "%2", "%L3"]),
    ("{name} {0} {} {0:.2f} {x!r}", ["{name}", "{0}", "{}", "{0:.2f}", "{x!r}"]),
    ("$HOME y ${XDG_DATA}/x", ["$HOME", "${XDG_DATA}"]),
    ('<b>Bold</b> <a href="https://x.org/?a=1&b=2">link</a><br/><br>', [
        "<b>", "</b>", '<a href="https://x.org/?a=1&b=2">', "</a>", "<br/>", "<br>"]),
    ("A &amp; B &lt; &#169; &#xA9;", ["&amp;", "&lt;", "&#169;", "&#xA9;"]),
    ("Run <code>ls -l %s</code> or <kbd>Ctrl+C</kbd>, <tt>a</tt> <var>n</var>", [
        "<code>ls -l %s</code>", "<kbd>Ctrl+C</kbd>", "<tt>a</tt>", "<var>n</var>"]),
    ("See https://example.com/a_(b). Or www.x.org, or (http://y.org/z).", [
        "https://example.com/a_(b)", "www.x.org", "http://y.org/z"]),
    ("Write to jane.doe+x@mail.example.org.", ["jane.doe+x@mail.example.org"]),
    ("A literal ｟3｠ stays", ["｟3｠"]),
    # text, not spans: a percent sign before a word, %% literal, a comparison, a price
    ("100% de descuento, 50%% y a < b > c, US$ 5", []),
]


@pytest.mark.parametrize("text,want", SPANS)
def test_the_protected_spans_of_a_line(text, want):
    assert span_texts(text) == want
    masked, slots = protect(text)
    assert [s.text for s in slots] == want
    assert SLOT.findall(masked) == [str(k) for k in range(1, len(want) + 1)]
    assert restore(masked, slots) == text


FORMS = [  # every printf form of gettext's c-format, and Python's, brace and Qt ones: (line, spans)
    ("%'d elemento seleccionado", ["%'d"]),  # glibc's thousands grouping
    ("Copiando %'d archivo a «%s»", ["%'d", "%s"]),
    ("flags %-5d %+d %#x %05.1f %-'10d %Id", ["%-5d", "%+d", "%#x", "%05.1f", "%-'10d", "%Id"]),
    ("space flag % 5d, % +d, % -d, % .3f y %1$ d", ["% 5d", "% +d", "% -d", "% .3f", "%1$ d"]),
    ("%1$'d de %2$s", ["%1$'d", "%2$s"]),
    ("%*d %.*s %-*.*s %*1$d %.*2$f %*.s", ["%*d", "%.*s", "%-*.*s", "%*1$d", "%.*2$f", "%*.s"]),
    ("%hhd %hd %ld %lld %Lf %qd %jd %zu %Zd %td %I64u %I32d", [
        "%hhd", "%hd", "%ld", "%lld", "%Lf", "%qd", "%jd", "%zu", "%Zd", "%td", "%I64u", "%I32d"]),
    ("%d %i %o %u %x %X %e %E %f %F %g %G %a %A %c %s %p %n", [
        "%d", "%i", "%o", "%u", "%x", "%X", "%e", "%E", "%f", "%F", "%g", "%G", "%a", "%A", "%c",
        "%s", "%p", "%n"]),
    ("no se puede abrir: %m", ["%m"]),
    ("%<PRId64> bytes de %5<PRIuMAX>", ["%<PRId64>", "%5<PRIuMAX>"]),
    ("%(name)s %(count)05d %(name)-10s %(n) d", ["%(name)s", "%(count)05d", "%(name)-10s", "%(n) d"]),
    ("{0!r:>10} {name} {} {0:.2f}", ["{0!r:>10}", "{name}", "{}", "{0:.2f}"]),
    ("Qt: %1 de %2, %L3", ["%1", "%2", "%L3"]),
    (" [ %i%% ]", ["%i"]),
    ("%d%% completado", ["%d"]),
]
TEXT = [  # percent signs that are text, not placeholders (rule 1's space flag)
    "100% de descuento", "50 % más", "del 10 % a 20 %, 50 % o más", "50 % - Silenciado", "%%",
    "% d, % s, % ld, %+ d", "50%% y %%'d",
]


@pytest.mark.parametrize("text,want", FORMS)
def test_every_printf_form_is_a_span(text, want):
    assert span_texts(text) == want
    masked, slots = protect(text)
    assert restore(masked, slots) == text


@pytest.mark.parametrize("text", TEXT)
def test_a_percent_sign_in_text_is_no_span(text):
    assert span_texts(text) == []
    assert protect(text) == (text, []) and restore(text, []) == text


def _reversed(masked: str) -> str:
    numbers = SLOT.findall(masked)[::-1]
    return SLOT.sub(lambda m: slot_token(int(numbers.pop())), masked)


MODELS = {  # a fake translation of a masked line, one kind of what a model writes per entry
    "kept": lambda masked: masked,
    "dropped": lambda masked: SLOT.sub("", masked, count=1),
    "doubled": lambda masked: SLOT.sub(lambda m: m.group() * 2, masked),
    "reordered": _reversed,
    "% before": lambda masked: SLOT.sub(lambda m: "%" + m.group(), masked),
    "% after": lambda masked: SLOT.sub(lambda m: m.group() + "%", masked),
    "% and letters after": lambda masked: SLOT.sub(lambda m: m.group() + "%dias", masked),
    "%% before": lambda masked: SLOT.sub(lambda m: "%%" + m.group(), masked),
    "% around a double": lambda masked: SLOT.sub(lambda m: f"{m.group()} %{m.group()}%x", masked),
}


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("source", [text for text, _ in FORMS])
def test_every_form_comes_out_once_whatever_the_model_writes(source, kind):
    masked, slots = protect(source)
    output = restore(MODELS[kind](masked), slots)
    assert slots_survive(source, output), output
    assert Counter(span_texts(output)) == Counter(span_texts(source)), output  # none made either


@pytest.mark.parametrize(
    "source,output,want",
    [
        ("%'d elemento seleccionado", "%｟1｠ item selected", "%'d item selected"),
        ("Copiando %'d archivo a «%s»", 'Copying %｟1｠ file to "｟2｠%"', 'Copying %\'d file to "%s"'),
        ("Copiando %'d archivo a «%s»", "Copying ｟1｠%files to ｟2｠", "Copying %'dfiles to %s"),
        ("Eliminando %'d archivo", "Removing ｟1｠ ｟1｠% file", "Removing %'d file"),
        ("Eliminando %'d archivo", "Removing %｟7｠ file", "Removing file %'d"),
        (" [ %i%% ]", "%% ｟1｠%%% ]", "%% %i%% ]"),  # the source's %% as written, a stray dropped
        ("%d%% completado", "｟1｠% complete", "%d%% complete"),  # half of the source's %%
        ("%d%% completado", "%%｟1｠%% complete", "%%%d%% complete"),  # %% as the model wrote it
        ("%1$'d de %2$s", "｟2｠ of %｟1｠%", "%2$s of %1$'d"),
        ("Zoom: %1%", "Zoom: ｟1｠%", "Zoom: %1%"),  # Qt's lone % is the source's
        ("{0}% hecho", "｟1｠% done", "{0}% done"),
        ("Abrir {0}", "Open ｟1｠%s", "Open {0}s"),
        ("Ver https://x.org", "See %｟1｠", "See https://x.org"),
        ("Ver https://x.org", "See ｟1｠files", "See https://x.org files"),  # set apart: one URL
        ("Qt: %1 de %2", "｟1｠dias of ｟2｠", "%1 dias of %2"),  # %1dias would read %1d
    ],
)
def test_the_model_s_percent_signs_next_to_a_slot(source, output, want):
    masked, slots = protect(source)
    assert restore(output, slots) == want
    assert slots_survive(source, want)


def test_a_token_replaces_exactly_the_span_and_spacing_stays():
    masked, _ = protect("Pulsa <b>%s</b> para 50% más")
    assert masked == "Pulsa ｟1｠｟2｠｟3｠ para 50% más"


def test_past_max_slots_spans_stay_literal():
    text = " ".join(f"{{v{k}}}" for k in range(MAX_SLOTS + 5))
    masked, slots = protect(text)
    assert len(slots) == MAX_SLOTS
    assert masked.endswith(" ".join(f"{{v{k}}}" for k in range(MAX_SLOTS, MAX_SLOTS + 5)))
    assert restore(masked, slots) == text


def test_restore_repairs_dropped_repeated_reordered_and_unknown_slots():
    _, slots = protect("Pulsa <b>%s</b> para %d archivos")
    assert restore("Press ｟1｠｟2｠｟3｠ for ｟4｠ files", slots) == "Press <b>%s</b> for %d files"
    assert restore("｟4｠ files ｟1｠｟2｠｟3｠", slots) == "%d files <b>%s</b>"  # reordered: kept
    # missing %s goes after <b> (before it in the source), missing %d after </b>
    assert restore("Press ｟1｠｟3｠ for files", slots) == "Press <b>%s</b> %d for files"
    assert restore("Press for files", slots) == "Press for files <b>%s</b> %d"  # none there: end
    assert restore("｟9｠ Press ｟1｠ ｟1｠ ok ｟0｠", slots) == "Press <b>%s</b> %d ok"
    _, slots = protect("%s: error")
    assert restore("Error", slots) == "%s Error"  # began the source: at the start, not glued
    _, slots = protect("Error: %s")
    assert restore("Failed:", slots) == "Failed: %s"


WORDS = ["Abre", "el", "archivo", "ahora", "de", "la", "x", "ñu", "—", ",", ".", "?", "(", ")"]
PIECES = [
    "%s", "%d", "%1$s", "%(n)s", "%2", "{0}", "{name}", "{}", "$PATH", "${V}", "<b>", "</b>",
    "<br/>", '<a href="http://e.org/?q=1">', "</a>", "&amp;", "&#169;", "<code>x %s</code>",
    "https://e.org/p", "a@b.org",
]


def random_line(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 12)):
        parts.append(rng.choice(PIECES) if rng.random() < 0.35 else rng.choice(WORDS))
        parts.append(rng.choice([" ", " ", "", "  "]))
    return "".join(parts)


def scrambled(masked: str, n: int, rng: random.Random) -> str:
    """A model's worst: slot tokens dropped, repeated, moved and invented among new words."""
    pieces = [p for p in SLOT.split(masked)[::2] for p in p.split()] + [
        slot_token(int(k)) for k in SLOT.findall(masked)
    ]
    pieces = [p for p in pieces if rng.random() > 0.3]  # drop
    pieces += [rng.choice(pieces) for _ in range(rng.randint(0, 3)) if pieces]  # repeat
    pieces += [slot_token(rng.choice([0, n + 1, 99, MAX_SLOTS + 3])) for _ in range(rng.randint(0, 2))]
    pieces += rng.sample(WORDS, 2)
    rng.shuffle(pieces)
    return "".join(p + rng.choice([" ", ""]) for p in pieces)


@pytest.mark.parametrize("seed", range(5))
def test_property_protect_then_restore_is_the_identity(seed):
    rng = random.Random(seed)
    for _ in range(300):
        line = random_line(rng)
        masked, slots = protect(line)
        assert restore(masked, slots) == line, line


@pytest.mark.parametrize("seed", range(5))
def test_property_restore_of_any_output_gives_each_slot_exactly_once(seed):
    rng = random.Random(100 + seed)
    for _ in range(300):
        masked, slots = protect(random_line(rng))
        # each slot's text made unique, so counting it in the output cannot be fooled
        marked = [Slot(f"⟦{k}⟧", s.starts, s.before, s.after) for k, s in enumerate(slots)]
        output = scrambled(masked, len(slots), rng)
        restored = restore(output, marked)
        assert all(restored.count(f"⟦{k}⟧") == 1 for k in range(len(slots))), (output, restored)
        assert SLOT.search(restored) is None, (output, restored)
        assert "  " not in restored.strip() or "  " in output, (output, restored)


PERCENT_PIECES = [
    "%'d", "%1$'d", "%-*.*s", "%*1$d", "%<PRId64>", "%I64u", "%m", "%(n)05d", "%1", "%L2",
    "{0:.2f}", "% 5d", "%s", "%%",
]


def with_strays(output: str, rng: random.Random) -> str:
    """The output with `%` signs written right before and after its slot tokens."""
    return SLOT.sub(
        lambda m: rng.choice(["", "", "%", "%%", "%%%"]) + m.group() + rng.choice(["", "", "%", "%%"]),
        output,
    )


@pytest.mark.parametrize("seed", range(5))
def test_property_percent_signs_next_to_slot_tokens_neither_lose_nor_make_a_placeholder(seed):
    rng = random.Random(200 + seed)
    for _ in range(300):
        line = "".join(
            rng.choice(PERCENT_PIECES if rng.random() < 0.5 else WORDS) + rng.choice([" ", ""])
            for _ in range(rng.randint(1, 10))
        )
        masked, slots = protect(line)
        output = with_strays(scrambled(masked, len(slots), rng), rng)
        restored = restore(output, slots)
        assert Counter(span_texts(restored)) == Counter(span_texts(line)), (line, output, restored)


C_DIRECTIVE = re.compile(  # a directive as gettext's c-format reads one (its documented grammar)
    r"%(?:[1-9]\d*\$)?(?P<flags>[-+ #0'I]*)(?:\*(?:[1-9]\d*\$)?|\d+)?(?:\.(?:\*(?:[1-9]\d*\$)?|\d*))?"
    r"(?:<PRI[diouxX](?:(?:LEAST|FAST)?(?:8|16|32|64)|MAX|PTR)>"
    r"|(?:hh|ll|wf?(?:8|16|32|64)|I64|[hlLqjzZt])?[diouxXbeEfFgGaAcCsSpnm]|%)"
)


def c_directives(text: str) -> list[tuple[int, int]] | None:
    """(start, end) of each directive of text but `%%`, read % by % as gettext does; None when
    text is no c-format: a % begins no directive, or one has the space flag (xgettext's test of
    intent: "100% de" is no format) or is `%5%`."""
    found, at = [], text.find("%")
    while at >= 0:
        m = C_DIRECTIVE.match(text, at)
        if m is None or " " in m["flags"] or (m.group()[-1] == "%" and m.group() != "%%"):
            return None
        if m.group() != "%%":
            found.append(m.span())
        at = text.find("%", m.end())
    return found


def stray_percents(masked: str, slots: list[Slot]) -> str:
    """A model's output: the masked line with a `%` before each slot token and after each printf
    or Python one (where rule 4 promises to mend it)."""

    def stray(m: re.Match) -> str:
        printf = re.match(r"%(?!L?\d+$)", slots[int(m[1]) - 1].text)
        return "%" + m.group() + ("%" if printf else "")

    return SLOT.sub(stray, masked)


def installed_catalogs() -> list:
    """The Spanish gettext catalogs under / and TRANSFORMER_TEST_DEB_ROOT; skip when none."""
    found = []
    for root in ["/", os.environ.get("TRANSFORMER_TEST_DEB_ROOT")]:
        try:
            found += find_catalogs(Path(root) / "usr/share/locale") if root else []
        except DataError:
            pass
    if not found:
        pytest.skip("no Spanish gettext catalogs under /usr/share/locale/es*/LC_MESSAGES")
    return found


def test_real_catalogs_every_c_format_directive_is_a_span_and_comes_back():
    """Every msgid and msgstr that reads as a c-format: each directive is a span (or lies whole in
    a URL or <code> span), and the msgstr comes back from protect, and from a model that writes a
    `%` before each slot token and after each printf or Python one, with exactly its spans."""
    formats = 0
    for catalog in installed_catalogs():
        try:
            entries = read_catalog(catalog)
        except (OSError, UnicodeDecodeError, ValueError, LookupError):
            continue
        for msgid, msgstr in entries:
            for text in (msgid, msgstr):
                if not (directives := c_directives(text)):
                    continue
                formats += 1
                found = list(spans(text))
                for a, b in directives:
                    whole = [(x, y) for x, y in found if x <= a and b <= y and text[x] != "%"]
                    assert (a, b) in found or whole, (catalog.domain, text, text[a:b])
            if not c_directives(msgstr):
                continue
            masked, slots = protect(msgstr)
            assert restore(masked, slots) == msgstr
            stray = restore(stray_percents(masked, slots), slots)
            assert Counter(span_texts(stray)) == Counter(span_texts(msgstr)), (msgstr, stray)
    if not formats:
        pytest.skip("no c-format message in the installed Spanish catalogs")


def test_protect_pair_numbers_the_target_by_the_source():
    src, tgt = protect_pair("Pulsa <b>%s</b> y %s", "Press %s <b>and</b> %s")
    assert src == "Pulsa ｟1｠｟2｠｟3｠ y ｟4｠"
    assert tgt == "Press ｟2｠ ｟1｠and｟3｠ ｟4｠"  # repeated %s: matched in order


def test_protect_pair_leaves_unmatched_target_spans_literal_and_masks_every_source_span():
    src, tgt = protect_pair("Abrir %s con {app}", "Open %s with <i>{program}</i>")
    assert src == "Abrir ｟1｠ con ｟2｠"  # {app} is masked though the target lacks it
    assert tgt == "Open ｟1｠ with <i>{program}</i>"


def test_slots_survive_counts_every_span():
    assert slots_survive("Hola %s <b>x</b>", "Hello <b>x</b> %s")
    assert not slots_survive("Hola %s", "Hello")
    assert not slots_survive("Hola %s", "Hello %s %s")
    assert not slots_survive("Hola %s", "Hello %d")
    assert slots_survive("no spans here", "none")
    assert kept_share(["a %s", "b", "<b>c</b>"], ["x %s", "y", "<b>c"]) == (1, 2)


def test_split_at_slots_gives_the_text_between_them():
    assert list(split_at_slots(["Pulsa ｟1｠Guardar｟2｠", "｟1｠"])) == ["Pulsa ", "Guardar"]


TEXTS = ["Hola mundo, abre el archivo ahora.", "Pulsa Guardar para salir!", "El valor es 50"] * 30


@pytest.mark.parametrize("kind", ["bpe", "unigram", "word", "char"])
def test_slot_tokens_are_atomic_and_decode_as_themselves(kind, tmp_path):
    masked = "Pulsa ｟1｠Guardar｟2｠ para ｟3｠! ｟32｠"
    plain = train_tokenizer(kind, TEXTS, 300, 1)
    assert not plain.protects_markup
    tok = with_slot_tokens(train_tokenizer(kind, split_at_slots(TEXTS), 300, 1))
    assert tok.protects_markup and tok.vocab_size == plain.vocab_size + MAX_SLOTS
    ids = tok.encode(masked)
    slot_ids = {tok.token_to_id(t) for t in SLOT_TOKENS}
    assert [tok.id_to_token(i) for i in ids if i in slot_ids] == ["｟1｠", "｟2｠", "｟3｠", "｟32｠"]
    decoded = tok.decode(ids)
    assert SLOT.findall(decoded) == ["1", "2", "3", "32"]
    if kind in ("bpe", "unigram", "char"):  # these give the text back as it was
        assert decoded == masked
    tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json")
    assert again.protects_markup and again.encode(masked) == ids


def test_a_tokenizer_without_slot_tokens_is_unchanged():
    tok = train_tokenizer("bpe", TEXTS, 300, 1)
    ids = tok.encode("Pulsa ｟1｠")
    assert len(ids) > 2 and tok.decode(ids) == "Pulsa ｟1｠"
    assert Counter(tok.tokenizer.to_str()) == Counter(train_tokenizer("bpe", TEXTS, 300, 1).tokenizer.to_str())
