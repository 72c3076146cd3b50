"""Our decoding against CTranslate2 on the same weights and lines: fp32 / bf16 / int8 against float32 / int8.

The model directory (default: the Bible demo's averaged model) is exported with
`transformer export --to ct2` into a temporary directory, so both engines run the same weights.
Each engine translates the same test lines, tokenization and detokenization included, in
process, both with `--threads` threads (ours: torch.set_num_threads; CTranslate2:
intra_threads, one translator). Batching: ours `Pipeline.translate(batch_tokens=4000)` (sorted
by length), CTranslate2 `translate_batch(max_batch_size=4000, batch_type="tokens")` (sorted by
length too). Hugging Face `generate` runs on a copy of the model in its M2M100 class (the one
with our pre-norm layout; see hf_m2m100.py), checked to give our logits before any timing, with
batches formed as ours are; it is timed on its first run only unless `--hf-repeats` says more
(beam 4 there takes minutes); `--no-hf` leaves it out.

Search settings are the same on both sides so that the outputs can be compared: greedy, and beam
4 with length penalty alpha (decode.json's; |Y|^alpha, |Y| counting </s>: our "power" kind,
CTranslate2's `return_end_token=True`), at most `--max-len` output tokens, no minimum length,
and no repetition guards (the model's decode.json may set `no_repeat_ngram_size` and
`repetition_penalty`; ours would apply them unless told not to): `--guards` applies decode.json's
on both sides (CTranslate2's `no_repeat_ngram_size` and `repetition_penalty`).
fp32 is checked line for line against CTranslate2 float32 (the output must be identical; lines
that differ are counted and shown). The reduced-precision modes change outputs a little: their
BLEU and chrF against the references are printed for every engine and mode.

Timing: a warm-up pass of every engine, then `--repeats` rounds, each running every engine
once in turn (so machine noise hits all of them alike); the table gives each engine's median
seconds, lines/s and its speed relative to CTranslate2 float32 (median of the per-round ratios).
`--profile` runs our fp32 once more under torch's profiler and splits operator time into
matrix products, attention, cache copies and the rest; the remainder of the wall time is
Python (beam bookkeeping, tokenization, batching).

`--batch-lines N` hands both engines the lines N at a time, in order (a user waiting on one
sentence, or a client sending 16): ours `Pipeline.translate(chunk)`, CTranslate2
`translate_batch(chunk, max_batch_size=N, batch_type="examples")`.

    PYTHONPATH=src python benchmarks/ct2.py [--model runs/demo/averaged] [--lines 0] [--repeats 3] [--profile]
        [--guards] [--batch-lines N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ctranslate2
import torch

from transformer.decoding.inputs import batches_by_tokens
from transformer.decoding.pipeline import Pipeline
from transformer.evaluation.metrics import bleu, chrf
from transformer.export.targets import export_model

HERE = Path(__file__).resolve().parent
HF = "Hugging Face generate fp32"
sys.path.insert(0, str(HERE))
from hf_m2m100 import check, to_m2m100  # noqa: E402


def _decode_benchmark():
    spec = importlib.util.spec_from_file_location("decode_benchmark", HERE / "decode.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or "unknown CPU"


def chunks(lines: list[str], size: int | None) -> list[list[str]]:
    """Consecutive chunks of `size` lines (a user sending that many at a time); all at once if None."""
    return [lines] if not size else [lines[i:i + size] for i in range(0, len(lines), size)]


def ours(pipe: Pipeline, lines: list[str], beam: int, alpha: float, max_len: int, guards: dict, size=None):
    def run():
        return [out for part in chunks(lines, size) for out in pipe.translate(
            part, beam_size=beam, length_penalty=alpha, length_penalty_kind="power", max_len_a=0,
            max_len_b=max_len, min_len=0, **guards)]
    return run


def theirs(translator, tokenizer, lines: list[str], beam: int, alpha: float, max_len: int, guards: dict,
           size=None):
    def run():
        out = []
        for part in chunks(lines, size):
            batch = [e.tokens for e in tokenizer.encode_batch(part, add_special_tokens=False)]
            results = translator.translate_batch(batch, beam_size=beam, length_penalty=alpha, return_end_token=True,
                                                 max_decoding_length=max_len, min_decoding_length=0,
                                                 max_batch_size=size or 4000,
                                                 batch_type="examples" if size else "tokens", **guards)
            ids = [[tokenizer.token_to_id(t) for t in r.hypotheses[0]] for r in results]
            out += [text.strip() for text in tokenizer.decode_batch(ids, skip_special_tokens=True)]
        return out
    return run


def hugging_face(pipe: Pipeline, hf, lines: list[str], beam: int, alpha: float, max_len: int, early_stopping):
    """`generate` on the M2M100 copy, batches formed as ours are (sorted by length, <= 4000 padded tokens)."""
    cfg = pipe.model.config
    common = dict(max_new_tokens=max_len, min_length=0, do_sample=False, suppress_tokens=[cfg.pad_id],
                  forced_bos_token_id=None, forced_eos_token_id=None, no_repeat_ngram_size=0)
    if beam > 1:
        common.update(num_beams=beam, length_penalty=alpha, early_stopping=early_stopping)

    def run():
        encoded, _ = pipe.encode_sources(lines, True)
        outputs = [""] * len(lines)
        order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
        for batch in batches_by_tokens(order, [len(ids) for ids in encoded], 4000):
            width = max(len(encoded[i]) for i in batch)
            src = torch.tensor([encoded[i] + [cfg.pad_id] * (width - len(encoded[i])) for i in batch])
            with torch.inference_mode():
                out = hf.generate(input_ids=src, attention_mask=(src != cfg.pad_id).long(), **common)
            for row, i in zip(out[:, 1:].tolist(), batch, strict=True):
                row = row[:row.index(cfg.eos_id)] if cfg.eos_id in row else row
                outputs[i] = pipe.target_tokenizer.decode(row).strip()
        return outputs
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/demo/averaged", help="our model directory (encoder-decoder)")
    parser.add_argument("--src", default="data/bible/test.spa", help="source lines")
    parser.add_argument("--ref", default="data/bible/test.eng", help="references, for BLEU and chrF")
    parser.add_argument("--lines", type=int, default=0, help="use the first N lines (0 = all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-lines", type=int, default=None,
                        help="translate the lines in consecutive chunks of N (1: one sentence at a time, as a user "
                             "waiting on each); default: all at once, batched by tokens")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--max-len", type=int, default=256, help="longest output, in tokens")
    parser.add_argument("--ours", nargs="+", default=["fp32", "bf16", "int8"], help="our precisions")
    parser.add_argument("--ct2", nargs="+", default=["float32", "int8"], help="CTranslate2 compute types")
    parser.add_argument("--hf-repeats", type=int, default=1,
                        help="timed runs of Hugging Face generate (its first run counts: beam search is slow there)")
    parser.add_argument("--no-hf", action="store_true", help="leave out Hugging Face generate (M2M100 copy)")
    parser.add_argument("--profile", action="store_true", help="split our fp32 decode's operator time by kind")
    parser.add_argument("--guards", action="store_true",
                        help="apply decode.json's no_repeat_ngram_size and repetition_penalty on both sides "
                             "(leaves Hugging Face out)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    lines = Path(args.src).read_text(encoding="utf-8").splitlines()
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    if args.lines:
        lines, refs = lines[:args.lines], refs[:args.lines]
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; {args.threads} threads; torch {torch.__version__}, "
          f"CTranslate2 {ctranslate2.__version__}; {len(lines)} lines of {args.src}")

    with tempfile.TemporaryDirectory() as tmp:
        exported = export_model(args.model, "ct2", Path(tmp) / "ct2")
        import tokenizers

        tokenizer = tokenizers.Tokenizer.from_file(str(exported / "tokenizer.json"))
        translators = {ct: ctranslate2.Translator(str(exported), device="cpu", compute_type=ct, inter_threads=1,
                                                  intra_threads=args.threads) for ct in args.ct2}
        pipes = {p: Pipeline.load(args.model, precision=p) for p in args.ours}
        first = pipes[args.ours[0]]
        alpha = first.decode.length_penalty
        names = ("no_repeat_ngram_size", "repetition_penalty")
        guards = {n: getattr(first.decode, n) for n in names} if args.guards else \
            {"no_repeat_ngram_size": 0, "repetition_penalty": 1.0}
        print("repetition guards: " + ", ".join(f"{n} {v}" for n, v in guards.items()))
        hf = None
        if not args.no_hf and not args.guards:
            try:
                hf = to_m2m100(first.model)
            except ValueError as e:
                print(f"Hugging Face generate left out: {e}")
        if hf is not None:
            encoded, _ = first.encode_sources(lines[:16], True)
            print(f"Hugging Face M2M100 copy: logits within {check(first.model, hf, encoded):.1e} of ours")
        for beam in args.beams:
            runs = {f"ours {p}": ours(pipe, lines, beam, alpha, args.max_len, guards, args.batch_lines)
                    for p, pipe in pipes.items()}
            runs.update({f"CTranslate2 {ct}": theirs(tr, tokenizer, lines, beam, alpha, args.max_len, guards,
                                                     args.batch_lines)
                         for ct, tr in translators.items()})
            if hf is not None:
                runs[HF] = hugging_face(first, hf, lines, beam, alpha, args.max_len,
                                                                  first.decode.early_stopping)
            outputs, times = {}, {name: [] for name in runs}
            for name, run in runs.items():  # warm-up, and the outputs to score
                start = time.perf_counter()
                outputs[name] = run()
                if name == HF:  # too slow to repeat: this first run is its (only) timing by default
                    times[name].append(time.perf_counter() - start)
            for round_ in range(args.repeats):
                for name, run in runs.items():
                    if name == HF and round_ + 1 >= args.hf_repeats:
                        continue
                    start = time.perf_counter()
                    run()
                    times[name].append(time.perf_counter() - start)
            anchor = "CTranslate2 float32" if "CTranslate2 float32" in runs else next(iter(runs))
            search = "greedy" if beam == 1 else f"beam {beam}"
            hf_note = f"; Hugging Face timed {len(times[HF])}x" if HF in times else ""
            print(f"\n{search} (alpha {alpha}, |Y|^alpha), median of {args.repeats}{hf_note}:")
            print(f"| engine | {search}: s | lines/s | vs {anchor} | BLEU | chrF |")
            print("|---|---|---|---|---|---|")
            for name in runs:
                if len(times[name]) == len(times[anchor]):
                    ratio = statistics.median(a / o for o, a in zip(times[name], times[anchor], strict=True))
                else:  # Hugging Face, timed fewer times: ratio of the medians
                    ratio = statistics.median(times[anchor]) / statistics.median(times[name])
                seconds = statistics.median(times[name])
                print(f"| {name} | {seconds:.2f} | {len(lines) / seconds:.1f} | {ratio:.2f}x | "
                      f"{bleu(outputs[name], refs).score:.2f} | {chrf(outputs[name], refs).score:.2f} |")
            for peer in ("CTranslate2 float32", HF):
                if "ours fp32" not in outputs or peer not in outputs:
                    continue
                differ = [i for i, (a, b) in enumerate(zip(outputs["ours fp32"], outputs[peer], strict=True)) if a != b]
                print(f"ours fp32 vs {peer}: {len(lines) - len(differ)} of {len(lines)} lines identical")
                for i in differ[:3]:
                    print(f"  line {i + 1}:\n    ours: {outputs['ours fp32'][i]}\n    peer: {outputs[peer][i]}")
            if args.profile and "ours fp32" in runs:
                wall = []

                def timed(run=runs["ours fp32"], wall=wall):
                    start = time.perf_counter()
                    run()
                    wall.append(time.perf_counter() - start)

                split = _decode_benchmark().profile(timed)
                parts = ", ".join(f"{k} {v:.2f} s ({v / wall[0]:.0%})" for k, v in split.items() if k != "total")
                print(f"ours fp32 profile ({search}): {wall[0]:.2f} s under the profiler, of which operators "
                      f"{split['total']:.2f} s: {parts}; outside operators (Python: search bookkeeping, "
                      f"tokenization, batching) {wall[0] - split['total']:.2f} s ({1 - split['total'] / wall[0]:.0%})")


if __name__ == "__main__":
    sys.exit(main())
