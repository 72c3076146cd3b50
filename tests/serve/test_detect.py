"""`serve` with a detector: /v1/detect on base64 image files answers what Pipeline.detect finds in
the same files (boxes in each image's pixels, the threshold applied); its bad inputs (not base64,
not an image, none, too many, too large, a threshold outside [0, 1]) are each one JSON error naming
what is wrong; a detector's other endpoints name /v1/detect, and /v1/detect on another model names
that model's endpoint."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
Image = pytest.importorskip("PIL.Image")
from fastapi.testclient import TestClient  # noqa: E402

from tests.viz.detector import tiny_detector  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402


def png(width: int, height: int, seed: int = 0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    """Queries that favour "dog", their probabilities spread around 0.5."""
    return Pipeline.load(tiny_detector(tmp_path_factory.mktemp("det") / "det", bias={1: 2.0}))


def client(pipeline, **config) -> TestClient:
    return TestClient(create_app(pipeline, ServeConfig(**config)))


def error(response, status: int, code: str, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code and words in body["message"] and "\n" not in body["message"]


def test_detect_gives_the_pipelines_objects_in_each_images_pixels(detector):
    files = [png(60, 40, seed=1), png(32, 32, seed=2), png(100, 75, seed=3)]
    found = {}
    with client(detector) as c:
        info = c.get("/v1/model").json()
        assert info["family"] == "detection" and info["endpoints"] == ["/v1/detect"]
        for threshold in (None, 0.3, 1):
            body = {"images": [b64(f) for f in files]}
            if threshold is not None:
                body["threshold"] = threshold  # 1: a whole number is taken for a probability
            r = c.post("/v1/detect", json=body)
            assert r.status_code == 200, r.text
            out = r.json()
            assert out["model"] == "model" and out["sizes"] == [[60, 40], [32, 32], [100, 75]]
            want = detector.detect(
                [io.BytesIO(f) for f in files], 0.5 if threshold is None else threshold
            )
            assert [[o["label"] for o in got] for got in out["detections"]] == [
                [o.label for o in objects] for objects in want
            ]
            for got, objects in zip(out["detections"], want, strict=True):
                for answer, o in zip(got, objects, strict=True):
                    assert answer["score"] == pytest.approx(o.score, abs=1e-6)
                    assert answer["box"] == pytest.approx(list(o.box), abs=0.011)
            found[threshold] = sum(len(got) for got in out["detections"])
    assert found[1] == 0 < found[None] < found[0.3] <= 15  # the threshold is applied


def test_bad_images_get_one_clear_error(detector, monkeypatch):
    from transformer.serve import uploads

    good = b64(png(40, 30))
    with client(detector, max_lines=2) as c:
        post = lambda images, **more: c.post("/v1/detect", json={"images": images, **more})  # noqa: E731
        error(post([good, "%%%"]), 422, "invalid_request", "images[1] is not base64")
        error(
            post([b64(b"hello"), good]),
            422,
            "invalid_request",
            "images[0] cannot be read as an image",
        )
        error(
            post([good, b64(png(40, 30)[:60])]),
            422,
            "invalid_request",
            "images[1] cannot be read as an image",
        )
        error(post([]), 422, "invalid_request", "images is an empty list")
        error(post([good] * 3), 413, "too_many_lines", "--max-lines")
        error(post([good], threshold=1.5), 422, "invalid_request", "threshold")
        error(post([good], threshold="0.5"), 422, "invalid_request", "threshold")
        error(post(good), 422, "invalid_request", "images")  # one string, not a list
        error(post([good], top_k=3), 422, "invalid_request", "top_k")
        monkeypatch.setattr(uploads, "MAX_IMAGE_PIXELS", 1000)
        error(post([b64(png(20, 20)), good]), 413, "image_too_large", "images[1] is 40 x 30 pixels")
        monkeypatch.setattr(uploads, "MAX_IMAGE_PIXELS", 2000)
        monkeypatch.setattr(uploads, "MAX_REQUEST_PIXELS", 2000)
        error(post([good, good]), 413, "image_too_large", "2,400 pixels in all")


def test_a_detectors_other_endpoints_name_detect_and_back(detector, tmp_path):
    import transformer
    from transformer.config import cpu_tiny
    from transformer.data.tokenizer import train_tokenizer

    with client(detector) as c:
        for path, body in (
            ("/v1/translate", {"text": "a cat"}),
            ("/v1/generate", {"prompt": "a cat"}),
            ("/v1/classify", {"images": [b64(png(32, 32))]}),
            ("/v1/attention", {"text": "a cat"}),
            ("/v1/transcribe", {"audio": b64(b"RIFF")}),
        ):
            error(c.post(path, json=body), 400, "wrong_endpoint", "/v1/detect")
    tokenizer = train_tokenizer("word", iter(["a b c"]), 20, 1, ("<pad>", "<unk>", "<s>", "</s>"))
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size))
    text = Pipeline.load(transformer.save_model(model, tmp_path / "mt", tokenizer=tokenizer))
    with client(text) as c:
        error(
            c.post("/v1/detect", json={"images": [b64(png(32, 32))]}),
            400,
            "wrong_endpoint",
            "/v1/detect needs an object detector and this one is a translation model (encoder-decoder); use /v1/translate",
        )


def test_an_image_generator_is_served_as_what_it_is(tmp_path):
    """A decoder over pixel tokens is not a language model: /v1/generate refuses it in one line
    instead of sampling pixel ids as text."""
    import transformer
    from transformer.config import ModelConfig
    from transformer.data.pixels import ImageTokens

    tokens = ImageTokens(4, 1, 4, labels=("a", "b"))
    cfg = ModelConfig(arch="decoder", d_model=16, n_heads=2, n_decoder_layers=1, d_ff=32,
                      positional="learned", max_positions=16, vocab_size=tokens.vocab_size)  # fmt: skip
    path = transformer.save_model(transformer.build_model(cfg), tmp_path / "g", pixels=tokens)
    with client(Pipeline.load(path)) as c:
        info = c.get("/v1/model").json()
        assert info["family"] == "image-generation" and info["endpoints"] == []
        error(c.post("/v1/generate", json={"prompt": "a"}), 400, "wrong_endpoint", "image-generation")
