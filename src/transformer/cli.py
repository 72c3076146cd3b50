"""The `transformer` command: argparse subcommands; the only place that reads argv.

Each subcommand is a small function that turns arguments into library calls. Errors a user
can fix (bad paths, bad configs, bad files) are printed as one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys

from .config import ConfigError
from .model.io import ModelFileError


class UserError(Exception):
    """An error caused by the user's input; printed as one line without a traceback."""


USER_ERRORS = (UserError, ConfigError, ModelFileError, FileNotFoundError, ValueError)


def cmd_info(args: argparse.Namespace) -> None:
    """Print a model directory's config, parameter count and FLOPs per token."""
    from .model.accounting import count_parameters, flops_per_token
    from .model.io import load_config, load_model

    config = load_config(args.model_dir)
    model = load_model(args.model_dir)
    print(f"model directory: {args.model_dir}")
    print("config:")
    for key, value in config.to_dict().items():
        print(f"  {key} = {value}")
    total = count_parameters(model)
    print(f"parameters: {total:,} ({total / 1e6:.2f}M; tied matrices counted once)")
    flops = flops_per_token(config, args.seq_len)
    print(f"FLOPs per token at sequence length {args.seq_len}: "
          f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
          f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)")


def cmd_import_hf(args: argparse.Namespace) -> None:
    """Convert a Hugging Face model directory or .gguf file into a model directory."""
    from .interop.hf import import_hf
    from .model.accounting import count_parameters

    result = import_hf(args.path, args.out)
    total = count_parameters(result.model)
    print(f"imported {result.model_type} model ({total / 1e6:.2f}M parameters) from {args.path}")
    print(f"wrote {args.out}: {', '.join(result.files)}")


def cmd_data_bible(args: argparse.Namespace) -> None:
    """Build aligned train/valid/test files from two SWORD Bible modules."""
    from .data.bible import build_bible_corpus

    report = build_bible_corpus(args.src, args.tgt, args.out, args.sword_dir)
    pairs = report["pairs"]
    print(f"wrote {args.out}: train {pairs['train']:,}, valid {pairs['valid']:,}, test {pairs['test']:,} verse pairs "
          f"({args.src} -> {args.tgt}); dropped {len(report['dropped_chapters'])} misaligned chapters "
          f"and {report['dropped_verses']} one-sided verses (see {args.out}/PROVENANCE.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="transformer", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("info", help="print a model directory's config, parameters and FLOPs/token")
    p.add_argument("model_dir")
    p.add_argument("--seq-len", type=int, default=128, help="sequence length for the FLOP count (default 128)")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("import-hf", help="convert a Hugging Face model (directory or .gguf file) into a model directory")
    p.add_argument("path", help="a Hugging Face model directory (config.json + weights) or a .gguf file")
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="the model directory to write")
    p.set_defaults(func=cmd_import_hf)

    data = sub.add_parser("data", help="build datasets").add_subparsers(dest="dataset", required=True, metavar="DATASET")
    p = data.add_parser("bible", help="a parallel corpus from the SWORD Bible modules (spa, eng, kjv)")
    texts = ["spa", "eng", "kjv"]
    p.add_argument("--src", default="spa", choices=texts, help="source text: spa (Reina-Valera 1909), eng (World English Bible), kjv (King James)")
    p.add_argument("--tgt", default="eng", choices=texts, help="target text (same codes)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help="SWORD module directory (default: $SWORD_PATH, /usr/share/sword)")
    p.set_defaults(func=cmd_data_bible)

    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except USER_ERRORS as e:
        print(f"transformer {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"transformer {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
