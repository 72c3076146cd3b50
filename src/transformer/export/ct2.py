"""Model directory -> CTranslate2 model directory, through `ctranslate2.specs` (the `export` extra).

How our layout maps onto CTranslate2's (the rules first; `_layer` and `_stack` apply them):
- Self-attention: our q/k/v projections fused into one linear (rows q, then k, then v; with
  grouped-query attention k and v have n_kv_heads * head_dim rows each); cross-attention: q
  alone, then k and v fused; the output projection as is. Weights stay (out, in), as in torch.
- Norms: our `norm1` (before/after self-attention), decoder `norm2` (cross-attention) and the
  FFN's norm (`norm2` in the encoder, `norm3` in the decoder) sit inside CTranslate2's
  attention and FFN blocks; pre- or post-norm is one flag (`pre_norm`) for the whole model.
  A norm without bias (bias=False) gets a zero beta; RMSNorm maps to `rms_norm`.
- FFN: w1 -> linear_0 (activated), w2 -> linear_1; a gated FFN's (SwiGLU, GEGLU) w3 ->
  linear_0_noact.
- Positions: sinusoidal and learned tables are written out as they are (our interleaved
  sin/cos table included, so CTranslate2 never uses its own); RoPE maps to rotary embeddings
  over the whole head with interleaved pairs, as ours. Token embeddings are scaled by
  sqrt(d_model) when scale_embedding is on (a scale of 1.0 otherwise).
- Vocabulary: the tokenizer's token strings in id order. CTranslate2 takes and returns token
  strings, so users tokenize with our tokenizer (copied into the output) and map back to ids.
- Decoding: the decoder starts from the token of `start_id` (<s>, or Marian's pad). Beam scores
  divide log P by |Y|^alpha, our length_penalty_kind="power"; with `return_end_token=True`
  |Y| counts </s> as ours does (without it, as ours with length_counts_eos false; the README
  passes the model's own). Our default, Wu's ((5+|Y|)/6)^alpha, has no CTranslate2
  equivalent: the output's README says so.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import torch

from ..config import GATED_ACTIVATIONS, ModelConfig
from ..model.positional import sinusoidal_table
from ..model.transformer import Model
from ..model_dir import VOCAB_FILES, load_model, load_tokenizers
from ..model_records import DECODE_FILE, load_decode_config
from .common import ExportError, python_path, write_directory
from .ct2_limits import check_exportable

SHARED_FILE, SOURCE_FILE, TARGET_FILE = VOCAB_FILES  # model_dir's names of the tokenizer files

QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)


def _specs():
    try:
        import ctranslate2
        from ctranslate2.specs import common_spec, transformer_spec
    except ImportError:
        raise ExportError(
            "--to ct2 needs CTranslate2: pip install 'transformer[export]' "
            "(or pip install ctranslate2)"
        ) from None
    return ctranslate2, common_spec, transformer_spec


def _array(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().to(torch.float32).cpu().numpy())


def _activation(cfg: ModelConfig, common_spec):
    act = common_spec.Activation
    return {
        "relu": act.RELU,
        "gelu": act.GELU,
        "gelu_tanh": act.GELUTanh,
        "silu": act.SWISH,
        "swiglu": act.SWISH,
        "geglu": act.GELU,
        "geglu_tanh": act.GELUTanh,
    }[cfg.activation]


def _linear(spec, layer: torch.nn.Linear) -> None:
    spec.weight = _array(layer.weight)
    if layer.bias is not None:
        spec.bias = _array(layer.bias)


def _fused(spec, layers: list[torch.nn.Linear]) -> None:
    """One linear made of several stacked by output rows (q|k|v, or k|v)."""
    spec.weight = _array(torch.cat([layer.weight for layer in layers]))
    if layers[0].bias is not None:
        spec.bias = _array(torch.cat([layer.bias for layer in layers]))


def _norm(spec, norm: torch.nn.Module) -> None:
    spec.gamma = _array(norm.weight)
    if hasattr(spec, "beta"):  # LayerNorm; RMSNorm has no beta
        bias = getattr(norm, "bias", None)
        spec.beta = (
            _array(bias) if bias is not None else np.zeros(norm.weight.shape, dtype=np.float32)
        )


def _attention(spec, attn, self_attention: bool) -> None:
    if self_attention:
        _fused(spec.linear[0], [attn.q_proj, attn.k_proj, attn.v_proj])
    else:
        _linear(spec.linear[0], attn.q_proj)
        _fused(spec.linear[1], [attn.k_proj, attn.v_proj])
    _linear(spec.linear[-1], attn.out_proj)


def _feed_forward(spec, ffn) -> None:
    _linear(spec.linear_0, ffn.w1)
    _linear(spec.linear_1, ffn.w2)
    if ffn.w3 is not None:
        _linear(spec.linear_0_noact, ffn.w3)


def _layer(spec, layer, cross: bool) -> None:
    """One of our Encoder/DecoderLayers into CTranslate2's layer spec (norm names: see the module
    docstring)."""
    _attention(spec.self_attention, layer.self_attn, self_attention=True)
    _norm(spec.self_attention.layer_norm, layer.norm1)
    if cross:
        _attention(spec.attention, layer.cross_attn, self_attention=False)
        _norm(spec.attention.layer_norm, layer.norm2)
    _feed_forward(spec.ffn, layer.feed_forward)
    _norm(spec.ffn.layer_norm, layer.norm3 if hasattr(layer, "norm3") else layer.norm2)


def _stack(spec, stack, cfg: ModelConfig, cross: bool) -> None:
    """Embeddings, positions, layers and final norm of one of our stacks."""
    embed = stack.embed
    tokens = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    tokens.weight = _array(embed.tokens.weight)
    spec.scale_embeddings = float(embed.scale)
    if cfg.positional == "sinusoidal":
        spec.position_encodings.encodings = _array(
            sinusoidal_table(cfg.max_positions, cfg.d_model, cfg.sinusoidal_layout)
        )
    elif cfg.positional == "learned":
        spec.position_encodings.encodings = _array(embed.positions.weight)
    if embed.norm is not None:
        _norm(spec.layernorm_embedding, embed.norm)
    for layer_spec, layer in zip(spec.layer, stack.layers, strict=True):
        _layer(layer_spec, layer, cross)
    if stack.final_norm is not None:
        _norm(spec.layer_norm, stack.final_norm)


def _stack_options(cfg: ModelConfig, common_spec) -> dict:
    options = dict(
        pre_norm=cfg.norm_position == "pre",
        activation=_activation(cfg, common_spec),
        no_final_norm=not cfg.use_final_norm,
        layernorm_embedding=cfg.embedding_norm,
        ffn_glu=cfg.activation in GATED_ACTIVATIONS,
        rms_norm=cfg.norm == "rmsnorm",
        num_heads_kv=cfg.kv_heads if cfg.kv_heads != cfg.n_heads else None,
    )
    if cfg.positional == "rope":
        options.update(rotary_dim=0, rotary_interleave=True, rotary_base=cfg.rope_base)
    return options


def model_spec(model: Model, source_tokens: list[str], target_tokens: list[str]):
    """Our model (fp32 weights) -> a validated CTranslate2 model spec with its vocabularies and
    config."""
    cfg = model.config
    check_exportable(cfg)  # a model CTranslate2 cannot run is refused first, installed or not
    _, common_spec, transformer_spec = _specs()
    options = _stack_options(cfg, common_spec)
    if cfg.arch == "encoder-decoder":
        rotary = {
            k: options.pop(k)
            for k in ("rotary_dim", "rotary_interleave", "rotary_base")
            if k in options
        }
        encoder = transformer_spec.TransformerEncoderSpec(
            cfg.n_encoder_layers, cfg.n_heads, **options, **rotary
        )
        decoder = transformer_spec.TransformerDecoderSpec(
            cfg.n_decoder_layers, cfg.n_heads, **options, **rotary
        )
        spec = transformer_spec.TransformerSpec(encoder, decoder)
        _stack(spec.encoder, model.encoder, cfg, cross=False)
        _stack(spec.decoder, model.decoder, cfg, cross=True)
        spec.register_source_vocabulary(source_tokens)
        spec.register_target_vocabulary(target_tokens)
        spec.config.decoder_start_token = target_tokens[cfg.start_id]
    else:
        spec = transformer_spec.TransformerDecoderModelSpec.from_config(
            cfg.n_decoder_layers, cfg.n_heads, **options
        )
        _stack(spec.decoder, model.decoder, cfg, cross=False)
        spec.register_vocabulary(target_tokens)
    _linear(spec.decoder.projection, model.lm_head)
    spec.config.unk_token = target_tokens[1] if len(target_tokens) > 1 else "<unk>"
    spec.config.bos_token = target_tokens[cfg.bos_id]
    spec.config.eos_token = target_tokens[cfg.eos_id]
    spec.config.layer_norm_epsilon = cfg.norm_eps
    spec.validate()
    return spec


def vocabulary(tokenizer, size: int, side: str) -> list[str]:
    """The token strings of ids 0..size-1; ids the tokenizer lacks (embedding rows past its
    vocabulary) get placeholder names."""
    tokens = [tokenizer.tokenizer.id_to_token(i) for i in range(size)]
    tokens = [t if t is not None else f"<unused{i}>" for i, t in enumerate(tokens)]
    if len(set(tokens)) != len(tokens):
        raise ExportError(
            f"the {side} tokenizer maps two ids to the same token string: "
            "CTranslate2 needs one string per id"
        )
    return tokens


def export_ct2(
    model_dir: str | os.PathLike, out: str | os.PathLike, quantization: str | None = None
) -> Path:
    """Write a CTranslate2 model directory `out` from our model directory `model_dir` (with
    tokenizer)."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(
            f"--quantization {quantization!r} is not one of CTranslate2's: "
            f"{', '.join(QUANTIZATIONS)}"
        )
    model_dir = Path(model_dir)
    model = load_model(model_dir).float()
    check_exportable(model.config)
    _specs()
    source, target = load_tokenizers(model_dir)
    if target is None:
        raise ExportError(f"{model_dir} has no tokenizer file: CTranslate2 needs the vocabulary")
    cfg = model.config
    target_tokens = vocabulary(target, cfg.target_vocab_size, "target")
    source_tokens = (
        vocabulary(source, cfg.vocab_size, "source")
        if cfg.arch == "encoder-decoder"
        else target_tokens
    )
    spec = model_spec(model, source_tokens, target_tokens)
    spec.optimize(quantization=quantization)
    decode = load_decode_config(model_dir)

    def write(tmp: Path) -> None:
        spec.save(str(tmp))
        for name in (SHARED_FILE, SOURCE_FILE, TARGET_FILE, DECODE_FILE):
            if (model_dir / name).is_file():
                shutil.copyfile(model_dir / name, tmp / name)
        text = readme(cfg, decode, quantization, (model_dir / SHARED_FILE).is_file(), Path(out))
        (tmp / "README.md").write_text(text, encoding="utf-8")

    return write_directory(out, write)


def readme(cfg: ModelConfig, decode, quantization: str | None, shared: bool, out: Path) -> str:
    """How to run the exported model (the directory `out`) with CTranslate2 and our tokenizer."""
    src_file, tgt_file = (SHARED_FILE, SHARED_FILE) if shared else (SOURCE_FILE, TARGET_FILE)
    where, src_path, tgt_path = (
        python_path(out),
        python_path(out / src_file),
        python_path(out / tgt_file),
    )
    note = "" if decode.length_penalty_kind == "power" else "  # |Y|^alpha: see below"
    lines = [
        "# CTranslate2 export",
        "",
        f"Exported by `transformer export --to ct2` from an {cfg.arch} model "
        f"({cfg.n_encoder_layers if cfg.arch == 'encoder-decoder' else 0}+{cfg.n_decoder_layers} "
        "layers, "
        f"d_model {cfg.d_model}, {cfg.norm_position}-norm, {cfg.positional} positions), "
        f"weights {quantization or 'float32'} (change at load time with `compute_type=`).",
        "",
        "```python",
        "import ctranslate2, tokenizers",
    ]
    if cfg.arch == "encoder-decoder":
        lines += [
            f"source = tokenizers.Tokenizer.from_file({src_path})",
            f"target = tokenizers.Tokenizer.from_file({tgt_path})",
            f'translator = ctranslate2.Translator({where}, device="cpu")',
            'lines = ["Hola."]',
            "batch = [source.encode(line, add_special_tokens=False).tokens for line in lines]",
            f"results = translator.translate_batch(batch, beam_size={decode.beam_size}, "
            f"length_penalty={decode.length_penalty},{note}",
            "                                      "
            f"return_end_token={decode.length_counts_eos}, "
            f"max_decoding_length={min(256, cfg.max_positions)})",
            "for r in results:",
            "    ids = [target.token_to_id(t) for t in r.hypotheses[0]]",
            "    print(target.decode(ids, skip_special_tokens=True).strip())",
        ]
    else:
        bos = '["' + "<s>" + '"] + ' if decode.add_bos else ""
        lines += [
            f"tokenizer = tokenizers.Tokenizer.from_file({tgt_path})",
            f'generator = ctranslate2.Generator({where}, device="cpu")',
            f'prompt = {bos}tokenizer.encode("Once upon a time", add_special_tokens=False).tokens',
            "results = generator.generate_batch([prompt], "
            f"max_length={min(decode.max_new_tokens, cfg.max_positions)}, "
            "sampling_topk=1, include_prompt_in_result=False)",
            "print(tokenizer.decode(results[0].sequences_ids[0], "
            "skip_special_tokens=True).strip())",
        ]
    lines += [
        "```",
        "",
        "CTranslate2 takes and returns token strings: tokenize with the tokenizer file copied "
        "here,",
        "without special tokens, and map the output tokens back to ids to detokenize.",
        "`decode.json` holds the model's decoding defaults.",
    ]
    if cfg.positional != "rope":
        lines += [
            f"The position table has {cfg.max_positions} rows: inputs and outputs longer than "
            "that must be cut "
            "(our `translate` keeps a source's first tokens)."
        ]
    if cfg.arch == "encoder-decoder" and decode.length_penalty_kind != "power":
        lines += [
            "",
            "Length penalty: this model's default ranks beams by Wu et al.'s "
            f"((5+|Y|)/6)^{decode.length_penalty};",
            "CTranslate2 divides by |Y|^alpha, our `--lenpen-kind power`. The two agree exactly",
            "with `transformer translate --lenpen-kind power`; with the default they may pick "
            "another",
            "beam on some lines.",
        ]
    return "\n".join(lines) + "\n"
