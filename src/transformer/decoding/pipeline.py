"""Text in, text out: a model directory loaded with its tokenizer(s) and decoding defaults.

`Pipeline.load(dir)` is what `transformer translate`, `generate` and `evaluate` use:
`translate(lines)` for encoder-decoder models, `generate(prompt)` for language models,
`classify(lines)` for encoder classifiers (a text is fed as [CLS] text [SEP]).
Sources are encoded without special tokens (as in training); prompts start with <s> when the
model's decoding defaults say so (our language models are trained that way; imported models
follow their tokenizer).

Over-long input (truncate=True, the default): one bad line must not stop a 100,000-line job.
A source longer than the encoder's max_positions keeps its first max_positions tokens; a prompt
keeps its end (the <s> it starts with stays), cut so that the requested new tokens fit in the
position table, but never to less than half the table. What was cut is reported to the
callback `on_truncate` (translate: the 1-based numbers of the lines cut; generate: one line of
text saying what was kept), or as a Python warning when no callback is given.
truncate=False raises PipelineError instead.

`open_pipeline` is how a command opens one: on the device it was given ("auto": the GPU when
torch sees one), its "auto" precision's choice said on stderr, and, where the command runs one
task, the model checked to be that task's.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

import torch

from ..config import DecodeConfig, unknown_key_error
from ..data.lines import note
from ..model.quantize import set_inference_precision
from ..model.transformer import Model
from ..model_dir import ModelDir
from ..runtime.precision import PrecisionChoice, inference_precision
from ..tasks import Task, model_task
from ..tasks.base import wrong_task
from .chat import apply_chat_template
from .generate import fit_prompt, generate, prompt_ids
from .inputs import PipelineError
from .search.batch import search
from .search.compiled import compile_steps
from .translate import encode_sources, translate


@dataclass
class Pipeline:
    """A model with its tokenizer(s) and decoding defaults."""

    model: Model
    source_tokenizer: object
    target_tokenizer: object
    decode: DecodeConfig
    chat: dict | None = None
    """{"chat_template", "bos_token", "eos_token"} when the model came with a chat template."""
    precision: PrecisionChoice = PrecisionChoice("fp32", "as trained")
    """The precision the model runs in, and why (see Pipeline.load)."""
    labels: list[str] | None = None
    """A classifier's class names (labels.json)."""
    special_tokens: dict | None = None
    """An encoder's special tokens by role (special_tokens.json)."""
    speech: dict | None = None
    """A speech model's decoder prompt and suppressed token ids (speech.json)."""
    pixels: object | None = None
    """An image generator's token layout (pixels.json; transformer.data.pixels.ImageTokens)."""
    languages: dict[str, str] | None = None
    """A translation model's {"source": "es", "target": "en"} (languages.json)."""
    trained_for: str | None = None
    """The name of the task that trained it (task.json; None: its config says which runs it)."""

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        device: str | torch.device = "cpu",
        precision: str | None = None,
        compile: str | None = None,
    ) -> Pipeline:
        """Load a model directory. precision: fp32, bf16, int8 (CPU) or auto; None = decode.json's
        (default fp32). compile: "on" decodes a language model's prompts through one compiled step
        (decode.compile; where it cannot be compiled here, a warning says why and decoding stays
        eager); None = decode.json's (default off)."""
        files = ModelDir.read(path, device)
        model, cfg, pixels = files.model, files.model.config, files.pixels
        if model_task(cfg, pixels is not None, files.task).tokenizers:
            source, target = files.require_tokenizers(path)
        else:  # pixels in or out: no text tokenizer
            source = target = None
        decode = files.decode
        choice = inference_precision(
            precision or decode.precision, device, cfg.d_model, cfg.d_ff, cfg.vocab_size
        )
        model = set_inference_precision(model, choice.precision)
        if compile is not None:
            decode = replace(decode, compile=compile)  # checked as decode.compile
        if decode.compile == "on":
            reason = compile_steps(model)
            if reason is not None:
                warnings.warn(f"decoding stays eager: {reason}", stacklevel=2)
        return cls(
            model,
            source,
            target,
            decode,
            files.chat,
            choice,
            files.labels,
            files.special_tokens,
            files.speech,
            pixels,
            files.languages,
            files.task,
        )

    @property
    def task(self) -> Task:
        """The task this model runs (transformer.tasks' table)."""
        return model_task(self.model.config, self.pixels is not None, self.trained_for)

    def __call__(self, *inputs, **settings):
        """Run the model's task on inputs: its Task's inference entry (a translation model
        translates lines, a language model continues prompts, a classifier labels texts or
        images, ...); settings are that entry's (decoding settings by name)."""
        task = self.task
        if task.infer is None:
            raise PipelineError(wrong_task(task, "pipeline(inputs)"))
        return task.infer(self, *inputs, **settings)

    def expect(self, command: str) -> None:
        """PipelineError unless this model's task is run by `command` (a Pipeline method or CLI
        command: "translate", "generate", "classify", ...)."""
        task = self.task
        if task.command != command:
            raise PipelineError(wrong_task(task, command))

    def batch_size(self, given: int | None = None) -> int:
        """Inputs run together: `given` (checked as decode.batch_size), else decode.json's, else
        the task's own (transformer.tasks)."""
        s = self.decode if given is None else self.settings(batch_size=given)
        return s.batch_size or self.task.batch_size or 1

    @property
    def max_source_tokens(self) -> int | None:
        return None if self.model.config.positional == "none" else self.model.config.max_positions

    def settings(self, **decode) -> DecodeConfig:
        """The model's decoding defaults with `decode` overrides (names of DecodeConfig's fields),
        validated."""
        valid = [f.name for f in fields(DecodeConfig)]
        for key in decode:
            if key == "precision":
                raise PipelineError(
                    "precision is set when the model is loaded: Pipeline.load(path, precision=...)"
                )
            if key not in valid:
                raise unknown_key_error("decode", key, valid)
        return replace(self.decode, **decode)

    def encode_sources(
        self, lines: list[str], truncate: bool = True
    ) -> tuple[list[list[int]], list[int]]:
        """Source lines -> token ids, and the 1-based numbers of the lines cut to max_positions."""
        return encode_sources(self, lines, truncate)

    def translate(
        self,
        lines: list[str],
        batch_tokens: int = 4000,
        truncate: bool = True,
        on_truncate: Callable[[list[int]], None] | None = None,
        generator: torch.Generator | None = None,
        **decode,
    ) -> list[str] | list[list[str]]:
        """Translate each line (output in input order): a list (or any iterable) of str, each one
        line; one bare str is a TypeError. `decode` overrides the model's defaults (beam_size,
        length_penalty, length_penalty_kind, max_len_a, max_len_b, min_len, n_best,
        no_repeat_ngram_size, repetition_penalty); beam_size 1 is greedy. With n_best > 1 each
        entry is a list of the n best, best first. With a generator each translation is sampled
        instead (temperature, top_k, top_p; up to max_len_a x the batch's longest source +
        max_len_b tokens), one per line. Lines longer than the model takes are truncated (see the
        module's rules)."""
        return translate(self, lines, batch_tokens, truncate, on_truncate, generator, **decode)

    def classify(
        self,
        lines: list[str],
        top_k: int = 1,
        batch_tokens: int = 4000,
        truncate: bool = True,
        on_truncate: Callable[[list[int]], None] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The top_k (label, probability) pairs of each line, most likely first (top_k 0: all
        labels). A text longer than the encoder takes keeps its first max_positions - 2 tokens
        ([CLS] and [SEP] take the rest); the 1-based numbers of such lines go to on_truncate (else a
        warning); truncate=False raises PipelineError instead. See transformer.decoding.classify."""
        from .classify import classify_texts

        return classify_texts(self, lines, top_k, batch_tokens, truncate, on_truncate)

    def classify_images(
        self, images, top_k: int = 1, batch_size: int | None = None
    ) -> list[list[tuple[str, float]]]:
        """The top_k (label, probability) pairs of each image, most likely first (top_k 0: all
        labels). images: uint8 (N, C, H, W) pixels 0-255, or a list of image files (read as
        model.vision says). See transformer.decoding.classify."""
        from .classify import classify_images

        return classify_images(self, images, top_k, self.batch_size(batch_size))

    def embed_texts(self, texts: list[str], batch_size: int | None = None) -> torch.Tensor:
        """A dual encoder's (CLIP's) unit embeddings (N, E) of N texts, lowercased as training
        lowercases the names. See transformer.decoding.embed."""
        from .embed import embed_texts

        return embed_texts(self, texts, self.batch_size(batch_size))

    def embed_images(self, images, batch_size: int | None = None) -> torch.Tensor:
        """A dual encoder's (CLIP's) unit embeddings (N, E) of N images: uint8 (N, C, H, W) pixels
        0-255 (fitted to the model's channels and size) or a list of square image files. See
        transformer.decoding.embed."""
        from .embed import embed_images

        return embed_images(self, images, self.batch_size(batch_size))

    def generate_images(
        self,
        n: int = 16,
        label: str | None = None,
        text: str | None = None,
        seed: int | None = None,
        **decode,
    ) -> torch.Tensor:
        """n images sampled from an image generator, uint8 (n, channels, H, W): of a class (label),
        of a name (text), or unconditional. `decode` overrides temperature, top_k, top_p and
        guidance_scale (classifier-free guidance towards the label or text; an unconditional
        sample takes none)."""
        from .images import generate_images

        return generate_images(self, n, label, text, seed, **decode)

    def detect(self, images, threshold: float | None = None, batch_size: int | None = None) -> list:
        """The objects in each image, most likely first: a list per image of DetectedObject
        (label, score, box (x0, y0, x1, y1) in the image's pixels) whose probability is at least
        threshold. images: image files (any size; resized to the model's), or uint8 (C, H, W)
        arrays. See transformer.decoding.detect."""
        from .detect import detect_images

        given = {"threshold": threshold, "batch_size": batch_size}
        s = self.settings(**{k: v for k, v in given.items() if v is not None})
        return detect_images(self, images, s.threshold, s.batch_size or self.task.batch_size)

    def answer(self, questions, contexts, sentences=None, **decode) -> list:
        """The answer span of each question in its context (extractive question answering with a
        span head, or the best run of sentences with a sentence head): a question and a context
        (strings), or lists of them (one context for all the questions, or one each). sentences:
        a sentence-head model's sentence starts (character offsets; one list for all contexts or
        one each; default: cut at sentence ends). decode: answer_window (a sentence head's row
        length), answer_stride, max_answer_tokens. Returns an Answer (text, start, end, score) or
        a list of them. See transformer.decoding.answer."""
        from .answer import answer

        return answer(self, questions, contexts, sentences, **decode)

    def caption(self, images, batch_size: int | None = None, **decode) -> list[str]:
        """The caption of each image of an image captioner (objective caption): images are uint8
        (N, C, H, W) pixels 0-255 at the model's shape, or image files (any size: converted and
        resized to the model's). decode overrides the model's defaults (beam_size 1 = greedy).
        See transformer.decoding.caption."""
        from .caption import caption_images

        return caption_images(self, images, self.batch_size(batch_size), **decode)

    def transcribe(self, audio, batch_size: int | None = None, **decode) -> list[str]:
        """The transcript of each audio input: WAV file paths, or 1-D float tensors of 16 kHz
        samples (a single one gives a list of one). Audio longer than the model's window (30 s for
        Whisper) is cut into windows whose transcripts are joined. decode overrides the model's
        defaults (beam_size 1 = greedy). See transformer.decoding.transcribe."""
        from .transcribe import transcribe

        return transcribe(self, audio, self.batch_size(batch_size), **decode)

    def search(
        self,
        sources: list[list[int]] | torch.Tensor,
        s: DecodeConfig,
        return_attention: bool = False,
        src_mask: torch.Tensor | None = None,
        **speech,
    ):
        """Token ids in, ids out under settings s: greedy when s.beam_size is 1, else beam search
        (with return_attention, also the attention weights, as greedy_search/beam_search return
        them). A speech model's sources are log-mel features with their frame mask (src_mask), and
        speech holds prefix, suppress_tokens and begin_suppress_tokens."""
        return search(self.model, sources, s, return_attention, src_mask, **speech)

    def prompt_ids(self, prompt: str | list[dict], chat: bool = False) -> list[int]:
        """A prompt's token ids: the chat template applied when chat=True (a prompt string is one
        user turn; a list of {"role", "content"} is the conversation so far), <s> first when the
        defaults say so."""
        return prompt_ids(self, prompt, chat)

    def apply_chat_template(self, messages: list[dict]) -> str:
        """Render the model's chat template (Jinja, as Hugging Face does) with a generation
        prompt."""
        return apply_chat_template(self.chat, messages)

    def fit_prompt(self, ids: list[int], max_new_tokens: int, truncate: bool = True) -> list[int]:
        """The end of a prompt that leaves room for max_new_tokens (at least half the table stays
        the prompt's); a leading <s> is kept. Unchanged when it fits or the model has no position
        table."""
        return fit_prompt(self, ids, max_new_tokens, truncate)

    def generate(
        self,
        prompt: str | list[dict],
        chat: bool = False,
        seed: int | None = None,
        truncate: bool = True,
        on_truncate: Callable[[str], None] | None = None,
        on_token: Callable[[int], None] | None = None,
        **decode,
    ) -> str:
        """Continue a prompt (or answer it, with chat=True: a string is one user turn, a list of
        {"role", "content"} messages the conversation to answer). `decode` overrides the defaults
        (max_new_tokens, temperature, top_k, top_p, no_repeat_ngram_size, repetition_penalty;
        beam_size > 1 uses beam search, temperature 0 is greedy: see transformer.decoding.sampling).
        Returns the new text only. An over-long prompt keeps its end (see the module's rules);
        sampling goes on past max_positions from the last half of the context
        (generate.sample_long), beam search stops there.
        on_token(id) is called with each new token as it is chosen (</s> not included), to stream
        the output; an exception it raises stops the decoding and propagates. Beam search has no
        tokens to stream before it ends."""
        return generate(self, prompt, chat, seed, truncate, on_truncate, on_token, **decode)


def pick_device(device: str, threads: int | None) -> str:
    """The device to run on ("auto": the GPU when torch sees one, else the CPU), with torch's CPU
    threads set when given."""
    if threads is not None:
        torch.set_num_threads(threads)
    if device == "cuda" and not torch.cuda.is_available():
        raise PipelineError(
            "--device cuda was asked for, but torch sees no CUDA GPU: use --device cpu (or auto)"
        )
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def open_pipeline(
    model_dir: str,
    device: str,
    threads: int | None,
    precision: str | None,
    command: str,
    task: Task | None = None,
    compile: str | None = None,
) -> Pipeline:
    """A model directory as a Pipeline on `device` in `precision` (None: its decode.json's);
    "auto" says on stderr what it chose. With `task` (a record of transformer.tasks), the model
    must run it: else one line naming what it is and the command that runs it."""
    pipeline = Pipeline.load(
        model_dir, pick_device(device, threads), precision=precision, compile=compile
    )
    if (precision or pipeline.decode.precision) == "auto":
        note(command, f"precision {pipeline.precision.describe()}")
    if task is not None and pipeline.task is not task:
        raise PipelineError(
            f"{model_dir} is not {task.described}; " + wrong_task(pipeline.task, command)
        )
    return pipeline
