"""A model's chat template (Jinja, as Hugging Face renders it) applied to a conversation."""

from __future__ import annotations

from ..data.chat import render_chat
from .inputs import PipelineError


def apply_chat_template(chat: dict | None, messages: list[dict]) -> str:
    """Render chat["chat_template"] over messages ([{"role", "content"}, ...]) with a generation
    prompt; chat also gives bos_token and eos_token. PipelineError when there is no template."""
    if not chat:
        raise PipelineError(
            "this model has no chat template (chat_template.json): drop --chat, or import a "
            "chat model with transformer import-hf"
        )
    return render_chat(chat, messages, add_generation_prompt=True)
