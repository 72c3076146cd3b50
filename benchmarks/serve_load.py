"""Load test of `transformer serve`: C concurrent clients send the verses of a test split.

First the offline reference, in this process: `Pipeline.translate` on all the lines (the model's
decoding defaults), timed (median of --repeats), its outputs kept, and a lone verse translated
alone (p50 of 20). Then, for each batching mode (--batching: continuous, whole), the server is
started as a subprocess on a free loopback port (`transformer serve MODEL --threads T --batching
B`), this process's torch stays idle, and for each concurrency C (default 1, 4, 16, 64) C clients
(asyncio + httpx, one connection each) send the lines one request per line until all are done.
Reported per mode and C: lines/s, the ratio to offline lines/s at the same concurrency
(`Pipeline.translate` on consecutive chunks of C lines: what C clients' lines can be batched
into) and to offline on the whole file, p50 / p95 / p99 latency, errors,
and how many responses differ from the offline translation. Then an idle server's latency for the
lone verse (p50 of 20 sequential requests) against offline's, and with --soak-minutes M (first
mode only) a soak at 16 clients with the server's RSS each minute.

    PYTHONPATH=src python benchmarks/serve_load.py [--model runs/demo/averaged] [--lines 0]
        [--clients 1 4 16 64] [--batching continuous whole] [--soak-minutes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import torch

from transformer.decoding.pipeline import Pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ct2 import cpu_model  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


_last = [time.perf_counter(), time.process_time()]


def client_cpu() -> float:
    """This process's CPU time since the last call, over the wall time: what the clients cost the machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    share = (cpu - _last[1]) / max(1e-9, wall - _last[0])
    _last[:] = [wall, cpu]
    return share


def wait_for(server: subprocess.Popen, url: str, seconds: float = 300) -> None:
    """Until the server's /health answers 200; exits if it does not within `seconds` or dies."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            raise SystemExit("the server did not start")
        time.sleep(0.2)


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q / 100 * len(values) + 0.5) - 1))]


async def load(url: str, lines: list[str], clients: int, deadline: float | None = None):
    """Each client takes the next line until none is left (or the deadline passes)."""
    next_line = 0
    latencies: list[float] = []
    outputs: dict[int, str] = {}
    errors = 0

    async def client(http: httpx.AsyncClient):
        nonlocal next_line, errors
        while True:
            if deadline is not None and time.monotonic() > deadline:
                return
            if next_line >= len(lines):
                if deadline is None:
                    return
                next_line = 0  # the soak goes round again
            i = next_line
            next_line += 1
            start = time.perf_counter()
            try:
                r = await http.post(url + "/v1/translate", json={"text": lines[i]}, timeout=120)
                if r.status_code != 200:
                    errors += 1
                    continue
                outputs[i] = r.json()["translations"][0]
            except httpx.HTTPError:
                errors += 1
                continue
            latencies.append(time.perf_counter() - start)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits) as http:
        start = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        seconds = time.perf_counter() - start
    return seconds, latencies, outputs, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/demo/averaged")
    parser.add_argument("--src", default="data/bible/test.spa")
    parser.add_argument("--lines", type=int, default=0, help="the first N lines (0 = all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="offline runs (median)")
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 4, 16, 64])
    parser.add_argument("--max-wait-ms", type=float, default=10.0)
    parser.add_argument("--soak-minutes", type=float, default=0.0)
    parser.add_argument("--batching", nargs="+", default=["continuous", "whole"],
                        choices=["continuous", "whole"])
    args = parser.parse_args()

    lines = Path(args.src).read_text(encoding="utf-8").splitlines()
    lines = lines[:args.lines] if args.lines else lines
    torch.set_num_threads(args.threads)
    pipe = Pipeline.load(args.model)
    offline = pipe.translate(lines)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        pipe.translate(lines)
        times.append(time.perf_counter() - start)
    offline_rate = len(lines) / statistics.median(times)
    at_concurrency = {}  # C -> lines/s of Pipeline.translate in consecutive chunks of C lines (C clients' batches)
    for clients in args.clients:
        chunked = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for i in range(0, len(lines), clients):
                pipe.translate(lines[i:i + clients])
            chunked.append(time.perf_counter() - start)
        at_concurrency[clients] = len(lines) / statistics.median(chunked)
    verse = next((line for line in lines if 19 <= len(line.split()) <= 21), lines[0])
    lone = []
    for _ in range(20):
        start = time.perf_counter()
        pipe.translate([verse])
        lone.append(time.perf_counter() - start)
    d = pipe.decode
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; server --threads {args.threads}; {len(lines)} lines of "
          f"{args.src}; beam {d.beam_size}, length penalty {d.length_penalty} ({d.length_penalty_kind})")
    print(f"offline Pipeline.translate: {offline_rate:.1f} lines/s (median of {args.repeats}); one "
          f"{len(verse.split())}-word verse alone: p50 {statistics.median(lone) * 1000:.0f} ms")
    print("offline in consecutive chunks of C lines: " + ", ".join(
        f"C={c}: {rate:.1f} lines/s" for c, rate in at_concurrency.items()))
    del pipe
    torch.set_num_threads(1)
    print("\n| batching | clients | lines/s | vs offline at C (chunks of C) | vs offline whole | p50 ms | p95 ms | "
          "p99 ms | errors | differing outputs | load generator CPU (of one core) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    idle_rows = []
    for mode in args.batching:
        idle = run_server(args, mode, lines, offline, offline_rate, verse, soak=mode == args.batching[0],
                          at_concurrency=at_concurrency)
        idle_rows.append(f"{mode}: p50 {statistics.median(idle) * 1000:.0f} ms "
                         f"({statistics.median(idle) / statistics.median(lone):.2f}x offline), "
                         f"min {min(idle) * 1000:.0f} ms")
    print(f"\nidle server, one {len(verse.split())}-word verse (20 requests): " + "; ".join(idle_rows))


def run_server(args, mode: str, lines, offline, offline_rate, verse, soak: bool, at_concurrency) -> list[float]:
    """Start the server in this batching mode, print its table rows (and the soak); return the idle
    latencies of the lone verse."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TRANSFORMER_ACCESS_LOG": "0"}
    server = subprocess.Popen([sys.executable, "-m", "transformer", "serve", args.model, "--port", str(port),
                               "--threads", str(args.threads), "--max-wait-ms", str(args.max_wait_ms),
                               "--batching", mode, "--max-queue", "1024", "--timeout", "600"], env=env)
    try:
        wait_for(server, url)
        asyncio.run(load(url, lines[:8], 4))  # warm-up
        for clients in args.clients:
            client_cpu()
            seconds, latencies, outputs, errors = asyncio.run(load(url, lines, clients))
            differ = sum(outputs.get(i) != offline[i] for i in range(len(lines)))
            rate = len(outputs) / seconds
            print(f"| {mode} | {clients} | {rate:.1f} | {rate / at_concurrency[clients]:.2f}x | "
                  f"{rate / offline_rate:.2f}x | "
                  f"{percentile(latencies, 50) * 1000:.0f} | {percentile(latencies, 95) * 1000:.0f} | "
                  f"{percentile(latencies, 99) * 1000:.0f} | {errors} | {differ} | {client_cpu():.0%} |", flush=True)
        idle = []
        with httpx.Client() as http:  # one kept-alive connection, as a client library would hold
            for _ in range(20):
                start = time.perf_counter()
                http.post(url + "/v1/translate", json={"text": verse}, timeout=60).raise_for_status()
                idle.append(time.perf_counter() - start)
                time.sleep(0.05)
        if args.soak_minutes and soak:
            before = rss_mb(server.pid)
            end = time.monotonic() + args.soak_minutes * 60
            samples: list[float] = []  # the server's RSS each minute: growth that levels off is not a leak
            done = threading.Event()

            def sample():
                while not done.wait(60):
                    samples.append(rss_mb(server.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            seconds, latencies, outputs, errors = asyncio.run(load(url, lines, 16, deadline=end))
            done.set()
            after = rss_mb(server.pid)
            late = f"; minute 2 -> end {(after - samples[1]) / samples[1]:+.1%}" if len(samples) > 1 else ""
            print(f"\nsoak ({mode}), 16 clients, {args.soak_minutes:g} min: {len(latencies)} requests, {errors} "
                  f"errors, p99 {percentile(latencies, 99) * 1000:.0f} ms; server RSS {before:.0f} MB -> "
                  f"{after:.0f} MB ({(after - before) / before:+.1%}{late}); each minute: "
                  f"{' '.join(f'{m:.0f}' for m in samples)}", flush=True)
        return idle
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
