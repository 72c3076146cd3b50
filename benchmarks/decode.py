"""Decoding speed: our greedy and beam-5 against Hugging Face `generate`, same weights, side by side.

A random MarianMTModel the size of the Bible recipe's model (d_model 256, 3+3 layers, 8k
vocabulary) is loaded into our EncoderDecoder with `transformer.interop.hf.from_hf`, so both
run the same weights. `--linear default` makes our linear layers use torch's default BLAS call, as
HF's do, for a same-kernels comparison (model/linear.py). Two length regimes, each checked for identical outputs:

- forced: exactly `--new-tokens` tokens per hypothesis: </s> is blocked until then (ours:
  min_len = max_len = N; HF: min_length = max_length = N + 1, its lengths counting the decoder
  start token), so both do the same arithmetic.
- natural: sentences end at their own </s> (at most N tokens). A random model almost never
  ends a sentence, so the logit bias of </s> is raised (`--eos-bias`) until sentences end at
  different lengths; the lengths are printed. Ours drops finished sentences from the batch,
  `generate` keeps computing them until the whole batch is done.

Both sides: greedy, or beam search with length_penalty 1.0 (|Y|^alpha) and early_stopping=True;
<pad> suppressed, no forced </s>, no n-gram blocking; attention at each side's default (our
fused path, HF's sdpa). Timing alternates ours/HF within each repeat after a warm-up; reported
are the medians and the median of the per-repeat ratios, sentences/s and generated tokens/s
(beam search: tokens of the returned best hypotheses).

`--profile` then runs each side once more under torch's profiler and splits its operator time
into matrix products (the linear layers: both sides do the same ones), attention, cache copies
and the rest; HF's time over our matrix-product time is the speed-up that ours could reach if
everything else cost nothing. `--cache flat` keeps every beam's keys/values in its own row (no
prefix tree, model/cache.py); `--cache both` also times our beam search with the flat cache
against the tree, side by side, to show what the tree buys.

    PYTHONPATH=src python benchmarks/decode.py [--threads 1] [--repeats 5] [--lengths forced natural] [--profile]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import transformer as T  # noqa: E402
from transformer.interop.hf import from_hf  # noqa: E402
from transformer.model.linear import set_onednn_linear  # noqa: E402


def build(vocab: int, d_model: int, layers: int, eos_bias: float = 0.0, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.MarianConfig(
        vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model, max_position_embeddings=512, pad_token_id=vocab - 1,
        decoder_start_token_id=vocab - 1, eos_token_id=0)
    hf = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        hf.final_logits_bias[0, config.eos_token_id] = eos_bias
    return hf, from_hf(hf).eval()


def side_by_side(ours_fn, hf_fn, repeats: int):
    """Warm up both, then alternate them; returns (median ours s, median HF s, median ratio, outputs)."""
    out_ours, out_hf = ours_fn(), hf_fn()
    t_ours, t_hf = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        ours_fn()
        t_ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        hf_fn()
        t_hf.append(time.perf_counter() - start)
    ratio = statistics.median(h / o for o, h in zip(t_ours, t_hf, strict=True))
    return statistics.median(t_ours), statistics.median(t_hf), ratio, out_ours, out_hf


# Operator names by what they do, for --profile (ours: oneDNN or BLAS; HF: BLAS).
KINDS = {
    "matmul": ("mkldnn::_linear_pointwise", "aten::addmm", "aten::mm", "aten::bmm"),
    "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_softmax"),
    "cache copies": ("aten::index_select", "aten::cat", "aten::index", "aten::copy_", "aten::gather"),
}


def profile(fn) -> dict[str, float]:
    """Seconds of operator (self) time per kind in one run of fn, and the run's total."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    split = dict.fromkeys([*KINDS, "other", "total"], 0.0)
    for event in prof.key_averages():
        seconds = event.self_cpu_time_total / 1e6
        kind = next((k for k, names in KINDS.items() if event.key in names), "other")
        split[kind] += seconds
        split["total"] += seconds
    return split


def hf_as_ours(seqs: torch.Tensor, eos: int, pad: int) -> torch.Tensor:
    """HF sequences (start token, output, </s>, pad...) -> ours (output, right-padded, no </s>)."""
    ids = seqs[:, 1:].masked_fill(seqs[:, 1:] == eos, pad)
    width = int((ids != pad).sum(-1).max())
    return ids[:, :width]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--lengths", nargs="+", choices=["forced", "natural"], default=["forced", "natural"])
    parser.add_argument("--eos-bias", type=float, default=1.03, help="</s> logit bias for natural lengths")
    parser.add_argument("--linear", choices=["onednn", "default"], default="onednn",
                        help="our inference linear layers: oneDNN (our default) or torch's default BLAS call, as HF")
    parser.add_argument("--profile", action="store_true", help="split each side's operator time by kind")
    parser.add_argument("--cache", choices=["tree", "flat", "both"], default="tree",
                        help="beam search's cache: the prefix tree (default), flat rows, or both compared")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    set_onednn_linear(args.linear == "onednn")
    pad, eos = args.vocab - 1, 0
    g = torch.Generator().manual_seed(1)
    src = torch.randint(1, pad, (args.batch, args.src_len), generator=g)
    lengths = torch.randint(args.src_len // 2, args.src_len + 1, (args.batch,), generator=g)
    mask = torch.arange(args.src_len)[None] < lengths[:, None]
    src = src.masked_fill(~mask, pad)
    n = args.new_tokens
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.threads} thread(s); batch {args.batch}, source {args.src_len} (ragged), up to {n} new tokens, "
          f"d_model {args.d_model}, {args.layers}+{args.layers} layers, vocab {args.vocab}; our linear layers: "
          f"{args.linear}; median of {args.repeats}")
    print(f"{'lengths':<8} {'search':<7} {'impl':<12} {'seconds':>8} {'sent/s':>7} {'tok/s':>7} {'speed-up':>8}")
    for regime in args.lengths:
        forced = regime == "forced"
        hf, ours = build(args.vocab, args.d_model, args.layers, 0.0 if forced else args.eos_bias)
        tree_cache = ours.new_cache

        def flat_cache(tree_cache=tree_cache):
            cache = tree_cache()
            cache.share_prefixes = False
            return cache

        if args.cache == "flat":
            ours.new_cache = flat_cache
        min_len = n if forced else 0
        hf_common = dict(max_length=n + 1, min_length=min_len + 1 if forced else 0, do_sample=False,
                         suppress_tokens=[pad], forced_eos_token_id=None, bad_words_ids=None, no_repeat_ngram_size=0)

        def hf_run(beam: int, hf=hf, hf_common=hf_common):
            kw = dict(num_beams=beam, length_penalty=1.0, early_stopping=True) if beam > 1 else {}
            with torch.inference_mode():
                return hf.generate(input_ids=src, attention_mask=mask.long(), **hf_common, **kw)

        def ours_greedy(ours=ours, min_len=min_len):
            return T.greedy_search(ours, src, src_mask=mask, max_len_a=0, max_len_b=n, min_len=min_len)

        def ours_beam(ours=ours, min_len=min_len):
            return T.beam_search(ours, src, src_mask=mask, beam_size=args.beam, length_penalty=1.0,
                                 length_penalty_kind="power", max_len_a=0, max_len_b=n, min_len=min_len)

        for name, ours_fn, hf_fn in (("greedy", ours_greedy, lambda: hf_run(1)),
                                     (f"beam-{args.beam}", ours_beam, lambda: hf_run(args.beam))):
            t_ours, t_hf, ratio, ids, seqs = side_by_side(ours_fn, hf_fn, args.repeats)
            theirs = hf_as_ours(seqs, eos, pad)
            same = ids.shape == theirs.shape and bool((ids == theirs).all())
            tokens = int((ids != pad).sum())
            for impl, t in (("transformer", t_ours), ("hf generate", t_hf)):
                print(f"{regime:<8} {name:<7} {impl:<12} {t:8.3f} {args.batch / t:7.1f} {tokens / t:7.0f} "
                      f"{(ratio if impl == 'transformer' else 1.0):7.2f}x")
            print(f"{regime:<8} {name:<7} identical outputs: {same}; output lengths "
                  f"{sorted((ids != pad).sum(-1).tolist())}")
            if args.cache == "both" and name != "greedy":
                def flat_beam(ours=ours, flat_cache=flat_cache, tree_cache=tree_cache, ours_beam=ours_beam):
                    ours.new_cache = flat_cache
                    try:
                        return ours_beam()
                    finally:
                        ours.new_cache = tree_cache

                t_tree, t_flat, gain, tree_ids, flat_ids = side_by_side(ours_fn, flat_beam, args.repeats)
                print(f"{regime:<8} {name:<7} prefix tree {t_tree:.3f} s, flat cache {t_flat:.3f} s: tree "
                      f"{gain:.2f}x faster; identical outputs: {torch.equal(tree_ids, flat_ids)}")
            if args.profile:
                for impl, fn in (("transformer", ours_fn), ("hf generate", hf_fn)):
                    split = profile(fn)
                    parts = ", ".join(f"{k} {split[k] / split['total']:.0%}" for k in (*KINDS, "other"))
                    print(f"{regime:<8} {name:<7} {impl:<12} profile: {split['total']:.3f} s of operators: {parts}")
                    if impl == "transformer":  # our matrix products' share of our time
                        ours_matmul = t_ours * split["matmul"] / split["total"]
                print(f"{regime:<8} {name:<7} HF time / our matrix-product time: {t_hf / ours_matmul:.2f}x "
                      f"(the ceiling if all else cost nothing)")


if __name__ == "__main__":
    main()
