"""CTranslate2 model directories in: the Whisper models that CTranslate2 runs (faster-whisper's and
others' `model.bin` + `config.json` + `tokenizer.json`), read with the standard library and numpy
(no ctranslate2 needed) into one of our model directories.

The model.bin format (CTranslate2's `ModelSpec.save`, binary version 6; little-endian):
    u32 version, string spec name, u32 revision, u32 n_variables,
    n_variables x [string name, u8 rank, rank x u32 dims, u8 dtype, u32 n_bytes, the bytes],
    u32 n_aliases, n_aliases x [string alias, string name]
where a string is u16 length (with its NUL), the UTF-8 bytes and a NUL. dtype ids: 0 float32,
1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16. Scalars (num_heads, pre_norm, activation) are
rank-0 variables.

Whisper's names, and ours (the rules `_layer` applies): self-attention's q/k/v are one fused linear
(`linear_0`, rows q then k then v) and its output `linear_1`; cross-attention (`attention`) has q
alone (`linear_0`), k and v fused (`linear_1`) and the output `linear_2`; each block's
`layer_norm` is the norm before it (pre-norm); `ffn/linear_0` and `linear_1` are w1 and w2. The
output projection is an alias of the token embeddings (tied). Weights are converted to float32.

Decoding (the decode.json and speech.json written): CTranslate2's `Whisper.generate` with its
defaults, so that the imported model's transcripts are CTranslate2's on the same features:
- the prompt <|startoftranscript|> <|notimestamps|> (multilingual: <|en|> <|transcribe|> between);
  config.json's suppress_ids never generated, its suppress_ids_begin (suppress_blank: " " and
  <|endoftext|>) not as the first token; both are set to -inf before the softmax, as CTranslate2;
- beam 5 with patience 1: a clip stops once 5 hypotheses have finished (early_stopping=True);
- length_penalty 1: a finished hypothesis scores log P (<|endoftext|> included) divided by its
  number of output tokens, <|endoftext|> not counted (`include_eos_in_hypotheses = false`;
  length_counts_eos=False here). Counting it, as Hugging Face does, picks another of the beam's
  hypotheses on some clips;
- at most min(max_length // 2, max_length - (prompt - 1)) output tokens, <|endoftext|> included,
  with its max_length = 448: 224 for tiny.en (the prompt's last token is the start token). A clip
  that sends the decoder into a loop stops there, as in CTranslate2, not at the position table's
  end.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..config import AudioConfig, ModelConfig

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
BFLOAT16 = 5
_ACTIVATIONS = {0: "relu", 1: "gelu_tanh", 2: "silu", 3: "gelu"}  # ctranslate2.specs.Activation
SUPPORTED_VERSIONS = (5, 6)


class CT2ReadError(ValueError):
    """A file is not a CTranslate2 model this reader understands; the message says why."""


@dataclass
class CT2Model:
    """What model.bin holds."""

    spec: str
    """The spec's name (WhisperSpec, TransformerSpec, ...)."""
    revision: int
    variables: dict[str, np.ndarray]
    """Every variable by name, aliases resolved."""


def read_model_bin(path: str | os.PathLike) -> CT2Model:
    """Read a CTranslate2 model.bin (format in the module docstring)."""
    path = Path(path)
    data = path.read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        if pos + struct.calcsize(fmt) > len(data):
            raise CT2ReadError(f"{path} ends early (at byte {pos}): the file is truncated")
        (value,) = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal pos
        n = take("<H")
        text = data[pos : pos + n - 1].decode("utf-8", errors="replace")
        pos += n
        return text

    version = take("<I")
    if version not in SUPPORTED_VERSIONS:
        raise CT2ReadError(
            f"{path} is not a CTranslate2 model.bin of a known version (read {version}; this "
            f"reader takes {', '.join(map(str, SUPPORTED_VERSIONS))})"
        )
    spec, revision = string(), take("<I")
    variables = {}
    for _ in range(take("<I")):
        name = string()
        shape = [take("<I") for _ in range(take("<B"))]
        dtype, size = take("<B"), take("<I")
        raw = data[pos : pos + size]
        pos += size
        if dtype == BFLOAT16:
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            array = bits.view(np.float32)
        elif dtype in _DTYPES:
            array = np.frombuffer(raw, dtype=_DTYPES[dtype])
        else:
            raise CT2ReadError(f"{path}: variable {name} has an unknown dtype id {dtype}")
        variables[name] = array.reshape(shape)
    for _ in range(take("<I")):
        alias, target = string(), string()
        variables[alias] = variables[target]
    return CT2Model(spec, revision, variables)


def _scalar(variables: dict, name: str) -> int:
    return int(variables[name].reshape(-1)[0])


def _count_layers(variables: dict, side: str) -> int:
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in variables:
        n += 1
    return n


def whisper_config(variables: dict, special: dict[str, int]) -> ModelConfig:
    """Our ModelConfig for a WhisperSpec's variables; special: the tokenizer's ids of
    <|endoftext|> and <|startoftranscript|>."""
    tokens = variables["decoder/embeddings/weight"]
    conv1 = variables["encoder/conv1/weight"]  # (C, n_mels, 3)
    heads = _scalar(variables, "encoder/num_heads")
    if _scalar(variables, "decoder/num_heads") != heads:
        raise CT2ReadError("the encoder and decoder have different head counts: not supported")
    activation = _scalar(variables, "decoder/activation")
    if activation not in _ACTIVATIONS:
        raise CT2ReadError(f"activation id {activation} is not supported")
    eos, sot = special["<|endoftext|>"], special["<|startoftranscript|>"]
    return ModelConfig(
        arch="encoder-decoder",
        vocab_size=tokens.shape[0],
        d_model=tokens.shape[1],
        n_heads=heads,
        n_encoder_layers=_count_layers(variables, "encoder"),
        n_decoder_layers=_count_layers(variables, "decoder"),
        d_ff=variables["encoder/layer_0/ffn/linear_0/weight"].shape[0],
        dropout=0.0,
        norm_position="pre",
        norm="layernorm",
        norm_eps=1e-5,
        final_norm=True,
        positional="learned",
        max_positions=variables["decoder/position_encodings/encodings"].shape[0],
        activation=_ACTIVATIONS[activation],
        bias=True,
        tie_embeddings=True,
        scale_embedding=False,
        pad_id=eos,
        bos_id=sot,
        eos_id=eos,
        decoder_start_id=sot,
        audio=AudioConfig(
            n_mels=conv1.shape[1],
            max_frames=2 * variables["encoder/position_encodings/encodings"].shape[0],
            positions="sinusoidal",
            pad_to_max=True,
        ),
    )


def _linear(out: dict, ours: str, variables: dict, theirs: str) -> None:
    out[f"{ours}.weight"] = variables[f"{theirs}/weight"]
    out[f"{ours}.bias"] = variables[f"{theirs}/bias"]


def _norm(out: dict, ours: str, variables: dict, theirs: str) -> None:
    out[f"{ours}.weight"] = variables[f"{theirs}/gamma"]
    out[f"{ours}.bias"] = variables[f"{theirs}/beta"]


def _split(out: dict, ours: list[str], variables: dict, theirs: str) -> None:
    """A fused linear (rows of each part in turn) -> one linear per name in ours."""
    weights = np.split(variables[f"{theirs}/weight"], len(ours))
    biases = np.split(variables[f"{theirs}/bias"], len(ours))
    for name, w, b in zip(ours, weights, biases, strict=True):
        out[f"{name}.weight"], out[f"{name}.bias"] = w, b


def _layer(out: dict, variables: dict, side: str, i: int) -> None:
    ours, theirs = f"{side}.layers.{i}", f"{side}/layer_{i}"
    attn = f"{ours}.self_attn"
    _norm(out, f"{ours}.norm1", variables, f"{theirs}/self_attention/layer_norm")
    _split(
        out, [f"{attn}.q_proj", f"{attn}.k_proj", f"{attn}.v_proj"], variables,
        f"{theirs}/self_attention/linear_0",
    )  # fmt: skip
    _linear(out, f"{attn}.out_proj", variables, f"{theirs}/self_attention/linear_1")
    ffn_norm = "norm2"
    if side == "decoder":
        cross = f"{ours}.cross_attn"
        _norm(out, f"{ours}.norm2", variables, f"{theirs}/attention/layer_norm")
        _linear(out, f"{cross}.q_proj", variables, f"{theirs}/attention/linear_0")
        _split(
            out, [f"{cross}.k_proj", f"{cross}.v_proj"], variables, f"{theirs}/attention/linear_1"
        )
        _linear(out, f"{cross}.out_proj", variables, f"{theirs}/attention/linear_2")
        ffn_norm = "norm3"
    _norm(out, f"{ours}.{ffn_norm}", variables, f"{theirs}/ffn/layer_norm")
    _linear(out, f"{ours}.feed_forward.w1", variables, f"{theirs}/ffn/linear_0")
    _linear(out, f"{ours}.feed_forward.w2", variables, f"{theirs}/ffn/linear_1")


def whisper_tensors(cfg: ModelConfig, variables: dict) -> dict[str, torch.Tensor]:
    """Our state dict (float32) from a WhisperSpec's variables."""
    out: dict[str, np.ndarray] = {
        "encoder.front.positions": variables["encoder/position_encodings/encodings"],
        "decoder.embed.tokens.weight": variables["decoder/embeddings/weight"],
        "decoder.embed.positions.weight": variables["decoder/position_encodings/encodings"],
    }
    for conv in ("conv1", "conv2"):
        _linear(out, f"encoder.front.{conv}", variables, f"encoder/{conv}")
    for side, n in (("encoder", cfg.n_encoder_layers), ("decoder", cfg.n_decoder_layers)):
        _norm(out, f"{side}.final_norm", variables, f"{side}/layer_norm")
        for i in range(n):
            _layer(out, variables, side, i)
    return {k: torch.from_numpy(np.asarray(v, dtype=np.float32).copy()) for k, v in out.items()}


@dataclass
class WhisperImport:
    """A CTranslate2 Whisper directory, read."""

    model: torch.nn.Module
    tokenizer_file: Path
    speech: dict
    """The decoder prompt and suppressed tokens (model_dir's speech.json)."""


def _special_ids(tokenizer_file: Path) -> dict[str, int]:
    record = json.loads(tokenizer_file.read_text(encoding="utf-8"))
    return {t["content"]: t["id"] for t in record.get("added_tokens", [])}


def read_whisper(path: str | os.PathLike) -> WhisperImport:
    """Read a CTranslate2 Whisper directory (model.bin, config.json, tokenizer.json) into our
    model, its tokenizer file and the speech record."""
    from ..model.build import build_model
    from .hf.common import load_weights

    path = Path(path)
    missing = [
        f for f in ("model.bin", "config.json", "tokenizer.json") if not (path / f).is_file()
    ]
    if missing:
        raise CT2ReadError(
            f"{path} lacks {', '.join(missing)}: pass a CTranslate2 Whisper directory "
            "(model.bin, config.json, tokenizer.json)"
        )
    ct2 = read_model_bin(path / "model.bin")
    if ct2.spec != "WhisperSpec":
        raise CT2ReadError(
            f"{path}/model.bin is a CTranslate2 {ct2.spec}: this reader takes Whisper models only"
        )
    special = _special_ids(path / "tokenizer.json")
    needed = ("<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>")
    if any(t not in special for t in needed):
        raise CT2ReadError(f"{path}/tokenizer.json lacks Whisper's special tokens {needed}")
    cfg = whisper_config(ct2.variables, special)
    model = build_model(cfg)
    tensors = whisper_tensors(cfg, ct2.variables)  # key biases: the fused biases' (zero) thirds
    load_weights(model, tensors, f"{path}/model.bin -> EncoderDecoder")
    options = json.loads((path / "config.json").read_text(encoding="utf-8"))
    prompt = [special["<|startoftranscript|>"]]
    if cfg.vocab_size >= 51865 and "<|en|>" in special:  # a multilingual model: CTranslate2's rule
        prompt += [special["<|en|>"], special["<|transcribe|>"]]
    prompt.append(special["<|notimestamps|>"])
    speech = {
        "prompt": prompt,
        "suppress_tokens": [int(t) for t in options.get("suppress_ids", [])],
        "begin_suppress_tokens": [int(t) for t in options.get("suppress_ids_begin", [])],
    }
    return WhisperImport(model.eval(), path / "tokenizer.json", speech)


def is_ct2_directory(path: str | os.PathLike) -> bool:
    """Whether path is a CTranslate2 model directory (it holds model.bin)."""
    return Path(path).is_dir() and (Path(path) / "model.bin").is_file()


CT2_MAX_LENGTH = 448
"""CTranslate2's Whisper.generate default max_length (the prompt and the output)."""


def ct2_decode(prompt_length: int, max_length: int = CT2_MAX_LENGTH):
    """A DecodeConfig with CTranslate2's Whisper.generate defaults, for a prompt of prompt_length
    tokens and generate's max_length (see the module doc)."""
    from ..config import DecodeConfig

    max_tokens = min(max_length // 2, max_length - (prompt_length - 1))
    return DecodeConfig(
        beam_size=5, length_penalty=1.0, length_penalty_kind="power", length_counts_eos=False,
        early_stopping=True, max_len_a=0.0, max_len_b=max_tokens, add_bos=False, add_eos=False,
    )  # fmt: skip


def import_ct2(path: str | os.PathLike, out: str | os.PathLike):
    """Convert a CTranslate2 Whisper directory into one of our model directories: config.json,
    model.safetensors, tokenizer.json (copied), decode.json, speech.json and a README.md.
    Returns the interop.hf ImportResult (model_type "whisper")."""
    import shutil

    from ..files import atomic_write, atomic_write_text
    from ..model_dir import save_model
    from .hf.importing import ImportResult

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise CT2ReadError(f"--out {out} is a file: pass a directory to write the model into")
    whisper = read_whisper(path)
    decode = ct2_decode(len(whisper.speech["prompt"]))
    save_model(whisper.model, out, decode=decode, speech=whisper.speech)
    atomic_write(out / "tokenizer.json", lambda tmp: shutil.copyfile(whisper.tokenizer_file, tmp))
    atomic_write_text(
        out / "README.md",
        f"# Whisper, imported from CTranslate2\n\nConverted from `{path}` with `transformer "
        "import-hf` (weights in float32). Its transcripts equal CTranslate2's "
        "`Whisper.generate` on the same log-mel features, greedy or beam: decode.json holds "
        "generate's defaults (beam 5, length_penalty 1 over the output tokens without "
        "<|endoftext|>, at most "
        f"{decode.max_len_b} tokens).\n\nThe decoder starts from the prompt in speech.json and "
        "never generates the ids it suppresses, as CTranslate2 does.\n",
    )
    files = [
        "config.json", "model.safetensors", "decode.json", "speech.json", "tokenizer.json",
        "README.md",
    ]  # fmt: skip
    return ImportResult("whisper", files, whisper.model)
