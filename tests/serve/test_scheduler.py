"""The server's continuous batching (serve/scheduler.py): staggered concurrent requests of mixed
lengths, beam sizes and settings each get what the pipeline gives them alone; the token budget
bounds the running batch; a request nobody waits for leaves; an error fails only its lane's jobs."""

import random
import threading
import time
from concurrent.futures import CancelledError, ThreadPoolExecutor

import pytest
import torch

pytest.importorskip("fastapi")

import transformer  # noqa: E402
from transformer.config import DecodeConfig, ServeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve.state import State  # noqa: E402
from transformer.serve.worker import Cancelled, Job  # noqa: E402

TEXT = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today", "birds sing in the trees",
        "el gato se sentó", "un perro corrió en el parque", "hace sol hoy", "los pájaros cantan"] * 20
WORDS = sorted(set(" ".join(TEXT).split()))


@pytest.fixture(scope="module")
def pipes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sched")
    tokenizer = train_bpe(TEXT, vocab_size=300)
    out = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(1)
        model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=24))
        decode = DecodeConfig(beam_size=2, max_len_b=12, max_new_tokens=12, no_repeat_ngram_size=3,
                              repetition_penalty=1.1)
        out[arch] = Pipeline.load(transformer.save_model(model, tmp / arch, tokenizer=tokenizer, decode=decode))
    return out


def serving(pipeline, **config) -> State:
    state = State(ServeConfig(**config))
    state.start(pipeline)
    return state


def lines(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9))) for _ in range(n)]


def test_staggered_translations_of_mixed_settings_equal_each_alone(pipes):
    mt = pipes["encoder-decoder"]
    rng = random.Random(0)
    settings = [{}, {"beam_size": 1}, {"beam_size": 3, "n_best": 2}, {"beam_size": 1, "no_repeat_ngram_size": 0},
                {"beam_size": 2, "max_len_b": 4}, {"min_len": 3, "length_penalty": 0.2}]
    requests = [(lines(rng, rng.randint(1, 3)), settings[i % len(settings)], rng.random() * 0.3) for i in range(16)]
    state = serving(mt, max_batch_tokens=60)
    peak = [0]

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], state.worker.running)
            time.sleep(0.001)

    def send(request):
        text, s, delay = request
        time.sleep(delay)
        job = state.translation_job(text, s)
        state.queue(job)
        return job.future.result(60)

    done = threading.Event()
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(12) as pool:
            got = list(pool.map(send, requests))
    finally:
        done.set()
        watcher.join()
        state.worker.stop()
    for (text, s, _), (outputs, cut) in zip(requests, got, strict=True):
        assert outputs == [mt.translate([line], **s, on_truncate=lambda n: None)[0] for line in text], (text, s)
        assert cut == [i for i, line in enumerate(text) if len(mt.source_tokenizer.encode(line)) > 24]
    assert peak[0] > 1  # requests did share the running batch


def test_staggered_generations_equal_each_alone_with_their_seeds(pipes):
    lm = pipes["decoder"]
    rng = random.Random(1)
    requests = []
    for i in range(16):
        s = {"temperature": rng.choice([0.0, 0.8, 1.2]), "top_p": rng.choice([1.0, 0.9]),
             "max_new_tokens": rng.choice([5, 12, 40])}  # 40: past the 24 positions
        requests.append((rng.choice(WORDS) + " " + rng.choice(WORDS), s, i, rng.random() * 0.3))
    state = serving(lm)

    def send(request):
        prompt, s, seed, delay = request
        time.sleep(delay)
        settings = lm.settings(**s)
        ids = lm.fit_prompt(lm.prompt_ids(prompt), settings.max_new_tokens)
        streamed = []
        job = state.generation_job(ids, settings, seed=seed, on_token=streamed.append)
        state.queue(job)
        result = job.future.result(60)
        assert streamed == result.ids
        return lm.target_tokenizer.decode(result.ids), result.finish_reason

    try:
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(send, requests))
    finally:
        state.worker.stop()
    for (prompt, s, seed, _), (text, reason) in zip(requests, got, strict=True):
        assert text == lm.generate(prompt, seed=seed, **s), (prompt, s, seed)
        assert reason in ("stop", "length")


def test_on_token_can_end_a_generation_and_a_cancelled_one_leaves(pipes):
    lm = pipes["decoder"]
    state = serving(lm)
    try:
        s = lm.settings(temperature=1.0, max_new_tokens=40, min_len=40)
        ids = lm.prompt_ids("the cat")
        job = state.generation_job(ids, s, seed=3, on_token=lambda t: True)
        state.queue(job)
        result = job.future.result(30)
        assert len(result.ids) == 1 and result.finish_reason == "stop"
        gate = threading.Event()
        state.queue(Job("hold", run=gate.wait))  # nothing decodes until the gate opens
        stopped = state.generation_job(ids, s, seed=4)
        state.queue(stopped)
        stopped.stop.set()
        gate.set()
        with pytest.raises(CancelledError):  # dropped from the queue, never decoded
            stopped.future.result(30)
        seen = []
        running = state.generation_job(ids, s, seed=4, on_token=lambda t: seen.append(t) or (
            running.stop.set() if len(seen) == 3 else None))
        state.queue(running)
        with pytest.raises(Cancelled):  # left the running batch at its next step
            running.future.result(30)
        assert len(seen) == 3
        full = state.generation_job(ids, s, seed=5)
        state.queue(full)
        assert full.future.result(30).finish_reason == "length"
        assert state.worker.running == 0
    finally:
        state.worker.stop()


def test_the_token_budget_bounds_the_running_batch(pipes):
    mt = pipes["encoder-decoder"]
    state = serving(mt, max_batch_tokens=8)
    peak = [0]
    try:
        jobs = [state.translation_job(["the cat sat on the mat"], {"beam_size": 1}) for _ in range(6)]
        assert all(job.tokens > 4 for job in jobs)  # two of them exceed the budget
        original = state.worker._step

        def step():
            peak[0] = max(peak[0], state.worker.running_tokens)
            return original()

        state.worker._step = step
        for job in jobs:
            state.queue(job)
        results = [job.future.result(30)[0] for job in jobs]
    finally:
        state.worker.stop()
    assert results == [mt.translate(["the cat sat on the mat"], beam_size=1)] * 6
    assert 0 < peak[0] <= max(8, jobs[0].tokens)


def test_an_error_fails_the_jobs_of_its_lane_and_the_server_goes_on(pipes, monkeypatch):
    mt = pipes["encoder-decoder"]
    state = serving(mt)
    try:
        from transformer.decoding.search.beams import BeamLane

        real = BeamLane.step
        calls = [0]

        def broken(self):
            calls[0] += 1
            if calls[0] == 2:
                raise RuntimeError("out of memory (simulated)")
            return real(self)

        monkeypatch.setattr(BeamLane, "step", broken)
        bad = state.translation_job(["the cat sat on the mat"], {"beam_size": 2})
        state.queue(bad)
        with pytest.raises(RuntimeError, match="simulated"):
            bad.future.result(30)
        good = state.translation_job(["a dog"], {"beam_size": 2})
        state.queue(good)
        assert good.future.result(30)[0] == mt.translate(["a dog"], beam_size=2)
    finally:
        state.worker.stop()
