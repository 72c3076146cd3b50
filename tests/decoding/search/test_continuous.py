"""Continuous batching (decoding/search/continuous.py): requests that join and leave a running batch
between steps get exactly the tokens they get decoded alone, under any schedule of arrivals."""

import random

import pytest
import torch

import transformer
from transformer.config import DecodeConfig, cpu_tiny
from transformer.decoding.beam import beam_search
from transformer.decoding.greedy import greedy_search
from transformer.decoding.sampling import sample
from transformer.decoding.search.continuous import lane_key, new_lane
from transformer.decoding.search.lanes import Request
from transformer.model.cache import KVCache

V = 40


def tiny(
    arch: str, positional: str = "sinusoidal", max_positions: int = 32, seed: int = 0, **changes
):
    torch.manual_seed(seed)
    cfg = cpu_tiny(
        vocab_size=V, arch=arch, positional=positional, max_positions=max_positions, **changes
    )
    model = transformer.build_model(cfg).eval()
    with torch.no_grad():  # make </s> likely enough that outputs end at different lengths
        model.lm_head.bias.add_(torch.nn.functional.one_hot(torch.tensor(cfg.eos_id), V) * 2.5) if (
            model.lm_head.bias is not None
        ) else None
    return model


def sources(n: int, seed: int, low: int = 1, high: int = 12) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(4, V) for _ in range(rng.randint(low, high))] for _ in range(n)]


def run(model, seqs: list[Request], seed: int, max_wave: int = 3) -> None:
    """Admit the requests in random waves between random numbers of steps, until all are done."""
    rng = random.Random(seed)
    lane = new_lane(model, seqs[0].settings)
    waiting = list(seqs)
    while waiting or len(lane):
        if waiting and (not len(lane) or rng.random() < 0.5):
            wave = [waiting.pop(0) for _ in range(min(len(waiting), rng.randint(1, max_wave)))]
            lane.admit(wave)
        for _ in range(rng.randint(1, 3)):
            lane.step()
    assert all(s.done for s in seqs)


def unpad(row: list[int], pad: int) -> list[int]:
    while row and row[-1] == pad:
        row = row[:-1]
    return row


@pytest.mark.parametrize("positional", ["sinusoidal", "rope", "t5_bias"])
@pytest.mark.parametrize("guards", [(0, 1.0), (2, 1.3)])
def test_greedy_translation_joins_and_leaves_as_alone(positional, guards):
    model = tiny("encoder-decoder", positional)
    s = DecodeConfig(
        beam_size=1,
        max_len_a=1.0,
        max_len_b=3,
        min_len=2,
        no_repeat_ngram_size=guards[0],
        repetition_penalty=guards[1],
    )
    srcs = sources(14, seed=1)
    seqs = [Request(src, s) for src in srcs]
    run(model, seqs, seed=2)
    for seq, src in zip(seqs, srcs, strict=True):
        alone = greedy_search(
            model,
            [src],
            max_len_a=1.0,
            max_len_b=3,
            min_len=2,
            no_repeat_ngram_size=guards[0],
            repetition_penalty=guards[1],
        )
        assert seq.tokens == unpad(alone[0].tolist(), model.config.pad_id)
        assert seq.finish in ("stop", "length")


@pytest.mark.parametrize("positional", ["sinusoidal", "t5_bias"])
@pytest.mark.parametrize("guards", [(0, 1.0), (3, 1.2)])
@pytest.mark.parametrize("early_stopping", [True, "never"])
def test_beam_translation_joins_and_leaves_as_alone(positional, guards, early_stopping):
    model = tiny("encoder-decoder", positional)
    s = DecodeConfig(
        beam_size=3,
        n_best=2,
        length_penalty=0.6,
        max_len_a=1.2,
        max_len_b=2,
        early_stopping=early_stopping,
        no_repeat_ngram_size=guards[0],
        repetition_penalty=guards[1],
    )
    srcs = sources(12, seed=3)
    seqs = [Request(src, s) for src in srcs]
    run(model, seqs, seed=4)
    for seq, src in zip(seqs, srcs, strict=True):
        alone = beam_search(
            model,
            [src],
            beam_size=3,
            n_best=2,
            length_penalty=0.6,
            max_len_a=1.2,
            max_len_b=2,
            early_stopping=early_stopping,
            no_repeat_ngram_size=guards[0],
            repetition_penalty=guards[1],
        )
        want = [unpad(h, model.config.pad_id) for h in alone[0].tolist()]
        assert seq.hypotheses == want[: len(seq.hypotheses)]
        assert len(seq.hypotheses) == 2 or all(h == [] for h in want[len(seq.hypotheses) :])


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_sampling_a_language_model_draws_as_alone_with_its_own_seed(positional):
    model = tiny("decoder", positional)
    prompts = sources(10, seed=5, high=9)
    settings = [
        DecodeConfig(beam_size=1, temperature=t, top_k=k, top_p=p, min_len=m, max_new_tokens=n)
        for t, k, p, m, n in [
            (1.0, 0, 1.0, 0, 12),
            (0.7, 5, 1.0, 2, 9),
            (1.3, 0, 0.8, 0, 15),
            (0.0, 0, 1.0, 1, 7),
        ]
    ]
    seqs = []
    for i, prompt in enumerate(prompts):
        s = settings[i % len(settings)]
        g = torch.Generator().manual_seed(100 + i)
        seqs.append(Request(prompt, s, generator=g, max_new=s.max_new_tokens))
    run(model, seqs, seed=6)
    for i, (seq, prompt) in enumerate(zip(seqs, prompts, strict=True)):
        s = settings[i % len(settings)]
        alone = sample(
            model,
            [prompt],
            max_new_tokens=s.max_new_tokens,
            temperature=s.temperature,
            top_k=s.top_k,
            top_p=s.top_p,
            min_new_tokens=s.min_len,
            generator=torch.Generator().manual_seed(100 + i),
        )
        assert seq.tokens == unpad(alone[0].tolist(), model.config.pad_id), i


def test_sampling_past_the_context_rejoins_as_the_pipeline_does(tmp_path):
    from transformer.data.tokenizer import train_bpe
    from transformer.decoding.pipeline import Pipeline

    tok = train_bpe(["the cat sat on the mat", "a dog ran in the park"] * 10, vocab_size=300)
    torch.manual_seed(0)
    model = transformer.build_model(
        cpu_tiny(vocab_size=tok.vocab_size, arch="decoder", max_positions=12)
    )
    pipe = Pipeline.load(
        transformer.save_model(model, tmp_path / "lm", tokenizer=tok, decode=DecodeConfig())
    )
    s = pipe.settings(beam_size=1, max_new_tokens=30, temperature=1.0)
    prompts = ["the cat", "a dog ran", "the park"]
    seqs = [
        Request(pipe.prompt_ids(p), s, generator=torch.Generator().manual_seed(i), max_new=30)
        for i, p in enumerate(prompts)
    ]
    run(pipe.model, seqs, seed=7)
    for i, (seq, p) in enumerate(zip(seqs, prompts, strict=True)):
        assert pipe.target_tokenizer.decode(seq.tokens) == pipe.generate(
            p, seed=i, max_new_tokens=30
        )
    assert any(len(seq.tokens) > 12 for seq in seqs)  # some went past the 12 positions


def test_on_token_and_cancel_end_a_request_and_free_its_rows():
    model = tiny("decoder")
    s = DecodeConfig(beam_size=1, temperature=0.0, max_new_tokens=20, min_len=20)
    stop_at = [5]
    cancel = {"now": False}
    a = Request([5, 6, 7], s, max_new=20, on_token=lambda t: len(a.tokens) >= stop_at[0])
    b = Request([8, 9], s, max_new=20, cancelled=lambda: cancel["now"])
    c = Request([10], s, max_new=20)
    lane = new_lane(model, s)
    lane.admit([a, b, c])
    for _ in range(3):
        lane.step()
    cancel["now"] = True
    lane.step()
    assert b.finish == "cancelled" and lane.rows == 2
    while len(lane):
        lane.step()
    assert a.finish == "stop" and len(a.tokens) == 5
    assert c.finish == "length" and len(c.tokens) == 20


def test_lane_keys_split_what_cannot_share_a_batch():
    base = DecodeConfig(beam_size=4)
    assert lane_key(base) == lane_key(DecodeConfig(beam_size=4, max_len_b=99, min_len=3))
    assert lane_key(base) != lane_key(DecodeConfig(beam_size=2))
    assert lane_key(base) != lane_key(DecodeConfig(beam_size=4, no_repeat_ngram_size=3))
    greedy = DecodeConfig(beam_size=1)
    assert lane_key(greedy) == lane_key(DecodeConfig(beam_size=1, temperature=0.5, top_p=0.9))


def test_extend_refuses_caches_of_another_layout():
    a, b = KVCache.empty(1), KVCache.empty(1)
    b.group_size = 4
    with pytest.raises(ValueError, match="one layout"):
        a.extend(b)
