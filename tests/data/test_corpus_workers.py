"""A large corpus is tokenized by worker processes (data.encoding_pool): the arrays are the same,
byte for byte, as the parent encoding alone makes; for a pair with its own tokenizer per side, a
language model's text and a mixture of empty, too-long and long lines; a worker that dies is one
clear error, and the pool is not started on one core."""

import os
import random
import signal
from pathlib import Path

import pytest

from tests.data.test_corpus import sentence
from transformer.data import corpus as C
from transformer.data import encoding_pool
from transformer.data.tokenizer import train_bpe


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """700 pairs (a chunk is 100 lines below, so the pool starts), with empty and too-long sides."""
    tmp = tmp_path_factory.mktemp("big")
    rng = random.Random(3)
    src = [sentence(rng) if i % 37 else "" for i in range(700)]
    tgt = [sentence(rng, 90 if i % 41 == 5 else 14) for i in range(700)]
    (tmp / "train.src").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp / "train.tgt").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    return tmp


def files_of(corpus: C.Corpus) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(Path(corpus.path).iterdir())}


@pytest.mark.parametrize("shared", [True, False])
def test_workers_write_the_same_arrays_as_the_parent_alone(big, tmp_path, monkeypatch, shared):
    tgt_tok = train_bpe((big / "train.tgt").read_text().splitlines(), vocab_size=300)
    src_tok = tgt_tok if shared else train_bpe((big / "train.src").read_text().splitlines(), vocab_size=280)
    monkeypatch.setattr(C, "CHUNK_LINES", 100)
    started = []
    real_start = encoding_pool.start
    monkeypatch.setattr(encoding_pool, "usable_cores", lambda: 3)  # three workers, shares of 34/33/33
    monkeypatch.setattr(encoding_pool, "start", lambda *a: started.append(real_start(*a)) or started[-1])
    pooled = C.prepare_corpus(big / "train.tgt", tgt_tok, 40, big / "train.src", src_tok, cache=tmp_path / "a")
    assert len(started) == 1 and started[0] is not None and len(started[0].procs) == 3
    assert all(p.poll() is not None for p in started[0].procs)  # closed: no worker left behind
    monkeypatch.setattr(encoding_pool, "start", lambda *a: None)
    alone = C.prepare_corpus(big / "train.tgt", tgt_tok, 40, big / "train.src", src_tok, cache=tmp_path / "b")
    assert files_of(pooled) == files_of(alone)
    assert pooled.dropped["empty"] > 0 and pooled.dropped["too_long"] > 0
    lm_pooled = C.prepare_corpus(big / "train.tgt", tgt_tok, 40, cache=tmp_path / "c")
    assert len(started) == 1  # (start is the in-process stand-in now)
    monkeypatch.setattr(encoding_pool, "start", real_start)
    lm_alone = C.prepare_corpus(big / "train.tgt", tgt_tok, 40, cache=tmp_path / "d")
    assert files_of(lm_pooled) == files_of(lm_alone)


def test_a_small_corpus_or_one_core_encodes_in_process(big, tmp_path, monkeypatch):
    tok = train_bpe((big / "train.tgt").read_text().splitlines(), vocab_size=300)
    monkeypatch.setattr(encoding_pool, "usable_cores", lambda: 1)
    assert encoding_pool.start({"target": tok.tokenizer.to_str()}, {"target": "uint16"}) is None
    monkeypatch.setattr(encoding_pool, "usable_cores", lambda: 2)
    monkeypatch.setattr(encoding_pool, "start", lambda *a: pytest.fail("a pool for a corpus under one chunk"))
    C.prepare_corpus(big / "train.tgt", tok, 40, big / "train.src", tok, cache=tmp_path)  # 700 < CHUNK_LINES


def test_a_worker_that_dies_is_one_clear_error(big):
    tok = train_bpe((big / "train.tgt").read_text().splitlines(), vocab_size=300)
    pool = encoding_pool.Pool({"target": tok.tokenizer.to_str()}, {"target": "uint16"}, 2)
    try:
        pool.submit({"target": ["el gato", "the cat sat"] * 10})
        lengths, flat = pool.result()["target"]
        assert lengths.tolist() == [len(tok.encode(t)) for t in ["el gato", "the cat sat"] * 10]
        assert flat.tolist() == [i for t in ["el gato", "the cat sat"] * 10 for i in tok.encode(t)]
        os.kill(pool.procs[1].pid, signal.SIGKILL)
        pool.procs[1].wait()
        with pytest.raises(encoding_pool.WorkerError, match=rf"worker \(pid {pool.procs[1].pid}\) stopped with status -9"):
            pool.submit({"target": ["el gato"] * 4})
            pool.result()
    finally:
        pool.close()


def test_a_build_interrupted_while_workers_encode_leaves_nothing(big, tmp_path, monkeypatch):
    tok = train_bpe((big / "train.tgt").read_text().splitlines(), vocab_size=300)
    monkeypatch.setattr(C, "CHUNK_LINES", 100)
    monkeypatch.setattr(encoding_pool, "usable_cores", lambda: 2)
    pools, calls = [], []
    real_start, real_result = encoding_pool.start, encoding_pool.Pool.result
    monkeypatch.setattr(encoding_pool, "start", lambda *a: pools.append(real_start(*a)) or pools[-1])

    def result(self):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as Ctrl-C mid-build would
        return real_result(self)

    monkeypatch.setattr(encoding_pool.Pool, "result", result)
    with pytest.raises(KeyboardInterrupt):
        C.prepare_corpus(big / "train.tgt", tok, 40, big / "train.src", tok, cache=tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert all(p.poll() is not None for p in pools[0].procs)
