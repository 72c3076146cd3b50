"""Speech recognition trained here: a corpus of tone "words" (each word a pitch) in the folder
format `transformer data speech` writes, a small run that learns to transcribe it, resume's
batches, and the transcribe / evaluate --audio commands on its output (WAV files, padded batches,
30 s windows)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config import ConfigError, build_run_config
from transformer.data.audio import SAMPLE_RATE, log_mel
from transformer.data.sources.speech import features_of, write_wav
from transformer.decoding.pipeline import Pipeline
from transformer.decoding.transcribe import TranscribeError, windows
from transformer.training.objectives.speech import SpeechCorpus, spec_augment
from transformer.training.trainer import train

WORDS = {"do": 262, "re": 294, "mi": 330, "fa": 349, "so": 392, "la": 440}
WORD_SECONDS, GAP_SECONDS = 0.12, 0.05


def speak(words: list[str], gain: float = 0.3) -> torch.Tensor:
    """16 kHz samples: each word a tone of its pitch (and its octave), a short silence after."""
    parts = []
    t = torch.arange(int(WORD_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    for w in words:
        f = WORDS[w]
        parts += [gain * (torch.sin(2 * math.pi * f * t) + 0.5 * torch.sin(4 * math.pi * f * t)),
                  torch.zeros(int(GAP_SECONDS * SAMPLE_RATE))]
    return torch.cat(parts)


def sentences(n: int, seed: int) -> list[list[str]]:
    g = torch.Generator().manual_seed(seed)
    names = list(WORDS)
    return [[names[int(i)] for i in torch.randint(len(names), (int(k),), generator=g)]
            for k in torch.randint(2, 6, (n,), generator=g)]


def write_features(folder: Path, texts: list[list[str]]) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    feats = [features_of(speak(words)) for words in texts]
    offsets = torch.tensor([0] + [len(f) for f in feats]).cumsum(0)
    save_file({"frames": torch.cat(feats), "offsets": offsets}, str(folder / "features.safetensors"))
    (folder / "transcripts.tsv").write_text("".join(f"{i}\ttones\t{' '.join(w)}\n" for i, w in enumerate(texts)))
    return folder


def write_wavs(folder: Path, texts: list[list[str]]) -> Path:
    folder.mkdir(parents=True)
    for i, words in enumerate(texts):
        write_wav(folder / f"{i}.wav", speak(words))
    (folder / "transcripts.tsv").write_text("".join(f"{i}.wav\t{' '.join(w)}\n" for i, w in enumerate(texts)))
    return folder


def _config(root: Path, steps: int) -> dict:
    return {
        "model": {"arch": "encoder-decoder", "d_model": 64, "n_heads": 4, "n_encoder_layers": 1,
                  "n_decoder_layers": 1, "d_ff": 128, "dropout": 0.0, "norm_position": "pre",
                  "activation": "gelu", "positional": "learned", "max_positions": 16,
                  "scale_embedding": False, "audio": {"n_mels": 80, "max_frames": 200}},
        "data": {"train_audio": str(root / "train"), "valid_audio": str(root / "valid"),
                 "tokenizer": "word", "vocab_size": 20, "max_len": 12, "cache": str(root / "cache")},
        "train": {"batch_tokens": 1200, "max_steps": steps, "warmup_steps": 20, "lr": 3e-3, "label_smoothing": 0.0,
                  "schedule": "cosine", "valid_every": steps, "save_every": steps, "log_every": 50,
                  "precision": "fp32", "valid_questions": 40},
        "decode": {"beam_size": 1, "max_len_a": 0.0, "max_len_b": 12},
    }


@pytest.fixture(scope="module")
def speech_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech")
    write_features(root / "train", sentences(500, 1))
    write_features(root / "valid", sentences(40, 2))
    write_wavs(root / "test", sentences(12, 3))
    config = build_run_config(_config(root, 200))
    assert config.objective == "speech"
    lines = []
    train(config, root / "run", log=lines.append)
    return root, lines


def test_a_speech_run_learns_to_transcribe(speech_run):
    root, lines = speech_run
    assert any("500 training clips" in line for line in lines)
    metrics = [json.loads(x) for x in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    valid = [m for m in metrics if m.get("split") == "valid"][-1]
    assert valid["valid_wer"] < 10  # 1.3 here; a transcript drawn at random has a WER near 100
    assert json.loads((root / "run" / "best" / "speech.json").read_text())["prompt"] == [2]


def test_transcripts_of_wav_files_and_their_wer(speech_run, capsys):
    root, _ = speech_run
    assert main(["evaluate", str(root / "run" / "best"), "--audio", str(root / "test")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 13 and out[-1].startswith("WER = ")
    assert float(out[-1].split()[2]) < 15
    wav = str(root / "test" / "0.wav")
    assert main(["transcribe", str(root / "run" / "best"), wav, wav, "--json", "--beam", "1"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in records] == [wav, wav] and records[0]["text"] == records[1]["text"]


def test_padded_batches_and_windows_transcribe_as_each_clip_alone(speech_run):
    root, _ = speech_run
    pipe = Pipeline.load(root / "run" / "best")
    clips = [speak(w) for w in sentences(6, 4)]
    alone = [pipe.transcribe(c, beam_size=1)[0] for c in clips]
    assert pipe.transcribe(clips, beam_size=1, batch_size=4) == alone
    # a clip longer than the model's 2 s window is cut in windows: here exactly two
    window = 200 * 160
    first, second = speak(["do", "re", "mi"]), speak(["la", "so"])
    long = torch.cat([first, torch.zeros(window - len(first)), second])
    assert pipe.transcribe(long, beam_size=1) == [
        " ".join(pipe.transcribe([long[:window], second], beam_size=1))
    ]
    assert [len(w) for w in windows(long, window)] == [window, len(second)]


def test_transcribe_errors_are_one_line(speech_run, tmp_path, capsys):
    root, _ = speech_run
    pipe = Pipeline.load(root / "run" / "best")
    with pytest.raises(TranscribeError, match="pass WAV file paths or 1-D float tensors"):
        pipe.transcribe([torch.zeros(2, 3)])
    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    assert main(["transcribe", str(root / "run" / "best"), str(text)]) == 2
    assert "is not a WAV file" in capsys.readouterr().err
    assert main(["evaluate", str(root / "run" / "best"), "--audio", str(tmp_path)]) == 2
    assert "has no transcripts.tsv" in capsys.readouterr().err


def test_the_corpus_drops_what_does_not_fit_and_spec_augment_masks(tmp_path):
    from transformer.data.tokenizer import train_tokenizer

    folder = write_features(tmp_path / "c", [["do"] * 2, ["re"] * 20])  # 20 words: 3.4 s
    tok = train_tokenizer("word", iter(["do re"]), 20, 1, ("<pad>", "<unk>", "<s>", "</s>"))
    corpus = SpeechCorpus(str(folder), tok, max_frames=200, max_len=12)
    assert len(corpus) == 1 and corpus.dropped == 1 and corpus.kept_texts == ["do do"]
    x = corpus.features(0)
    masked = spec_augment(x, torch.Generator().manual_seed(0))
    assert masked.shape == x.shape and (masked != x).any() and (masked == x).float().mean() > 0.5


def test_speech_config_rules(tmp_path):
    values = _config(tmp_path, 10)
    values["model"].pop("audio")
    with pytest.raises(ConfigError, match="data.train_audio needs a speech encoder"):
        build_run_config(values)
    values = _config(tmp_path, 10)
    values["data"].pop("train_audio")
    values["data"].pop("valid_audio")
    values["data"]["train_text"] = "x.txt"
    with pytest.raises(ConfigError, match="a speech encoder needs data.train_audio"):
        build_run_config(values)


def test_attention_over_the_audio(speech_run, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from transformer.viz.audio_attention import audio_attention

    root, _ = speech_run
    pipe = Pipeline.load(root / "run" / "best")
    samples = speak(["do", "mi", "so"])
    m = audio_attention(pipe, samples, head="all")
    frames = log_mel(samples, pad_to=None).shape[1]
    assert m.weights.shape == (4, len(m.tokens), (frames + 1) // 2) and m.text == pipe.transcribe(samples)[0]
    assert torch.allclose(m.weights.sum(-1), torch.ones(4, len(m.tokens)), atol=1e-4)  # all real keys
    wav = tmp_path / "clip.wav"
    write_wav(wav, samples)
    out = tmp_path / "att.png"
    assert main(["attention", str(root / "run" / "best"), "--audio", str(wav), "--out", str(out)]) == 0
    assert out.stat().st_size > 0 and "cross-attention" in capsys.readouterr().out
    assert main(["attention", str(root / "run" / "best"), "--text", "do", "--out", str(out)]) == 2
    assert "give --audio" in capsys.readouterr().err


def test_the_ctc_loss_is_ctcs_per_clip(tmp_path):
    root = tmp_path
    write_features(root / "train", sentences(12, 5))
    write_features(root / "valid", sentences(4, 6))
    values = _config(root, 1)
    values["model"]["audio"]["ctc"] = True
    config = build_run_config(values)
    from transformer.tasks import prepare_objective
    from transformer.training import distributed as D

    (root / "run").mkdir()
    objective = prepare_objective(config, root / "run", D.DistInfo(0, 1, 0, torch.device("cpu")), lambda line: None)
    model = objective.new_model()
    objective.bind(model)
    batch = objective._batch(objective.train, list(range(6)))
    with torch.no_grad():
        _, ctc_logits, positions = model(batch.features, batch.tgt_in, src_mask=batch.mask, ctc=True)
        total = objective.ctc_loss(ctc_logits, positions, batch)
        expected, start = 0.0, 0
        for row in range(6):  # each clip alone: its real positions, its own transcript
            n, k = int(positions[row].sum()), int(batch.ctc_lengths[row])
            lp = torch.log_softmax(ctc_logits[row, :n], -1)[:, None]  # (L, 1, V)
            target = batch.ctc_targets[start : start + k][None]
            expected += float(torch.nn.functional.ctc_loss(lp, target, [n], [k], blank=0, reduction="sum"))
            start += k
    assert float(total) == pytest.approx(expected, rel=1e-5)


def test_a_ctc_run_at_stride_4_learns_and_transcribes_by_its_ctc_head(tmp_path, capsys):
    root = tmp_path
    write_features(root / "train", sentences(500, 1))
    write_features(root / "valid", sentences(40, 2))
    write_wavs(root / "test", sentences(12, 3))
    values = _config(root, 150)
    values["model"]["audio"].update(stride=4, ctc=True)
    values["train"]["ctc_weight"] = 0.7
    values["decode"]["speech_head"] = "ctc"
    train(build_run_config(values), root / "run", log=lambda line: None)
    metrics = [json.loads(x) for x in (root / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m for m in metrics if m.get("split") == "valid"][-1]["valid_wer"] < 10
    best = str(root / "run" / "best")
    assert main(["evaluate", best, "--audio", str(root / "test")]) == 0
    assert float(capsys.readouterr().out.splitlines()[-1].split()[2]) < 15
    pipe = Pipeline.load(best)
    assert pipe.decode.speech_head == "ctc"
    clips = [speak(w) for w in sentences(6, 4)]
    assert pipe.transcribe(clips, batch_size=4) == [pipe.transcribe(c)[0] for c in clips]
    # the same model's decoder, and the joint search, on request
    assert main(["transcribe", best, str(root / "test" / "0.wav"), "--speech-head", "decoder"]) == 0
    capsys.readouterr()
    args = ["--speech-head", "joint", "--beam", "2", "--ctc-weight", "0.5"]
    assert main(["evaluate", best, "--audio", str(root / "test"), *args]) == 0
    assert float(capsys.readouterr().out.splitlines()[-1].split()[2]) < 15
    values["model"]["audio"]["ctc"] = False
    with pytest.raises(ConfigError, match='speech_head = "ctc" needs a CTC head'):
        train(build_run_config(values), root / "run2", log=lambda line: None)


def test_speech_head_ctc_on_a_model_without_one_is_one_line(speech_run, capsys):
    root, _ = speech_run
    wav = str(root / "test" / "0.wav")
    assert main(["transcribe", str(root / "run" / "best"), wav, "--speech-head", "ctc"]) == 2
    err = capsys.readouterr().err
    assert "this model has no CTC head" in err and len(err.strip().splitlines()) == 1


def test_train_pad_to_max_overrides_a_pretrained_models_windows(speech_run, tmp_path):
    """A model trained on whole windows (Whisper's) fine-tuned with train.pad_to_max = false reads
    each clip at its own length, and the model it writes transcribes without padding; and back."""
    root, _ = speech_run
    windowed = tmp_path / "windowed"
    shutil.copytree(root / "run" / "best", windowed)
    config = json.loads((windowed / "config.json").read_text())
    config["audio"]["pad_to_max"] = True
    (windowed / "config.json").write_text(json.dumps(config))

    def fine_tune(init: Path, pad_to_max: bool, out: Path) -> tuple[list[float], dict]:
        values = _config(root, 4)
        values["train"].update(init_from=str(init), pad_to_max=pad_to_max, valid_questions=4)
        lines = []
        train(build_run_config(values), out, log=lines.append)
        written = json.loads((out / "last" / "config.json").read_text())["audio"]
        padding = [float(x.split("padding ")[1].split("%")[0]) for x in lines if "padding" in x]
        return padding, written

    # the tone clips are 0.3-0.9 s in a 2 s window: padded to it, most positions are padding
    padding, written = fine_tune(root / "run" / "best", True, tmp_path / "windows")
    assert written["pad_to_max"] is True and padding[0] > 40
    padding, written = fine_tune(windowed, False, tmp_path / "clips")
    assert written["pad_to_max"] is False and padding[0] < 15
    pipe = Pipeline.load(tmp_path / "clips" / "last")
    clips = [speak(w) for w in sentences(4, 5)]
    assert pipe.transcribe(clips, beam_size=1, batch_size=4) == [
        pipe.transcribe(c, beam_size=1)[0] for c in clips
    ]
    values = _config(root, 4)
    values["train"]["pad_to_max"] = False
    with pytest.raises(ConfigError, match="train.pad_to_max is for objective speech with train.init_from"):
        build_run_config(values)


def test_freeze_encoder_fine_tunes_a_speech_models_decoder_alone(speech_run, tmp_path):
    """train.freeze_encoder on a speech model: the audio encoder's weights come out as they went
    in, every decoder weight moves; and it is refused beside train.lora (which freezes them all)."""
    from safetensors.torch import load_file

    root, _ = speech_run
    values = _config(root, 4)
    values["train"].update(init_from=str(root / "run" / "best"), freeze_encoder=True, valid_questions=4)
    train(build_run_config(values), tmp_path / "frozen", log=lambda _: None)
    before = load_file(root / "run" / "best" / "model.safetensors")
    after = load_file(tmp_path / "frozen" / "last" / "model.safetensors")
    encoder = [n for n in before if n.startswith("encoder.")]
    decoder = [n for n in before if n.startswith("decoder.") and not n.endswith("k_proj.bias")]  # its gradient is 0
    assert encoder and decoder
    assert all(torch.equal(before[n], after[n]) for n in encoder)
    assert all(not torch.equal(before[n], after[n]) for n in decoder)
    values["train"]["lora"] = {"rank": 2}
    with pytest.raises(ConfigError, match="train.freeze_encoder and train.lora both choose"):
        build_run_config(values)
