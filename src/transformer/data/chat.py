"""Conversations for chat fine-tuning: JSONL files of {"messages": [{"role", "content"}, ...]}
(the OpenAI and Hugging Face format), rendered with a model's chat template (Jinja, as Hugging Face
renders it) and cut into the pieces a model reads and the pieces it learns to write.

The rules:
- A line is one conversation: roles system, user and assistant, each content a string, at least
  one assistant turn. Anything else is refused with the file and line.
- The assistant's turns are found by rendering: for the turn i, the template's rendering of
  messages[:i] with the generation prompt is the prompt the model is given at that point, and its
  rendering of messages[:i + 1] minus that prompt is what the model learns to write (the content
  and the end-of-turn marker the template writes after it). Each must begin with the one before;
  a template that does not render a conversation as a prefix of its continuation is refused.
- Each piece is tokenized on its own, as the server tokenizes a rendered prompt and then decodes:
  the tokens a model learns to write are the tokens it writes.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

ROLES = ("system", "user", "assistant")


class ChatDataError(ValueError):
    """A conversation file or a chat template cannot be read as this module's rules say."""


def render_chat(chat: dict, messages: list[dict], add_generation_prompt: bool = True) -> str:
    """Render chat["chat_template"] over messages ([{"role", "content"}, ...]), with the assistant's
    generation prompt at the end when add_generation_prompt; chat also gives bos_token and
    eos_token. jinja2.TemplateError when the template raises."""
    return _compiled(chat["chat_template"]).render(
        messages=messages,
        add_generation_prompt=add_generation_prompt,
        bos_token=chat.get("bos_token") or "",
        eos_token=chat.get("eos_token") or "",
    )


@functools.lru_cache(maxsize=8)
def _compiled(template: str):
    """A chat template compiled once (a fine-tuning run renders it a few times per conversation)."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template)


def read_conversations(path: str | Path) -> list[list[dict]]:
    """The conversations of a JSONL file, each a list of {"role", "content"} (module rules)."""
    path = Path(path)
    if not path.is_file():
        raise ChatDataError(f"{path} not found: give a JSONL file of conversations")
    conversations = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ChatDataError(f"{where} is not JSON ({e})") from None
            conversations.append(_messages(record, where))
    if not conversations:
        raise ChatDataError(f"{path} has no conversations: one JSON object a line")
    return conversations


def _messages(record, where: str) -> list[dict]:
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages:
        raise ChatDataError(
            f'{where}: expected {{"messages": [{{"role": "user", "content": "..."}}, ...]}}'
        )
    out = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in ROLES or not isinstance(content, str):
            raise ChatDataError(
                f"{where}: each message needs a role ({', '.join(ROLES)}) and a content string, "
                f"got {json.dumps(message)[:80]}"
            )
        out.append({"role": role, "content": content})
    if not any(m["role"] == "assistant" for m in out):
        raise ChatDataError(f"{where}: no assistant turn: nothing to learn from it")
    return out


def chat_pieces(chat: dict, messages: list[dict]) -> list[tuple[str, bool]]:
    """The conversation as the template renders it, in pieces (text, learned): learned pieces are
    the assistant's turns (module rules); the pieces join to the whole rendering."""
    pieces: list[tuple[str, bool]] = []
    done = ""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = render_chat(chat, messages[:i], add_generation_prompt=True)
        turn = render_chat(chat, messages[: i + 1], add_generation_prompt=False)
        if not prompt.startswith(done) or not turn.startswith(prompt) or turn == prompt:
            raise ChatDataError(
                "the chat template does not render a conversation as the prefix of its "
                "continuation, so the assistant's turns cannot be told apart: use a template "
                "that does (Hugging Face's ChatML, Llama, SmolLM2 templates do)"
            )
        if len(prompt) > len(done):
            pieces.append((prompt[len(done) :], False))
        pieces.append((turn[len(prompt) :], True))
        done = turn
    rest = render_chat(chat, messages, add_generation_prompt=False)[len(done) :]
    if rest:
        pieces.append((rest, False))
    return pieces


def tokenize_conversation(
    tokenizer, chat: dict, messages: list[dict]
) -> tuple[list[int], list[bool]]:
    """Token ids of the rendered conversation and, for each, whether it is learned (an assistant
    turn's token); each piece tokenized on its own."""
    ids: list[int] = []
    learned: list[bool] = []
    for text, learn in chat_pieces(chat, messages):
        piece = tokenizer.encode(text)
        ids += piece
        learned += [learn] * len(piece)
    return ids, learned
