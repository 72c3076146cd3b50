"""Scoring a model or a Pipeline on a test set: the model-driven side of evaluation, calling the
string metrics of evaluation.metrics. Perplexity's NLL (`model_nll`) is teacher-forced; a
classifier's and a text-to-text model's scores run the Pipeline over a labelled file."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..config import PAIR_METRICS
from ..decoding.greedy import greedy_search
from ..decoding.search.step import inference, pad_rows
from ..model.transformer import DecoderOnly, EncoderDecoder
from .metrics import ClassificationScores, bleu, chrf, classification_scores, perplexity, task_name
from .overlap import rouge


def model_nll(
    model: torch.nn.Module,
    sequences: Sequence[Sequence[int]],
    sources: Sequence[Sequence[int]] | None = None,
    batch_size: int = 32,
) -> tuple[float, int]:
    """Summed NLL (nats) and predicted-token count of token sequences under a model, teacher-forced.

    Decoder-only: each sequence predicts its tokens after the first (start them with <s>).
    Encoder-decoder: sequences are targets for `sources`; the decoder starts from the start
    token and predicts every target token and then </s>.
    """
    if not isinstance(model, EncoderDecoder | DecoderOnly):
        raise ValueError(
            f"{type(model).__name__} has no next-token distribution: perplexity needs an "
            "encoder-decoder or decoder-only model"
        )
    cfg = model.config
    enc_dec = isinstance(model, EncoderDecoder)
    if enc_dec and (sources is None or len(sources) != len(sequences)):
        raise ValueError("an encoder-decoder model needs `sources`, one per target sequence")
    device = next(model.parameters()).device
    total, count = 0.0, 0
    with inference(model):
        for lo in range(0, len(sequences), batch_size):
            rows = [
                torch.as_tensor(list(s), dtype=torch.long) for s in sequences[lo : lo + batch_size]
            ]
            if enc_dec:
                start = torch.tensor([cfg.start_id])
                eos = torch.tensor([cfg.eos_id])
                inputs = [torch.cat([start, r]) for r in rows]
                targets = [torch.cat([r, eos]) for r in rows]
            else:
                inputs, targets = [r[:-1] for r in rows], [r[1:] for r in rows]
            keep = [i for i, t in enumerate(targets) if len(t)]
            if not keep:
                continue
            ids, mask = pad_rows([inputs[i] for i in keep], cfg.pad_id, left=False, device=device)
            tgt, _ = pad_rows([targets[i] for i in keep], cfg.pad_id, left=False, device=device)
            if enc_dec:
                src_rows = [torch.as_tensor(list(sources[lo + i]), dtype=torch.long) for i in keep]
                src, src_mask = pad_rows(src_rows, cfg.pad_id, left=False, device=device)
                logits = model(src, ids, src_mask, mask)
            else:
                logits = model(ids, mask)
            lp = (
                torch.log_softmax(logits.float(), dim=-1).gather(-1, tgt[..., None]).squeeze(-1)
            )  # (B, T)
            total -= float(lp[mask].sum())
            count += int(mask.sum())
    return total, count


def text_perplexity(
    model: torch.nn.Module,
    lines: Sequence[str],
    encode: Callable[[str], list[int]],
    batch_size: int = 32,
) -> float:
    """Perplexity of a language model over lines of text; encode turns a line into ids (with <s>
    first)."""
    nll, n = model_nll(
        model, [encode(line) for line in lines if line.strip()], batch_size=batch_size
    )
    return perplexity(nll, n)


@dataclass
class TextScore:
    """A language model's loss over a text: summed NLL (nats) over the predicted tokens, and the
    characters of the text they stand for."""

    nll: float
    tokens: int
    chars: int

    @property
    def nll_per_token(self) -> float:
        return self.nll / max(self.tokens, 1)

    @property
    def perplexity(self) -> float:
        return perplexity(self.nll, self.tokens)

    @property
    def nll_per_char(self) -> float:
        """Nats per character (bits per character: divide by ln 2)."""
        return self.nll / max(self.chars, 1)

    @property
    def bits_per_char(self) -> float:
        return self.nll_per_char / math.log(2)


def windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """Sliding windows over a stream of n tokens: (begin, end, first scored) each, the window's
    inputs ids[begin:end] predicting ids[begin + 1:end + 1], scored from position `first scored`
    on. Each window moves `stride` positions and scores only what no earlier window did, so
    every token after the first is scored once, with up to window - stride tokens of context
    before the stride it scores (stride = window: blocks side by side)."""
    if not 0 < stride <= window:
        raise ValueError(f"stride {stride} must be in 1..window ({window})")
    out, scored = [], 0
    for begin in range(0, max(n - 1, 0), stride):
        end = min(begin + window, n - 1)
        out.append((begin, end, scored))
        scored = end
        if end == n - 1:
            break
    return out


def stream_nll(
    model: torch.nn.Module,
    ids: Sequence[int],
    window: int,
    stride: int,
    ignore: int | None = None,
    batch_size: int = 16,
) -> tuple[float, int]:
    """Summed NLL (nats) and scored-token count of a decoder-only model over one token stream in
    sliding windows (see `windows`); a target equal to `ignore` (<s>, which only begins a
    document) is not scored."""
    if not isinstance(model, DecoderOnly):
        raise ValueError(f"{type(model).__name__} is not a language model (decoder-only)")
    device = next(model.parameters()).device
    ids_t = torch.as_tensor(list(ids), dtype=torch.long)
    spans = windows(len(ids_t), window, stride)
    total, count = 0.0, 0
    with inference(model):
        for lo in range(0, len(spans), batch_size):
            group = spans[lo : lo + batch_size]
            inputs = [ids_t[b:e] for b, e, _ in group]
            targets = [ids_t[b + 1 : e + 1].clone() for b, e, _ in group]
            for (b, _, first), t in zip(group, targets, strict=True):
                t[: first - b] = -1  # scored by an earlier window
                if ignore is not None:
                    t[t == ignore] = -1
            x, mask = pad_rows(inputs, 0, left=False, device=device)
            y, _ = pad_rows(targets, -1, left=False, device=device)
            logits = model(x, mask)
            keep = y >= 0
            lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, y.clamp(min=0)[..., None])
            total -= float(lp.squeeze(-1)[keep].sum())
            count += int(keep.sum())
    return total, count


def score_text(
    model: torch.nn.Module,
    path,
    tokenizer,
    documents: str = "file",
    window: int | None = None,
    stride: int | None = None,
    batch_size: int = 16,
) -> TextScore:
    """A language model's NLL over a text file read as one stream (data.stream: each document
    <s> ... </s>), in windows of `window` tokens (default: the model's max_positions) moved by
    `stride` (default: window); </s> is scored, <s> (a document's start) is not."""
    from ..data.stream import encode_stream

    cfg = model.config
    chunks = list(encode_stream(path, tokenizer, documents, cfg.bos_id, cfg.eos_id))
    ids = np.concatenate([c for c, _, _ in chunks])
    chars = sum(n for _, n, _ in chunks)
    window = window or cfg.max_positions
    nll, n = stream_nll(model, ids, window, stride or window, cfg.bos_id, batch_size)
    return TextScore(nll, n, chars)


def score_classifier(
    pipeline,
    path,
    on_truncate: Callable[[list[int]], None] | None = None,
) -> tuple[ClassificationScores, list[int]]:
    """A classifier's scores on labelled data, and its predicted label indices: a `label<TAB>text`
    file for a text classifier, a prepared split or a folder of class folders for an image
    classifier. A label the model does not know is a ValueError naming it (and the line, for text);
    texts longer than the model takes are truncated, their file line numbers (1-based) given to
    on_truncate."""
    from ..data.images import load_images
    from ..data.text import iter_labelled

    config = pipeline.model.config
    labels = pipeline.labels
    if config.vision is None:
        if labels is None:
            raise ValueError(
                f"the model has no labels.json: scoring {path} needs a classifier trained here"
            )
        rows = list(iter_labelled(path))
        index = {label: i for i, label in enumerate(labels)}
        for line, label, _ in rows:
            if label not in index:
                raise ValueError(
                    f"{path} line {line + 1}: label {label!r} is not one of the model's "
                    f"({', '.join(labels)})"
                )
        cut = (
            None
            if on_truncate is None
            else (lambda numbers: on_truncate([rows[n - 1][0] + 1 for n in numbers]))
        )
        results = pipeline.classify([text for _, _, text in rows], top_k=1, on_truncate=cut)
        gold = [index[label] for _, label, _ in rows]
    else:
        labels = labels or [str(i) for i in range(config.n_classes)]
        data = load_images(path, config.vision.channels, config.vision.image_size)
        index = {label: i for i, label in enumerate(labels)}
        unknown = [name for name in data.names if name not in index]
        if unknown:
            raise ValueError(
                f"{path}: label {unknown[0]!r} is not one of the model's ({', '.join(labels)})"
            )
        gold = [index[data.names[i]] for i in data.labels.tolist()]
        results = pipeline.classify_images(data.images)
    predicted = [index[r[0][0]] for r in results]
    return classification_scores(predicted, gold, labels), predicted


TASK_SHARE = 0.05
"""score_pairs: an input's text before its first ": " names its task when at least this share of
the file's inputs start with it (a prefix such as "summarize: "); other inputs are task "-", so
text that holds ": " by chance is not cut into tasks."""


def score_pairs(
    pipeline,
    path,
    on_truncate: Callable[[list[int]], None] | None = None,
    metric: str = "bleu",
    **decode,
) -> tuple[dict[str, dict[str, float]], list[str]]:
    """A text-to-text model on an `input<TAB>target` file, per task (task_name of each input, see
    TASK_SHARE) and
    over all lines: {task: {"lines", ..., "exact"}}, and the outputs in file order. metric "bleu"
    gives "bleu" and "chrf", "rouge" gives "rouge1", "rouge2" and "rougeL" (overlap.rouge); exact
    is the share of outputs equal to the target (the accuracy of a task whose targets are labels).
    Inputs longer than the model takes are truncated, their file line numbers (1-based) given to
    on_truncate."""
    from ..data.text import iter_pairs

    if metric not in PAIR_METRICS:
        raise ValueError(f"metric {metric!r}: give one of {', '.join(PAIR_METRICS)}")
    rows = list(iter_pairs(path))
    cut = (
        None
        if on_truncate is None
        else (lambda numbers: on_truncate([rows[n - 1][0] + 1 for n in numbers]))
    )
    outputs = pipeline.translate([x for _, x, _ in rows], on_truncate=cut, **decode)
    names = [task_name(x) for _, x, _ in rows]
    counts = Counter(names)
    tasks = {name for name, n in counts.items() if n >= TASK_SHARE * len(rows)}
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name if name in tasks else "-", []).append(i)
    if len(groups) > 1:
        groups["all"] = list(range(len(rows)))
    scores = {}
    for task, indices in groups.items():
        hyps, refs = [outputs[i] for i in indices], [rows[i][2] for i in indices]
        scores[task] = {"lines": len(indices), **pair_scores(hyps, refs, metric)}
    return scores, outputs


def pair_scores(hypotheses: list[str], references: list[str], metric: str) -> dict[str, float]:
    """{"bleu", "chrf"} or {"rouge1", "rouge2", "rougeL"}, and "exact" (% equal after strip)."""
    if metric == "rouge":
        scores = rouge(hypotheses, references)
    else:
        scores = {
            "bleu": bleu(hypotheses, references).score,
            "chrf": chrf(hypotheses, references).score,
        }
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references, strict=True))
    return {**scores, "exact": 100.0 * exact / max(len(references), 1)}


def score_chat(
    pipeline, path: str, metric: str = "bleu", **decode
) -> tuple[dict[str, float], list[str]]:
    """A chat model's replies to held-out conversations (JSONL, data/chat.py), each conversation
    answered up to its last turn (the assistant's: the reference), greedy unless `decode` says
    otherwise; returns pair_scores (with "lines") and the replies."""
    from ..data.chat import read_conversations
    from ..data.text import DataError

    conversations = read_conversations(path)
    for number, messages in enumerate(conversations, 1):
        if messages[-1]["role"] != "assistant":
            raise DataError(
                f"{path} conversation {number} does not end with the assistant's turn: the last "
                "turn is the reference its reply is scored against"
            )
    decode = {"temperature": 0.0, **decode}
    replies = [
        pipeline.generate(messages[:-1], chat=True, **decode).strip() for messages in conversations
    ]
    references = [messages[-1]["content"] for messages in conversations]
    return {"lines": len(replies), **pair_scores(replies, references, metric)}, replies


@torch.no_grad()
def greedy_scores(
    model: torch.nn.Module,
    sources: Sequence[Sequence[int]],
    references: Sequence[str],
    decode: Callable[[list[int]], str],
    max_len_a: float,
    max_len_b: int,
    batch_tokens: int,
) -> tuple[float, float]:
    """(corpus BLEU 0-100, share of outputs equal to their reference) of greedy output.

    sources: encoded source ids, no special tokens; references: one line each; decode turns output
    ids into text. Sources of similar length are decoded together, batch_tokens // (the longest
    source) at a time."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    rows = max(1, batch_tokens // max(len(sources[order[-1]]), 1))
    hypotheses = [""] * len(sources)
    for start in range(0, len(order), rows):
        batch = order[start : start + rows]
        ids = greedy_search(
            model, [sources[i] for i in batch], max_len_a=max_len_a, max_len_b=max_len_b
        )  # (B, T), no <s>/</s>
        for i, row in zip(batch, ids.tolist(), strict=True):
            hypotheses[i] = decode(row).strip()
    exact = sum(h == r.strip() for h, r in zip(hypotheses, references, strict=True)) / len(sources)
    return bleu(hypotheses, references).score, exact


def covered_verses(start: int, end: int, verse_starts: Sequence[int], length: int) -> set[int]:
    """The verses (numbered from 1) whose characters overlap [start, end): verse k spans
    [verse_starts[k - 1], verse_starts[k]) (the last to the context's end, `length`)."""
    if start >= end:
        return set()
    bounds = [*verse_starts, length]
    return {k + 1 for k in range(len(verse_starts)) if start < bounds[k + 1] and bounds[k] < end}


def score_squad(pipeline, path, **decode) -> tuple[dict[str, float], list]:
    """An extractive QA model on a SQuAD-format file: {"questions", "exact_match", "f1"} (SQuAD's
    definitions, times 100) and, when the file gives verses (`transformer data commentary-qa`),
    "verse_f1": the mean over questions of the F1 of the verses the answer overlaps against the
    gold verses; and the answers (data.squad.Answer) in file order."""
    from ..data.squad import read_squad
    from .overlap import set_f1, squad_scores

    questions = read_squad(path)
    # a sentence head reads the file's verses as its sentences, where it gives them
    starts = [q.verse_starts for q in questions] if pipeline.model.config.sentence_head else None
    answers = pipeline.answer(
        [q.question for q in questions], [q.context for q in questions], starts, **decode
    )
    scores = {
        "questions": len(questions),
        **squad_scores([a.text for a in answers], [[t for t, _ in q.answers] for q in questions]),
    }
    if all(q.verses and q.verse_starts for q in questions):
        f1 = [
            set_f1(
                covered_verses(a.start, a.end, q.verse_starts, len(q.context)),
                set(range(q.verses[0], q.verses[1] + 1)),
            )
            for a, q in zip(answers, questions, strict=True)
        ]
        scores["verse_f1"] = 100 * sum(f1) / len(f1)
    return scores, answers
