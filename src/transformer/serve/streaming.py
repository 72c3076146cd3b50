"""Server-Sent Events for /v1/generate with "stream": true, and noticing a client that went away.

The rules: one `data: {"text": piece}` event per new piece of text, where a piece is the growth of
the decoded text, held back while the text ends inside a multi-byte character; then `event: done`
with the whole text and the token counts, or `event: error`. A client that goes away, or a request
past its time, stops the decoding at its next token; a client gone is normal operation (on_gone: one
log line and a count, no traceback).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from fastapi import Request

from ..decoding.pipeline import Pipeline
from .worker import Job


async def disconnected(request: Request) -> None:
    """Returns when the client goes away: once the body is read, the server's next message is the
    disconnect (no polling)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def stream(
    job: Job,
    events: asyncio.Queue,
    pipeline: Pipeline,
    final,
    timeout: float,
    on_gone: Callable[[], None] | None = None,
):
    """The SSE events of a generation job whose tokens arrive on `events` (see the module's
    rules); on_gone is called when the client goes away before the end."""
    future = asyncio.wrap_future(job.future)
    ids: list[int] = []
    sent = ""
    deadline = job.arrived + timeout
    getter: asyncio.Future | None = None
    ended = False
    try:
        while True:
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait(
                {getter, future},
                timeout=max(0.0, deadline - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                ids.append(getter.result())
                text = pipeline.target_tokenizer.decode(ids)
                if text.startswith(sent) and not text.endswith("\ufffd") and len(text) > len(sent):
                    yield event({"text": text[len(sent) :]})
                    sent = text
                continue
            getter.cancel()
            ended = True
            if future in done:
                while not events.empty():  # tokens queued before the end
                    ids.append(events.get_nowait())
                try:
                    text = future.result()
                except Exception as e:  # noqa: BLE001
                    yield event(
                        {"error": {"code": "generation_failed", "message": str(e)}}, "error"
                    )
                    return
                if text.startswith(sent) and len(text) > len(sent):
                    yield event({"text": text[len(sent) :]})
                yield event(final(text), "done")
                return
            job.stop.set()
            future.cancel()
            yield event(
                {
                    "error": {
                        "code": "timeout",
                        "message": f"the request took more than {timeout:g} s",
                    }
                },
                "error",
            )
            return
    finally:
        job.stop.set()  # the client went away (or we are done): stop decoding at the next token
        if getter is not None:
            getter.cancel()
        future.cancel()  # nobody waits for it any more: its end (Cancelled) is not an error
        if future.done() and not future.cancelled():
            future.exception()  # seen: no "exception was never retrieved" traceback at exit
        if not ended and on_gone is not None:
            on_gone()


def event(data: dict, name: str | None = None) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n"
