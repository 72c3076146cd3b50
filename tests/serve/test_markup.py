"""/v1/translate with a model trained with data.protect_markup: both batching modes (continuous, the
default, decodes outside Pipeline.translate) mask each line and put every placeholder and tag back
exactly once, as Pipeline.translate does; keep_markup=false is a request field too."""

from collections import Counter

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.markup import span_texts  # noqa: E402
from transformer.data.tokenizer import train_bpe, with_slot_tokens  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy"] * 20
LINES = ["el gato %s se sentó en <b>{name}</b>", "hace sol &amp; https://x.org/a", "sin marcas", "%d"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    tokenizer = with_slot_tokens(train_bpe(TEXT, vocab_size=300))
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, max_positions=32))
    decode = DecodeConfig(beam_size=2, max_len_b=12)
    return transformer.save_model(model, tmp_path_factory.mktemp("markup") / "m", tokenizer=tokenizer,
                                  decode=decode)


@pytest.mark.parametrize("batching", ["continuous", "whole"])
def test_translate_keeps_every_placeholder_in_both_batching_modes(model_dir, batching):
    pipeline = Pipeline.load(model_dir)
    alone = pipeline.translate(LINES)
    with TestClient(create_app(pipeline, ServeConfig(batching=batching))) as client:
        r = client.post("/v1/translate", json={"text": LINES})
        assert r.status_code == 200, r.text
        got = r.json()["translations"]
        assert got == alone
        for line, output in zip(LINES, got, strict=True):
            assert Counter(span_texts(output)) == Counter(span_texts(line)), (line, output)
        r = client.post("/v1/translate", json={"text": LINES, "keep_markup": False})
        assert r.status_code == 200, r.text
        assert r.json()["translations"] == pipeline.translate(LINES, keep_markup=False)
