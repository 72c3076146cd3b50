"""Language modelling: a decoder trained on the next token, on packed text (GPT-style blocks) or
one example per line, or a chat model fine-tuned on conversations (objective chat: the loss on the
assistant's turns); run by `generate` (and the OpenAI API), scored by perplexity
(`evaluate --text`)."""

from __future__ import annotations

from pathlib import Path

from ..config import ModelConfig, RunConfig
from .base import Route, Scored, Task
from .figures import TEXT


def runs(model: ModelConfig, pixels: bool) -> bool:
    return model.arch == "decoder" and not pixels


def prepare(config: RunConfig, run_dir: Path, dist, say, resume: bool):
    from ..training.corpora import prepare_data
    from ..training.objectives import ChatSFT, PackedLM, Seq2Seq

    if config.objective == "chat":
        return ChatSFT(config, run_dir, dist, say, resume)
    if config.packed:
        return PackedLM(config, run_dir, dist, say, resume)
    return Seq2Seq(config, prepare_data(config, run_dir, dist, say, resume))


def infer(pipeline, prompts, **settings):
    """`pipeline(prompts)`: the continuations (Pipeline.generate)."""
    return pipeline.generate(prompts, **settings)


TASK = Task(
    name="language-modelling",
    summary="language modelling: continue a text, or chat with a chat template",
    described="a language model",
    objectives=("lm", "chat"),
    family="decoder",
    runs=runs,
    prepare=prepare,
    attention=TEXT,
    infer=infer,
    command="generate",
    routes=(
        Route("/v1/generate"),
        Route("/v1/attention"),
        Route("/v1/completions"),
        Route("/v1/chat/completions"),
    ),
    evaluate=(
        Scored("--text", "perplexity", "a language model's perplexity"),
        Scored("--chat", "replies", "a chat model's replies to conversations"),
    ),
)
