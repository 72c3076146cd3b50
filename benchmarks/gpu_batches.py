"""The batches of benchmarks/gpu_train.py: synthetic ones of one padded shape, or the Bible's
sentences batched by token count as the training loop batches them (see gpu_train.py's docstring),
and the figures read off them (the attended length for the FLOPs, the padding)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import torch

from transformer.data.batching import Example, batch_indices, encode_examples
from transformer.data.tokenizer import train_bpe

FIRST_ID = 4  # ids 0-3 are <pad> <unk> <s> </s>: random tokens start above them


def synthetic_batches(k: int, rows: int, lo: int, hi: int, vocab: int, seed: int):
    """k batches of `rows` random examples; lengths in [lo, hi] (targets counting <s>/</s>), the
    first row of each batch the longest, so that every batch pads to (rows, hi)."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(k):
        src_len = torch.randint(lo, hi + 1, (rows,), generator=g)
        tgt_len = torch.randint(lo - 1, hi, (rows,), generator=g)  # + <s> or </s>: lo..hi
        src_len[0], tgt_len[0] = hi, hi - 1
        ids = torch.randint(FIRST_ID, vocab, (rows, 2 * hi), generator=g)
        batches.append(
            [
                Example(ids[i, : src_len[i]].tolist(), ids[i, hi : hi + tgt_len[i]].tolist())
                for i in range(rows)
            ]
        )
    return batches


def bible_batches(data: Path, pairs: int, bpe_vocab: int, batch_tokens: int, max_len: int):
    """The Bible's pairs (a fixed shuffled sample, as train_speed.py), a joint BPE trained on them,
    batched by token count as the loop batches (seed 1, epoch 0)."""
    src = data.joinpath("train.spa").read_text(encoding="utf-8").splitlines()
    tgt = data.joinpath("train.eng").read_text(encoding="utf-8").splitlines()
    order = list(range(len(src)))
    random.Random(0).shuffle(order)
    src, tgt = [src[i] for i in order[:pairs]], [tgt[i] for i in order[:pairs]]
    started = time.perf_counter()
    tok = train_bpe(src + tgt, vocab_size=bpe_vocab)
    examples, dropped = encode_examples(tgt, tok, max_len, src, tok)
    batches = batch_indices([e.size for e in examples], batch_tokens, seed=1, epoch=0)
    info = dict(
        pairs=len(examples),
        dropped=dropped,
        bpe_vocab=tok.vocab_size,
        batches=len(batches),
        tokenize_s=round(time.perf_counter() - started, 1),
    )
    return [[examples[i] for i in b] for b in batches], info


def attended_length(batches) -> int:
    """sum(l^2) / sum(l) over the target rows (l = target + </s>): flops_per_token's seq_len."""
    lengths = [len(e.tgt) + 1 for b in batches for e in b]
    return round(sum(n * n for n in lengths) / sum(lengths))


def padding(batches) -> float:
    """Share of padded positions on the target side."""
    real = sum(len(e.tgt) + 1 for b in batches for e in b)
    padded = sum(len(b) * max(len(e.tgt) + 1 for e in b) for b in batches)
    return 1 - real / padded


def measured_batches(batches, args) -> list:
    """The batches the timed rounds step through (for the FLOPs' length and the padding)."""
    used = {(args.warmup + k) % len(batches) for k in range(args.repeats * args.steps)}
    return [batches[i] for i in sorted(used)]
