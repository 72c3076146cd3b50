"""Prepared corpora (transformer.data.corpus): the memory-mapped arrays hold exactly the examples
that reading the files into lists gives, the cache is keyed and never read half-written, .gz
equals plain text, and batches from the lengths array equal the textbook greedy rule."""

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.data import corpus as C
from transformer.data import text as T
from transformer.data.batching import batch_indices, encode_examples
from transformer.data.text import DataError
from transformer.data.tokenizer import train_bpe

WORDS = "the a cat dog sat ran on in park mat sun warm birds sing trees el gato perro sol hoy".split()


def sentence(rng: random.Random, longest: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest)))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Aligned files with what reading must handle: a BOM, CRLF, empty and blank sides, long lines."""
    tmp = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    src, tgt = [], []
    for i in range(700):
        s, t = sentence(rng), sentence(rng)
        if i % 50 == 7:
            s = ""
        if i % 60 == 11:
            t = "   "
        if i % 45 == 3:
            t = sentence(rng, 90)  # too long for max_len below
        src.append(s)
        tgt.append(t)
    (tmp / "train.src").write_bytes(("\ufeff" + "\r\n".join(src) + "\r\n").encode("utf-8"))
    (tmp / "train.tgt").write_text("\n".join(tgt), encoding="utf-8")  # no final newline
    return tmp


@pytest.fixture(scope="module")
def tok(files):
    return train_bpe((files / "train.tgt").read_text().splitlines() * 2, vocab_size=400)


def plain_lines(path: Path) -> list[str]:
    """The whole file at once, by the rules of transformer.data.lines: what the streaming reader must match."""
    lines = path.read_bytes().decode("utf-8").removeprefix("\ufeff").split("\n")
    return [line.removesuffix("\r").strip() for line in (lines[:-1] if lines[-1] == "" else lines)]


def reference(files: Path, tok, max_len: int):
    """The list path: every line in memory, empty pairs dropped, then encode_examples."""
    pairs = [(s, t) for s, t in zip(plain_lines(files / "train.src"), plain_lines(files / "train.tgt"), strict=True)
             if s and t]
    empty = len(plain_lines(files / "train.src")) - len(pairs)
    examples, too_long = encode_examples([t for _, t in pairs], tok, max_len, [s for s, _ in pairs], tok)
    return examples, too_long, empty


def test_prepared_arrays_hold_exactly_the_examples_of_the_list_path(files, tok, tmp_path):
    corpus = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path)
    examples, too_long, empty = reference(files, tok, 40)
    assert too_long > 0 and empty > 0  # the fixture exercises both drops
    assert corpus.dropped == {"empty": empty, "too_long": too_long}
    assert len(corpus) == len(examples)
    assert [(e.src, e.tgt) for e in corpus] == [(e.src, e.tgt) for e in examples]
    # lines are the examples' lines in the files (0-based), whichever were dropped before them
    src_lines = (files / "train.src").read_bytes().decode("utf-8-sig").split("\r\n")
    assert all(tok.decode(e.src) == src_lines[e.line].strip() for e in corpus)
    assert list(corpus.lines) == sorted(set(corpus.lines.tolist()))
    assert corpus.sizes.tolist() == [e.size for e in examples]
    assert corpus.header["dtype"] == {"target": "uint16", "source": "uint16"}
    assert corpus[-1].tgt == examples[-1].tgt and len(corpus[2:5]) == 3
    with pytest.raises(IndexError):
        corpus[len(corpus)]


def test_language_model_text_and_gz_input_equal_plain_text(files, tok, tmp_path):
    lm = C.prepare_corpus(files / "train.tgt", tok, 40, cache=tmp_path)
    kept = [line for line in plain_lines(files / "train.tgt") if line]
    examples, _ = encode_examples(kept, tok, 40)
    assert [e.tgt for e in lm] == [e.tgt for e in examples] and lm.src_lengths is None and lm[0].src is None
    for name in ("train.src", "train.tgt"):
        with gzip.open(tmp_path / f"{name}.gz", "wb") as f:
            f.write((files / name).read_bytes())
    gz = C.prepare_corpus(tmp_path / "train.tgt.gz", tok, 40, tmp_path / "train.src.gz", tok, cache=tmp_path)
    plain = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path)
    assert gz.path != plain.path
    assert [(e.src, e.tgt, e.line) for e in gz] == [(e.src, e.tgt, e.line) for e in plain]
    assert gz.dropped == plain.dropped


def test_misaligned_files_name_both_counts_while_streaming(tmp_path, tok):
    (tmp_path / "a.src").write_text("x\n" * 5)
    with gzip.open(tmp_path / "a.tgt.gz", "wt") as f:
        f.write("y\n" * 8)
    with pytest.raises(DataError, match=r"a.src has 5 lines but .*a.tgt.gz has 8: the files must be aligned"):
        C.prepare_corpus(tmp_path / "a.tgt.gz", tok, 40, tmp_path / "a.src", tok, cache=tmp_path / "c")
    text = "\n".join(sentence(random.Random(1)) + str(i) for i in range(2000)).encode()
    (tmp_path / "bad.gz").write_bytes(gzip.compress(text)[:2000])
    with pytest.raises(DataError, match="bad.gz: cannot be read after line .* complete gzip file"):
        list(T.iter_lines(tmp_path / "bad.gz"))
    (tmp_path / "latin.txt").write_bytes("uno\nel ni\xf1o\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin.txt line 2: invalid UTF-8 \(byte 0xf1\)"):
        list(T.iter_lines(tmp_path / "latin.txt"))
    assert not list((tmp_path / "c").glob(".*tmp*"))  # nothing half-written left behind


def test_the_cache_is_reused_while_its_key_holds_and_rebuilt_when_it_changes(files, tok, tmp_path):
    said = []
    first = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path, say=said.append)
    again = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path, say=said.append)
    assert again.path == first.path and said[-1].startswith("data: prepared corpus")
    other_len = C.prepare_corpus(files / "train.tgt", tok, 30, files / "train.src", tok, cache=tmp_path)
    other_tok = train_bpe((files / "train.src").read_text(encoding="utf-8-sig").splitlines(), vocab_size=300)
    by_tok = C.prepare_corpus(files / "train.tgt", other_tok, 40, files / "train.src", other_tok, cache=tmp_path)
    assert len({first.path, other_len.path, by_tok.path}) == 3
    assert len(other_len) < len(first)
    # a changed file (same name) is another corpus
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("train.src", "train.tgt"):
        (copy / name).write_bytes((files / name).read_bytes())
    before = C.prepare_corpus(copy / "train.tgt", tok, 40, copy / "train.src", tok, cache=tmp_path)
    (copy / "train.tgt").write_text((files / "train.tgt").read_text().replace("cat", "dog", 1))
    after = C.prepare_corpus(copy / "train.tgt", tok, 40, copy / "train.src", tok, cache=tmp_path)
    assert after.path != before.path
    assert [e.tgt for e in after] != [e.tgt for e in before]


@pytest.mark.parametrize("damage", ["truncated ids", "missing header", "other key", "garbage header"])
def test_a_damaged_cache_is_detected_and_rebuilt_never_read(files, tok, tmp_path, damage):
    good = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path)
    expected = [(e.src, e.tgt) for e in good]
    del good
    path = next(p for p in tmp_path.iterdir() if not p.name.startswith("."))
    match damage:
        case "truncated ids":
            data = (path / "target.ids").read_bytes()
            (path / "target.ids").write_bytes(data[: len(data) // 2])
        case "missing header":
            (path / "header.json").unlink()
        case "other key":
            header = json.loads((path / "header.json").read_text())
            header["key"]["max_len"] = 7
            (path / "header.json").write_text(json.dumps(header))
        case "garbage header":
            (path / "header.json").write_text("{not json")
    said = []
    rebuilt = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path, say=said.append)
    assert "cannot be used" in said[0] and "building it again" in said[0]
    assert [(e.src, e.tgt) for e in rebuilt] == expected


def test_a_build_killed_midway_leaves_nothing_that_will_be_read(files, tok, tmp_path, monkeypatch):
    monkeypatch.setattr(C, "CHUNK_LINES", 100)
    monkeypatch.setattr(C.encoding_pool, "start", lambda *a: None)  # in-process (workers: test_corpus_workers)
    calls = []
    real = type(tok).encode_batch

    def failing(self, texts):
        calls.append(len(texts))
        if len(calls) == 4:
            raise KeyboardInterrupt  # as a kill mid-write would
        return real(self, texts)

    monkeypatch.setattr(type(tok), "encode_batch", failing)
    with pytest.raises(KeyboardInterrupt):
        C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(type(tok), "encode_batch", real)
    corpus = C.prepare_corpus(files / "train.tgt", tok, 40, files / "train.src", tok, cache=tmp_path)
    assert [e.tgt for e in corpus] == [e.tgt for e in reference(files, tok, 40)[0]]  # chunks joined seamlessly


def greedy_batches(sizes, batch_tokens, seed, epoch, shuffle=True):
    """The textbook rule, one example at a time: sort by size (stable after a seeded shuffle),
    add to the batch while rows x longest row fits, then shuffle the batches."""
    n = len(sizes)
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(n, generator=g).tolist() if shuffle else list(range(n))
    order.sort(key=lambda i: sizes[i])
    batches, current, longest = [], [], 0
    for i in order:
        if current and max(longest, sizes[i]) * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, sizes[i])
    if current:
        batches.append(current)
    if shuffle:
        batches = [batches[p] for p in torch.randperm(len(batches), generator=g).tolist()]
    return batches


@pytest.mark.parametrize("n,batch_tokens", [(1, 5), (2, 1), (300, 64), (3000, 4096), (500, 7)])
def test_batches_from_the_lengths_array_equal_the_greedy_rule(n, batch_tokens):
    rng = random.Random(n)
    sizes = [rng.randint(1, 60) for _ in range(n)]
    for epoch in range(3):
        batches = batch_indices(np.array(sizes, dtype=np.int32), batch_tokens, 5, epoch)
        assert batches == greedy_batches(sizes, batch_tokens, 5, epoch)
        assert sorted(i for b in batches for i in b) == list(range(n))
    assert batch_indices(sizes, batch_tokens, 5, 0, shuffle=False) == greedy_batches(sizes, batch_tokens, 5, 0, False)
    assert batch_indices(sizes, batch_tokens, 5, 1) != batch_indices(sizes, batch_tokens, 5, 2) or n < 3
    batches = batch_indices(sizes, batch_tokens, 5, 0)
    assert batches[1:3] == [batches[k] for k in range(1, min(3, len(batches)))]


def test_tokenizer_sample_trains_on_a_seeded_subset_in_file_order(files):
    all_pairs = list(T.iter_examples(files / "train.tgt", files / "train.src"))
    texts = list(T.tokenizer_texts(files / "train.tgt", files / "train.src", "both", sample=0))
    assert texts == [s for _, s, _ in all_pairs] + [t for _, _, t in all_pairs]
    assert list(T.tokenizer_texts(files / "train.tgt", files / "train.src", "target", sample=10_000)) == \
        [t for _, _, t in all_pairs]
    some = list(T.tokenizer_texts(files / "train.tgt", files / "train.src", "target", sample=50))
    assert len(some) == 50 and some == list(T.tokenizer_texts(files / "train.tgt", files / "train.src", "target", 50))
    rest = iter(t for _, _, t in all_pairs)
    assert all(any(x == t for t in rest) for x in some)  # a subsequence: file order kept


def test_data_prepare_then_train_reuses_the_tokenizer_and_the_arrays(files, tmp_path, capsys):
    from transformer.cli import main

    sets = [f'data.text.train_src="{files / "train.src"}"', f'data.text.train_tgt="{files / "train.tgt"}"',
            "data.vocab_size=300", "data.max_len=40", f'data.cache="{tmp_path / "cache"}"']
    argv = ["data", "prepare", str(Path(__file__).resolve().parents[2] / "configs" / "copy.toml")] + [a for s in sets for a in ("--set", s)]
    assert main(argv) in (0, None)
    out = capsys.readouterr().out
    assert "data: preparing" in out and "dropped" in out
    examples, too_long, empty = reference(files, C.Tokenizer.load(next((tmp_path / "cache").glob("tokenizer-*")) /
                                                                  "tokenizer.json"), 40)
    assert f"{len(examples):,} training examples" in out
    assert f"dropped {empty:,} with an empty side and {too_long:,} longer than data.max_len=40" in out
    assert main(argv) in (0, None)
    out = capsys.readouterr().out
    assert "trained BPE: loaded from" in out and "data: prepared corpus" in out and "preparing" not in out


def test_data_prepare_names_an_objective_whose_data_is_read_whole(tmp_path, capsys):
    from transformer.cli import main

    (tmp_path / "train.tsv").write_text("good\tpos\nbad\tneg\n")
    config = tmp_path / "classify.toml"
    config.write_text(f'[model]\narch = "encoder"\n\n[data.text]\ntrain_tsv = "{tmp_path / "train.tsv"}"\n')
    assert main(["data", "prepare", str(config)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "data prepare builds the arrays of train_src/train_tgt, train_pairs or train_text; objective "
        "'classify' reads data.train_tsv whole when training starts (nothing to prepare)")
