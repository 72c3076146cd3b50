"""Placeholders and markup through slot tokens (transformer.data.markup): which spans are protected,
protect -> restore is the identity, restore of any scrambled output gives each slot exactly once,
training pairs share the source's slot numbers, and the tokenizers keep slot tokens whole."""

from __future__ import annotations

import random
from collections import Counter

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
    split_at_slots,
)
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
