"""The CTC head as the transcriber (transformer.decoding.ctc): the best path against its definition,
a padded batch against each clip alone, and the refusals."""

from __future__ import annotations

import itertools

import pytest
import torch

import transformer
from transformer.config import AudioConfig, ModelConfig
from transformer.decoding.ctc import CTCError, best_path, ctc_transcribe


def reference_best_path(logits: torch.Tensor, length: int, blank: int) -> list[int]:
    """The definition, written out: the most probable token at each real position, runs of one
    token made one, then the blanks removed."""
    path = [max(range(logits.shape[-1]), key=lambda v: float(logits[t, v])) for t in range(length)]
    return [token for token, _ in itertools.groupby(path) if token != blank]


def test_best_path_merges_repeats_and_drops_blanks():
    # positions' best tokens: a a _ a b b _ _ c (blank 0) -> a a b c
    best = [1, 1, 0, 1, 2, 2, 0, 0, 3]
    logits = torch.nn.functional.one_hot(torch.tensor(best), 4).float()[None]
    assert best_path(logits, None, blank=0) == [[1, 1, 2, 3]]
    assert best_path(logits, torch.tensor([4]), blank=0) == [[1, 1]]
    assert best_path(logits, torch.tensor([0]), blank=0) == [[]]


def test_best_path_equals_its_definition_on_random_logits():
    torch.manual_seed(0)
    logits = torch.randn(6, 30, 5) * 2
    logits[:, :, 0] += 1.5  # blanks often, as a trained head
    lengths = torch.tensor([30, 1, 17, 29, 8, 0])
    got = best_path(logits, lengths, blank=0)
    assert got == [reference_best_path(logits[b], int(lengths[b]), 0) for b in range(6)]
    assert got != [reference_best_path(logits[b], int(lengths[b]), 2) for b in range(6)]


def speech_model(stride: int, ctc: bool = True):
    torch.manual_seed(0)
    cfg = ModelConfig(
        arch="encoder-decoder", vocab_size=12, d_model=32, n_heads=4, n_encoder_layers=2,
        n_decoder_layers=1, d_ff=64, dropout=0.0, norm_position="pre", positional="learned",
        max_positions=20, activation="gelu", scale_embedding=False,
        audio=AudioConfig(n_mels=8, max_frames=160, stride=stride, ctc=ctc),
    )  # fmt: skip
    return transformer.build_model(cfg).eval()


def padded_clips(lengths: list[int]):
    """Random clips of 8 mel bands and these lengths, and the padded batch (B, 8, F) with its frame
    mask (B, F)."""
    clips = [torch.randn(8, n) for n in lengths]
    batch = torch.zeros(len(clips), 8, max(lengths))
    mask = torch.zeros(len(clips), max(lengths), dtype=torch.bool)
    for row, clip in enumerate(clips):
        batch[row, :, : clip.shape[1]] = clip
        mask[row, : clip.shape[1]] = True
    return clips, batch, mask


@pytest.mark.parametrize("stride", [2, 4])
def test_a_padded_batch_is_transcribed_as_each_clip_alone(stride):
    model = speech_model(stride)
    with torch.no_grad():  # a head that prefers blanks a little less: paths with several tokens
        model.ctc_head.bias[0] -= 0.5
    clips, batch, mask = padded_clips([160, 41, 90, 7])
    together = ctc_transcribe(model, batch, mask)
    alone = [ctc_transcribe(model, clip[None], None)[0] for clip in clips]
    assert together == alone and any(len(row) > 1 for row in alone)
    with torch.no_grad():
        memory, positions = model.encode(batch, mask)
        head = model.ctc_head(memory)
    assert together == [reference_best_path(head[b], int(positions[b].sum()), 0) for b in range(4)]


def test_a_model_without_a_ctc_head_is_refused():
    with pytest.raises(CTCError, match="no CTC head: use the decoder"):
        ctc_transcribe(speech_model(2, ctc=False), torch.randn(1, 8, 20), None)


def collapse(path) -> tuple[int, ...]:
    return tuple(token for token, _ in itertools.groupby(path) if token != 0)


def brute_force(log_probs: torch.Tensor):
    """{transcript: P} over every path of the (T, V) log-probabilities (blank 0)."""
    out: dict[tuple[int, ...], float] = {}
    t, v = log_probs.shape
    for path in itertools.product(range(v), repeat=t):
        p = float(sum(log_probs[i, c] for i, c in enumerate(path)).exp())
        out[collapse(path)] = out.get(collapse(path), 0.0) + p
    return out


def test_prefix_scores_are_the_probability_of_a_transcript_starting_with_the_prefix():
    from transformer.decoding.ctc import PrefixScorer

    torch.manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(5, 3, dtype=torch.float64), -1)  # T 5, blank + 2
    transcripts = brute_force(log_probs)
    assert sum(transcripts.values()) == pytest.approx(1.0)
    scorer = PrefixScorer(log_probs, blank=0)

    def states(prefix):  # r of a prefix, grown one token at a time
        r = scorer.initial()[None]
        for i, c in enumerate(prefix):
            last = torch.tensor([prefix[i - 1] if i else 0])
            new, _ = scorer.extend(r, last, torch.tensor([i == 0]), torch.tensor([[c]]))
            r = new[:, 0]
        return r

    for prefix in [(), (1,), (2,), (1, 1), (1, 2), (2, 1), (2, 2, 1), (1, 2, 1)]:
        r = states(prefix)
        exact = transcripts.get(prefix, 0.0)
        assert float(PrefixScorer.final(r).exp()) == pytest.approx(exact, abs=1e-12)
        for c in (1, 2):
            last = torch.tensor([prefix[-1] if prefix else 0])
            _, psi = scorer.extend(r, last, torch.tensor([not prefix]), torch.tensor([[c]]))
            starts = sum(p for y, p in transcripts.items() if y[: len(prefix) + 1] == (*prefix, c))
            assert float(psi.exp()) == pytest.approx(starts, abs=1e-12)


def test_joint_search_without_ctc_is_the_decoders_greedy_search_and_pads_as_alone():
    from transformer.decoding.ctc import joint_search
    from transformer.decoding.greedy import greedy_search

    model = speech_model(4)
    clips, batch, mask = padded_clips([160, 61, 90])
    prefix = [model.config.start_id]
    plain = joint_search(model, batch, mask, beam_size=1, ctc_weight=0.0, max_len=8, prefix=prefix)
    greedy = greedy_search(model, batch, src_mask=mask, max_len_a=0, max_len_b=8, prefix=prefix)
    want = [[t for t in row if t != model.config.pad_id] for row in greedy.tolist()]
    assert plain == want
    joint = joint_search(model, batch, mask, beam_size=3, ctc_weight=0.5, max_len=8, prefix=prefix)
    alone = [joint_search(model, c[None], None, 3, 0.5, 8, prefix)[0] for c in clips]
    assert joint == alone


def test_joint_search_follows_the_ctc_head_when_it_is_sure():
    """With a CTC head that is certain of a transcript and a decoder that knows nothing, the joint
    search writes the CTC head's transcript."""
    from transformer.decoding.ctc import joint_search

    model = speech_model(4)
    clip = torch.randn(1, 8, 80)  # 20 positions
    with torch.no_grad():
        memory, _ = model.encode(clip)
        path = torch.tensor([0, 5, 5, 0, 7, 0, 0, 5, 9, 9] + [0] * 10)  # -> 5 7 5 9
        model.ctc_head.weight.zero_()
        model.ctc_head.bias.zero_()
    sure = torch.nn.functional.one_hot(path, 12).float() * 30
    original = model.ctc_head.forward
    model.ctc_head.forward = lambda x: sure[None].expand(x.shape[0], -1, -1).to(x.dtype)
    try:
        with torch.no_grad():
            model.lm_head.weight.zero_()  # a decoder that is uniform over every token
            if model.lm_head.bias is not None:
                model.lm_head.bias.zero_()
        out = joint_search(model, clip, None, beam_size=4, ctc_weight=0.5, max_len=10,
                           prefix=[model.config.start_id])
    finally:
        model.ctc_head.forward = original
    assert out == [[5, 7, 5, 9]]
