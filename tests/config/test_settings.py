"""One source of truth: every decoding setting (and every serve limit) is accepted and refused
alike by the command line, a config file's [decode] section and the HTTP API, because all three
derive from the setting's one definition (transformer.config.checks.setting)."""

import math

import pytest
import torch

import transformer
from transformer.cli import build_parser
from transformer.cli.common import UserError, check_flags
from transformer.cli.serve import serve_config
from transformer.config import (
    ConfigError,
    DecodeConfig,
    ServeConfig,
    cpu_tiny,
    load_config,
    settings_of,
)
from transformer.data.tokenizer import train_bpe

# setting -> (values every interface accepts, values every interface refuses); within the server's caps
DECODE = {
    "beam_size": ([1, 3], [0, -1]),
    "length_penalty": ([0.0, 0.6, -0.5, 2], [math.nan, math.inf]),
    "length_penalty_kind": (["wu", "power"], ["cube", ""]),
    "max_len_a": ([0.0, 0.5, 2], [-1.0, math.inf]),
    "max_len_b": ([0, 5], [-1]),
    "min_len": ([0, 2], [-2]),
    "n_best": ([1, 2], [0, -1]),
    "early_stopping": ([True, False, "never"], ["always"]),
    "temperature": ([0.0, 0.7, 1, 2.5], [-1.0, math.inf, math.nan]),
    "top_k": ([0, 5], [-1]),
    "top_p": ([1.0, 0.5], [0.0, 1.5, -0.1]),
    "guidance_scale": ([1.0, 0.0, 3, 7.5], [-1.0, math.inf, math.nan]),
    "max_new_tokens": ([1, 3], [0, -5]),
    "no_repeat_ngram_size": ([0, 1, 3], [-1]),
    "repetition_penalty": ([1.0, 1.2, 0.8, 3], [0.0, -1.0, math.inf, math.nan]),
    "precision": (["fp32", "bf16", "int8", "auto"], ["fp16", "x"]),
    "compile": (["off", "on"], ["yes", "auto"]),
    "answer_window": ([8, 384], [7, 0]),
    "answer_stride": ([1, 128], [0, -1]),
    "max_answer_tokens": ([1, 30], [0, -1]),
    "sentence_threshold": ([0.5, 0.01, 0.99], [0.0, 1.0, -0.5, math.nan]),
    "speech_head": (["decoder", "ctc", "joint"], ["attention", ""]),
    "ctc_weight": ([0.0, 0.3, 1], [-0.1, 1.5, math.nan]),
    "threshold": ([0.0, 0.5, 1], [-0.1, 1.5, math.nan]),
    "batch_size": ([1, 64], [0, -1]),
    "keep_markup": ([True, False], ["yes", 1]),
    "length_counts_eos": ([True, False], ["no", 0]),
}
COMPANIONS = {
    "n_best": {"beam_size": 4},
    "source_lang": {"target_lang": "en"},
    "target_lang": {"source_lang": "es"},
}
"""Settings given with the one under test (n_best needs a beam at least as wide; a language pair is
given whole)."""
COMMANDS = {
    "temperature": "generate",
    "top_k": "generate",
    "top_p": "generate",
    "guidance_scale": "generate",
    "max_new_tokens": "generate",
    "compile": "generate",
    "answer_window": "answer",
    "answer_stride": "answer",
    "max_answer_tokens": "answer",
    "sentence_threshold": "answer",
    "speech_head": "transcribe",
    "ctc_weight": "transcribe",
    "threshold": "detect",
    "batch_size": "transcribe",
}
"""The command whose flag is tried (translate unless named)."""
REQUIRED = {
    "generate": ["--prompt", "x"],
    "answer": ["--question", "q", "--context", "c"],
    "transcribe": ["clip.wav"],
    "detect": ["image.png"],
}
"""What each command needs besides the flag."""

SERVE = {
    "max_batch_tokens": ([1, 4000], [0, -1]),
    "batching": (["continuous", "whole"], ["dynamic", ""]),
    "max_waiting_steps": ([1, 8], [0, -1]),
    "max_wait_ms": ([0.0, 10.5], [-1.0, math.inf]),
    "max_queue": ([1, 256], [0]),
    "timeout": ([0.5, 60], [0.0, -1.0, math.nan]),
    "max_lines": ([1], [0]),
    "max_body_bytes": ([1, 1 << 20], [0]),
    "max_audio_seconds": ([0.5, 600.0], [0.0, -1.0, math.inf]),
    "api_key": (["k"], []),
    "cors_origin": (["https://example.org"], []),
    "source_lang": (["es", "ast", "pt-BR"], ["ES", "auto", "en", "e s", ""]),
    "target_lang": (["en", "zh-Hans"], ["es", "auto", "english"]),
    "host": (["0.0.0.0"], []),
    "port": ([0, 8000, 65535], [-1, 65536]),
    "drain_timeout": ([0.0, 30], [-1.0, math.inf]),
}


def test_every_setting_is_walked():
    assert set(DECODE) == set(settings_of(DecodeConfig)), (
        "add the new decoding setting's values to DECODE"
    )
    assert set(SERVE) == set(settings_of(ServeConfig)), (
        "add the new serve setting's values to SERVE"
    )


def toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(float(value)) if isinstance(value, float) else str(value)


def config_accepts(tmp_path, name, value) -> bool:
    decode = {**COMPANIONS.get(name, {}), name: value}
    file = tmp_path / "c.toml"
    file.write_text(
        '[model]\narch = "decoder"\n[data]\ntrain_text = "t.txt"\n[decode]\n'
        + "".join(f"{k} = {toml(v)}\n" for k, v in decode.items()),
        encoding="utf-8",
    )
    try:
        load_config(file)
    except ConfigError:
        return False
    return True


def cli_accepts(cls, command: list[str], name, value) -> bool | None:
    """Whether `transformer COMMAND --flag VALUE` passes argparse and the flag checks; None: no flag."""
    fields = settings_of(cls)
    if fields[name].metadata["flag"] is None or isinstance(fields[name].default, bool):
        return None  # a bool's flag takes no value: it gives the other one (tests/cli/test_args.py)
    argv = [*command]
    for key, v in {**COMPANIONS.get(name, {}), name: value}.items():
        argv += [fields[key].metadata["flag"], str(v)]
    try:
        args = build_parser().parse_args(argv)
        check_flags(args)
    except (SystemExit, UserError):
        return False
    return True


@pytest.mark.parametrize("name", list(DECODE))
def test_the_cli_and_the_config_file_agree(tmp_path, capsys, name):
    accepted, refused = DECODE[name]
    command = [COMMANDS.get(name, "translate"), "model"]
    command += REQUIRED.get(command[0], [])
    for values, ok in ((accepted, True), (refused, False)):
        for value in values:
            assert config_accepts(tmp_path, name, value) is ok, (name, value, "config")
            assert cli_accepts(DecodeConfig, command, name, value) in (ok, None), (
                name,
                value,
                "cli",
            )
    capsys.readouterr()  # argparse's usage lines


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from transformer.decoding.pipeline import Pipeline
    from transformer.serve import create_app

    tmp = tmp_path_factory.mktemp("settings")
    tok = train_bpe(["the cat sat on the mat", "a dog ran in the park"] * 20, vocab_size=300)
    out = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(0)
        model = transformer.build_model(
            cpu_tiny(vocab_size=tok.vocab_size, arch=arch, max_positions=32)
        )
        path = transformer.save_model(
            model,
            tmp / arch,
            tokenizer=tok,
            decode=DecodeConfig(beam_size=1, max_len_b=4, max_new_tokens=4),
        )
        out[arch] = TestClient(create_app(Pipeline.load(path), ServeConfig()))
        out[arch].__enter__()
    yield out
    for c in out.values():
        c.__exit__(None, None, None)


def api_accepts(clients, name, value) -> bool | None:
    """Whether the API takes the value (200) or refuses it (422); None: no endpoint takes it."""
    from pydantic import ValidationError

    from transformer.serve.schemas import GenerateRequest, TranscribeRequest, TranslateRequest

    settings = {**COMPANIONS.get(name, {}), name: value}
    if name == "threshold":  # /v1/detect's request
        from transformer.serve.schemas import DetectRequest

        try:
            DetectRequest(images=["UklGRg=="], **settings)
        except ValidationError:
            return False
        return True
    if name in TRANSCRIBE_ONLY:  # /v1/transcribe's request, validated as the route validates it
        try:
            TranscribeRequest(audio="UklGRg==", **settings)
        except ValidationError:
            return False
        return True
    if name in TranslateRequest.model_fields:
        r = clients["encoder-decoder"].post("/v1/translate", json={"text": "the cat", **settings})
    elif name in GenerateRequest.model_fields:
        r = clients["decoder"].post("/v1/generate", json={"prompt": "the cat", **settings})
    else:
        return None
    assert r.status_code in (200, 422), r.text
    return r.status_code == 200


TRANSCRIBE_ONLY = {"speech_head", "ctc_weight"}
"""Settings of /v1/transcribe alone."""
API_LESS = {
    "early_stopping",
    "precision",
    "compile",
    "answer_window",
    "answer_stride",
    "max_answer_tokens",
    "sentence_threshold",
    "guidance_scale",
    "batch_size",
    "length_counts_eos",
}
"""Settings no request takes: a model directory's decode.json and the server's --precision set them
(the server has no question-answering route, and does not serve image generators; it batches by its
own --max-batch-tokens)."""


@pytest.mark.parametrize("name", list(DECODE))
def test_the_http_api_agrees(clients, name):
    accepted, refused = DECODE[name]
    for values, ok in ((accepted, True), (refused, False)):
        for value in values:
            if isinstance(value, float) and not math.isfinite(value):
                continue  # JSON has no NaN or infinity
            answer = api_accepts(clients, name, value)
            assert answer is (None if name in API_LESS else ok), (name, value, "api")


def test_the_server_adds_resource_caps_and_says_so(clients):
    from transformer.serve.schemas import SERVER_CAPS

    for name, cap in SERVER_CAPS.items():
        assert DecodeConfig(
            **{name: cap * 2, **({"beam_size": cap * 2} if name == "n_best" else {})}
        )
        too_much = cap + 1 if isinstance(cap, int) and name != "max_len_a" else cap * 2
        assert api_accepts(clients, name, too_much) is False, name


def test_temperature_0_is_greedy_everywhere(clients):
    lm = clients["decoder"].app.state.serve.pipeline
    greedy = transformer.greedy_search(
        lm.model, [lm.prompt_ids("the cat")], max_len_a=0, max_len_b=4
    )
    want = lm.target_tokenizer.decode(greedy[0].tolist())
    assert DecodeConfig(temperature=0).temperature == 0
    assert (
        lm.generate("the cat", temperature=0, seed=1)
        == lm.generate("the cat", temperature=0, seed=2)
        == want
    )
    r = clients["decoder"].post("/v1/generate", json={"prompt": "the cat", "temperature": 0})
    assert r.json()["text"] == want


@pytest.mark.parametrize("name", list(SERVE))
def test_serve_flags_and_serve_config_agree(capsys, name):
    accepted, refused = SERVE[name]
    for values, ok in ((accepted, True), (refused, False)):
        for value in values:
            given = {**COMPANIONS.get(name, {}), name: value}
            try:
                ServeConfig(**given)
                config_ok = True
            except ConfigError:
                config_ok = False
            assert config_ok is ok, (name, value, "ServeConfig")
            cli_ok = cli_accepts(ServeConfig, ["serve", "model"], name, value)
            if cli_ok:  # the flags' rules passed: then `transformer serve` builds its config
                try:
                    serve_config(given)
                except ConfigError:
                    cli_ok = False
            assert cli_ok is ok, (
                name,
                value,
                "cli",
            )
    capsys.readouterr()


def test_flags_and_api_fields_carry_the_settings_doc():
    """The doc is written once (the docstring under the field): the flag's help and the API field's
    description are that text."""
    pytest.importorskip("fastapi")
    from transformer.config.checks import field_docs
    from transformer.serve.schemas import GenerateRequest, TranslateRequest

    docs = field_docs(DecodeConfig)
    translate = build_parser().parse_args(["translate", "model"]).parser  # the command's own parser
    helps = {a.dest: a.help for a in translate._actions}
    assert helps["length_penalty_kind"].startswith(docs["length_penalty_kind"].rstrip("."))
    assert "((5 + |Y|) / 6)^alpha" in docs["length_penalty_kind"]
    for model in (TranslateRequest, GenerateRequest):
        for name, field in model.model_fields.items():
            if name in docs:
                assert field.description == docs[name], name


def test_components_read_their_choice_lists_from_config():
    import transformer.config as config
    from transformer.data import tokenizer
    from transformer.decoding.search import penalties
    from transformer.model import quantize
    from transformer.runtime import precision
    from transformer.viz import attention

    assert tokenizer.KINDS is config.TOKENIZER_KINDS
    assert penalties.LENGTH_PENALTY_KINDS is config.LENGTH_PENALTY_KINDS
    assert quantize.INFERENCE_PRECISIONS is config.INFERENCE_PRECISIONS
    assert (
        precision.ATTENTION_IMPLS is config.ATTENTION_IMPLS
        and precision.PRECISIONS is config.PRECISIONS
    )
    assert attention.KINDS is config.ATTENTION_KINDS
