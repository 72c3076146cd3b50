"""Attention heatmaps: which source (or earlier) tokens each output token attended to (§3.2, Figures
3-5).

`attention_map(pipeline, text)` decodes one text with greedy or beam search and returns one
layer's weights with a readable label per token; `plot_attention` draws a (T, S) matrix, or
one panel per head for (H, T, S), as a PNG with a colour bar.

Legend (model/__init__.py): H heads, T output tokens (rows, queries), S source / key tokens
(columns).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from ..config import ATTENTION_KINDS as KINDS
from ..decoding.inputs import PipelineError
from ..decoding.search.step import inference
from ..model.transformer import DecoderOnly, EncoderDecoder
from .common import figure_format, save_figure


@dataclass
class AttentionMap:
    """One layer's attention weights while decoding one text, with a label per row and column."""

    weights: torch.Tensor
    """(T, S) for one head or the mean over heads, (H, T, S) for all heads; float32 on the CPU."""
    rows: list[str]
    """Query labels: the output token each row's query predicted (kind "encoder": the source
    tokens)."""
    columns: list[str]
    """Key labels: the source ("cross", "encoder"), or the decoder's inputs ("self")."""
    source: list[str]
    """The source pieces (a language model: the prompt's, <s> included when the model adds it)."""
    output: list[str]
    """The output pieces, without </s> (empty for kind "encoder")."""
    output_text: str
    """The decoded output (empty for kind "encoder")."""
    kind: str
    """"cross" (decoder over source), "self" (decoder over its inputs) or "encoder" (source over
    source)."""
    layer: int
    """The layer, counted from 0."""
    n_layers: int
    """Layers in the stack the weights come from (the decoder's, or the encoder's for kind
    "encoder")."""
    head: int | str
    """A head counted from 0, "mean" or "all"."""
    n_heads: int
    """Attention heads per layer."""

    @property
    def title(self) -> str:
        name = {
            "cross": "cross-attention",
            "self": "decoder self-attention",
            "encoder": "encoder self-attention",
        }
        heads = {"mean": f"mean of {self.n_heads} heads", "all": f"{self.n_heads} heads"}.get(
            self.head, f"head {self.head}"
        )
        return f"{name[self.kind]}, layer {self.layer} of 0-{self.n_layers - 1}, {heads}"


def _byte_decoder() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2's: one printable character per byte) mapped back to
    bytes."""
    byte_values = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(byte_values)
    for b in range(256):
        if b not in byte_values:  # control characters, space, ...: moved past 255
            chars.append(256 + len(byte_values) - 188)
            byte_values.append(b)
    return {chr(c): b for b, c in zip(byte_values, chars, strict=True)}


def token_pieces(tokenizer, ids: list[int]) -> list[str]:
    """A readable label per token id: the text it stands for, without its leading space.

    Special tokens show by name (<s>, </s>); a token of spaces only as ␣, a newline as \\n; a
    byte-level piece of a multi-byte character as its bytes (\\xe6), so no label is a bare
    `Ġword` or a replacement character.
    """
    table = _byte_decoder()
    labels = []
    for i in ids:
        token = tokenizer.id_to_token(int(i))
        text = tokenizer.decode([int(i)])  # skips special tokens
        if token is None:
            label = f"<id {int(i)}>"
        elif not text:
            label = token
        elif "\ufffd" in text and all(c in table for c in token):
            label = bytes(table[c] for c in token).decode("utf-8", errors="backslashreplace")
        else:
            label = text
        label = label.strip() or label.replace(
            " ", "␣"
        )  # " word" -> "word"; a blank token stays visible
        labels.append(label.replace("\n", "\\n").replace("\t", "\\t"))
    return labels


def checked_index(value: int, count: int, what: str, where: str, other: str = "") -> int:
    """A 0-based index (negative counts from the end) checked against count; returned
    non-negative."""
    if not isinstance(value, int) or isinstance(value, bool) or not -count <= value < count:
        raise PipelineError(
            f"{what} {value!r} is out of range: the {where} has {count} {what}s "
            f"(0 to {count - 1}, or -1 for the last){other}"
        )
    return value % count


def select_head(weights: torch.Tensor, head: int | str) -> torch.Tensor:
    """(H, T, S) -> (T, S) for a head or the mean over heads; unchanged for "all"."""
    if head == "all":
        return weights
    if head == "mean":
        return weights.mean(0)
    return weights[head]


def _source(pipeline, text: str, kind: str | None) -> tuple[str, list[int], list[str]]:
    """(kind, with its default; the text's ids as the model reads them; their token labels)."""
    model = pipeline.model
    if isinstance(model, EncoderDecoder):
        kind = kind or "cross"
        src = pipeline.source_tokenizer.encode(text)
        limit = pipeline.max_source_tokens
        if limit is not None and len(src) > limit:
            raise PipelineError(
                f"the text has {len(src)} tokens, more than the model's max_positions={limit}: "
                "give a shorter sentence"
            )
        source = token_pieces(pipeline.source_tokenizer, src)
    elif isinstance(model, DecoderOnly):
        kind = kind or "self"
        if kind != "self":
            raise PipelineError(
                f"a language model has only decoder self-attention: kind={kind!r} needs an "
                "encoder-decoder model; use kind='self'"
            )
        src = pipeline.prompt_ids(text)
        source = token_pieces(pipeline.target_tokenizer, src)
    else:
        raise PipelineError(
            f"{type(model).__name__} does not generate text: attention maps need an "
            "encoder-decoder or decoder-only model"
        )
    return kind, src, source


def _decoded(
    pipeline, src: list[int], kind: str, layer: int, beam_size: int | None, decode: dict
) -> tuple[list[int], list[int], torch.Tensor]:
    """Decode src as attention_map says: (output ids, key ids, that layer's weights (H, T, S))."""
    model, cfg = pipeline.model, pipeline.model.config
    lm = isinstance(model, DecoderOnly)
    s = replace(pipeline.decode, **{**decode, "n_best": 1})
    if lm:  # as Pipeline.generate decodes: new tokens bounded by max_new_tokens, greedy by default
        s = replace(
            s,
            max_len_a=0,
            max_len_b=s.max_new_tokens,
            min_len=decode.get("min_len", 0),
            beam_size=1,
        )
    if beam_size is not None:
        s = replace(s, beam_size=beam_size)
    out, att = pipeline.search([src], s, return_attention=True)
    out_ids = out[0].tolist()  # one row: no padding
    t = len(out_ids)
    if kind == "cross":
        keys = src
    else:
        keys = ((src if lm else [cfg.start_id]) + out_ids[:-1]) if t else []
    weights = att[kind][0, layer][:, :t, : len(keys)]  # (H, T, S)
    return out_ids, keys, weights


def attention_map(
    pipeline,
    text: str,
    layer: int = -1,
    kind: str | None = None,
    head: int | str = "mean",
    beam_size: int | None = None,
    **decode,
) -> AttentionMap:
    """Decode `text` and return one layer's attention weights with token labels.

    kind: "cross" (default for translation models), "self" (the decoder's self-attention; the
    only kind, and the default, for language models) or "encoder" (the encoder's self-attention
    over the source, as in the paper's Figures 3-5; no decoding). layer and head count from 0
    (-1 = the last); head "mean" averages the heads, "all" keeps them (H, T, S).
    beam_size: 1 is greedy; default the model's decode.json for translation, greedy for language
    models. `decode` overrides other decoding defaults (max_len_b, min_len, length_penalty, ...).

    The weights are the decoding's own (`greedy_search` / `beam_search` with return_attention):
    row t is the query that predicted output token t. Like the decoding's output, the rows stop
    before </s>: the step that predicted </s> has no row. Columns are the real tokens only: the
    source ("cross"), or <s> + the output but its last token (a language model: the prompt +
    the output but its last token) for "self".
    """
    model, cfg = pipeline.model, pipeline.model.config
    if kind is not None and kind not in KINDS:
        raise PipelineError(f"kind={kind!r} is not one of {', '.join(KINDS)}")
    kind, src, source = _source(pipeline, text, kind)
    if not src:
        raise PipelineError("the text is empty: give a sentence to decode")
    where = "encoder" if kind == "encoder" else "decoder"
    n_layers = len(getattr(model, where).layers)
    layer = checked_index(layer, n_layers, "layer", where)
    if head not in ("mean", "all"):
        head = checked_index(head, cfg.n_heads, "head", "model", ", or 'mean' or 'all'")

    if kind == "encoder":
        with inference(model):
            ids = torch.tensor([src], device=next(model.parameters()).device)
            weights = model.encode(ids, need_weights=True)[2][layer][0]  # (H, S, S)
        return AttentionMap(
            weights=select_head(weights.float().cpu(), head),
            rows=source,
            columns=source,
            source=source,
            output=[],
            output_text="",
            kind=kind,
            layer=layer,
            n_layers=n_layers,
            head=head,
            n_heads=cfg.n_heads,
        )

    out_ids, keys, weights = _decoded(pipeline, src, kind, layer, beam_size, decode)
    tok = pipeline.target_tokenizer
    output = token_pieces(tok, out_ids)
    columns = source if kind == "cross" else token_pieces(tok, keys)
    return AttentionMap(
        weights=select_head(weights.float().cpu(), head),
        rows=output,
        columns=columns,
        source=source,
        output=output,
        output_text=tok.decode(out_ids).strip(),
        kind=kind,
        layer=layer,
        n_layers=n_layers,
        head=head,
        n_heads=cfg.n_heads,
    )


def plot_attention(
    weights,
    x_labels: list[str],
    y_labels: list[str],
    out: str | os.PathLike,
    title: str | None = None,
) -> Path:
    """Write a heatmap of (T, S) weights, or one panel per head for (H, T, S), with a colour bar.

    Rows are queries (y_labels, e.g. output tokens), columns keys (x_labels, e.g. source tokens).
    The format follows out's suffix (.png, .svg, .pdf); the file is written atomically.
    """
    w = torch.as_tensor(weights).detach().float().cpu()
    if w.dim() not in (2, 3):
        raise ValueError(
            f"weights must be a (T, S) matrix or (H, T, S) per head; got shape {tuple(w.shape)}"
        )
    panels = w[None] if w.dim() == 2 else w  # (H, T, S)
    _, t, s = panels.shape
    if panels.numel() == 0:
        raise ValueError(
            f"the weights are empty (shape {tuple(w.shape)}): nothing to plot "
            "(did the model produce no output tokens?)"
        )
    if len(x_labels) != s:
        raise ValueError(
            f"x_labels has {len(x_labels)} labels but the weights have {s} columns: give one "
            "label per column"
        )
    if len(y_labels) != t:
        raise ValueError(
            f"y_labels has {len(y_labels)} labels but the weights have {t} rows: give one label "
            "per row"
        )
    figure_format(out)  # before the work

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = panels.shape[0]
    ncols = 1 if n == 1 else 2 if n <= 4 else 4  # 4 heads: 2x2; 8 (the paper's): 4x2
    nrows = -(-n // ncols)
    cell = max(0.12, min(0.32, 12 / max(s, t)))  # inches per token: smaller for long sentences
    font = max(4.0, min(8.0, cell * 25))
    fig, axes = plt.subplots(
        nrows,
        ncols,
        squeeze=False,
        layout="constrained",
        dpi=110,
        figsize=(ncols * (1.4 + cell * s) + 1.0, nrows * (1.2 + cell * t) + 0.6),
    )
    vmax = max(float(panels.max()), 1e-9)  # one colour scale for every panel
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.axis("off")
            continue
        image = ax.imshow(
            panels[i].numpy(),
            cmap="viridis",
            vmin=0.0,
            vmax=vmax,
            aspect="auto",
            interpolation="nearest",
        )
        ax.set_xticks(range(s), x_labels, rotation=90, fontsize=font)
        ax.set_yticks(range(t), y_labels, fontsize=font)
        ax.tick_params(length=0)
        if n > 1:
            ax.set_title(f"head {i}", fontsize=font + 1)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title, fontsize=9)
    return save_figure(fig, out)
