"""Model directory -> one GGUF file, the format llama.cpp (and so Ollama) runs.

How our decoder-only model maps onto llama.cpp's (the rules first; the functions apply them):
- Layouts: Llama (pre-norm, RMSNorm, rope, SwiGLU, grouped-query attention allowed; biases
  written when the model has them) as general.architecture "llama", and GPT-2 (pre-norm,
  LayerNorm, learned positions, GELU) as "gpt2". Anything else, and every encoder-decoder or
  encoder-only model, is one ExportError line naming the field.
- Rotary positions: ours rotate the pairs (2i, 2i+1) at angle pos * base^(-2i/D) (RoFormer);
  llama.cpp's "llama" architecture uses the same "normal" rope (LLAMA_ROPE_TYPE_NORM: pairs of
  consecutive values). So the query and key rows go in as they are. (llama.cpp's
  convert_hf_to_gguf permutes them because Hugging Face's Llama pairs i with i + D/2; our
  importer already undid that permutation.)
- GPT-2: llama.cpp's GELU is the tanh approximation (our "gelu_tanh"); a model trained with
  exact GELU ("gelu") is exported too, and its outputs differ from ours in the last digits. Its
  query, key and value projections are one fused attn_qkv matrix, and every layer has biases:
  a model without them (bias = false) gets zeros, the same outputs.
- Tensors: GGUF names (token_embd, blk.N.attn_q, ...), each matrix in our (out, in) layout (the
  writer stores ggml's reversed dimensions). The output layer is left out when tied to the
  token embedding: llama.cpp then reuses token_embd.
- Precision (--quantization): f32 (default), f16 or q8_0 for the matrices; vectors (norms,
  biases) stay f32. A matrix whose rows are not a multiple of Q8_0's 32-value block is written
  f16, as llama.cpp's converter does.
- Tokenizer: byte-level BPE (ours, and imported GPT-2 style ones) as tokenizer.ggml.model
  "gpt2" with tokens, merges and token types (special -> control, other added tokens -> user
  defined, embedding rows past the vocabulary -> unused "[PADn]"), and the pre-tokenizer named
  by what it splits: GPT-2's regex -> "gpt-2", digits first -> "smollm", Llama 3's regex ->
  "llama-bpe". Other kinds (unigram, word) and other pre-tokenizers are refused: llama.cpp
  could not split text as we do. Our tokenizers NFC-normalise, llama.cpp does not: text that is
  already NFC (almost all) gets the same ids.
- Character tokenizers whose every regular token is one ASCII character (configs/
  shakespeare-char.toml's) are the same "gpt2" model with no merges (an empty array: llama.cpp
  needs the key), each character written as GPT-2's byte symbol for it (space "Ġ", newline "Ċ",
  printable characters as themselves): llama.cpp splits text into bytes, one byte one token, our
  character's id. Any other token (a character of 2-4 bytes in UTF-8, or several characters) is
  refused: llama.cpp would need byte tokens the model does not have. ASCII is its own NFC, so
  ASCII text gets our ids; a character our vocabulary lacks is <unk> to us and dropped by
  llama.cpp (its "gpt2" tokenizer has no unknown token).
- bos/eos/pad/unk ids are the model's; tokenizer.ggml.add_bos_token is decode.json's add_bos (a
  prompt starts with <s> when the model was trained so). The chat template, when the model has
  one, is tokenizer.chat_template.
- The file is written as OUT.tmp beside OUT and renamed at the end: nothing half-written.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..config import ModelConfig
from ..interop.hf.common import bias_or_zeros
from ..model_dir import load_model, load_tokenizers
from ..model_records import load_chat_template, load_decode_config
from .common import ExportError
from .gguf_vocab import vocabulary

QUANTIZATIONS = ("f32", "f16", "q8_0")


def _gguf():
    try:
        import gguf
    except ImportError:
        raise ExportError(
            "--to gguf needs the gguf package: pip install 'transformer[export]' (or pip install "
            "gguf)"
        ) from None
    return gguf


def layout(cfg: ModelConfig) -> str:
    """The llama.cpp architecture ("llama" or "gpt2") that runs `cfg`, or one ExportError line."""
    if cfg.arch != "decoder" or any((cfg.vision, cfg.audio, cfg.detection, cfg.contrastive)):
        raise ExportError(
            f"arch={cfg.arch!r} cannot be exported to GGUF: llama.cpp runs decoder-only language "
            "models here; export this one with --to ct2 or --to hf"
        )
    if cfg.positional == "rope":
        name, wants = "llama", dict(norm="rmsnorm", activation=("swiglu",))
    elif cfg.positional == "learned":
        name, wants = "gpt2", dict(norm="layernorm", activation=("gelu_tanh", "gelu"))
    else:
        raise ExportError(
            f"positional={cfg.positional!r} cannot be exported to GGUF: the Llama layout "
            "(positional = rope, norm = rmsnorm, activation = swiglu) and the GPT-2 layout "
            "(learned, layernorm, gelu_tanh) are supported; train one of those (configs/lm.toml "
            "is GPT-2 shaped)"
        )
    checks = [
        ("norm", cfg.norm == wants["norm"], f"the {name} layout uses {wants['norm']}"),
        (
            "activation",
            cfg.activation in wants["activation"],
            f"the {name} layout's feed-forward is {' or '.join(wants['activation'])}",
        ),
        ("norm_position", cfg.norm_position == "pre", "llama.cpp's layers are pre-norm"),
        ("final_norm", cfg.use_final_norm, "llama.cpp applies a final norm"),
        ("output_bias", not cfg.output_bias, "llama.cpp's output layer has no bias"),
        ("scale_embedding", not cfg.scale_embedding, "llama.cpp does not scale embeddings"),
        ("embedding_norm", not cfg.embedding_norm, "llama.cpp has no embedding norm"),
        ("scale_attention", cfg.scale_attention, "llama.cpp divides scores by sqrt(head dim)"),
        ("scale_output", not cfg.scale_output, "llama.cpp does not scale the output"),
        ("n_token_types", not cfg.n_token_types, "llama.cpp has no token-type embeddings"),
        ("d_k", cfg.d_k is None and cfg.d_v is None, "heads must be d_model / n_heads wide"),
    ]
    for field, ok, why in checks:
        if not ok:
            raise ExportError(
                f"{field}={getattr(cfg, field)!r} cannot be exported to GGUF ({name} layout): "
                f"{why}; export with --to hf or --to ct2 instead"
            )
    return name


def _llama_tensors(w: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict -> llama.cpp's "llama" tensor names (q/k rows as they are: see the rules)."""
    t = {"token_embd.weight": w["decoder.embed.tokens.weight"]}
    t["output_norm.weight"] = w["decoder.final_norm.weight"]
    if not cfg.tie_embeddings:
        t["output.weight"] = w["lm_head.weight"]
    names = {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.out_proj": "attn_output",
        "feed_forward.w1": "ffn_gate",
        "feed_forward.w3": "ffn_up",
        "feed_forward.w2": "ffn_down",
        "norm1": "attn_norm",
        "norm3": "ffn_norm",
    }
    for i in range(cfg.n_decoder_layers):
        for ours, theirs in names.items():
            for p in ("weight", "bias"):
                if f"decoder.layers.{i}.{ours}.{p}" in w:
                    t[f"blk.{i}.{theirs}.{p}"] = w[f"decoder.layers.{i}.{ours}.{p}"]
    return t


def _gpt2_tensors(w: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Our state dict -> llama.cpp's "gpt2" tensor names; missing biases as zeros."""

    def bias(name: str) -> torch.Tensor:
        return bias_or_zeros(w, name)

    t = {
        "token_embd.weight": w["decoder.embed.tokens.weight"],
        "position_embd.weight": w["decoder.embed.positions.weight"],
        "output_norm.weight": w["decoder.final_norm.weight"],
        "output_norm.bias": bias("decoder.final_norm"),
    }
    if not cfg.tie_embeddings:
        t["output.weight"] = w["lm_head.weight"]
    for i in range(cfg.n_decoder_layers):
        ours, blk = f"decoder.layers.{i}", f"blk.{i}"
        qkv = [f"{ours}.self_attn.{n}" for n in ("q_proj", "k_proj", "v_proj")]
        t[f"{blk}.attn_qkv.weight"] = torch.cat([w[f"{n}.weight"] for n in qkv])  # (C+2KD, C)
        t[f"{blk}.attn_qkv.bias"] = torch.cat([bias(n) for n in qkv])
        for mine, theirs in (
            ("self_attn.out_proj", "attn_output"),
            ("feed_forward.w1", "ffn_up"),
            ("feed_forward.w2", "ffn_down"),
            ("norm1", "attn_norm"),
            ("norm3", "ffn_norm"),
        ):
            t[f"{blk}.{theirs}.weight"] = w[f"{ours}.{mine}.weight"]
            t[f"{blk}.{theirs}.bias"] = bias(f"{ours}.{mine}")
    return t


def _arrays(tensors: dict[str, torch.Tensor], quantization: str, gguf):
    """(name, numpy array, raw dtype or None) per tensor at the asked precision (see the
    rules)."""
    q8 = gguf.GGMLQuantizationType.Q8_0
    block = gguf.GGML_QUANT_SIZES[q8][0]
    for name, t in tensors.items():
        a = t.detach().float().contiguous().numpy()
        if a.ndim == 1 or quantization == "f32":
            yield name, a, None
        elif quantization == "q8_0" and a.shape[-1] % block == 0:
            yield name, gguf.quants.quantize(a, q8), q8
        else:
            yield name, a.astype(np.float16), None


def _writer(gguf, path: Path, arch: str):
    """gguf's writer, able to write an empty array (the merges of a character vocabulary): the
    format allows one, llama.cpp reads it, gguf's writer refuses it."""

    class Writer(gguf.GGUFWriter):
        def _pack_val(self, val, vtype, add_vtype, sub_type=None) -> bytes:
            if vtype == gguf.GGUFValueType.ARRAY and sub_type is not None and len(val) == 0:
                head = self._pack("I", vtype) if add_vtype else b""
                return head + self._pack("I", sub_type) + self._pack("Q", 0)
            return super()._pack_val(val, vtype, add_vtype, sub_type)

    return Writer(path, arch)


def export_gguf(
    model_dir: str | os.PathLike, out: str | os.PathLike, quantization: str | None = None
) -> Path:
    """Write the GGUF file `out` (a file path, e.g. model.gguf) from our model directory
    `model_dir` (with its tokenizer)."""
    quantization = (quantization or "f32").lower()
    if quantization not in QUANTIZATIONS:
        raise ExportError(
            f"--quantization {quantization!r} is not a GGUF precision here: choose one of "
            f"{', '.join(QUANTIZATIONS)}"
        )
    gguf = _gguf()
    model_dir, out = Path(model_dir), Path(out)
    if out.exists() or out.is_symlink():
        raise ExportError(f"{out} already exists: choose a new --out or remove it")
    if out.suffix != ".gguf":
        raise ExportError(f"--out {out} is not a .gguf file path: pass e.g. --out model.gguf")
    model = load_model(model_dir).float()
    cfg = model.config
    arch = layout(cfg)
    _, tok = load_tokenizers(model_dir)
    if tok is None:
        raise ExportError(
            f"{model_dir} has no tokenizer file: a GGUF file carries the vocabulary llama.cpp "
            "tokenizes with; copy the model's tokenizer.json into it"
        )
    vocab = vocabulary(tok, cfg.vocab_size, model_dir)
    decode, chat = load_decode_config(model_dir), load_chat_template(model_dir)
    weights = {k: v.detach() for k, v in model.state_dict().items()}
    tensors = (_llama_tensors if arch == "llama" else _gpt2_tensors)(weights, cfg)

    tmp = out.with_name(out.name + ".tmp")
    out.parent.mkdir(parents=True, exist_ok=True)
    w = _writer(gguf, tmp, arch)
    try:
        w.add_name(model_dir.resolve().name)
        w.add_file_type(
            {
                "f32": gguf.LlamaFileType.ALL_F32,
                "f16": gguf.LlamaFileType.MOSTLY_F16,
                "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
            }[quantization]
        )
        w.add_context_length(cfg.max_positions)
        w.add_embedding_length(cfg.d_model)
        w.add_block_count(cfg.n_decoder_layers)
        w.add_feed_forward_length(cfg.d_ff)
        w.add_head_count(cfg.n_heads)
        w.add_head_count_kv(cfg.kv_heads)
        w.add_vocab_size(cfg.vocab_size)
        if arch == "llama":
            w.add_rope_freq_base(cfg.rope_base)
            w.add_rope_dimension_count(cfg.head_dim)
            w.add_layer_norm_rms_eps(cfg.norm_eps)
        else:
            w.add_layer_norm_eps(cfg.norm_eps)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(vocab["pre"])
        w.add_token_list(vocab["tokens"])
        w.add_token_types(vocab["types"])
        w.add_key_value(  # add_token_merges would leave out a character vocabulary's empty list
            gguf.Keys.Tokenizer.MERGES,
            vocab["merges"],
            gguf.GGUFValueType.ARRAY,
            sub_type=gguf.GGUFValueType.STRING,
        )
        w.add_bos_token_id(cfg.bos_id)
        w.add_eos_token_id(cfg.eos_id)
        w.add_pad_token_id(cfg.pad_id)
        if vocab["unk"] is not None and tok.token_to_id(vocab["unk"]) is not None:
            w.add_unk_token_id(tok.token_to_id(vocab["unk"]))
        w.add_add_bos_token(bool(decode.add_bos))
        w.add_add_eos_token(False)
        if chat:
            w.add_chat_template(chat["chat_template"])
        for name, array, raw_dtype in _arrays(tensors, quantization, gguf):
            w.add_tensor(name, array, raw_dtype=raw_dtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, out)
    except BaseException:
        w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out


def usage(out: Path) -> str:
    """How to run the written file with llama.cpp and Ollama (printed by `transformer export`)."""
    where = Path(out).absolute()
    return (
        f"run it with llama.cpp: llama-cli -m {where} -p 'Once upon a time' -n 50\n"
        f"or with Ollama: a file Modelfile holding the line 'FROM {where}', then "
        f"ollama create {where.stem} -f Modelfile && ollama run {where.stem}"
    )


__all__ = ["QUANTIZATIONS", "export_gguf", "layout", "usage", "vocabulary"]
