"""A model's chat template (Jinja, as Hugging Face renders it) applied to a conversation."""

from __future__ import annotations

from .inputs import PipelineError


def apply_chat_template(chat: dict | None, messages: list[dict]) -> str:
    """Render chat["chat_template"] over messages ([{"role", "content"}, ...]) with a generation
    prompt; chat also gives bos_token and eos_token. PipelineError when there is no template."""
    if not chat:
        raise PipelineError(
            "this model has no chat template (chat_template.json): drop --chat, or import a "
            "chat model with transformer import-hf"
        )
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(chat["chat_template"]).render(
        messages=messages,
        add_generation_prompt=True,
        bos_token=chat.get("bos_token") or "",
        eos_token=chat.get("eos_token") or "",
    )
