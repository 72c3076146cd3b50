"""Packed language-model text (data.stream): documents, the token stream and its cache, and the
blocks an epoch reads: every position predicted exactly once an epoch, nothing read outside the
stream, a pure function of (seed, epoch)."""

import numpy as np
import pytest

from transformer.data import stream as S
from transformer.data.text import DataError, split_text
from transformer.data.tokenizer import train_bpe, train_char

TEXT = (
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\n"
    "All:\nSpeak, speak.\n\n\n"
    "First Citizen:\n  You are all resolved rather to die than to famish?\n"
    "All:\nResolved. resolved.\n"
)
BOS, EOS = 2, 3


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text(TEXT * 20, encoding="utf-8")
    return path


def test_documents_of_each_kind(text_file, monkeypatch):
    """file: the text exactly, in pieces cut before a line that starts with a non-space; paragraph:
    lines up to a blank line; line: each non-empty line."""
    monkeypatch.setattr(S, "PIECE_CHARS", 50)
    pieces = list(S.iter_pieces(text_file, "file"))
    assert "".join(p for p, _ in pieces) == TEXT * 20
    assert [end for _, end in pieces] == [False] * (len(pieces) - 1) + [True]
    assert len(pieces) > 10 and all(p[:1].strip() for p, _ in pieces)
    once = text_file.with_name("once.txt")
    once.write_text(TEXT, encoding="utf-8")
    paragraphs = [p for p, end in S.iter_pieces(once, "paragraph") if end]
    assert paragraphs == [
        "First Citizen:\nBefore we proceed any further, hear me speak.",
        "All:\nSpeak, speak.",
        "First Citizen:\n  You are all resolved rather to die than to famish?\nAll:\nResolved. resolved.",
    ]
    lines = [p for p, _ in S.iter_pieces(text_file, "line")]
    assert lines[:3] == ["First Citizen:", "Before we proceed any further, hear me speak.", "All:"]
    assert len(lines) == 8 * 20


def test_blank_file_is_refused(tmp_path):
    path = tmp_path / "blank.txt"
    path.write_text("\n  \n\n", encoding="utf-8")
    for kind in ("file", "paragraph", "line"):
        with pytest.raises(DataError, match="has no text, only blank lines"):
            list(S.iter_pieces(path, kind))


@pytest.mark.parametrize("train", [train_bpe, train_char])
def test_pieces_encode_as_the_whole_text(text_file, monkeypatch, train):
    """The byte-level BPE and the character tokenizer give the same ids in pieces as for the whole
    text, line breaks and blank lines included; decoding gives the text back."""
    tok = train([TEXT] * 5, 300 if train is train_bpe else 100, min_frequency=1)
    monkeypatch.setattr(S, "PIECE_CHARS", 40)
    chunks = list(S.encode_stream(text_file, tok, "file", BOS, EOS))
    assert len(chunks) > 10
    ids = np.concatenate([c for c, _, _ in chunks]).tolist()
    assert ids == [BOS] + tok.encode(TEXT * 20) + [EOS]
    assert tok.decode(ids) == TEXT * 20
    assert sum(n for _, n, _ in chunks) == len(TEXT * 20)


def test_prepared_stream_is_cached_and_rebuilt_when_damaged(text_file, tmp_path):
    tok = train_char([TEXT], 100, min_frequency=1)
    said = []
    stream = S.prepare_stream(text_file, tok, "line", BOS, EOS, tmp_path / "cache", said.append)
    lines = [line for line in (TEXT * 20).splitlines() if line.strip()]
    expect = [i for line in lines for i in [BOS, *tok.encode(line), EOS]]
    assert stream.ids.tolist() == expect
    assert (stream.chars, stream.documents) == (sum(map(len, lines)), len(lines))
    assert said[-1].startswith("data: preparing")
    again = S.prepare_stream(text_file, tok, "line", BOS, EOS, tmp_path / "cache", said.append)
    assert said[-1].startswith("data: prepared stream") and again.ids.tolist() == expect
    other = S.prepare_stream(text_file, tok, "file", BOS, EOS, tmp_path / "cache", said.append)
    assert other.path != stream.path and other.documents == 1
    with open(stream.path / "ids", "r+b") as f:  # a half-written array
        f.truncate(10)
    fixed = S.prepare_stream(text_file, tok, "line", BOS, EOS, tmp_path / "cache", said.append)
    assert "cannot be used" in said[-2] and fixed.ids.tolist() == expect


@pytest.mark.parametrize("n,block", [(1000, 64), (64, 64), (65, 64), (10, 64), (997, 7), (2, 1)])
def test_every_position_is_predicted_once_an_epoch(n, block):
    """An epoch's blocks cover the ring: each position predicts the token after it exactly once;
    the offset and order move with the epoch, and are the same for the same (seed, epoch)."""
    ids = np.arange(n) * 7 % 1009
    offsets = set()
    for epoch in range(4):
        offset, order = S.epoch_blocks(n, block, seed=3, epoch=epoch)
        offsets.add(offset)
        assert sorted(order.tolist()) == list(range(-(-n // block)))
        seen = np.zeros(n, dtype=int)
        for k in order:
            start, positions = S.block_span(n, block, offset, int(k))
            assert 1 <= positions <= block
            tokens = S.read_block(ids, start, positions)
            where = (start + np.arange(positions + 1)) % n
            assert tokens.tolist() == ids[where].tolist()  # the ring, never past its end
            seen[where[:-1]] += 1
        assert seen.tolist() == [1] * n
        again = S.epoch_blocks(n, block, seed=3, epoch=epoch)
        assert again[0] == offset and again[1].tolist() == order.tolist()
    assert len(offsets) > 1 or n < 4


def test_read_block_never_reads_outside_the_stream():
    """read_block indexes a memory map only inside it, also when a block wraps."""

    class Guarded(np.ndarray):
        def __getitem__(self, index):
            index = np.asarray(index)
            assert index.min() >= 0 and index.max() < len(self), index
            return np.asarray(self).__getitem__(index)

    ids = np.arange(50).view(Guarded)
    assert S.read_block(ids, 45, 10).tolist() == [45, 46, 47, 48, 49, 0, 1, 2, 3, 4, 5]


def test_document_starts_are_not_targets_and_validation_reads_in_order():
    block = np.array([5, EOS, BOS, 6, 7])
    x, y = S.targets(block, BOS, 0)
    assert x.tolist() == [5, EOS, BOS, 6] and y.tolist() == [EOS, 0, 6, 7]
    spans = S.valid_blocks(11, 4)
    assert spans == [(0, 4), (4, 4), (8, 2)]  # positions 0..9 predict 1..10, once each, in order
    assert S.valid_blocks(2, 4) == [(0, 1)]


def test_block_batches():
    batches = S.BlockBatches(np.array([4, 0, 3, 1, 2]), rows=2)
    assert len(batches) == 3 and list(batches) == [[4, 0], [3, 1], [2]]
    assert batches[-1] == [2] and batches[1:] == [[3, 1], [2]]
    with pytest.raises(IndexError):
        batches[3]


def test_split_text_as_nanogpt(tmp_path):
    """The first 90% of the characters train, the last 10% validate; bytes as they are."""
    text = "é" * 5 + "line\r\n" * 30
    (tmp_path / "in.txt").write_bytes(text.encode("utf-8"))
    counts = split_text(tmp_path / "in.txt", tmp_path / "out", 0.1)
    cut = int(len(text) * 0.9)
    assert (tmp_path / "out" / "train.txt").read_bytes() == text[:cut].encode("utf-8")
    assert (tmp_path / "out" / "valid.txt").read_bytes() == text[cut:].encode("utf-8")
    assert counts == {"train.txt": cut, "valid.txt": len(text) - cut}
    (tmp_path / "tiny.txt").write_text("a\n", encoding="utf-8")
    with pytest.raises(DataError, match="too little text"):
        split_text(tmp_path / "tiny.txt", tmp_path / "o2", 0.1)
    with pytest.raises(DataError, match="missing.txt not found: give the text file to split"):
        split_text(tmp_path / "missing.txt", tmp_path / "o3", 0.1)
