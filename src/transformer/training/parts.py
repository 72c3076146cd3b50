"""train.init_parts: parts of a new model (a tower, an encoder, a decoder) loaded from other model
directories before the first step, where train.init_from takes a whole model. A captioner's image
encoder from a ViT classifier, a dual encoder's image tower from one and its text tower from a
sentence encoder.

A part is a module path of the model (`model.get_submodule`: image_encoder, text_encoder, encoder,
decoder, ...). Every tensor of the source part is copied into the run's part, which must hold the
same names and shapes; a part that embeds tokens must be loaded under the tokenizer it was trained
with (the run's, by vocabulary).
"""

from __future__ import annotations

from torch import nn

from ..config import ConfigError
from ..data.tokenizer import Tokenizer
from ..model.io import wrong_shapes
from ..model_dir import has_tokenizer, load_model, load_tokenizers


def load_parts(model: nn.Module, parts: dict[str, dict[str, str]], tokenizers) -> list[str]:
    """Copy each of train.init_parts' parts into `model` in place ({part: {"from": DIR, "part":
    source part}}); `tokenizers` are the run's (one Tokenizer, a pair, or None for a model that
    reads no tokens). Returns a line per part for the log; a part that does not fit is a one-line
    ConfigError."""
    lines = []
    for name, source in parts.items():
        where = f"train.init_parts.{name}"
        target = _part(model, name, f"{where}: this run's model")
        piece = _part(load_model(source["from"]), source["part"], f"{where}: {source['from']}")
        ours, theirs = target.state_dict(), piece.state_dict()
        apart = sorted(set(ours) ^ set(theirs))
        wrong = ", ".join(apart[:5]) if apart else wrong_shapes(theirs, ours, "here")
        if wrong:
            raise ConfigError(
                f"{where}: {source['from']}'s {source['part']} does not fit this model's {name} "
                f"({wrong}): give [model] the source model's sizes"
            )
        _check_tokens(piece, source, tokenizers, where)
        target.load_state_dict(theirs)
        count = sum(p.numel() for p in piece.parameters())
        lines.append(f"{name}: {source['from']}'s {source['part']} ({count / 1e6:.2f}M parameters)")
    return lines


def _part(model: nn.Module, name: str, where: str) -> nn.Module:
    """The module at path `name`, or the error that lists the parts there are."""
    try:
        if name:
            return model.get_submodule(name)
    except AttributeError:
        pass
    there = [n for n, m in model.named_children() if any(True for _ in m.parameters())]
    raise ConfigError(
        f"{where} has no part {name!r}: its parts are {', '.join(there)} (for the whole model, "
        "use train.init_from)"
    )


def _check_tokens(piece: nn.Module, source: dict[str, str], tokenizers, where: str) -> None:
    """A part holding an embedding of its source tokenizer's size needs the run to read the same
    tokens: the run's tokenizer must hold the same vocabulary, id for id."""
    if not has_tokenizer(source["from"]):
        return
    theirs = {id(t): t for t in load_tokenizers(source["from"])}.values()
    sizes = {m.num_embeddings for m in piece.modules() if isinstance(m, nn.Embedding)}
    embedded = [t for t in theirs if t.vocab_size in sizes]
    if not embedded:
        return
    if isinstance(tokenizers, Tokenizer):
        tokenizers = (tokenizers,)
    ours = list(tokenizers or ())
    if not any(_same_vocabulary(a, b) for a in embedded for b in ours):
        raise ConfigError(
            f"{where}: {source['from']}'s {source['part']} embeds the tokens of its own tokenizer "
            f"({embedded[0].vocab_size:,} tokens), and this run reads others: its embeddings "
            "would be read as the wrong tokens; fine-tune that model with train.init_from instead"
        )


def _same_vocabulary(a: Tokenizer, b: Tokenizer) -> bool:
    return a.vocab_size == b.vocab_size and all(
        a.id_to_token(i) == b.id_to_token(i) for i in range(a.vocab_size)
    )
