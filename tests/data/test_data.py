"""Data: reading text files, the BPE tokenizer, batching by length with shifted targets."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import tokenizers
import torch
from tokenizers import decoders, models, normalizers, pre_tokenizers

from transformer.data.batching import (
    Example,
    batch_indices,
    collate,
    encode_examples,
    padding_share,
)
from transformer.data.text import DataError, ReadCounts, iter_examples, iter_lines
from transformer.data.tokenizer import (
    SPECIAL_TOKENS,
    Tokenizer,
    TokenizerError,
    train_bpe,
)
from transformer.model_dir import load_tokenizers, save_tokenizers

CORPUS = [
    "the cat sat on the mat",
    "a dog sat on a log",
    "héllo wörld, ünïcode is fine",
    "naïve café — 日本語のテキスト",
] * 20


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(CORPUS, vocab_size=320, min_frequency=1)


# ---- text files ----

def test_aligned_files_drop_empty_pairs_and_count_them(tmp_path):
    (tmp_path / "a.src").write_text("one\n\nthree\nfour\n", encoding="utf-8")
    (tmp_path / "a.tgt").write_text("uno\ndos\n  \ncuatro\n", encoding="utf-8")
    counts = ReadCounts()
    assert list(iter_examples(tmp_path / "a.tgt", tmp_path / "a.src", counts)) == [(0, "one", "uno"),
                                                                                   (3, "four", "cuatro")]
    assert counts.empty == 2 and counts.lines == 4


def test_line_count_mismatch_names_both_files(tmp_path):
    (tmp_path / "a.src").write_text("1\n2\n3\n", encoding="utf-8")
    (tmp_path / "a.tgt").write_text("1\n2\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"a\.src has 3 lines but .*a\.tgt has 2: the files must be aligned"):
        list(iter_examples(tmp_path / "a.tgt", tmp_path / "a.src"))


def test_missing_empty_and_bad_utf8_files(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt not found"):
        list(iter_lines(tmp_path / "nope.txt"))
    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.txt is empty"):
        list(iter_examples(tmp_path / "empty.txt"))
    (tmp_path / "bad.txt").write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(DataError, match=r"bad\.txt line 3: invalid UTF-8 \(byte 0xff\)"):
        list(iter_lines(tmp_path / "bad.txt"))


def test_monolingual_text_handles_crlf_and_bom(tmp_path):
    (tmp_path / "m.txt").write_bytes("\ufeffline one\r\n\r\nline two".encode())
    counts = ReadCounts()
    assert [text for _, _, text in iter_examples(tmp_path / "m.txt", counts=counts)] == ["line one", "line two"]
    assert counts.empty == 1


# ---- tokenizer ----

def test_specials_have_fixed_ids(bpe):
    for i, tok in enumerate(SPECIAL_TOKENS):
        assert bpe.token_to_id(tok) == i
    assert bpe.vocab_size <= 320


@pytest.mark.parametrize("text", [
    "", " ", "the cat sat", "unseen wörds ✓ 🙂 \x00 tab\there", "日本語", "  two  spaces ", "line\nbreak \r\n crlf",
    "\ufeffbom", "ﬁ ligature, ² superscript",  # compatibility characters: NFC keeps them (NFKC would not)
    "cafe\u0301 and \u212b",  # NFD é, and the angstrom sign: both change under NFC
])
def test_any_string_round_trips_to_its_nfc_form_without_markers(bpe, text):
    """What round-trips: decode(encode(s)) == NFC(s) for any string s. Byte-level BPE has no unknown
    token and adds no markers; the one change is the tokenizer's Unicode normalisation to NFC."""
    ids = bpe.encode(text)
    assert bpe.token_to_id("<unk>") not in ids  # byte-level: nothing is unknown
    out = bpe.decode(ids)
    assert out == unicodedata.normalize("NFC", text)
    assert (out == text) == unicodedata.is_normalized("NFC", text)  # NFC text comes back exactly, other text does not
    assert "Ġ" not in out and "@@" not in out
    assert bpe.encode(unicodedata.normalize("NFD", text)) == ids  # NFD and NFC spellings are the same tokens


def test_nfd_text_comes_back_composed(bpe):
    assert bpe.encode("") == [] and bpe.decode([]) == ""
    assert bpe.decode(bpe.encode("cafe\u0301")) == "caf\u00e9"


def test_encode_adds_no_specials_and_decode_skips_them(bpe):
    ids = bpe.encode("the cat")
    assert not set(ids) & {0, 1, 2, 3}
    assert bpe.decode([2] + ids + [3, 0, 0]) == "the cat"
    assert bpe.decode_batch([[2] + ids, ids + [3]]) == ["the cat", "the cat"]
    assert bpe.encode_batch(["the cat", "a dog"]) == [ids, bpe.encode("a dog")]


def test_bpe_learns_merges(bpe):
    assert len(bpe.encode("the cat sat on the mat")) < len("the cat sat on the mat")


def test_vocab_too_small_is_a_clear_error():
    with pytest.raises(TokenizerError, match="vocab_size=100 is too small"):
        train_bpe(CORPUS, vocab_size=100)


def test_shared_and_separate_tokenizers_in_a_model_dir(tmp_path, bpe):
    save_tokenizers(tmp_path / "shared", bpe)
    src, tgt = load_tokenizers(tmp_path / "shared")
    assert src is tgt and src.encode("the cat") == bpe.encode("the cat")
    other = train_bpe(["completely different text here"] * 5, vocab_size=270, min_frequency=1)
    save_tokenizers(tmp_path / "sep", bpe, other)
    src, tgt = load_tokenizers(tmp_path / "sep")
    assert src is not tgt and tgt.vocab_size == other.vocab_size
    assert sorted(p.name for p in (tmp_path / "sep").iterdir()) == ["tokenizer.src.json", "tokenizer.tgt.json"]
    with pytest.raises(TokenizerError, match="has no tokenizer"):
        load_tokenizers(tmp_path)


def test_corrupt_tokenizer_file_is_a_clear_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer\.json is not a valid tokenizer\.json"):
        Tokenizer.load(tmp_path / "tokenizer.json")


def test_imported_wordpiece_tokenizer_loads_through_the_same_class(tmp_path):
    """A BERT-style tokenizer.json (WordPiece, [UNK]) goes through Tokenizer.load unchanged."""
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "##s", "sat"])}
    hf = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    hf.decoder = decoders.WordPiece()
    hf.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    hf.save(str(tmp_path / "tokenizer.json"))
    tok = Tokenizer.load(tmp_path / "tokenizer.json")
    ids = tok.encode("The cats sat")
    assert ids == [4, 5, 6, 7]
    assert tok.decode([2] + ids + [3]) == "the cats sat"
    assert tok.encode("zebra") == [1]  # unknown word -> [UNK], no crash


# ---- batching ----

def test_encode_examples_drops_over_long_with_a_count(bpe):
    examples, dropped = encode_examples(["the cat sat on the mat " * 10, "the cat"], bpe, max_len=16,
                                        sources=["a dog", "a dog"], src_tok=bpe)
    assert dropped == 1 and len(examples) == 1 and examples[0].tgt == bpe.encode("the cat")
    assert examples[0].line == 1  # the line it came from (validation BLEU finds its reference by it)


def test_batches_respect_token_budget_cover_everything_and_group_lengths():
    g = torch.Generator().manual_seed(0)
    sizes = torch.randint(2, 60, (500,), generator=g).tolist()
    batches = batch_indices(sizes, batch_tokens=256, seed=1, epoch=0)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    for b in batches:
        assert len(b) == 1 or max(sizes[i] for i in b) * len(b) <= 256
    tgt_lengths = np.array(sizes) - 1  # a target row is the target plus its <s>/</s>
    by_length = padding_share(batches, tgt_lengths)
    shuffled = torch.randperm(500, generator=g).tolist()
    random_batches, start = [], 0
    for b in batches:  # the same batch sizes, filled in random order
        random_batches.append(shuffled[start: start + len(b)])
        start += len(b)
    assert by_length < 0.1 < padding_share(random_batches, tgt_lengths)


def test_batches_are_deterministic_per_epoch_and_differ_across_epochs():
    sizes = [5] * 100 + [9] * 100
    a = batch_indices(sizes, 64, seed=3, epoch=0)
    assert a == batch_indices(sizes, 64, seed=3, epoch=0)
    assert a != batch_indices(sizes, 64, seed=3, epoch=1)
    assert a != batch_indices(sizes, 64, seed=4, epoch=0)
    assert batch_indices(sizes, 64, 0, 0, shuffle=False) == batch_indices(sizes, 64, 9, 9, shuffle=False)


def test_collate_shifts_targets_and_pads():
    batch = collate([Example([7, 8, 9], [4, 5]), Example([7], [6, 6, 6])], pad_id=0, start_id=2, eos_id=3)
    assert batch.src.tolist() == [[7, 8, 9], [7, 0, 0]]
    assert batch.src_mask.tolist() == [[True, True, True], [True, False, False]]
    assert batch.tgt_in.tolist() == [[2, 4, 5, 0], [2, 6, 6, 6]]
    assert batch.tgt_out.tolist() == [[4, 5, 3, 0], [6, 6, 6, 3]]
    assert batch.n_tokens == 7
    lm = collate([Example(None, [4, 5])], pad_id=0, start_id=2, eos_id=3)
    assert lm.src is None and lm.tgt_in.tolist() == [[2, 4, 5]] and lm.tgt_out.tolist() == [[4, 5, 3]]
