"""The answers of the OpenAI API (openai.py): each choice's text as its tokens come, cut before the
first stop string and, when streamed, sent only where it has settled (no end inside a multi-byte
character, no end that could begin a stop string); and the envelope of a whole reply, of a
stream's chunks and of an error in mid-stream, in OpenAI's shapes.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

from .state import Generation


class Choice:
    """One choice's tokens as the worker chooses them (on_token, on the worker thread), its text
    cut before the first stop string and, when streamed, the part of it handed to `emit`."""

    def __init__(self, tokenizer, stops: list[str], emit: Callable[[str], None] | None = None):
        self.tokenizer, self.stops, self.emit = tokenizer, stops, emit
        self.ids: list[int] = []
        self.text = self.sent = ""
        self.stopped = False

    def on_token(self, token: int) -> bool:
        """True (end the generation) once a stop string is generated."""
        self.ids.append(token)
        if not self.stops and self.emit is None:
            return False
        text = self.tokenizer.decode(self.ids)
        at = first_stop(text, self.stops)
        if at is not None:
            text, self.stopped = text[:at], True
        self.text = text
        if self.emit is not None:
            self._send(text if self.stopped else settled(text, self.stops))
        return self.stopped

    def _send(self, text: str) -> None:
        if len(text) > len(self.sent) and text.startswith(self.sent):
            self.emit(text[len(self.sent) :])
            self.sent = text

    def finish(self, generation: Generation) -> str:
        """The whole text (a stream: what is left to send), once the job is done."""
        if not self.stopped:
            self.text = self.tokenizer.decode(generation.ids)
        return self.text[len(self.sent) :] if self.text.startswith(self.sent) else ""


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the first stop string in `text` begins, or None."""
    found = [i for i in (text.find(stop) for stop in stops) if i >= 0]
    return min(found) if found else None


def settled(text: str, stops: list[str]) -> str:
    """The part of `text` that may be sent: not an end inside a multi-byte character ("\ufffd"),
    nor an end that could begin a stop string."""
    text = text.rstrip("\ufffd")
    hold = max(
        (k for stop in stops for k in range(1, len(stop)) if text.endswith(stop[:k])), default=0
    )
    return text[: len(text) - hold]


class Reply:
    """The answer's envelope: its id, object, created and model, and its choices' shapes."""

    def __init__(self, model: str, chat: bool):
        self.model, self.chat = model, chat
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())

    def head(self, object: str) -> dict:
        return {"id": self.id, "object": object, "created": self.created, "model": self.model}

    def usage(self, prompt_tokens: int, generations: list[Generation]) -> dict:
        completion = sum(len(g.ids) for g in generations)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }

    def whole(self, texts, reasons, prompt_tokens, generations) -> dict:
        if self.chat:
            choices = [
                {"index": i, "message": {"role": "assistant", "content": text}}
                for i, text in enumerate(texts)
            ]
        else:
            choices = [{"index": i, "text": text} for i, text in enumerate(texts)]
        for choice, reason in zip(choices, reasons, strict=True):
            choice.update(logprobs=None, finish_reason=reason)
        return {
            **self.head("chat.completion" if self.chat else "text_completion"),
            "choices": choices,
            "usage": self.usage(prompt_tokens, generations),
        }

    def piece(self, i: int, text: str | None, reason: str | None = None, role=False) -> dict:
        """One choice's chunk: a piece of text, or (text None) its finish."""
        if not self.chat:
            return {"index": i, "text": text or "", "logprobs": None, "finish_reason": reason}
        delta = {"role": "assistant", "content": ""} if role else {}
        if text:
            delta["content"] = text
        return {"index": i, "delta": delta, "logprobs": None, "finish_reason": reason}

    def chunk(self, include_usage: bool, choices: list[dict], usage: dict | None = None) -> str:
        data = {
            **self.head("chat.completion.chunk" if self.chat else "text_completion"),
            "choices": choices,
        }
        if include_usage:
            data["usage"] = usage
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def error_event(status: int, code: str, message: str) -> str:
    """An error in the middle of a stream, in OpenAI's shape (its clients raise it)."""
    kind = "timeout" if status == 504 else "server_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n"
