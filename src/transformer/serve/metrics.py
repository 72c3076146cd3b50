"""Server metrics in the Prometheus text exposition format (version 0.0.4), without a client
library.

Counters of requests by endpoint and status, a latency histogram per endpoint, a histogram of
lines per decoded batch, the queue depth, the tokens generated and the requests cancelled.
Thread-safe: the worker thread and the event loop both record.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one: above every bucket (+Inf only)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out, total = [], 0
        for bound, n in zip(self.buckets, self.counts, strict=False):
            total += n
            out.append(f'{name}_bucket{{{labels}{sep}le="{bound:g}"}} {total}')
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {self.sum:.6f}", f"{name}_count{braces} {self.count}"]
        return out


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.batch_lines = Histogram(BATCH_BUCKETS)
        self.tokens_generated = 0
        self.lines_translated = 0
        self.cancelled = 0
        self.queue_wait = Histogram(LATENCY_BUCKETS)

    def request(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[endpoint, status] += 1
            self.latency.setdefault(endpoint, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def batch(self, lines: int) -> None:
        with self._lock:
            self.batch_lines.observe(lines)

    def generated(self, tokens: int) -> None:
        with self._lock:
            self.tokens_generated += tokens

    def waited(self, seconds: float) -> None:
        """A request joined the running batch after waiting this long in the queue."""
        with self._lock:
            self.queue_wait.observe(seconds)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled += 1

    def translated(self, lines: int) -> None:
        with self._lock:
            self.lines_translated += lines

    def render(self, queue_depth: int, busy: bool, running: int = 0) -> str:
        with self._lock:
            out = [
                "# HELP transformer_requests_total HTTP requests by endpoint and status code.",
                "# TYPE transformer_requests_total counter",
            ]
            for (endpoint, status), n in sorted(self.requests.items()):
                out.append(
                    f'transformer_requests_total{{endpoint="{endpoint}",status="{status}"}} {n}'
                )
            out += [
                "# HELP transformer_request_seconds Request latency, from arrival to the response "
                "(a stream: to its start).",
                "# TYPE transformer_request_seconds histogram",
            ]
            for endpoint, hist in sorted(self.latency.items()):
                out += hist.lines("transformer_request_seconds", f'endpoint="{endpoint}"')
            out += [
                "# HELP transformer_batch_lines Lines decoded together per translation batch "
                "(continuous batching: rows per decoding step).",
                "# TYPE transformer_batch_lines histogram",
                *self.batch_lines.lines("transformer_batch_lines"),
                "# HELP transformer_queue_depth Requests waiting for the model.",
                "# TYPE transformer_queue_depth gauge",
                f"transformer_queue_depth {queue_depth}",
                "# HELP transformer_running Requests in the running batch (continuous batching; "
                "a translation line or a generation each count once).",
                "# TYPE transformer_running gauge",
                f"transformer_running {running}",
                "# HELP transformer_queue_wait_seconds Time from a request's arrival to its "
                "joining the running batch.",
                "# TYPE transformer_queue_wait_seconds histogram",
                *self.queue_wait.lines("transformer_queue_wait_seconds"),
                "# HELP transformer_busy 1 while the model is decoding.",
                "# TYPE transformer_busy gauge",
                f"transformer_busy {int(busy)}",
                "# HELP transformer_tokens_generated_total Tokens generated by /v1/generate.",
                "# TYPE transformer_tokens_generated_total counter",
                f"transformer_tokens_generated_total {self.tokens_generated}",
                "# HELP transformer_lines_translated_total Lines translated by /v1/translate.",
                "# TYPE transformer_lines_translated_total counter",
                f"transformer_lines_translated_total {self.lines_translated}",
                "# HELP transformer_cancelled_total Requests whose client went away before the "
                "answer (their decoding stopped).",
                "# TYPE transformer_cancelled_total counter",
                f"transformer_cancelled_total {self.cancelled}",
            ]
        return "\n".join(out) + "\n"
