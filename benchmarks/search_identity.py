"""Outputs of greedy search, beam search and sampling, saved and compared bit for bit: the check that a
change to decoding/ (issue #71: the offline searches moved onto the lanes) changes no output.

Run it once with the code before the change (save) and once after (check):

    PYTHONPATH=/tmp/search-old/src python benchmarks/search_identity.py save /tmp/search-ref.pt
    PYTHONPATH=src python benchmarks/search_identity.py check /tmp/search-ref.pt

Without --model it decodes small random models (an encoder-decoder with right-padded, masked and
list sources, a decoder-only model with left-padded prompts) over a grid of settings: n_best,
min_len, every early_stopping mode and length penalty, the repetition guards, seeded sampling with
top_k/top_p, scores, attention weights, on_step, a forced prefix and suppressed tokens. With
--model (a model directory) and --src it decodes those lines as Pipeline.translate batches them,
with greedy, beam 4 and seeded sampling, and keeps the ids of every line. Only the public API is
called, so both versions run it. No timing: outputs only.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys

import torch

import transformer as T
from transformer.config import cpu_tiny

V = 40


DEVICE = torch.device("cpu")


def tiny(arch: str, positional: str = "sinusoidal", seed: int = 0, **kw) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = cpu_tiny(vocab_size=V, arch=arch, positional=positional, max_positions=24, **kw)
    model = T.build_model(cfg).eval().to(DEVICE)
    with torch.no_grad():  # a likelier </s>: outputs end at different lengths
        if model.lm_head.bias is not None:
            model.lm_head.bias[cfg.eos_id] += 2.0
    return model


def rows(n: int, seed: int, low: int = 1, high: int = 12) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, V) for _ in range(rng.randint(low, high))] for _ in range(n)]


def padded(sources: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids (B, S) and an explicit mask whose padding holds ordinary ids (not pad)."""
    width = max(map(len, sources))
    ids = torch.full((len(sources), width), pad)
    noisy = torch.full((len(sources), width), 7)
    mask = torch.zeros(len(sources), width, dtype=torch.bool)
    for i, r in enumerate(sources):
        ids[i, : len(r)] = torch.tensor(r)
        noisy[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = True
    return ids.to(DEVICE), (noisy.to(DEVICE), mask.to(DEVICE))


def synthetic() -> dict:
    """Name -> outputs of every case on the random models."""
    out: dict = {}
    seq2seq = {p: tiny("encoder-decoder", p) for p in ("sinusoidal", "rope")}
    lm = tiny("decoder", "learned", seed=1)
    src = rows(9, seed=1)
    pad = seq2seq["rope"].config.pad_id
    ids, (noisy, mask) = padded(src, pad)
    inputs = {"tensor": (ids, None), "masked": (noisy, mask), "list": (src, None)}
    guards = [(0, 1.0), (2, 1.0), (0, 1.3), (3, 1.2)]
    for (pos, model), (form, (x, m)), min_len, (n, p) in itertools.product(
        seq2seq.items(), inputs.items(), (0, 3), guards
    ):
        key = f"greedy/{pos}/{form}/min{min_len}/g{n},{p}"
        calls = []
        out[key] = T.greedy_search(
            model,
            x,
            src_mask=m,
            max_len_a=1.0,
            max_len_b=4,
            min_len=min_len,
            no_repeat_ngram_size=n,
            repetition_penalty=p,
            return_scores=True,
            return_attention=form == "tensor",
            on_step=lambda r, t, calls=calls: calls.append((r.tolist(), t.tolist())),
        )
        out[key + "/on_step"] = calls
    model = seq2seq["rope"]
    for beam, n_best, early, (kind, alpha), min_len, (n, p) in itertools.product(
        (2, 4),
        (1, 2),
        (True, False, "never"),
        (("wu", 0.6), ("power", 1.5), ("wu", 0.0)),
        (0, 2),
        guards,
    ):
        if n_best > beam:
            continue
        key = f"beam/{beam}/n{n_best}/{early}/{kind}{alpha}/min{min_len}/g{n},{p}"
        out[key] = T.beam_search(
            model,
            ids,
            beam_size=beam,
            n_best=n_best,
            early_stopping=early,
            length_penalty_kind=kind,
            length_penalty=alpha,
            min_len=min_len,
            max_len_a=1.2,
            max_len_b=2,
            no_repeat_ngram_size=n,
            repetition_penalty=p,
            return_scores=True,
            return_attention=early is True and kind == "wu",
        )
    for (form, (x, m)), beam in itertools.product(inputs.items(), (3,)):
        out[f"beam/form/{form}"] = T.beam_search(
            seq2seq["sinusoidal"], x, src_mask=m, beam_size=beam, n_best=2, return_scores=True
        )
    prompts = rows(7, seed=2, high=9)
    for (t, k, top_p), min_new, (n, p), who in itertools.product(
        ((1.0, 0, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.8), (0.9, 8, 0.9), (0.0, 0, 1.0)),
        (0, 2),
        guards,
        ("lm", "seq2seq"),
    ):
        model, x = (lm, prompts) if who == "lm" else (seq2seq["rope"], src)
        g = torch.Generator(DEVICE).manual_seed(17)
        key = f"sample/{who}/t{t},k{k},p{top_p}/min{min_new}/g{n},{p}"
        out[key] = T.sample(
            model,
            x,
            max_new_tokens=9,
            temperature=t,
            top_k=k,
            top_p=top_p,
            generator=g,
            min_new_tokens=min_new,
            no_repeat_ngram_size=n,
            repetition_penalty=p,
            return_scores=True,
            return_attention=who == "lm" and n == 0 and p == 1.0,
        )
    for beam in (1, 3):  # decoder-only search; a room capped by max_positions (24)
        out[f"lm/beam{beam}"] = (
            T.beam_search(
                lm,
                prompts,
                beam_size=beam,
                max_len_a=0,
                max_len_b=30,
                return_scores=True,
                return_attention=beam == 3,
            )
            if beam > 1
            else T.greedy_search(
                lm, prompts, max_len_a=0, max_len_b=30, return_scores=True, return_attention=True
            )
        )
    model = seq2seq["sinusoidal"]  # forced prefix, suppressed tokens; rows with no room
    for beam in (1, 3):
        fn = T.greedy_search if beam == 1 else T.beam_search
        kw = {} if beam == 1 else {"beam_size": beam}
        out[f"prefix/beam{beam}"] = fn(
            model,
            src,
            prefix=[model.config.start_id, 9],
            suppress_tokens=[5, 6],
            begin_suppress_tokens=[8, model.config.eos_id],
            max_len_a=0.5,
            max_len_b=3,
            min_len=1,
            return_scores=True,
            **kw,
        )
        out[f"room0/beam{beam}"] = fn(
            model, [[5], [6, 7, 8, 9, 10]], max_len_a=0.5, max_len_b=0, return_scores=True, **kw
        )
    out.update(lanes(seq2seq["rope"], lm, src, prompts))
    return out


def lanes(seq2seq, lm, src: list[list[int]], prompts: list[list[int]]) -> dict:
    """The server's lanes (decoding.search.continuous) under a fixed schedule of admissions and steps:
    greedy and beam translation, sampling a language model with each request's own generator."""
    from transformer.config import DecodeConfig
    from transformer.decoding.search.continuous import new_lane
    from transformer.decoding.search.lanes import Request

    out = {}
    cases = [
        ("greedy", seq2seq, src, DecodeConfig(beam_size=1, min_len=1, max_len_b=3), None),
        ("beam", seq2seq, src, DecodeConfig(beam_size=3, n_best=2, max_len_b=2), None),
        ("guards", seq2seq, src, DecodeConfig(beam_size=2, no_repeat_ngram_size=2), None),
        ("sample", lm, prompts, DecodeConfig(beam_size=1, temperature=0.9, top_k=6), 12),
    ]
    for name, model, sources, s, max_new in cases:
        seqs = [
            Request(x, s, generator=torch.Generator(DEVICE).manual_seed(i), max_new=max_new)
            if max_new
            else Request(x, s)
            for i, x in enumerate(sources)
        ]
        lane, waiting, rng = new_lane(model, s), list(seqs), random.Random(5)
        while waiting or len(lane):
            if waiting and (not len(lane) or rng.random() < 0.5):
                lane.admit([waiting.pop(0) for _ in range(min(len(waiting), rng.randint(1, 3)))])
            for _ in range(rng.randint(1, 3)):
                lane.step()
        out[f"lanes/{name}"] = [(q.tokens, q.hypotheses, q.finish) for q in seqs]
    return out


def real(model_dir: str, src: str, lines: int) -> dict:
    """Ids of each line of src under greedy, beam 4 and seeded sampling, batched as
    Pipeline.translate batches them (sorted by length, 4,000 tokens a batch); and translate's text."""
    from transformer.decoding.inputs import batches_by_tokens
    from transformer.decoding.pipeline import Pipeline

    pipe = Pipeline.load(model_dir)
    text = open(src, encoding="utf-8").read().splitlines()
    text = text[:lines] if lines else text
    encoded, _ = pipe.encode_sources(text)
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    s = pipe.decode
    out: dict = {"lines": len(text)}
    for mode in ("greedy", "beam4", "sample"):
        ids: dict = {}
        g = torch.Generator().manual_seed(1234)
        for batch in batches_by_tokens(order, [len(x) for x in encoded], 4000):
            sources = [encoded[i] for i in batch]
            lengths = dict(max_len_a=s.max_len_a, max_len_b=s.max_len_b, min_len=s.min_len)
            if mode == "greedy":
                got = T.greedy_search(pipe.model, sources, **lengths)
            elif mode == "beam4":
                got = T.beam_search(
                    pipe.model,
                    sources,
                    beam_size=4,
                    n_best=1,
                    length_penalty=s.length_penalty,
                    length_penalty_kind=s.length_penalty_kind,
                    **lengths,
                )
            else:
                longest = max(map(len, sources))
                got = T.sample(
                    pipe.model,
                    sources,
                    max_new_tokens=int(s.max_len_a * longest + s.max_len_b),
                    temperature=0.8,
                    top_k=20,
                    top_p=0.95,
                    generator=g,
                )
            for row, i in zip(got.tolist(), batch, strict=True):
                ids[i] = row
        out[f"{mode}/ids"] = [ids.get(i, []) for i in range(len(text))]
    out["translate/greedy"] = pipe.translate(text, beam_size=1)
    out["translate/beam4"] = pipe.translate(text, beam_size=4)
    out["translate/sample"] = pipe.translate(
        text, beam_size=1, generator=torch.Generator().manual_seed(5)
    )
    return out


def same(a, b) -> bool:
    """Bitwise equality of nested outputs (tensors compared with torch.equal, dtype and shape too)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["save", "check"])
    parser.add_argument("file", help="the saved outputs (.pt)")
    parser.add_argument("--model", help="a model directory: decode --src with it")
    parser.add_argument("--src", default="data/bible/test.spa")
    parser.add_argument("--lines", type=int, default=0, help="the first N lines (0 = all)")
    parser.add_argument("--device", default="cpu", help="where the random models decode")
    args = parser.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    torch.set_num_threads(1)  # the same kernels in both runs
    out = real(args.model, args.src, args.lines) if args.model else synthetic()
    if args.mode == "save":
        torch.save(out, args.file)
        print(f"saved {len(out)} cases to {args.file}")
        return 0
    want = torch.load(args.file, weights_only=False)
    bad = [k for k in want if k not in out or not same(want[k], out[k])]
    bad += [k for k in out if k not in want]
    for k in bad[:20]:
        print("DIFFERS:", k)
    counts = {k: len(v) for k, v in out.items() if isinstance(v, list) and k.endswith("/ids")}
    print(f"{len(want) - len(bad)} of {len(want)} cases identical", counts or "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
