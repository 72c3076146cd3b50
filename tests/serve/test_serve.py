"""`transformer serve`: every endpoint, every error status, the API key, batching equality, streaming,
cancellation and a graceful shutdown with a request in flight."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app, is_loopback  # noqa: E402
from transformer.serve.worker import Cancelled, Job, QueueFull, Worker  # noqa: E402
from transformer.viz.attention import attention_map  # noqa: E402

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today", "birds sing in the trees",
        "el gato se sentó", "un perro corrió en el parque", "hace sol hoy", "los pájaros cantan"] * 20
LINES = ["the cat sat on the mat in the sun", "a dog", "los pájaros cantan hoy en el parque", "hace sol",
         "birds sing", "el gato se sentó en la alfombra", "the park", "un perro corrió"]


def tiny_dirs(tmp) -> dict:
    """Untrained tiny model directories under tmp, by arch: a translation model, a language model
    and an encoder without classes."""
    tokenizer = train_bpe(TEXT, vocab_size=300)
    out = {}
    for arch in ("encoder-decoder", "decoder", "encoder"):
        torch.manual_seed(0)
        model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=32))
        decode = DecodeConfig(beam_size=2, max_len_b=12, max_new_tokens=12)
        out[arch] = transformer.save_model(model, tmp / arch, tokenizer=tokenizer, decode=decode)
    return out


def classifier_dirs(tmp) -> tuple:
    """A text classifier (3 labels) and an image classifier (2 labels, 8 x 8 grayscale), untrained:
    their model directories under tmp."""
    from transformer.data.tokenizer import ENCODER_SPECIALS

    tokenizer = train_bpe(TEXT, vocab_size=300, specials=ENCODER_SPECIALS)
    torch.manual_seed(0)
    text = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch="encoder", max_positions=8,
                                            n_classes=3, pad_id=0, bos_id=2, eos_id=3))
    image = transformer.build_model(cpu_tiny(vocab_size=1, pad_id=0, bos_id=0, eos_id=0, arch="encoder",
                                             norm_position="pre", n_classes=2,
                                             vision={"image_size": 8, "patch_size": 4, "channels": 1}))
    return (transformer.save_model(text, tmp / "text", tokenizer=tokenizer, labels=["a", "b", "c"]),
            transformer.save_model(image, tmp / "image", labels=["dark", "light"]))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    return tiny_dirs(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def mt(dirs):
    return Pipeline.load(dirs["encoder-decoder"])


@pytest.fixture(scope="module")
def lm(dirs):
    return Pipeline.load(dirs["decoder"])


def client(pipeline, **config) -> TestClient:
    return TestClient(create_app(pipeline, ServeConfig(**config)))


def error(response, status: int, code: str, *words: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    for word in words:
        assert word in body["error"]["message"], body
    return body["error"]["message"]


def test_translate_equals_the_pipeline_line_by_line(mt):
    with client(mt) as c:
        one = c.post("/v1/translate", json={"text": LINES[0]})
        assert one.status_code == 200 and one.json() == {"translations": mt.translate([LINES[0]]), "truncated": []}
        many = c.post("/v1/translate", json={"text": LINES + [""], "beam_size": 3, "length_penalty_kind": "power"})
        alone = [mt.translate([line], beam_size=3, length_penalty_kind="power")[0] for line in LINES] + [""]
        assert many.json()["translations"] == alone
        best = c.post("/v1/translate", json={"text": LINES[:2], "beam_size": 3, "n_best": 3}).json()
        assert best["translations"] == mt.translate(LINES[:2], beam_size=3, n_best=3)
        assert all(len(h) == 3 for h in best["translations"])
        long = " ".join(["the cat sat on the mat"] * 20)  # more than max_positions=32 tokens
        cut = c.post("/v1/translate", json={"text": ["a dog", long]}).json()
        assert cut["truncated"] == [1] and cut["translations"][1] == mt.translate([long], on_truncate=lambda n: None)[0]


@pytest.mark.parametrize("batching", ["continuous", "whole"])
def test_concurrent_requests_are_batched_and_equal_the_offline_results(mt, batching):
    offline = {line: mt.translate([line])[0] for line in LINES}
    with client(mt, max_wait_ms=300, batching=batching) as c:
        with ThreadPoolExecutor(len(LINES)) as pool:
            replies = list(pool.map(lambda line: c.post("/v1/translate", json={"text": line}), LINES))
        assert [r.json()["translations"][0] for r in replies] == [offline[line] for line in LINES]
        # requests with other settings are batched apart, and still equal their own offline result
        settings = [{"beam_size": 1}, {"beam_size": 3}] * 4
        with ThreadPoolExecutor(len(LINES)) as pool:
            replies = list(pool.map(lambda a: c.post("/v1/translate", json={"text": a[0], **a[1]}),
                                    zip(LINES, settings, strict=True)))
        for line, s, r in zip(LINES, settings, replies, strict=True):
            assert r.json()["translations"] == mt.translate([line], **s)
        metrics = c.get("/metrics").text
    # some batch held more than one request's line
    buckets = {line.split('le="')[1].split('"')[0]: int(line.split()[-1])
               for line in metrics.splitlines() if line.startswith("transformer_batch_lines_bucket")}
    count = int(next(line.split()[-1] for line in metrics.splitlines() if line.startswith("transformer_batch_lines_count")))
    assert buckets["1"] < count, metrics
    if batching == "whole":
        assert count < 2 * len(LINES)  # batches, not one per line
    else:  # rows per step; every request joined the running batch once
        waits = next(line for line in metrics.splitlines() if line.startswith("transformer_queue_wait_seconds_count"))
        assert int(waits.split()[-1]) == 2 * len(LINES)
        assert "transformer_running 0" in metrics


def test_generate_json_and_stream(lm):
    with client(lm) as c:
        body = {"prompt": "the cat", "temperature": 0, "max_new_tokens": 10}
        plain = c.post("/v1/generate", json=body).json()
        assert plain["text"] == lm.generate("the cat", temperature=0, max_new_tokens=10)
        assert plain["prompt_tokens"] == len(lm.prompt_ids("the cat")) and 1 <= plain["completion_tokens"] <= 10
        assert plain["truncated"] is False
        with c.stream("POST", "/v1/generate", json={**body, "stream": True}) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            events = [block for block in r.read().decode().split("\n\n") if block]
        pieces, done = [], None
        for block in events:
            lines = block.split("\n")
            if lines[0] == "event: done":
                done = json.loads(lines[1][len("data: "):])
            else:
                pieces.append(json.loads(lines[0][len("data: "):])["text"])
        assert done == plain and "".join(pieces) == plain["text"] and len(pieces) > 1
        seeded = [c.post("/v1/generate", json={"prompt": "the", "seed": 5, "max_new_tokens": 8}).json()["text"]
                  for _ in range(2)]
        assert seeded[0] == seeded[1] == lm.generate("the", seed=5, max_new_tokens=8)


def test_attention_health_model_metrics(mt, lm):
    with client(mt) as c:
        assert c.get("/health").json() == {"status": "ok"}
        info = c.get("/v1/model").json()
        assert info["family"] == "encoder-decoder" and info["endpoints"] == [
            "/v1/translate", "/v1/attention", "/translate", "/languages"]
        assert info["languages"] is None  # --source-lang / --target-lang not given
        assert info["parameters"] == sum(p.numel() for p in mt.model.parameters())
        assert info["decoding"]["beam_size"] == 2 and info["vocabulary"]["source"] == mt.model.config.vocab_size
        got = c.post("/v1/attention", json={"text": LINES[0], "layer": 0}).json()
        want = attention_map(mt, LINES[0], layer=0, head="all")
        assert got["kind"] == "cross" and got["rows"] == want.rows and got["columns"] == want.columns
        assert torch.allclose(torch.tensor(got["weights"]), want.weights, atol=1e-5)
        assert c.post("/v1/attention", json={"text": LINES[0], "kind": "encoder"}).json()["rows"] == want.source
        page = c.get("/")
        assert page.status_code == 200 and "/v1/attention" in page.text and "http" not in page.text.split("<script>")[1]
        metrics = c.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert 'transformer_requests_total{endpoint="/v1/attention",status="200"} 2' in text
        assert 'transformer_request_seconds_count{endpoint="/health"} 1' in text
        assert "transformer_queue_depth 0" in text
    with client(lm) as c:
        got = c.post("/v1/attention", json={"text": "the cat"}).json()
        assert got["kind"] == "self" and got["columns"][: len(got["source"])] == got["source"]
        error(c.post("/v1/attention", json={"text": "the cat", "kind": "cross"}), 400, "wrong_endpoint", "self")
        c.post("/v1/generate", json={"prompt": "the", "temperature": 0, "max_new_tokens": 5})
        assert "transformer_tokens_generated_total 5" in c.get("/metrics").text


def test_health_is_503_until_the_model_is_loaded_and_says_why_it_failed(mt):
    app = create_app(None, ServeConfig())
    with TestClient(app) as c:
        r = c.get("/health")
        assert r.status_code == 503 and r.json()["status"] == "loading"
        r = c.post("/v1/translate", json={"text": "hola"})
        error(r, 503, "loading", "still loading")
        assert r.headers["Retry-After"] == "1"
        app.state.serve.load_error = "OSError: no weights"
        assert c.get("/health").json() == {"status": "failed", "error": "OSError: no weights"}
        error(c.get("/v1/model"), 503, "model_failed", "no weights")


def test_bad_input_gets_a_json_error_naming_the_field(mt, lm, dirs):
    with client(mt, max_lines=4, max_body_bytes=2000) as c:
        broken = c.post("/v1/translate", content=b'{"text": "a', headers={"Content-Type": "application/json"})
        error(broken, 422, "invalid_request", "not valid JSON")
        error(c.post("/v1/translate", content=b"a dog"), 422, "invalid_request", "a JSON object")
        error(c.post("/v1/translate", json=["a dog"]), 422, "invalid_request", "a JSON object")
        error(c.post("/v1/translate", json={}), 422, "invalid_request", "text: Field required")
        error(c.post("/v1/translate", json={"text": 3}), 422, "invalid_request", "text")
        error(c.post("/v1/translate", json={"text": "a", "beam_size": 0}), 422, "invalid_request", "beam_size")
        error(c.post("/v1/translate", json={"text": "a", "beam_size": "wide"}), 422, "invalid_request", "beam_size")
        error(c.post("/v1/translate", json={"text": "a", "beam": 3}), 422, "invalid_request", "beam: unknown field")
        error(c.post("/v1/translate", json={"text": "a", "n_best": 5, "beam_size": 2}), 422, "invalid_request", "n_best")
        error(c.post("/v1/translate", json={"text": ["a", "b\nc\r\nd", "e"]}), 413, "too_many_lines", "5 lines")
        error(c.post("/v1/translate", json={"text": ["a"] * 5}), 413, "too_many_lines", "5 lines", "--max-lines")
        error(c.post("/v1/translate", json={"text": "a" * 3000}), 413, "body_too_large", "--max-body-bytes")
        error(c.post("/v1/generate", json={"prompt": "a"}), 400, "wrong_endpoint", "/v1/translate")
        error(c.get("/v1/nothing"), 404, "not_found")
        error(c.get("/v1/translate"), 405, "method_not_allowed")
    with client(lm) as c:
        error(c.post("/v1/translate", json={"text": "a"}), 400, "wrong_endpoint", "/v1/generate")
        error(c.post("/v1/generate", json={"prompt": "a", "top_p": 0}), 422, "invalid_request", "top_p")
        error(c.post("/v1/generate", json={"prompt": "a", "chat": True}), 422, "invalid_request", "chat template")
    with client(Pipeline.load(dirs["encoder"])) as c:
        error(c.post("/v1/translate", json={"text": "a"}), 400, "wrong_endpoint", "/v1/model only")
        error(c.post("/v1/attention", json={"text": "a"}), 400, "wrong_endpoint")
        error(c.post("/v1/classify", json={"text": "a"}), 400, "wrong_endpoint", "an encoder without classes")
    with client(mt) as c:
        error(c.post("/v1/classify", json={"text": "a"}), 400, "wrong_endpoint", "encoder-decoder); use /v1/translate")


@pytest.fixture(scope="module")
def classifiers(tmp_path_factory):
    """A text classifier and an image classifier (classifier_dirs), loaded."""
    return tuple(Pipeline.load(d) for d in classifier_dirs(tmp_path_factory.mktemp("classifiers")))


def png(pixels) -> str:
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_classify_texts_and_images_equal_the_pipeline(classifiers):
    import numpy as np

    text, image = classifiers
    long = " ".join(["the cat sat on the mat"] * 4)  # more tokens than max_positions: truncated
    with client(text) as c:
        assert c.get("/v1/model").json()["endpoints"] == ["/v1/classify"]
        body = c.post("/v1/classify", json={"text": [LINES[4], long], "top_k": 0}).json()
        want = text.classify([LINES[4], long], top_k=0, on_truncate=lambda _: None)
        assert [[(x["label"], x["probability"]) for x in r] for r in body["labels"]] == \
            [[(label, round(p, 6)) for label, p in r] for r in want]
        assert body["truncated"] == [1] and len(body["labels"][0]) == 3
        one = c.post("/v1/classify", json={"text": LINES[1]}).json()
        assert [x["label"] for x in one["labels"][0]] == [text.classify([LINES[1]])[0][0][0]]
        error(c.post("/v1/classify", json={"images": [png(np.zeros((8, 8), np.uint8))]}), 422, "invalid_request",
              "a text classifier: send 'text', not 'images'")
        error(c.post("/v1/classify", json={"text": ["a", " "]}), 422, "invalid_request", "text[1] is empty")
        error(c.post("/v1/translate", json={"text": "a"}), 400, "wrong_endpoint", "/v1/classify")
    pictures = [np.zeros((8, 8), np.uint8), np.full((8, 8), 255, np.uint8)]
    with client(image, max_lines=3) as c:
        body = c.post("/v1/classify", json={"images": [png(p) for p in pictures], "top_k": 2}).json()
        want = image.classify_images(torch.from_numpy(np.stack(pictures))[:, None], top_k=2)
        assert [[(x["label"], x["probability"]) for x in r] for r in body["labels"]] == \
            [[(label, round(p, 6)) for label, p in r] for r in want]
        error(c.post("/v1/classify", json={"text": "a"}), 422, "invalid_request", "an image classifier: send 'images'")
        error(c.post("/v1/classify", json={"images": ["%%%"]}), 422, "invalid_request", "images[0] is not base64")
        error(c.post("/v1/classify", json={"images": [png(pictures[0]), "aGVsbG8="]}), 422, "invalid_request",
              "images[1] cannot be read as an image")
        error(c.post("/v1/classify", json={"images": [png(np.zeros((9, 8), np.uint8))]}), 422, "invalid_request",
              "images[0] is 8 x 9 pixels; the model takes 8 x 8")
        error(c.post("/v1/classify", json={"images": [png(pictures[0])] * 4}), 413, "too_many_lines", "4 inputs")


def blocked(c: TestClient):
    """Occupy the worker until the returned event is set."""
    gate = threading.Event()
    c.app.state.serve.worker.submit(Job("hold", run=gate.wait))
    deadline = time.monotonic() + 5
    while not c.app.state.serve.worker.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    return gate


def test_queue_full_is_503_and_slow_requests_are_504(mt):
    with client(mt, max_queue=1, timeout=0.5) as c:
        gate = blocked(c)
        try:
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(c.post, "/v1/translate", json={"text": "a dog"})
                time.sleep(0.2)  # the first one is queued
                # the event loop answers while the model is busy
                assert c.get("/health").status_code == 200
                metrics = c.get("/metrics").text
                assert "transformer_busy 1" in metrics and "transformer_queue_depth 1" in metrics
                full = c.post("/v1/translate", json={"text": "a dog"})
                error(full, 503, "overloaded", "queue")
                assert full.headers["retry-after"] == "1"
                error(first.result(), 504, "timeout", "--timeout")
        finally:
            gate.set()
        assert c.post("/v1/translate", json={"text": "a dog"}).status_code == 200  # the timed-out job was dropped


def test_api_key(mt, monkeypatch):
    with client(mt, api_key="s3cret") as c:
        assert c.get("/health").status_code == 200  # open: for load balancers
        assert c.get("/").status_code == 200  # the page; it asks for the key
        r = c.post("/v1/translate", json={"text": "a dog"})
        error(r, 401, "unauthorized", "Authorization: Bearer")
        assert r.headers["www-authenticate"] == "Bearer"
        error(c.get("/metrics", headers={"Authorization": "Bearer wrong"}), 401, "unauthorized")
        error(c.get("/v1/model", headers={"Authorization": "s3cret"}), 401, "unauthorized")
        ok = c.post("/v1/translate", json={"text": "a dog"}, headers={"Authorization": "Bearer s3cret"})
        assert ok.status_code == 200
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")


def test_worker_drops_cancelled_jobs_and_streaming_stops_when_told(lm):
    ran = []
    worker = Worker(lambda lines, s: (lines, []), max_batch_tokens=100, max_wait_ms=0, max_queue=4)
    gate = threading.Event()
    worker.submit(Job("hold", run=gate.wait))
    worker.start()
    gone = Job("other", run=lambda: ran.append("gone"))
    kept = Job("other", run=lambda: ran.append("kept"))
    worker.submit(gone)
    worker.submit(kept)
    gone.stop.set()  # its client went away: it no longer counts, and it makes room in the queue
    assert worker.depth == 1
    for _ in range(3):
        worker.submit(Job("other", run=lambda: None))
    with pytest.raises(QueueFull):
        worker.submit(Job("other", run=lambda: None))
    gate.set()
    kept.future.result(timeout=5)
    worker.stop(timeout=5)
    assert ran == ["kept"]
    # a generation stops at the token after its stop flag is set
    job, seen = Job("generate"), []

    def on_token(token):
        seen.append(token)
        if len(seen) == 3:
            job.stop.set()
        if job.stop.is_set():
            raise Cancelled

    with pytest.raises(Cancelled):
        lm.generate("the", temperature=0, max_new_tokens=12, on_token=on_token)
    assert len(seen) == 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(app):
    """`app` served by uvicorn on a free loopback port, on a thread of its own; yields the port."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def wait_healthy(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not become healthy")


def test_sigterm_finishes_the_request_in_flight_then_exits_0(dirs, mt):
    import httpx

    port = free_port()
    env = {**os.environ, "TRANSFORMER_API_KEY": "k", "TRANSFORMER_ACCESS_LOG": "0"}
    process = subprocess.Popen([sys.executable, "-m", "transformer", "serve", str(dirs["encoder-decoder"]),
                                "--port", str(port), "--max-wait-ms", "1500", "--threads", "1"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(port, process)
        headers = {"Authorization": "Bearer k"}  # the key came from the environment
        assert httpx.get(f"http://127.0.0.1:{port}/v1/model", timeout=5).status_code == 401
        with ThreadPoolExecutor(1) as pool:
            # the batching window keeps this request in flight for 1.5 s
            reply = pool.submit(httpx.post, f"http://127.0.0.1:{port}/v1/translate", json={"text": "a dog"},
                                headers=headers, timeout=30)
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            r = reply.result()
        assert r.status_code == 200 and r.json()["translations"] == mt.translate(["a dog"])
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_cli_refuses_bad_flags_and_warns_on_a_public_address(dirs, tmp_path, capsys, monkeypatch):
    from transformer.cli import main

    assert main(["serve", str(tmp_path)]) == 2
    assert "not a model directory" in capsys.readouterr().err
    assert main(["serve", str(dirs["decoder"]), "--max-queue", "0"]) == 2
    assert "--max-queue 0" in capsys.readouterr().err
    import uvicorn

    ran = {}
    def fake_run(self):
        ran.update(host=self.config.host, port=self.config.port)
        self.started = True  # and stops at once, as after a signal

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.delenv("TRANSFORMER_API_KEY", raising=False)
    assert main(["serve", str(dirs["decoder"]), "--host", "0.0.0.0", "--port", "9"]) in (0, None)
    assert "without an API key" in capsys.readouterr().err and ran["host"] == "0.0.0.0" and ran["port"] == 9
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)  # could not bind: uvicorn gives up
    with pytest.raises(SystemExit) as exit_:
        main(["serve", str(dirs["decoder"]), "--port", "9"])
    assert exit_.value.code == 1 and "could not listen on 127.0.0.1:9" in capsys.readouterr().err


def test_a_client_that_goes_away_stops_costing_work(mt):
    import httpx

    app = create_app(mt, ServeConfig())
    with running(app) as port:
        state = app.state.serve
        gate = threading.Event()
        state.worker.submit(Job("hold", run=gate.wait))
        with pytest.raises(httpx.TimeoutException):  # the client gives up while its job waits in the queue
            httpx.post(f"http://127.0.0.1:{port}/v1/translate", json={"text": "a dog"}, timeout=0.5)
        deadline = time.monotonic() + 10
        while state.worker.depth and time.monotonic() < deadline:
            time.sleep(0.05)  # the server noticed: the job left the queue ...
        assert state.worker.depth == 0
        gate.set()
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'endpoint="/v1/translate",status="499"' in metrics
        assert "transformer_lines_translated_total 0" in metrics  # ... and was never decoded
        assert "transformer_queue_wait_seconds_count 0" in metrics  # nothing joined a batch


def test_metrics_count_every_endpoint_by_name(classifiers):
    """/v1/classify used to be counted as "other": every route is counted under its own path."""
    from transformer.serve.app import ROUTES

    text, _ = classifiers
    assert "/v1/classify" in ROUTES
    with client(text) as c:
        assert c.post("/v1/classify", json={"text": LINES[0]}).status_code == 200
        metrics = c.get("/metrics").text
    assert 'transformer_requests_total{endpoint="/v1/classify",status="200"} 1' in metrics
    assert 'endpoint="other"' not in metrics
