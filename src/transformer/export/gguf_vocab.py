"""A tokenizer as GGUF's tokenizer.ggml.* values: byte-level BPE and ASCII character tokenizers
(the rules are export/gguf.py's module docstring, "Tokenizer" and "Character tokenizers")."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import pre_tokenizers

from ..data.tokenizer import Tokenizer
from .common import ExportError

LLAMA_3_SPLIT = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
"""Llama 3's pre-tokenizer regex (llama.cpp's "llama-bpe")."""


def _pre_tokenizer(spec: dict | None) -> str | None:
    """llama.cpp's name for a tokenizer.json pre_tokenizer, or None when it has none."""
    if not spec:
        return None
    steps = spec["pretokenizers"] if spec.get("type") == "Sequence" else [spec]
    kinds = [s.get("type") for s in steps]
    last = steps[-1]
    if kinds[-1] != "ByteLevel" or last.get("add_prefix_space"):
        return None
    if kinds == ["ByteLevel"] and last.get("use_regex", True):
        return "gpt-2"
    if (
        kinds == ["Digits", "ByteLevel"]
        and steps[0].get("individual_digits")
        and last.get("use_regex", True)
    ):
        return "smollm"
    if (
        kinds == ["Split", "ByteLevel"]
        and steps[0].get("pattern", {}).get("Regex") == LLAMA_3_SPLIT
        and steps[0].get("behavior") == "Isolated"
        and not last.get("use_regex", True)
    ):
        return "llama-bpe"
    return None


def _char_pieces(spec: dict, where: Path) -> dict[str, str]:
    """Our character -> GPT-2's byte symbol for it, for each regular token of a character
    tokenizer (see the rules), or one ExportError line naming the first token that is not one
    ASCII character."""
    split = spec.get("pre_tokenizer") or {}
    every_char = dict(
        type="Split", pattern={"Regex": "[\\s\\S]"}, behavior="Isolated", invert=False
    )
    if any(split.get(k) != v for k, v in every_char.items()):
        raise ExportError(
            f"{where} has a character tokenizer that does not split text into single "
            "characters: llama.cpp would not read the same tokens; retrain it with "
            'data.tokenizer = "char" or "bpe" (configs/shakespeare-bpe.toml)'
        )
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    added = {a["content"] for a in spec.get("added_tokens", [])}
    pieces = {}
    for token, _ in sorted(spec["model"]["vocab"].items(), key=lambda item: item[1]):
        if token in added:
            continue
        if len(token) != 1 or not token.isascii():
            why = (
                f"is {len(token)} characters"
                if len(token) != 1
                else f"is {len(token.encode())} bytes in UTF-8"
            )
            raise ExportError(
                f"{where}'s character tokenizer has the token {token!r}, which {why}: llama.cpp "
                "would split it into byte tokens the model does not have (only one-byte, ASCII, "
                'characters export); train with data.tokenizer = "bpe" '
                "(configs/shakespeare-bpe.toml)"
            )
        pieces[token] = byte_level.pre_tokenize_str(token)[0][0]
    return pieces


def vocabulary(tok: Tokenizer, size: int, where: Path) -> dict:
    """tokenizer.ggml.* values (model, pre, tokens, token_type, merges) of a byte-level BPE
    tokenizer, or a character one of ASCII characters, over `size` ids, or one ExportError line
    saying why llama.cpp cannot tokenize as ours."""
    import gguf

    spec = json.loads(tok.tokenizer.to_str())
    model = spec["model"]
    chars = _char_pieces(spec, where) if tok.kind == "char" else None
    pre = "gpt-2" if chars is not None else _pre_tokenizer(spec.get("pre_tokenizer"))
    if chars is None and (tok.kind != "bpe" or model.get("byte_fallback") or pre is None):
        what = (
            f"a {tok.kind} tokenizer"
            if tok.kind != "bpe"
            else "a BPE tokenizer whose pre-tokenizer llama.cpp does not have"
        )
        raise ExportError(
            f"{where} has {what}: GGUF export writes byte-level BPE tokenizers (GPT-2's) and "
            "character ones of ASCII text, which llama.cpp tokenizes as we do; train with "
            'data.tokenizer = "bpe" (configs/shakespeare-bpe.toml)'
        )
    normalizer = (spec.get("normalizer") or {}).get("type")
    if normalizer not in (None, "NFC"):
        raise ExportError(
            f"{where}'s tokenizer normalises text ({normalizer}), which llama.cpp does not: "
            "its ids would differ; retrain the tokenizer without a normalizer"
        )
    if tok.vocab_size > size:
        raise ExportError(
            f"{where}'s tokenizer has {tok.vocab_size} tokens but the model only {size} "
            "embedding rows: the tokenizer does not belong to this model"
        )
    added = {a["id"]: a for a in spec.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(size):
        token = tok.id_to_token(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(chars.get(token, token) if chars is not None else token)
            types.append(
                gguf.TokenType.NORMAL
                if i not in added
                else gguf.TokenType.CONTROL
                if added[i].get("special")
                else gguf.TokenType.USER_DEFINED
            )
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return dict(pre=pre, tokens=tokens, types=types, merges=merges, unk=model.get("unk_token"))
