"""Model directory -> Hugging Face model directory (`save_pretrained` layout), through
`interop.hf.to_hf`.

How our model directory maps onto transformers' (the rules first; the functions apply them):
- Weights: `to_hf` picks the family: encoder-decoder -> Marian (T5 for positional = "t5_bias"),
  decoder-only with learned positions -> GPT-2, with rope -> Llama, encoder-only -> BERT. What
  the family cannot express (our Bible recipe's pre-norm, interleaved sin/cos table) is one
  ExportError line naming the field, pointing at `--to ct2` when CTranslate2 runs the model.
  Written as model.safetensors.
- Tokenizer: our tokenizer.json as a `PreTrainedTokenizerFast` (tokenizer_config.json names that
  class, which transformers 4 and 5 both load), special tokens named from the model's ids,
  `clean_up_tokenization_spaces` off (ours never rewrites spaces). What it adds matches what our
  Pipeline feeds the model: nothing to a translation source; <s> first to a language model's
  prompt when decode.json says add_bos (a TemplateProcessing post-processor), else nothing.
  A chat template goes into tokenizer_config.json's "chat_template".
- Separate vocabularies (tokenizer.src.json + tokenizer.tgt.json): one transformers tokenizer
  encodes and decodes with one vocabulary, so the main tokenizer is the source one and the
  target one is written to target_tokenizer/. transformers 4's pipeline("translation") would
  decode with the source vocabulary: the README says to call generate() and decode with
  target_tokenizer/. (transformers 5 has no translation pipeline: generate() is the way there.)
- generation_config.json carries the decoding defaults that mean the same in transformers:
  the special ids, the decoder's start id, pad never generated (`suppress_tokens`, as our search
  blocks it), </s> never forced at the length limit (ours is not). Translation: num_beams,
  early_stopping, min_new_tokens, and length_penalty only for length_penalty_kind="power"
  with length_counts_eos (|Y|^alpha, |Y| counting </s> in both); Wu's ((5+|Y|)/6)^alpha, our
  default, and |Y| without </s> have none, so transformers' default (1.0) stays and the README
  says so. Our length limit
  floor(max_len_a * |source| + max_len_b) grows with the source; transformers' is one
  max_new_tokens: max_len_b when max_len_a is 0, else the limit for the longest source the model
  takes (capped by max_positions). Language models: max_new_tokens and sampling with temperature,
  top_k, top_p, as `transformer generate` (num_beams 1).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..config import DecodeConfig, ModelConfig
from ..data.tokenizer import Tokenizer
from ..model_dir import (
    SHARED_FILE,
    SOURCE_FILE,
    TARGET_FILE,
    has_tokenizer,
    load_model,
    load_tokenizers,
)
from ..model_records import load_chat_template, load_decode_config
from .common import ExportError, python_path, write_directory

TARGET_TOKENIZER_DIR = "target_tokenizer"


def _transformers():
    try:
        import transformers
    except ImportError:
        raise ExportError(
            "--to hf needs transformers: pip install 'transformer[hf]' "
            "(or pip install transformers)"
        ) from None
    return transformers


def convert(model, model_dir: Path):
    """Our model -> the transformers model, or one ExportError line naming the field and the way
    out."""
    from ..interop.hf.common import HFConversionError
    from ..interop.hf.convert import to_hf
    from .ct2_limits import check_exportable

    try:
        return to_hf(model)
    except HFConversionError as e:
        way_out = ""
        try:
            check_exportable(model.config)
            way_out = "; export it with --to ct2 instead (CTranslate2 runs this layout as it is)"
        except ExportError:
            pass  # CTranslate2 cannot run it either: the field's own fix is all there is
        raise ExportError(f"{model_dir} cannot be exported to Hugging Face: {e}{way_out}") from None


def max_new_tokens(cfg: ModelConfig, decode: DecodeConfig) -> int:
    """Translation's one fixed limit: ours, floor(a * |source| + b), for the longest source (see the
    module's rules)."""
    longest = 0 if decode.max_len_a == 0 else cfg.max_positions
    return max(1, min(math.floor(decode.max_len_a * longest + decode.max_len_b), cfg.max_positions))


def generation_config(cfg: ModelConfig, decode: DecodeConfig):
    """Our decoding defaults as a transformers GenerationConfig (the fields with the same
    meaning)."""
    values: dict = dict(bos_token_id=cfg.bos_id, eos_token_id=cfg.eos_id, pad_token_id=cfg.pad_id)
    if cfg.pad_id != cfg.eos_id:
        values["suppress_tokens"] = [cfg.pad_id]
    if cfg.arch == "encoder-decoder":
        values.update(
            decoder_start_token_id=cfg.start_id,
            max_new_tokens=max_new_tokens(cfg, decode),
            num_beams=decode.beam_size,
        )
        if decode.min_len:
            values["min_new_tokens"] = decode.min_len
        if decode.beam_size > 1:
            values["early_stopping"] = decode.early_stopping
            if decode.length_penalty_kind == "power" and decode.length_counts_eos:
                values["length_penalty"] = decode.length_penalty
    else:
        values.update(
            max_new_tokens=decode.max_new_tokens,
            num_beams=1,
            do_sample=True,
            temperature=decode.temperature,
            top_k=decode.top_k,
            top_p=decode.top_p,
        )
    return _transformers().GenerationConfig(**values)


def tokenizer_files(
    tok: Tokenizer, cfg: ModelConfig, add_bos: bool, chat: dict | None, add_eos: bool = False
) -> tuple[str, dict]:
    """(tokenizer.json text, tokenizer_config.json values) of the transformers tokenizer over
    `tok`."""
    import tokenizers

    backend = tokenizers.Tokenizer.from_str(tok.tokenizer.to_str())  # a copy: ours stays as it is
    bos, eos = backend.id_to_token(cfg.bos_id), backend.id_to_token(cfg.eos_id)
    if cfg.arch == "decoder" and add_bos and bos is not None:
        backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B:1", special_tokens=[(bos, cfg.bos_id)]
        )
    elif cfg.arch == "encoder-decoder" and add_eos and eos is not None:  # sources end with </s>
        backend.post_processor = tokenizers.processors.TemplateProcessing(
            single=f"$A {eos}", pair=f"$A $B:1 {eos}", special_tokens=[(eos, cfg.eos_id)]
        )
    elif cfg.arch != "encoder" and (
        backend.encode("a b").ids != backend.encode("a b", add_special_tokens=False).ids
    ):
        backend.post_processor = None  # our Pipeline encodes without special tokens
    special = {
        "bos_token": bos,
        "eos_token": backend.id_to_token(cfg.eos_id),
        "pad_token": backend.id_to_token(cfg.pad_id),
        "unk_token": getattr(backend.model, "unk_token", None),
    }
    if chat:  # the strings the template was written for
        special.update(
            {
                k: chat[k]
                for k in ("bos_token", "eos_token")
                if isinstance(chat.get(k), str) and chat[k]
            }
        )
    for mask in ("<mask>", "[MASK]"):
        if cfg.arch == "encoder" and backend.token_to_id(mask) is not None:
            special["mask_token"] = mask
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **{k: v for k, v in special.items() if v is not None},
        "model_max_length": cfg.max_positions,
        "padding_side": "left" if cfg.arch == "decoder" else "right",
        "clean_up_tokenization_spaces": False,
    }
    if chat:
        config["chat_template"] = chat["chat_template"]
    return backend.to_str(pretty=True), config


def _write_tokenizer(folder: Path, files: tuple[str, dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    text, config = files
    (folder / "tokenizer.json").write_text(text, encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def export_hf(model_dir: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write a Hugging Face model directory `out` from our model directory `model_dir` (with
    tokenizer).

    `out` holds config.json, model.safetensors, generation_config.json (not for encoder-only
    models), tokenizer.json + tokenizer_config.json (the source side's with separate
    vocabularies, the target's under target_tokenizer/) and README.md.
    """
    _transformers()
    model_dir = Path(model_dir)
    model = load_model(model_dir).float()
    cfg = model.config
    hf_model = convert(model, model_dir)
    if not has_tokenizer(model_dir):
        raise ExportError(
            f"{model_dir} has no tokenizer ({SHARED_FILE}, or {SOURCE_FILE} + {TARGET_FILE}): "
            "a Hugging Face export needs one; copy the model's tokenizer file into it"
        )
    source, target = load_tokenizers(model_dir)
    decode = load_decode_config(model_dir)
    chat = load_chat_template(model_dir)
    separate = cfg.arch == "encoder-decoder" and source is not target
    if cfg.arch != "encoder":
        hf_model.generation_config = generation_config(cfg, decode)
    main = tokenizer_files(
        source if cfg.arch == "encoder-decoder" else target,
        cfg,
        decode.add_bos,
        chat,
        decode.add_eos,
    )

    def write(tmp: Path) -> None:
        hf_model.save_pretrained(tmp)
        _write_tokenizer(tmp, main)
        if separate:
            _write_tokenizer(tmp / TARGET_TOKENIZER_DIR, tokenizer_files(target, cfg, False, None))
        text = readme(cfg, decode, type(hf_model).__name__, separate, chat is not None, Path(out))
        (tmp / "README.md").write_text(text, encoding="utf-8")

    return write_directory(out, write)


def _code(cfg: ModelConfig, hf_class: str, separate: bool, out: Path) -> list[str]:
    """The README's Python lines after `import transformers`, naming `out` by its real path."""
    where = python_path(out)
    lines = []
    if cfg.arch == "encoder-decoder":
        lines += [
            f"tokenizer = transformers.AutoTokenizer.from_pretrained({where})",
            f"model = transformers.AutoModelForSeq2SeqLM.from_pretrained({where})",
            'ids = model.generate(**tokenizer(["Hola."], return_tensors="pt", padding=True))',
        ]
        if separate:
            target = python_path(out / TARGET_TOKENIZER_DIR)
            lines += [
                f"target = transformers.AutoTokenizer.from_pretrained({target})",
                "print(target.batch_decode(ids, skip_special_tokens=True))",
            ]
        else:
            lines += [
                "print(tokenizer.batch_decode(ids, skip_special_tokens=True))",
                f'# transformers 4 also has transformers.pipeline("translation", model={where}) '
                "(removed in 5)",
            ]
    elif cfg.arch == "decoder":
        lines += [
            f'generate = transformers.pipeline("text-generation", model={where})',
            'print(generate("Once upon a time", return_full_text=False)[0]["generated_text"])',
            f"# or transformers.AutoModelForCausalLM.from_pretrained({where}) with AutoTokenizer",
        ]
    else:
        pooler = ", add_pooling_layer=False" if hf_class == "BertModel" and not cfg.pooler else ""
        lines += [
            f"tokenizer = transformers.AutoTokenizer.from_pretrained({where})",
            f"model = transformers.{hf_class}.from_pretrained({where}{pooler})",
            'outputs = model(**tokenizer(["Hello."], return_tensors="pt"))',
        ]
    return lines


def readme(
    cfg: ModelConfig, decode: DecodeConfig, hf_class: str, separate: bool, chat: bool, out: Path
) -> str:
    """What the exported model (the directory `out`) is, how to run it with transformers, and where
    that differs from ours."""
    layers = {
        "encoder-decoder": f"{cfg.n_encoder_layers}+{cfg.n_decoder_layers}",
        "decoder": cfg.n_decoder_layers,
        "encoder": cfg.n_encoder_layers,
    }[cfg.arch]
    article = "an" if cfg.arch.startswith("e") else "a"
    lines = [
        "# Hugging Face export",
        "",
        f"Exported by `transformer export --to hf` from {article} {cfg.arch} model "
        f"({layers} layers, d_model {cfg.d_model}, {cfg.norm_position}-norm, "
        f"{cfg.positional} positions) as `{hf_class}`, float32; its outputs match ours.",
        "",
        "```python",
        "import transformers",
        *_code(cfg, hf_class, separate, out),
        "```",
        "",
    ]
    if separate:
        lines += [
            "The model has separate source and target vocabularies: the main tokenizer is the "
            "source one,",
            f"`{TARGET_TOKENIZER_DIR}/` decodes outputs. "
            'transformers 4\'s `pipeline("translation")` would decode them',
            "with the source vocabulary: do not use it.",
            "",
        ]
    if cfg.arch == "encoder-decoder":
        lines += _translation_differences(decode)
    elif cfg.arch == "decoder":
        bos = (
            "starts each prompt with <s>, as in training"
            if decode.add_bos
            else ("adds no special tokens")
        )
        lines += [
            f"The tokenizer {bos}. `generation_config.json` samples as `transformer generate` does",
            f"(temperature {decode.temperature}, top_k {decode.top_k}, top_p {decode.top_p}, "
            f"max_new_tokens {decode.max_new_tokens}); pass do_sample=False for greedy output.",
            "Ours shortens a prompt that leaves no room in the position table; "
            "transformers does not.",
        ]
        if chat:
            lines.append(
                "The chat template is in tokenizer_config.json (`tokenizer.apply_chat_template`)."
            )
    return "\n".join(lines) + "\n"


def _translation_differences(decode: DecodeConfig) -> list[str]:
    """The README's lines on where transformers' translation differs from ours."""
    sources = (
        "Sources end with </s>, as the model was trained."
        if decode.add_eos
        else "Sources are tokenized without special tokens, as in training."
    )
    lines = [
        sources + " `generation_config.json` holds",
        f"our decoding defaults (beam {decode.beam_size}). "
        "Where transformers differs from `transformer translate`:",
        f"- Length limit: ours is floor({decode.max_len_a} x source tokens + {decode.max_len_b}); "
        "transformers takes one",
        "  `max_new_tokens`, here the limit for the longest source: pass your own per call.",
        "- Our translate strips spaces around each output line; batch_decode does not.",
    ]
    if decode.length_penalty_kind == "power" and decode.length_counts_eos:
        return lines + [
            f"- Length penalty: none, both divide by |Y|^{decode.length_penalty} "
            "(`length_penalty`)."
        ]
    if decode.length_penalty_kind == "power":
        return lines + [
            f"- Length penalty: ours divides by |Y|^{decode.length_penalty} with |Y| not counting "
            "</s> (CTranslate2's rule);",
            "  transformers counts it. With beams the two may pick another hypothesis on some "
            "lines; greedy output is the same.",
        ]
    return lines + [
        f"- Length penalty: ours is Wu et al.'s ((5+|Y|)/6)^{decode.length_penalty}, which "
        "transformers does not have;",
        "  it divides by |Y|^length_penalty (default 1.0; our `--length-penalty-kind power`). "
        "With beams the two",
        "  may pick another hypothesis on some lines; greedy output is the same.",
    ]


__all__ = [
    "TARGET_TOKENIZER_DIR",
    "export_hf",
    "generation_config",
    "max_new_tokens",
    "tokenizer_files",
]
