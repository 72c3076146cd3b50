"""Language modelling: a decoder trained on the next token, on packed text (GPT-style blocks) or
one example per line, or a chat model fine-tuned on conversations (objective chat: the loss on the
assistant's turns); run by `generate` (and the OpenAI API), scored by perplexity
(`evaluate --text`)."""

from __future__ import annotations

from pathlib import Path

from ..config import EVALUATE_SEARCH, ModelConfig, RunConfig
from .base import Route, Scored, Task
from .evaluation import Evaluation, EvaluationError
from .figures import TEXT
from .reports import open_model, print_pair_scores


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


def evaluate_perplexity(e: Evaluation) -> None:
    """A language model's loss on --text: per token and per character, the text read as one
    stream in sliding windows, or with --per-line each line on its own."""
    from ..data.lines import read_text
    from ..data.text import DataError
    from ..evaluation.scoring import TextScore, model_nll, score_text

    pipeline = open_model(e)
    cfg = pipeline.model.config
    tok = pipeline.target_tokenizer
    if e.per_line:
        if e.window or e.stride:
            raise EvaluationError(
                "--window and --stride are for the stream: leave them out with --per-line"
            )
        lines = [line for line in read_text(e.text, "--text") if line.strip()]
        if not lines:
            raise EvaluationError(
                f"--text {e.text} has no non-empty line: give text to measure perplexity on"
            )
        nll, n = model_nll(
            pipeline.model, [[cfg.bos_id] + tok.encode(line) + [cfg.eos_id] for line in lines]
        )
        score = TextScore(nll, n, sum(len(line) + 1 for line in lines))
        how = f"{len(lines):,} lines each on its own, </s> scored as the line break"
    else:
        window = e.window or cfg.max_positions
        if window > cfg.max_positions:
            raise EvaluationError(
                f"--window {window} is longer than the model's max_positions={cfg.max_positions}: "
                f"give --window {cfg.max_positions} or less"
            )
        stride = e.stride or window
        if stride > window:
            raise EvaluationError(
                f"--stride {stride} is longer than the window ({window}): give at most {window}"
            )
        try:
            score = score_text(pipeline.model, e.text, tok, e.documents, window, stride)
        except DataError as error:
            raise EvaluationError(str(error)) from None
        context = (
            "" if stride == window else f", each scoring its last {stride} with the rest as context"
        )
        how = (
            f"one stream (documents: {e.documents}, each <s> ... </s>), windows of {window} "
            f"tokens moved by {stride}{context}"
        )
    print(
        f"perplexity {score.perplexity:.3f} on {e.text}: {score.nll_per_token:.4f} nats per "
        f"token over {score.tokens:,} tokens; {score.nll_per_char:.4f} nats = "
        f"{score.bits_per_char:.4f} bits per character over {score.chars:,} characters ({how})"
    )


def evaluate_chat(e: Evaluation) -> None:
    """A chat model's replies to --chat's conversations, scored against their last (assistant)
    turn; --output writes the replies."""
    from ..data.chat import ChatDataError
    from ..data.lines import write_text
    from ..data.text import DataError
    from ..evaluation.scoring import score_chat
    from ..files import check_output

    if e.output:
        check_output(e.output)
    pipeline = open_model(e)
    if not pipeline.chat:
        raise EvaluationError(
            "--chat needs a chat model (its chat_template.json): this language model has none; "
            "score it with --text"
        )
    search = e.settings(EVALUATE_SEARCH)
    beam = {"beam_size": search["beam_size"]} if search.get("beam_size") else {}
    try:
        scores, replies = score_chat(pipeline, e.chat, e.metric, **beam)
    except (ChatDataError, DataError) as error:
        raise EvaluationError(str(error)) from None
    if e.output:
        write_text(e.output, [" ".join(r.split()) for r in replies])
    print_pair_scores({"-": scores})


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
        Scored("--text", "perplexity", "a language model's perplexity", run=evaluate_perplexity),
        Scored("--chat", "replies", "a chat model's replies to conversations", run=evaluate_chat),
    ),
)
