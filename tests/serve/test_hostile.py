"""`transformer serve` against hostile and careless clients: never a 500, never a traceback.

Lone surrogates, control characters, line breaks, strict types, huge words, bodies and lists, wrong
types and bodies, slow senders, abandoned streams, SIGTERM under load: each answered with a clear
status (or a closed connection), and the server's log holds no traceback."""

import base64
import gc
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from tests.serve.test_serve import (  # noqa: E402
    LINES,
    classifier_dirs,
    client,
    error,
    free_port,
    tiny_dirs,
    wait_healthy,
)
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402
from transformer.serve.worker import Job  # noqa: E402


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """A translation model, a language model, a text classifier (3 labels) and an image classifier,
    tiny and untrained (test_serve's)."""
    tmp = tmp_path_factory.mktemp("hostile")
    out = tiny_dirs(tmp)
    out["classifier"], out["image"] = classifier_dirs(tmp)
    return out


@pytest.fixture(scope="module")
def mt(dirs):
    return Pipeline.load(dirs["encoder-decoder"])


@pytest.fixture(scope="module")
def lm(dirs):
    return Pipeline.load(dirs["decoder"])


@pytest.fixture(scope="module")
def clf(dirs):
    return Pipeline.load(dirs["classifier"])


@pytest.fixture(scope="module")
def images(dirs):
    return Pipeline.load(dirs["image"])


def raw(c: TestClient, path: str, body: bytes, content_type: str = "application/json"):
    """POST bytes as they are (a JSON escape such as \\ud800 stays an escape)."""
    return c.post(path, content=body, headers={"Content-Type": content_type})


def no_traceback(caplog) -> None:
    gc.collect()  # an asyncio future nobody looked at logs its exception when it is collected
    time.sleep(0.1)
    assert "Traceback" not in caplog.text, caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text


@contextmanager
def serving(app):
    """uvicorn on a free port in a thread, its log on the root logger (caplog)."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, log_level="info")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def request_head(path: str, length: int | None = None) -> bytes:
    size = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{size}\r\n\r\n".encode()


def answer(sock: socket.socket, seconds: float = 10) -> bytes:
    """What the server sends until it closes the connection (or `seconds` pass)."""
    sock.settimeout(seconds)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pass
    return data


def test_lone_surrogates_are_refused_on_every_text_field(mt, lm, clf):
    """A JSON \\ud800 escape is valid JSON but no character: the tokenizer used to raise (500)."""
    with client(mt) as c:
        for body, where in [
            (b'{"text": "\\ud800"}', "text"),
            (b'{"text": ["ok", "a\\udfffb"]}', "text[1]"),
            (b'{"text": "a", "\\ud800": 1}', "a field name"),
        ]:
            message = error(
                raw(c, "/v1/translate", body), 422, "invalid_request", where, "lone surrogate"
            )
            assert "send valid Unicode text" in message and "\n" not in message
        error(raw(c, "/v1/translate", b'{"text": "\\udfff"}'), 422, "invalid_request", "U+DFFF")
        error(
            raw(c, "/v1/attention", b'{"text": "x\\ud800"}'),
            422,
            "invalid_request",
            "text holds a lone surrogate",
        )
        # a pair of surrogates is one character (U+1F600): fine
        assert raw(c, "/v1/translate", b'{"text": "\\ud83d\\ude00"}').status_code == 200
    with client(lm) as c:
        error(
            raw(c, "/v1/generate", b'{"prompt": "\\ud800 the"}'),
            422,
            "invalid_request",
            "prompt holds a lone",
        )
        error(
            raw(c, "/v1/generate", b'{"prompt": "a", "stream": true, "x": "\\ud800"}'),
            422,
            "invalid_request",
        )
        error(
            raw(c, "/v1/attention", b'{"text": "\\ud800"}'),
            422,
            "invalid_request",
            "text holds a lone",
        )
        # OpenAI's paths too: a 400 in OpenAI's shape
        for path, body, where in [
            ("/v1/completions", b'{"model": "model", "prompt": ["a", "\\ud800"]}', "prompt[1]"),
            (
                "/v1/chat/completions",
                b'{"model": "model", "messages": [{"role": "user", "content": "\\udc00"}]}',
                "messages[0].content",
            ),
        ]:
            r = raw(c, path, body)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["message"].startswith(f"{where} holds a lone surrogate")
    with client(clf) as c:
        error(
            raw(c, "/v1/classify", b'{"text": ["a", "\\udc00"]}'),
            422,
            "invalid_request",
            "text[1] holds a lone",
        )


CONTROLS = "a\x00b\x07c\x1b[31m\x7f d\u2028e\ufeff\uffff"


def test_nul_and_control_characters_are_text(mt, lm, clf):
    """NUL, escapes and other control characters are translated (classified, ...) as the text they
    are, as offline: no refusal, no 500."""
    with client(mt) as c:
        r = c.post("/v1/translate", json={"text": [CONTROLS, "\x00"]})
        assert r.status_code == 200 and r.json()["translations"] == mt.translate([CONTROLS, "\x00"])
        assert c.post("/v1/attention", json={"text": CONTROLS}).status_code == 200
    with client(lm) as c:
        r = c.post("/v1/generate", json={"prompt": CONTROLS, "temperature": 0, "max_new_tokens": 4})
        assert r.status_code == 200 and r.json()["text"] == lm.generate(
            CONTROLS, temperature=0, max_new_tokens=4
        )
        with c.stream(
            "POST", "/v1/generate", json={"prompt": "\x00", "stream": True, "max_new_tokens": 4}
        ) as s:
            assert s.status_code == 200 and "event: done" in s.read().decode()
    with client(clf) as c:
        assert c.post("/v1/classify", json={"text": [CONTROLS, "\x00"]}).status_code == 200


def test_line_breaks_are_translated_line_by_line_and_kept(mt):
    with client(mt, max_lines=6) as c:
        text = "the cat sat\r\na dog\n\nel gato\rhace sol\n"
        pieces, breaks = (
            ["the cat sat", "a dog", "", "el gato", "hace sol", ""],
            ["\r\n", "\n", "\n", "\r", "\n", ""],
        )
        got = c.post("/v1/translate", json={"text": text}).json()
        offline = mt.translate(pieces)
        assert offline[2] == offline[5] == ""  # empty lines stay empty
        assert got == {
            "translations": ["".join(o + b for o, b in zip(offline, breaks, strict=True))],
            "truncated": [],
        }
        # in a list, each text keeps its own breaks; truncated names the text, not the line
        long = " ".join(["the cat sat on the mat"] * 20)  # more than max_positions=32 tokens
        got = c.post("/v1/translate", json={"text": ["a dog", f"hace sol\n{long}"]}).json()
        cut = mt.translate(["a dog", "hace sol", long], on_truncate=lambda n: None)
        assert got == {"translations": [cut[0], f"{cut[1]}\n{cut[2]}"], "truncated": [1]}
        # n_best: hypothesis i of a text joins the i-th best of its lines
        got = c.post(
            "/v1/translate",
            json={"text": ["a dog\n\nhace sol", "", "el gato"], "beam_size": 3, "n_best": 3},
        ).json()["translations"]
        first, second = mt.translate(["a dog", "hace sol"], beam_size=3, n_best=3)
        assert got[0] == [f"{a}\n\n{b}" for a, b in zip(first, second, strict=True)]
        assert (
            got[1] == ["", "", ""] and got[2] == mt.translate(["el gato"], beam_size=3, n_best=3)[0]
        )
        # max_lines counts the lines
        error(
            c.post("/v1/translate", json={"text": ["a", "b\nc\nd\ne\nf\ng"]}),
            413,
            "too_many_lines",
            "7 lines",
        )
        schema = c.get("/openapi.json").json()["components"]["schemas"]["TranslateRequest"][
            "properties"
        ]["text"]
        assert "line break" in schema["description"]


def test_request_fields_are_strictly_typed(mt, lm):
    with client(mt) as c:
        for field, value, expected in [
            ("beam_size", "4", 'a valid integer, not the string "4"'),
            ("beam_size", 2.0, "a valid integer, not 2.0"),
            ("beam_size", True, "a valid integer, not true"),
            ("length_penalty", "1.0", "a valid number, not the string"),
            ("length_penalty_kind", 1, "'wu' or 'power', not 1"),
        ]:
            message = error(
                c.post("/v1/translate", json={"text": "a", field: value}), 422, "invalid_request"
            )
            assert message == f"{field}: Input should be {expected}" or message.startswith(
                f"{field}: Input should be {expected}"
            )
        # a whole number where a float goes is what JSON clients send: taken
        ok = c.post("/v1/translate", json={"text": "a dog", "length_penalty": 1, "beam_size": 2})
        assert ok.status_code == 200 and ok.json()["translations"] == mt.translate(
            ["a dog"], length_penalty=1.0
        )
    with client(lm) as c:
        message = error(
            c.post("/v1/generate", json={"prompt": "a", "stream": "true", "seed": "5"}),
            422,
            "invalid_request",
        )
        assert message == (
            'seed: Input should be a valid integer, not the string "5"; '
            'stream: Input should be a valid boolean, not the string "true"'
        )
        assert (
            c.post(
                "/v1/generate", json={"prompt": "a", "temperature": 1, "max_new_tokens": 2}
            ).status_code
            == 200
        )


WRONG = [3, 2.5, True, None, [1, 2], {"a": "b"}, [["a"]], [None]]


def test_wrong_types_and_bodies_are_one_clear_line(mt, lm, clf):
    with client(mt) as c:
        for value in WRONG:
            message = error(
                c.post("/v1/translate", json={"text": value}), 422, "invalid_request", "text"
            )
            assert "Input should be a valid string" in message and "\n" not in message
            assert "list[str]" not in message  # pydantic's union tags are not shown
            error(c.post("/v1/attention", json={"text": value}), 422, "invalid_request", "text")
        assert (
            error(c.post("/v1/translate", json={"text": None}), 422, "invalid_request")
            == "text: Input should be a valid string or a valid list, not null"
        )
        assert (
            error(c.post("/v1/translate", json={"text": ["a", 1, None]}), 422, "invalid_request")
            == "text[1]: Input should be a valid string, not 1; text[2]: Input should be a valid string, not null"
        )
        for body, words in [
            (b"", "a JSON object"),
            (b"[]", "a JSON object"),
            (b'"text"', "a JSON object"),
            (b"null", "a JSON object"),
            (b"{", "not valid JSON"),
            (b"\xff\xfe\x00", "could not be read"),
            (b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}", "could not be read"),
        ]:
            r = raw(c, "/v1/translate", body)
            assert r.status_code in (400, 422) and words in r.json()["error"]["message"], (
                body[:20],
                r.text,
            )
        for content_type in (
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
        ):
            r = raw(c, "/v1/translate", b'{"text": "a"}', content_type)
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request", r.text
    with client(lm) as c:
        for value in WRONG:
            error(
                c.post("/v1/generate", json={"prompt": value}),
                422,
                "invalid_request",
                "prompt: Input should be",
            )
    with client(clf) as c:
        for value in WRONG[:-2]:
            error(c.post("/v1/classify", json={"text": value}), 422, "invalid_request", "text")


def test_huge_words_bodies_and_lists(mt, lm, clf):
    # one long word; one blob of characters the tokenizer never saw
    word, blob = "a" * 20_000, "\u4e00" * 20_000
    with client(mt) as c:
        for text in (word, blob):
            r = c.post("/v1/translate", json={"text": [text, "a dog"]})
            assert r.status_code == 200 and r.json()["truncated"] == [0]
            error(
                c.post("/v1/attention", json={"text": text}),
                422,
                "invalid_request",
                "max_positions",
            )
        error(
            c.post("/v1/translate", json={"text": "a" * 10_000_000}),
            413,
            "body_too_large",
            "10,000,0",
        )
        error(
            c.post("/v1/translate", json={"text": ["a"] * 100_000}),
            413,
            "too_many_lines",
            "100000 lines",
        )
        error(
            c.post("/v1/translate", json={"text": "a\n" * 60_000}),
            413,
            "too_many_lines",
            "60001 lines",
        )
    with client(lm) as c:
        r = c.post("/v1/generate", json={"prompt": word, "max_new_tokens": 4})
        assert r.status_code == 200 and r.json()["truncated"] is True
    with client(clf) as c:
        assert c.post("/v1/classify", json={"text": [blob]}).json()["truncated"] == [0]
        error(
            c.post("/v1/classify", json={"text": ["a"] * 100_000}),
            413,
            "too_many_lines",
            "100000 inputs",
        )


def png(width: int, height: int, pixels: bytes | None = None) -> str:
    """A grayscale PNG file, base64: its pixels (zeros by default) or, with b"", a header that
    claims the size and no pixels to match."""
    rows = b"".join(b"\x00" + bytes(width) for _ in range(height)) if pixels is None else pixels

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
    return base64.b64encode(data + chunk(b"IEND", b"")).decode()


def test_hostile_image_files_are_refused_without_being_decoded(images):
    with client(images) as c:
        assert c.post("/v1/classify", json={"images": [png(8, 8)]}).status_code == 200
        for image, words in [
            (
                png(20_000, 20_000, b""),
                "images[0] cannot be read as an image (Image size",
            ),  # a bomb
            (png(12_000, 12_000, b""), "images[0] is 12000 x 12000 pixels; the model takes 8 x 8"),
            (png(8, 8)[:60], "images[0] cannot be read as an image"),  # cut short
        ]:
            error(c.post("/v1/classify", json={"images": [image]}), 422, "invalid_request", words)
        bad_header = base64.b64encode(b"P5\n8 8x\n255\n" + bytes(64)).decode()  # PIL: ValueError
        error(
            c.post("/v1/classify", json={"images": [png(8, 8), bad_header]}),
            422,
            "invalid_request",
            "images[1] cannot be read as an image (invalid literal",
        )


def test_a_chunked_body_is_refused_past_the_limit_before_it_is_all_read(mt, caplog):
    app = create_app(mt, ServeConfig(max_body_bytes=100_000))
    chunk = b"[" + b'"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",' * 300  # ~10 KB
    read = []

    async def endless():  # a body without Content-Length, of 10 MB
        read.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": sum(read) < 10_000_000}

    sent = []

    async def send(message):
        sent.append(message)

    import asyncio

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/translate",
        "raw_path": b"/v1/translate",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, endless, send))
    assert sent[0]["status"] == 413 and (b"connection", b"close") in sent[0]["headers"]
    assert "more than 100,000 bytes" in json.loads(sent[1]["body"])["error"]["message"]
    assert sum(read) <= 100_000 + len(chunk)  # it stopped reading at the limit
    # the same over a socket, chunked: the client is answered 413 while it is still sending
    with serving(app) as port, socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request_head("/v1/translate"))
        sent_bytes = 0
        while not select.select([sock], [], [], 0.01)[0] and sent_bytes < 10_000_000:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent_bytes += len(chunk)
        reply = answer(sock)
    assert (
        reply.startswith(b"HTTP/1.1 413")
        and b'"body_too_large"' in reply
        and sent_bytes < 10_000_000
    )
    no_traceback(caplog)


def test_slow_senders_get_408_and_others_are_served_meanwhile(mt, caplog):
    app = create_app(mt, ServeConfig(timeout=1.5))
    body = json.dumps({"text": "a dog"}).encode()
    with serving(app) as port:
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(request_head("/v1/translate", len(body)) + body[:5])  # and then nothing
        trickler = socket.create_connection(("127.0.0.1", port))
        trickler.sendall(request_head("/v1/translate", len(body)))
        quitter = socket.create_connection(("127.0.0.1", port))
        quitter.sendall(request_head("/v1/translate", len(body)) + body[:5])
        quitter.close()  # goes away mid-body

        def trickle():  # one byte every 0.2 s: the body would take 3 s
            for byte in body:
                if select.select([trickler], [], [], 0.2)[0]:
                    return  # answered
                trickler.sendall(bytes([byte]))

        thread = threading.Thread(target=trickle)
        thread.start()
        for _ in range(3):  # others are served meanwhile
            r = httpx.post(
                f"http://127.0.0.1:{port}/v1/translate", json={"text": "a dog"}, timeout=10
            )
            assert r.status_code == 200 and r.json()["translations"] == mt.translate(["a dog"])
        for sock in (stalled, trickler):
            reply = answer(sock)  # until the server closes the connection
            assert reply.startswith(b"HTTP/1.1 408") and b"did not arrive within 1.5 s" in reply, (
                reply
            )
            assert b"connection: close" in reply.lower()
            sock.close()
        thread.join()
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'endpoint="/v1/translate",status="408"} 2' in metrics
        # the slow ones never reached the model
        assert "transformer_lines_translated_total 3" in metrics
    no_traceback(caplog)


def test_an_abandoned_stream_is_one_log_line_and_a_count_not_a_traceback(lm, caplog):
    caplog.set_level(logging.INFO)
    app = create_app(lm, ServeConfig())
    state = app.state.serve
    with serving(app) as port:
        body = json.dumps({"prompt": "the cat", "stream": True, "max_new_tokens": 4096}).encode()
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(request_head("/v1/generate", len(body)) + body)
                assert sock.recv(4096).startswith(b"HTTP/1.1 200")  # streaming has begun
        # and a request that waits in the queue, abandoned there (499)
        gate = threading.Event()
        state.worker.submit(Job("hold", run=gate.wait))
        try:
            with pytest.raises(httpx.TimeoutException):
                httpx.post(
                    f"http://127.0.0.1:{port}/v1/generate", json={"prompt": "a"}, timeout=0.5
                )
            deadline = time.monotonic() + 10
            while state.metrics.cancelled < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            gate.set()
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert "transformer_cancelled_total 3" in metrics
        # the streams stopped: none reached its done event
        assert state.metrics.tokens_generated == 0
    lines = [r.getMessage() for r in caplog.records if r.name == "transformer.serve"]
    assert lines == ["request cancelled: the client went away"] * 3
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "transformer.serve")
    no_traceback(caplog)


def test_sigterm_under_load_finishes_what_is_in_flight_and_exits_0(dirs, mt):
    port = free_port()
    env = {**os.environ, "TRANSFORMER_ACCESS_LOG": "0"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "transformer",
            "serve",
            str(dirs["encoder-decoder"]),
            "--port",
            str(port),
            "--max-wait-ms",
            "1500",
            "--threads",
            "1",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/v1/translate"
    try:
        wait_healthy(port, process)
        with ThreadPoolExecutor(6) as pool:
            # the batching window keeps these in flight for 1.5 s
            replies = [
                pool.submit(httpx.post, url, json={"text": line}, timeout=30) for line in LINES[:5]
            ]
            time.sleep(0.5)
            process.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            try:  # a new request: refused (the server no longer listens) or closed, never a 500
                late = httpx.post(url, json={"text": "a dog"}, timeout=10).status_code
            except httpx.TransportError:
                late = None
            got = [r.result() for r in replies]
        assert [r.status_code for r in got] == [200] * 5
        assert [r.json()["translations"][0] for r in got] == mt.translate(LINES[:5])
        assert late in (None, 503)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        _, stderr = process.communicate()
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr
