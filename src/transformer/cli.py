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


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a TOML config (see configs/), writing a run directory."""
    from pathlib import Path

    from .config import load_config
    from .data.text import DataError
    from .data.tokenizer import TokenizerError
    from .training.trainer import TrainError, train

    config = load_config(args.config, args.set or [])
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    try:
        train(config, out, resume=args.resume)
    except (DataError, TokenizerError, TrainError) as e:
        raise UserError(str(e)) from None


def cmd_average(args: argparse.Namespace) -> None:
    """Average checkpoints' parameters into a model directory (§6.1)."""
    from .data.tokenizer import has_tokenizer, load_tokenizers
    from .model.io import load_decode_config, save_model
    from .training.checkpoint import average_checkpoints, step_dirs

    if args.last is not None:
        if len(args.checkpoints) != 1:
            raise UserError("--last N takes one run directory: transformer average --last 5 RUN_DIR --out MODEL_DIR")
        found = step_dirs(args.checkpoints[0])
        if not found:
            raise UserError(f"{args.checkpoints[0]} has no checkpoints/step-* directories: pass a run directory")
        if args.last < 1:
            raise UserError(f"--last {args.last}: give a positive number of checkpoints")
        paths = found[-args.last:]
        if len(paths) < args.last:
            print(f"note: the run has only {len(paths)} checkpoint(s); averaging those", file=sys.stderr)
    else:
        paths = args.checkpoints
    model = average_checkpoints(paths)
    tokenizer = None
    if has_tokenizer(paths[-1]):
        src, tgt = load_tokenizers(paths[-1])
        tokenizer = src if src is tgt else (src, tgt)
    save_model(model, args.out, tokenizer=tokenizer, decode=load_decode_config(paths[-1]))
    print(f"averaged {len(paths)} checkpoint(s) ({', '.join(str(p) for p in paths)}) into {args.out}")


def cmd_data_copy(args: argparse.Namespace) -> None:
    """Write the synthetic copy task (target = source)."""
    from .data.copy import write_copy_task

    files = write_copy_task(args.out, n_train=args.n_train, n_valid=args.n_valid, n_test=args.n_test,
                            n_symbols=args.symbols, min_len=args.min_len, max_len=args.max_len, seed=args.seed)
    print(f"wrote {', '.join(sorted(p.name for p in files.values()))} into {args.out}")


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

    p = sub.add_parser("train", help="train a model from a TOML config (see configs/)")
    p.add_argument("config", help="TOML file with [model], [data], [train], [decode] sections")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override a config value (repeatable; values are TOML literals, e.g. train.max_steps=100)")
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME)")
    p.add_argument("--resume", action="store_true", help="continue from the run directory's latest checkpoint")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("average", help="average checkpoints into a model directory (the paper: last 5 or 20)")
    p.add_argument("checkpoints", nargs="+", metavar="CKPT_DIR", help="checkpoint directories, or one run directory with --last")
    p.add_argument("--last", type=int, metavar="N", help="average the last N checkpoints of the run directory")
    p.add_argument("--out", required=True, help="model directory to write")
    p.set_defaults(func=cmd_average)

    p = data.add_parser("copy", help="the synthetic copy task: aligned files where target = source")
    p.add_argument("--out", required=True, help="directory for {train,valid,test}.{src,tgt}")
    p.add_argument("--n-train", type=int, default=20000, help="training pairs (default 20000)")
    p.add_argument("--n-valid", type=int, default=200, help="validation pairs (default 200)")
    p.add_argument("--n-test", type=int, default=200, help="test pairs, never in the training data (default 200)")
    p.add_argument("--symbols", type=int, default=20, help="distinct symbols, letters a.. (default 20)")
    p.add_argument("--min-len", type=int, default=3, help="shortest sequence (default 3)")
    p.add_argument("--max-len", type=int, default=12, help="longest sequence (default 12)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.set_defaults(func=cmd_data_copy)

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
