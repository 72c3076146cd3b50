"""`serve` with a speech model: /v1/transcribe on base64 WAV files, as Pipeline.transcribe, and its
bad inputs (not base64, not a WAV file, no samples, an unreadable sample width, too long), each one
JSON error naming what is wrong; the other endpoints name /v1/transcribe for a speech model."""

from __future__ import annotations

import base64
import io
import struct
import wave

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

import transformer  # noqa: E402
from transformer.config import AudioConfig, DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import train_tokenizer  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


def wav_bytes(samples: torch.Tensor, rate: int = 16000, width: int = 2) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes((samples.clamp(-1, 1) * 32767).round().to(torch.int16).numpy().tobytes())
    return buffer.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("speech")
    tokenizer = train_tokenizer("word", iter(["do re mi fa so la"]), 20, 1, SPECIALS)
    torch.manual_seed(0)
    cfg = cpu_tiny(vocab_size=tokenizer.vocab_size, norm_position="pre", positional="learned", max_positions=16,
                   audio=AudioConfig(n_mels=80, max_frames=400))
    model = transformer.build_model(cfg)
    path = transformer.save_model(model, tmp / "speech", tokenizer=tokenizer,
                                  decode=DecodeConfig(beam_size=1, max_len_a=0.0, max_len_b=8))
    return Pipeline.load(path)


def client(pipeline, **config) -> TestClient:
    return TestClient(create_app(pipeline, ServeConfig(**config)))


def error(response, status: int, code: str, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and words in body["message"] and "\n" not in body["message"]


def test_transcribe_gives_the_pipelines_transcripts(speech):
    g = torch.Generator().manual_seed(0)
    clips = [torch.randn(n, generator=g) * 0.2 for n in (8000, 20000)]
    want = speech.transcribe(clips)
    with client(speech) as c:
        info = c.get("/v1/model").json()
        assert info["family"] == "speech" and info["endpoints"] == ["/v1/transcribe"]
        r = c.post("/v1/transcribe", json={"audio": [b64(wav_bytes(x)) for x in clips]})
        assert r.status_code == 200, r.text
        assert r.json() == {"texts": want, "seconds": [0.5, 1.25]}
        one = c.post("/v1/transcribe", json={"audio": b64(wav_bytes(clips[0])), "beam_size": 2})
        assert one.json()["texts"] == speech.transcribe(clips[0], beam_size=2)


def test_bad_audio_gets_one_clear_error(speech):
    silence = torch.zeros(1600)
    with client(speech, max_audio_seconds=1.0) as c:
        post = lambda audio: c.post("/v1/transcribe", json={"audio": audio})  # noqa: E731
        error(post("%%%"), 422, "invalid_request", "audio is not base64")
        error(post([b64(wav_bytes(silence)), b64(b"hello")]), 422, "invalid_request",
              "audio[1] is not a WAV file")
        error(post(b64(wav_bytes(torch.zeros(0)))), 422, "invalid_request", "no samples")
        odd = bytearray(wav_bytes(silence))
        odd[34:36] = struct.pack("<H", 40)  # bits per sample: 40
        odd[32:34] = struct.pack("<H", 5)  # block align
        error(post(b64(bytes(odd))), 422, "invalid_request", "audio has 40-bit samples; only 8-, 16-, 24- and 32-bit")
        error(post(b64(wav_bytes(torch.zeros(32000)))), 413, "too_long", "--max-audio-seconds")
        error(post([]), 422, "invalid_request", "empty")
        error(c.post("/v1/transcribe", json={"audio": b64(wav_bytes(silence)), "beam_size": 0}), 422,
              "invalid_request", "beam_size")
        error(c.post("/v1/translate", json={"text": "hello"}), 400, "wrong_endpoint", "/v1/transcribe")


def test_a_text_model_refuses_transcribe(tmp_path):
    tokenizer = train_tokenizer("word", iter(["a b c"]), 20, 1, SPECIALS)
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size))
    pipe = Pipeline.load(transformer.save_model(model, tmp_path / "mt", tokenizer=tokenizer))
    with client(pipe) as c:
        error(c.post("/v1/transcribe", json={"audio": b64(wav_bytes(torch.zeros(100)))}), 400,
              "wrong_endpoint", "/v1/translate")
