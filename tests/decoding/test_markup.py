"""Pipeline.translate with a model trained with data.protect_markup: whatever the search returns
(slot tokens dropped, repeated, reordered, invented), every placeholder and tag of the input comes
out exactly once, in greedy/beam, n-best and sampled translations; keep_markup=False and models
without slot tokens read the line as it is."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import transformer as T
from transformer.config import DecodeConfig, cpu_tiny
from transformer.data.markup import span_texts
from transformer.data.tokenizer import train_bpe, with_slot_tokens
from transformer.decoding import translate as translate_module
from transformer.decoding.pipeline import Pipeline

TEXTS = ["Press the button to save the file", "Open the window and close it"] * 20
LINES = [
    "Pulsa <b>%s</b> para guardar %d archivos",
    "Abre {name} en https://example.org/x &amp; sal",
    "sin marcas",
    "",
]
SCRIPT = {  # what the search "returns" for each line, slot tokens mangled
    LINES[0]: "Press ｟3｠ ｟3｠ to ｟9｠ save ｟1｠ files",  # %s, %d dropped; </b> twice; ｟9｠ unknown
    LINES[1]: "｟4｠ Open ｟2｠ ｟1｠",  # reordered, ｟3｠ (the URL) dropped
    LINES[2]: "no marks ｟1｠",  # a slot the line does not have
}


def pipeline(protects: bool = True) -> Pipeline:
    tok = train_bpe(TEXTS, vocab_size=300, min_frequency=1)
    tok = with_slot_tokens(tok) if protects else tok
    torch.manual_seed(0)
    model = T.build_model(cpu_tiny(vocab_size=tok.vocab_size, max_positions=64))
    return Pipeline(model.eval(), tok, tok, DecodeConfig(beam_size=2, max_len_b=8))


def scripted_ids(p: Pipeline, masked_sources: list[list[int]], n: int) -> torch.Tensor:
    """(B, T) or (B, n, T) ids of SCRIPT's outputs for these encoded (masked) sources."""
    rows = []
    for ids in masked_sources:
        restored = restore_line(p, ids)
        rows.append([p.target_tokenizer.encode(SCRIPT.get(restored, "x"))] * n)
    width = max(len(r) for row in rows for r in row)
    padded = [[r + [0] * (width - len(r)) for r in row] for row in rows]
    ids = torch.tensor(padded)
    return ids if n > 1 else ids[:, 0]


def restore_line(p: Pipeline, ids: list[int]) -> str:
    """Which LINES entry a masked source is (its text, slots put back)."""
    masked = p.source_tokenizer.decode(ids)
    for line in LINES:
        if translate_module.mask_lines(p, [line], p.decode)[0][0] == masked:
            return line
    return masked


def every_span_once(line: str, output: str) -> bool:
    return Counter(span_texts(output)) == Counter(span_texts(line))


def test_every_placeholder_comes_out_once_whatever_the_search_returns(monkeypatch):
    p = pipeline()
    seen = []

    def search(sources, s, *args, **kwargs):
        seen.extend(p.source_tokenizer.decode(ids) for ids in sources)
        return scripted_ids(p, sources, 1)

    monkeypatch.setattr(p, "search", search)
    outputs = p.translate(LINES)
    assert "Pulsa ｟1｠｟2｠｟3｠ para guardar ｟4｠ archivos" in seen  # the model read it masked
    assert outputs[3] == ""
    for line, output in zip(LINES, outputs, strict=True):
        assert every_span_once(line, output), (line, output)
    assert outputs[0] == "Press </b> %d to save <b>%s files"
    assert outputs[2] == "no marks"


def test_n_best_and_sampling_restore_every_hypothesis(monkeypatch):
    p = pipeline()
    monkeypatch.setattr(p, "search", lambda sources, s, *a, **k: scripted_ids(p, sources, s.n_best))
    for line, hyps in zip(LINES, p.translate(LINES, n_best=2, beam_size=2), strict=True):
        assert len(hyps) == (2 if line else 0) and all(every_span_once(line, h) for h in hyps), (line, hyps)
    monkeypatch.setattr(
        translate_module, "sample_translations", lambda pipe, sources, s, g: scripted_ids(p, sources, 1)
    )
    outputs = p.translate(LINES, generator=torch.Generator().manual_seed(0))
    assert all(every_span_once(line, o) for line, o in zip(LINES, outputs, strict=True))


def test_keep_markup_false_and_models_without_slot_tokens_read_the_line_as_it_is(monkeypatch):
    for p, decode in ((pipeline(), {"keep_markup": False}), (pipeline(protects=False), {})):
        seen = []

        def search(sources, s, *args, p=p, seen=seen, **kwargs):
            seen.extend(p.source_tokenizer.decode(ids) for ids in sources)
            return torch.tensor([p.target_tokenizer.encode("out ｟1｠")] * len(sources))

        monkeypatch.setattr(p, "search", search)
        outputs = p.translate(LINES[:1], **decode)
        assert seen == [LINES[0]] and outputs == ["out ｟1｠"]


def test_a_real_tiny_model_keeps_every_placeholder():
    """No script: a random model's own output, slot tokens restored."""
    p = pipeline()
    for beam in (1, 3):
        for line, output in zip(LINES, p.translate(LINES, beam_size=beam), strict=True):
            assert every_span_once(line, output), (beam, line, output)


@pytest.mark.parametrize("flag,value", [([], None), (["--no-keep-markup"], False)])
def test_translate_flag(flag, value):
    from transformer.cli import build_parser

    args = build_parser().parse_args(["translate", "model", *flag])
    assert getattr(args, "keep_markup", None) is value
