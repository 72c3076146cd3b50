"""ModelDir: a model directory read and written whole, its file names defined in model_dir.py only."""

import json
import re
from pathlib import Path

import pytest
import torch

import transformer
from transformer.config import DecodeConfig, cpu_tiny
from transformer.data.tokenizer import TokenizerError, train_bpe
from transformer.model_dir import ModelDir
from transformer.model_records import load_decode_config

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer"


def test_a_model_directory_round_trips_whole(tmp_path):
    tok = train_bpe(["the cat sat on the mat", "a dog sat on a log"] * 10, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size)).eval()
    chat = {"chat_template": "{{ messages }}", "bos_token": "<s>", "eos_token": "</s>"}
    written = ModelDir(model, (tok, tok), DecodeConfig(beam_size=3), chat=chat, readme="# made by a test\n")
    written.write(tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "README.md", "chat_template.json", "config.json", "decode.json", "model.safetensors", "tokenizer.json"]
    read = ModelDir.read(tmp_path / "m")
    assert read.model.config == model.config and not read.model.training
    assert all(torch.equal(a, b) for a, b in zip(read.model.state_dict().values(), model.state_dict().values(), strict=True))
    assert read.tokenizers[0] is read.tokenizers[1] and read.tokenizers[0].encode("the cat") == tok.encode("the cat")
    assert (read.decode, read.chat, read.readme) == (DecodeConfig(beam_size=3), chat, "# made by a test\n")
    assert (read.labels, read.special_tokens, read.speech, read.pixels) == (None, None, None, None)
    # what save_model wrote before ModelDir existed reads the same: decode.json is the same JSON
    assert json.loads((tmp_path / "m" / "decode.json").read_text()) == DecodeConfig(beam_size=3).to_dict()
    assert load_decode_config(tmp_path / "m") == read.decode


def test_a_translation_model_records_its_language_pair(tmp_path):
    from transformer.model.io import ModelFileError

    model = transformer.build_model(cpu_tiny(vocab_size=40)).eval()
    transformer.save_model(model, tmp_path / "m", languages={"source": "es", "target": "en"})
    assert json.loads((tmp_path / "m" / "languages.json").read_text()) == {"source": "es", "target": "en"}
    assert ModelDir.read(tmp_path / "m").languages == {"source": "es", "target": "en"}
    assert transformer.ModelDir.read(tmp_path / "m").languages is not None
    (tmp_path / "m" / "languages.json").write_text('{"source": "Spanish", "target": "en"}')
    with pytest.raises(ModelFileError, match=r"languages.json is not a language pair .* fix or delete it"):
        ModelDir.read(tmp_path / "m")
    transformer.save_model(model, tmp_path / "bare")
    assert ModelDir.read(tmp_path / "bare").languages is None


def test_a_directory_without_its_extras_reads_with_defaults(tmp_path):
    model = transformer.build_model(cpu_tiny(vocab_size=40)).eval()
    transformer.save_model(model, tmp_path / "bare")
    read = transformer.ModelDir.read(tmp_path / "bare")
    assert (read.tokenizers, read.readme, read.decode) == (None, None, DecodeConfig())


ALLOWED = {
    "export/hf.py: tokenizer.json",  # Hugging Face's own file name, in the folder export writes for it
    "cli/loading.py: config.json",  # cli/ peeks at a directory without importing torch (model_dir does)
    "cli/evaluation.py: pixels.json",
}


def test_the_directory_file_names_are_written_in_model_dir_and_its_records_only():
    names = re.compile(r'"(config\.json|model\.safetensors|tokenizer(\.src|\.tgt)?\.json|decode\.json|labels\.json|'
                       r'special_tokens\.json|chat_template\.json|speech\.json|pixels\.json|languages\.json)"')
    typed = [f"{file.relative_to(PACKAGE)}: {m.group(1)}" for file in PACKAGE.rglob("*.py")
             if file.name not in ("model_dir.py", "model_records.py") and "interop" not in file.parts  # other formats' files
             for m in names.finditer(file.read_text(encoding="utf-8"))]
    assert set(typed) - ALLOWED == set()


def test_pipeline_and_model_dir_are_public_names():
    from transformer.decoding.inputs import PipelineError
    from transformer.decoding.pipeline import Pipeline

    assert (transformer.Pipeline, transformer.PipelineError, transformer.ModelDir) == (Pipeline, PipelineError, ModelDir)
    assert {"Pipeline", "PipelineError", "ModelDir"} <= set(transformer.__all__)


def test_pipeline_load_reads_a_model_directory_whole(tmp_path):
    tok = train_bpe(["the cat sat on the mat", "a dog sat on a log"] * 10, vocab_size=300)
    model = transformer.build_model(cpu_tiny(vocab_size=tok.vocab_size)).eval()
    ModelDir(model, (tok, tok), DecodeConfig(beam_size=2)).write(tmp_path / "m")
    pipe = transformer.Pipeline.load(tmp_path / "m")
    assert pipe.source_tokenizer is pipe.target_tokenizer and pipe.decode == DecodeConfig(beam_size=2)
    (tmp_path / "m" / "tokenizer.json").unlink()
    with pytest.raises(TokenizerError, match="has no tokenizer: expected tokenizer.json or tokenizer.src.json"):
        transformer.Pipeline.load(tmp_path / "m")
