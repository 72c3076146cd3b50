"""Which files a run reads: its training sources (one, or one per file of a mixture) and its
validation files, from the [data] section."""

from __future__ import annotations

from pathlib import Path

from ..config import DataConfig
from ..data import text as T


def train_parts(d: DataConfig) -> list[tuple[str, str | None]]:
    """(targets, sources) of each training source: one, or one per file of a mixture
    (data.text.train_weights); sources None for a language model (for a classifier, the TSV file:
    its texts are the targets; text-to-text pairs: the TSV's two columns, data.text.TsvColumn)."""
    if d.text.train_pairs is not None:
        return [(T.TsvColumn(d.text.train_pairs, 1), T.TsvColumn(d.text.train_pairs, 0))]
    if d.is_translation:
        return [(tgt, src) for src, tgt in d.train_sources]
    if d.audio.train is not None:  # the transcripts: clip<TAB>voice<TAB>text
        return [(str(Path(d.audio.train) / "transcripts.tsv"), None)]
    return [((d.text.train_text or d.text.train_tsv or d.squad.train), None)]


def train_files(d: DataConfig) -> tuple[str, str | None]:
    """(targets, sources) of the training data when it is one source (see train_parts)."""
    parts = train_parts(d)
    if len(parts) > 1:
        raise ValueError("a mixture of training files: use train_parts")
    return parts[0]


def valid_files(d: DataConfig) -> tuple[str | tuple[str, ...] | None, str | tuple | None]:
    """(targets, sources) of the validation data; targets None when there is none. Translation
    files may be lists, read one after the other (read_valid)."""
    if d.text.valid_pairs is not None:
        return T.TsvColumn(d.text.valid_pairs, 1), T.TsvColumn(d.text.valid_pairs, 0)
    if d.is_translation:
        return d.text.valid_tgt, d.text.valid_src
    return (d.text.valid_text or d.text.valid_tsv), None


def read_valid(
    targets: str | tuple[str, ...], sources: str | tuple[str, ...] | None, protect: bool = False
) -> tuple[list[str] | None, list[str]]:
    """(sources, targets) of the validation files, a list of files read one after the other;
    protect: pairs with their markup masked (data.protect_markup)."""
    if isinstance(targets, tuple):
        pairs = zip(targets, sources or [None] * len(targets), strict=True)
        read = [read_valid(t, s, protect) for t, s in pairs]
        return (
            None if sources is None else [s for r in read for s in r[0]],
            [t for r in read for t in r[1]],
        )
    kept = list(T.iter_examples(targets, sources, protect=protect))
    return ([s for _, s, _ in kept] if sources else None), [t for _, _, t in kept]
