"""Decoding speed: our greedy and beam-5 against Hugging Face `generate`, same weights, side by side.

A random MarianMTModel the size of the Bible recipe's model (d_model 256, 3+3 layers, 8k
vocabulary) is loaded into our EncoderDecoder with `transformer.interop.hf.from_hf`, so both
run the same weights. Both produce exactly `--new-tokens` tokens per hypothesis: </s> is blocked
until then (ours: min_len = max_len = N; HF: min_length = max_length = N + 1, its lengths
counting the decoder start token), so they do the same work. Reported: median over repeats,
sentences/s and generated tokens/s (beam search: tokens of the returned best hypotheses).

    PYTHONPATH=src python benchmarks/decode.py [--threads 1] [--repeats 5]
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


def build(vocab: int, d_model: int, layers: int, seed: int = 0):
    torch.manual_seed(seed)
    config = transformers.MarianConfig(
        vocab_size=vocab, d_model=d_model, encoder_layers=layers, decoder_layers=layers,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model, max_position_embeddings=512, pad_token_id=vocab - 1,
        decoder_start_token_id=vocab - 1, eos_token_id=0)
    hf = transformers.MarianMTModel(config).eval()
    return hf, from_hf(hf).eval()


def timed(fn, repeats: int) -> tuple[float, object]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    hf, ours = build(args.vocab, args.d_model, args.layers)
    pad = args.vocab - 1
    g = torch.Generator().manual_seed(1)
    src = torch.randint(1, pad, (args.batch, args.src_len), generator=g)
    lengths = torch.randint(args.src_len // 2, args.src_len + 1, (args.batch,), generator=g)
    mask = torch.arange(args.src_len)[None] < lengths[:, None]
    src = src.masked_fill(~mask, pad)
    n = args.new_tokens
    hf_common = dict(max_length=n + 1, min_length=n + 1, do_sample=False, suppress_tokens=[pad],
                     forced_eos_token_id=None, bad_words_ids=None, no_repeat_ngram_size=0)

    def hf_run(beam: int):
        kw = dict(num_beams=beam, length_penalty=1.0, early_stopping=True) if beam > 1 else {}
        with torch.inference_mode():
            return hf.generate(input_ids=src, attention_mask=mask.long(), **hf_common, **kw)

    runs = {
        "greedy": (lambda: T.greedy_search(ours, src, src_mask=mask, max_len_a=0, max_len_b=n, min_len=n),
                   lambda: hf_run(1)),
        f"beam-{args.beam}": (lambda: T.beam_search(ours, src, src_mask=mask, beam_size=args.beam, length_penalty=1.0,
                                                    length_penalty_kind="power", max_len_a=0, max_len_b=n, min_len=n),
                              lambda: hf_run(args.beam)),
    }
    print(f"# torch {torch.__version__}, transformers {transformers.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.threads} thread(s); batch {args.batch}, source {args.src_len} (ragged), {n} new tokens, "
          f"d_model {args.d_model}, {args.layers}+{args.layers} layers, vocab {args.vocab}; median of {args.repeats}")
    print(f"{'search':<8} {'impl':<13} {'seconds':>8} {'sent/s':>8} {'tok/s':>8} {'speed-up':>8}")
    for name, (ours_fn, hf_fn) in runs.items():
        t_ours, ids = timed(ours_fn, args.repeats)
        t_hf, seqs = timed(hf_fn, args.repeats)
        assert ids.shape == (args.batch, n) and seqs.shape == (args.batch, n + 1), (ids.shape, seqs.shape)
        same = bool((ids == seqs[:, 1:]).all())
        for impl, t in (("transformer", t_ours), ("hf generate", t_hf)):
            print(f"{name:<8} {impl:<13} {t:8.3f} {args.batch / t:8.1f} {args.batch * n / t:8.0f} "
                  f"{(t_hf / t_ours if impl == 'transformer' else 1.0):7.2f}x")
        print(f"{name:<8} identical outputs: {same}")


if __name__ == "__main__":
    main()
