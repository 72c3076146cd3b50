"""Text-to-text (`transformer data bible-t2t`): several tasks in one TSV, each named by a prefix of
the input (T5's way).

Rules: translation both ways on the aligned verse pairs of `data bible`, and the genre task of
`data bible-genre` on the target text's verses, written as text ("genre: <verse>" -> "Gospels
and Acts"); splits are the same chapters (split_of), so no test chapter is seen in training by
any task. Lines are `input<TAB>target`, tasks one after another (training shuffles).
"""

from __future__ import annotations

import os
from pathlib import Path

from ....files import atomic_write_text
from .align import align, split_of
from .genre import genre_splits
from .parallel import check_pair
from .sword import MODULES, Verse, read_module


def t2t_prefixes(src: str, tgt: str) -> dict[str, str]:
    """Task name -> the prefix its inputs start with."""
    a, b = MODULES[src].language, MODULES[tgt].language
    return {
        f"{src}-{tgt}": f"translate {a} to {b}: ",
        f"{tgt}-{src}": f"translate {b} to {a}: ",
        "genre": "genre: ",
    }


def build_t2t_corpus(
    src: str, tgt: str, out_dir: str | os.PathLike, sword_dir: str | os.PathLike | None = None
) -> dict:
    """Write out_dir/{train,valid,test}.tsv (`input<TAB>target`, + .ids: task and verse),
    {train,valid}.txt (the split's verses in both languages, one per line: text for span-corruption
    pretraining) and PROVENANCE.md."""
    check_pair(src, tgt, out_dir, "dataset")
    src_verses, src_version = read_module(src, sword_dir)
    tgt_verses, tgt_version = read_module(tgt, sword_dir)
    alignment = align(src_verses, tgt_verses)
    genres = genre_splits(tgt_verses)
    prefixes = t2t_prefixes(src, tgt)
    forward, backward = list(prefixes)[:2]
    rows: dict[str, list[tuple[str, Verse, str, str]]] = {"train": [], "valid": [], "test": []}
    for key, (a, b) in alignment.pairs.items():
        a, b = " ".join(a.split()), " ".join(b.split())  # tabs and newlines would break the TSV
        rows[split_of(key[:2])].append((forward, key, prefixes[forward] + a, b))
    for key, (a, b) in alignment.pairs.items():
        a, b = " ".join(a.split()), " ".join(b.split())
        rows[split_of(key[:2])].append((backward, key, prefixes[backward] + b, a))
    for split, examples in genres.examples.items():
        rows[split] += [
            ("genre", key, prefixes["genre"] + text, genre) for key, genre, text in examples
        ]

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, examples in rows.items():
        atomic_write_text(out / f"{name}.tsv", "".join(f"{x}\t{y}\n" for _, _, x, y in examples))
        atomic_write_text(
            out / f"{name}.ids",
            "".join(f"{task}\t{b}.{c}.{v}\n" for task, (b, c, v), _, _ in examples),
        )
        if name != "test":  # monolingual text for pretraining: never the test chapters
            pairs = [
                (x.removeprefix(prefixes[forward]), y)
                for task, _, x, y in examples
                if task == forward
            ]
            atomic_write_text(
                out / f"{name}.txt",
                "".join(f"{a}\n" for a, _ in pairs) + "".join(f"{b}\n" for _, b in pairs),
            )
    counts = {
        name: {task: sum(1 for t, *_ in examples if t == task) for task in prefixes}
        for name, examples in rows.items()
    }
    report = {
        "src": src,
        "tgt": tgt,
        "prefixes": prefixes,
        "examples": counts,
        "versions": {src: src_version, tgt: tgt_version},
        "dropped_chapters": len(alignment.dropped_chapters),
        "misaligned_verses": len(alignment.misaligned_verses),
    }
    atomic_write_text(out / "PROVENANCE.md", _t2t_provenance(report))
    return report


def _t2t_provenance(report: dict) -> str:
    src, tgt = MODULES[report["src"]], MODULES[report["tgt"]]
    lines = [
        f"# Bible text-to-text mixture: {src.title} ({src.language}) and {tgt.title} "
        f"({tgt.language})",
        "",
        "Built by `transformer data bible-t2t` from the SWORD modules packaged by Debian, read "
        "with pysword:",
        f"{src.name} {report['versions'][src.code]} and {tgt.name} {report['versions'][tgt.code]} "
        "(Public Domain).",
        "",
        "Each line of {train,valid,test}.tsv is `input<TAB>target`; the input starts with its "
        "task's prefix",
        "({split}.ids: the task and the verse). Translation both ways uses the verse pairs of "
        "`transformer data",
        f"bible` ({report['dropped_chapters']} misaligned chapters and "
        f"{report['misaligned_verses']} misaligned verses "
        f"dropped); the genre task, the {tgt.language} "
        "verses of `transformer data bible-genre`. Splits are the same whole chapters for every "
        "task.",
        f"{{train,valid}}.txt: the split's verse pairs as plain text, the {src.language} verses "
        "then the "
        f"{tgt.language} ones, one per line (for span-corruption pretraining; none from the test "
        "chapters).",
        "",
        "| task | prefix | train | valid | test |",
        "|---|---|---:|---:|---:|",
    ]
    counts = report["examples"]
    for task, prefix in report["prefixes"].items():
        lines.append(
            f"| {task} | `{prefix.strip()}` | {counts['train'][task]:,} | "
            f"{counts['valid'][task]:,} "
            f"| {counts['test'][task]:,} |"
        )
    return "\n".join(lines) + "\n"
