"""Apertium (rule-based, Debian's apertium-eng-spa) against our models, Spanish -> English.

    sudo apt-get install apertium-eng-spa
    python benchmarks/apertium.py                                 # Apertium, every split present
    python benchmarks/apertium.py --model demo=runs/demo/averaged # and a model (repeatable)
    python benchmarks/apertium.py --split bible=data/bible --examples --json /tmp/apertium.json

Every system translates each split's test.spa; the table gives sacreBLEU BLEU and chrF against
test.eng (transformer.evaluation.metrics, default settings: 13a, case-sensitive), the share of
outputs that loop (metrics.has_loop) and "placeholders kept": of the test lines with at least one
placeholder, tag, entity, URL or e-mail address (transformer.data.markup's spans), the share whose
output has each of them exactly as often as the source (markup.slots_survive); "-" when no line has
one. Splits (--split NAME=DIR, repeatable): by default
data/bible, data/ui, data/debian, data/manuals, data/phrases, data/dialogue and data/vocabulary, those that hold test.spa and test.eng. Our models: beam 4
(--beam), the model's other decoding defaults, on the CPU (--device cuda: on a GPU). --examples
also prints what every system makes of a few everyday sentences (EXAMPLES) and checks the two
that must come out right.

Apertium is run as `apertium -u spa-eng` over the whole file, each line a paragraph of its own
(an empty line between lines: with bare newlines Apertium reorders words across them, see
`apertium_lines`); the output is checked to hold one paragraph per line, and a run where it does
not is split in halves until every line is aligned. -u leaves out the '*' before an unknown word
(and so picks a/an for it too); the '#' and '@' marks that remain (a form the generator lacks, a
transfer error) are stripped at word starts, and runs of spaces made one (`clean`). Its output is
cached per file (the key: the source's SHA-256, the direction, apertium-eng-spa's version and
RUN_KEY) under --cache, so a second run costs nothing. The CPU is printed with the table: our
models' outputs do not depend on it, but their time does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

from transformer.data.sources.apertium import clean, ready, translate_lines
from transformer.data.sources.apertium import version as apertium_version

DIRECTION = "spa-eng"
INSTALL = (
    "Apertium's spa-eng is not installed: install it with `sudo apt-get install apertium-eng-spa`"
)
RUN_KEY = "apertium -u, a paragraph per line"
"""How Apertium is run: part of the cache key (a change of method must not read old outputs)."""
DEFAULT_SPLITS = {
    "bible": "data/bible",
    "ui": "data/ui",
    "debian": "data/debian",
    "manuals": "data/manuals",
    "phrases": "data/phrases",
    "dialogue": "data/dialogue",
    "vocabulary": "data/vocabulary",
}

EXAMPLES = [
    "De quién es",
    "¿De quién es este libro?",
    "Me gusta leer libros.",
    "La puerta está abierta.",
    "Falló la verificación de firma de llave pública.",
    "¿Dónde está la estación de tren?",
    "Guardar el archivo antes de salir.",
    "No se pudo abrir el archivo.",
    "Un perro come una manzana.",
    "Me duele la cabeza.",
    "Mi hermana tiene dos gatos negros.",
    "Quiero un vaso de agua, por favor.",
    "¿De quién es este coche?",
]
REQUIRED = {
    "De quién es": ("Whose is it?", "Whose is it"),
    "¿De quién es este libro?": ("Whose book is this?",),
}
"""The examples that must come out right, and the answers that count as right (exact, after
stripping surrounding spaces)."""

def apertium_lines(lines: list[str], run=subprocess.run) -> list[str]:
    """Apertium's raw spa-eng output, one line per input line (run: subprocess.run, or a fake in
    tests): transformer.data.sources.apertium.translate_lines."""
    return translate_lines(lines, DIRECTION, run)


def apertium_ready() -> bool:
    """Whether apertium is on the PATH and lists the spa-eng pair."""
    return ready(DIRECTION)


def apertium_file(
    path: Path, lines: list[str], cache: Path, version: str, run=subprocess.run
) -> list[str]:
    """Apertium's cleaned translation of a file's lines, from the cache when it is there."""
    if not lines:
        return []
    header = f"{DIRECTION}\n{version}\n{RUN_KEY}\n".encode()
    key = hashlib.sha256(header + path.read_bytes()).hexdigest()
    cached = cache / f"{key[:32]}.txt"
    if cached.is_file():
        raw = cached.read_bytes().decode("utf-8").removesuffix("\n").split("\n")
        if len(raw) == len(lines):
            return [clean(line) for line in raw]
    raw = apertium_lines(lines, run)
    cache.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".partial")
    partial.write_bytes("".join(line + "\n" for line in raw).encode("utf-8"))
    partial.replace(cached)
    return [clean(line) for line in raw]


def scores(hypotheses: list[str], references: list[str], sources: list[str]) -> dict:
    from transformer.data.markup import kept_share
    from transformer.evaluation.metrics import bleu, chrf, loop_rate

    b, c = bleu(hypotheses, references), chrf(hypotheses, references)
    kept, marked = kept_share(sources, hypotheses)
    return {
        "bleu": b.score,
        "chrf": c.score,
        "loop": loop_rate(hypotheses),
        "placeholders_kept": kept,
        "placeholder_lines": marked,
        "lines": len(hypotheses),
        "bleu_signature": b.signature,
        "chrf_signature": c.signature,
    }


def placeholders_cell(result: dict) -> str:
    """The "placeholders kept" cell: the share and the counts, or "-" without such lines."""
    kept, lines = result["placeholders_kept"], result["placeholder_lines"]
    return f"{100 * kept / lines:.1f}% ({kept:,}/{lines:,})" if lines else "-"


def pairs(values: list[str] | None, flag: str, example: str) -> dict[str, str]:
    """NAME=VALUE arguments -> {NAME: VALUE}."""
    out = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            sys.exit(f"{flag} {value!r}: give NAME=DIR, e.g. {flag} {example}")
        out[name] = rest
    return out


def splits_of(args) -> dict[str, Path]:
    given = pairs(args.split, "--split", "bible=data/bible")
    splits = {}
    for name, folder in (given or DEFAULT_SPLITS).items():
        folder = Path(folder)
        if (folder / "test.spa").is_file() and (folder / "test.eng").is_file():
            splits[name] = folder
        elif given:
            sys.exit(f"--split {name}={folder}: {folder} holds no test.spa and test.eng")
    if not splits:
        sys.exit(
            "no split found: build one with `transformer data bible --src spa --tgt eng "
            "--out data/bible`, or pass --split NAME=DIR"
        )
    return splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        action="append",
        metavar="NAME=DIR",
        help="a model directory of ours (repeatable)",
    )
    parser.add_argument(
        "--split",
        action="append",
        metavar="NAME=DIR",
        help="a folder with test.spa and test.eng (repeatable; default: "
        + ", ".join(DEFAULT_SPLITS.values())
        + ", those present)",
    )
    parser.add_argument("--no-apertium", action="store_true", help="score our models only")
    parser.add_argument("--beam", type=int, default=4, help="our models' beam size")
    parser.add_argument(
        "--device", default="cpu", help="where our models translate (default cpu; cuda on a GPU)"
    )
    parser.add_argument(
        "--examples",
        action="store_true",
        help="also translate EXAMPLES with every system and check REQUIRED",
    )
    parser.add_argument(
        "--cache",
        default=str(Path.home() / ".cache" / "transformer" / "apertium"),
        help="where Apertium's outputs are kept, per source file",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    from transformer.data.lines import read_lines
    from transformer.runtime.measure_cache import cpu_name

    splits = splits_of(args)
    models = pairs(args.model, "--model", "demo=runs/demo/averaged")
    use_apertium = not args.no_apertium and apertium_ready()
    if not args.no_apertium and not use_apertium:
        if not models:
            sys.exit(INSTALL)
        print(INSTALL)
    version = apertium_version() if use_apertium else None

    systems: dict[str, object] = {}  # name -> a function: list of lines -> list of lines
    apertium = f"Apertium (apertium-eng-spa {version})" if use_apertium else None
    if apertium:
        systems[apertium] = lambda lines: [clean(x) for x in apertium_lines(lines)]
    for name, folder in models.items():
        from transformer.decoding.pipeline import Pipeline

        pipeline = Pipeline.load(folder, device=args.device)
        systems[name] = lambda lines, p=pipeline: p.translate(lines, beam_size=args.beam)
    if not systems:
        sys.exit("no system to score: pass --model NAME=DIR, or leave out --no-apertium")

    results = []
    for system, translate in systems.items():
        for split, folder in splits.items():
            sources = read_lines(folder / "test.spa", "source")
            references = read_lines(folder / "test.eng", "reference")
            if system == apertium:  # cached per file
                hypotheses = apertium_file(folder / "test.spa", sources, Path(args.cache), version)
            else:
                hypotheses = translate(sources)
            results.append(
                {
                    "system": system,
                    "split": split,
                    "folder": str(folder),
                    **scores(hypotheses, references, sources),
                }
            )

    command = shlex.join(["python", *sys.argv])
    print(f"CPU: {cpu_name()}")
    print(f"command: {command}\n")
    print(
        "| system | split | BLEU | chrF | loop % | placeholders kept | lines |\n"
        "|---|---|---:|---:|---:|---:|---:|"
    )
    for r in results:
        print(
            f"| {r['system']} | {r['split']} | {r['bleu']:.2f} | {r['chrf']:.2f} | "
            f"{100 * r['loop']:.2f} | {placeholders_cell(r)} | {r['lines']:,} |"
        )
    print(f"\nBLEU: {results[0]['bleu_signature']}\nchrF: {results[0]['chrf_signature']}")

    examples = []
    if args.examples:
        print()
        for system, translate in systems.items():
            outputs = translate(EXAMPLES)
            print(f"{system}:")
            for source, output in zip(EXAMPLES, outputs, strict=True):
                check = ""
                if source in REQUIRED:
                    ok = output.strip() in REQUIRED[source]
                    check = f"  [{'pass' if ok else 'FAIL'}: want {REQUIRED[source][0]!r}]"
                    examples.append(
                        {"system": system, "source": source, "output": output, "pass": ok}
                    )
                else:
                    examples.append({"system": system, "source": source, "output": output})
                print(f"  {source} -> {output}{check}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"cpu": cpu_name(), "command": command, "results": results, "examples": examples},
                indent=1,
                ensure_ascii=False,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
