"""The `transformer` command: argparse subcommands; the only place that reads argv.

Each subcommand is a small function that turns arguments into library calls. Errors a user
can fix (bad paths, bad configs, bad files) are printed as one line and exit with status 2;
an unknown flag prints the subcommand's usage with the closest flag it has.
"""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from pathlib import Path

from ..config import ConfigError
from ..model.io import ModelFileError
from .lines import LineError, format_lines, read_lines, stream_lines

DESCRIPTION = """\
The Transformer of "Attention Is All You Need" (Vaswani et al., 2017): train translation and
language models on your own text, translate, generate, evaluate, import Hugging Face weights and
look inside them. `transformer COMMAND --help` explains each command."""

EPILOG = """\
examples:
  transformer demo                                      Spanish -> English on the Bible, ~15 minutes on a CPU
  transformer data copy --out data/copy                 a synthetic task to check a set-up
  transformer train configs/copy.toml --out runs/copy   train from a TOML config
  echo "the cat" | transformer translate runs/copy/best
  transformer evaluate runs/copy/best --src data/copy/test.src --ref data/copy/test.tgt"""


class UserError(Exception):
    """An error caused by the user's input; printed as one line without a traceback."""


USER_ERRORS = (UserError, ConfigError, ModelFileError, LineError, ValueError, OSError)


def cmd_info(args: argparse.Namespace) -> None:
    """Print a model directory's config, parameter count and FLOPs per token."""
    from ..model.accounting import count_parameters, flops_per_image, flops_per_token
    from ..model.io import load_config
    from ..model_dir import load_model

    _check_flags(args)
    config = load_config(args.model_dir)
    model = load_model(args.model_dir)
    print(f"model directory: {args.model_dir}")
    print("config:")
    for key, value in config.to_dict().items():
        print(f"  {key} = {value}")
    total = count_parameters(model)
    print(f"parameters: {total:,} ({total / 1e6:.2f}M; tied matrices counted once)")
    if config.vision is not None:
        v, flops = config.vision, flops_per_image(config)
        print(f"FLOPs per image ({v.n_patches} patches of {v.patch_size} x {v.patch_size} + [CLS]): "
              f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
              f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)")
        return
    flops = flops_per_token(config, args.seq_len)
    print(f"FLOPs per token at sequence length {args.seq_len}: "
          f"forward {flops['forward']:,} ({flops['forward'] / 1e9:.3f} GFLOP), "
          f"training {flops['training']:,} ({flops['training'] / 1e9:.3f} GFLOP)")


def cmd_train(args: argparse.Namespace) -> None:
    """Train from a TOML config (see configs/), writing a run directory."""
    from pathlib import Path

    from ..config import load_config
    from ..training.trainer import train

    config = load_config(args.config, args.set or [])
    out = Path(args.out) if args.out else Path("runs") / Path(args.config).stem
    train(config, out, resume=args.resume)


def cmd_sweep(args: argparse.Namespace) -> None:
    """Train each variant of a grid for the same budget, one after another, and score them (training/sweep.py)."""
    from ..workflows.sweep import Plan, SweepError, parse_grid, run_sweep

    if args.repeats < 1:
        raise UserError(f"--repeats {args.repeats}: give a positive number of seeds per variant")
    if args.average < 1:
        raise UserError(f"--average {args.average}: give a positive number of checkpoints to average")
    if args.minutes is not None and not args.minutes > 0:
        raise UserError(f"--minutes {args.minutes}: give a positive training budget")
    if not Path(args.config).is_file():
        raise UserError(f"{args.config} not found: give the TOML config the variants change")
    for path in args.test or []:
        if not Path(path).exists():
            raise UserError(f"--test {path} not found")
    try:
        plan = Plan(config=args.config, grid=parse_grid(args.grid or [], args.zip), zip=args.zip, minutes=args.minutes,
                    repeats=args.repeats, average=args.average, sets=list(args.set or []), test=list(args.test or []))
        rows = run_sweep(plan, args.out, resume=args.resume)
    except SweepError as e:
        raise UserError(str(e)) from None
    print(f"{len(rows)} runs scored: {Path(args.out) / 'results.md'}, results.csv, results.png")


def cmd_average(args: argparse.Namespace) -> None:
    """Average checkpoints' parameters into a model directory (§6.1)."""
    from ..training.checkpoint import average_into, step_dirs

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
            _note("average", f"the run has only {len(paths)} checkpoint(s); averaging those")
    else:
        paths = args.checkpoints
    average_into(paths, args.out)
    print(f"averaged {len(paths)} checkpoint(s) ({', '.join(str(p) for p in paths)}) into {args.out}")


def cmd_data_copy(args: argparse.Namespace) -> None:
    """Write the synthetic copy task (target = source)."""
    from ..data.copy import SYMBOLS, write_copy_task

    for flag, value, low in (("--n-train", args.n_train, 1), ("--n-valid", args.n_valid, 0),
                             ("--n-test", args.n_test, 0), ("--min-len", args.min_len, 1)):
        if value < low:
            raise UserError(f"{flag} {value}: give a number of at least {low}")
    if not 1 <= args.symbols <= len(SYMBOLS):
        raise UserError(f"--symbols {args.symbols}: give a number from 1 to {len(SYMBOLS)} (the letters a-z)")
    if args.max_len < args.min_len:
        raise UserError(f"--max-len {args.max_len} is less than --min-len {args.min_len}: give --max-len "
                        f"{args.min_len} or more")
    files = write_copy_task(args.out, n_train=args.n_train, n_valid=args.n_valid, n_test=args.n_test,
                            n_symbols=args.symbols, min_len=args.min_len, max_len=args.max_len, seed=args.seed)
    print(f"wrote {', '.join(sorted(p.name for p in files.values()))} into {args.out}")


def cmd_data_prepare(args: argparse.Namespace) -> None:
    """Tokenize a config's training data once into the corpus cache, as train would on first use."""
    from ..config import load_config
    from ..training.corpora import prepare_only

    config = load_config(args.config, args.set or [])
    if config.objective == "classify":
        raise UserError("data prepare builds the arrays of train_src/train_tgt or train_text; a classifier's "
                        "train_tsv is read whole when training starts (nothing to prepare)")
    corpus = prepare_only(config, say=print)
    dropped = corpus.dropped
    print(f"{len(corpus):,} training examples ({corpus.header['tokens']['target']:,} target tokens) in {corpus.path}; "
          f"dropped {dropped['empty']:,} with an empty side and {dropped['too_long']:,} longer than "
          f"data.max_len={config.data.max_len}")


def cmd_tokenize(args: argparse.Namespace) -> None:
    """Show how a tokenizer cuts text into tokens, or compare the four kinds on a config's data."""
    from pathlib import Path

    from ..data.tokenizer import UNK_ID, Tokenizer, load_tokenizers

    if args.compare:
        if args.tokenizer or args.text:
            raise UserError("--compare CONFIG trains its own tokenizers: give no tokenizer and no --text with it")
        if args.sample < 0:
            raise UserError(f"--sample {args.sample}: give a number of training examples, or 0 for all")
        from ..config import load_config
        from ..training.corpora import compare_tokenizers

        config = load_config(args.compare, args.set or [])
        rows = compare_tokenizers(config, args.sample, say=lambda m: print(m, file=sys.stderr))
        sides = [side for side in ("source", "target") if f"{side}_tokens" in rows[0]]
        print("| tokenizer | vocabulary | " + " | ".join(f"{s} tokens/sentence | {s} <unk>" for s in sides) + " |")
        print("|---|---:|" + "---:|---:|" * len(sides))
        for r in rows:
            print(f"| {r['tokenizer']} | {r['vocab_size']:,} | " +
                  " | ".join(f"{r[f'{s}_tokens']:.1f} | {r[f'{s}_unk']:.2%}" for s in sides) + " |")
        return
    if not args.tokenizer or not args.text:
        raise UserError("give a model directory or a tokenizer.json and --text TEXT (or --compare CONFIG)")
    path = Path(args.tokenizer)
    if path.is_dir():
        source, target = load_tokenizers(path)
        tok = source if args.side == "source" else target
    else:
        tok = Tokenizer.load(path)
    for text in args.text:
        ids = tok.encode(text)
        unk = sum(i == UNK_ID for i in ids)
        print(f"{text}\n{len(ids)} token(s), {unk} <unk> ({tok.kind}, vocabulary {tok.vocab_size:,})")
        for i in ids:
            print(f"{i:>8}  {tok.id_to_token(i)}" + ("" if tok.kind in ("word", "char") else
                                                    f"  {tok.tokenizer.decode([i], skip_special_tokens=False)!r}"))


def cmd_import_hf(args: argparse.Namespace) -> None:
    """Convert a Hugging Face model directory or .gguf file into a model directory."""
    from ..interop.hf import import_hf
    from ..model.accounting import count_parameters

    result = import_hf(args.path, args.out)
    total = count_parameters(result.model)
    print(f"imported {result.model_type} model ({total / 1e6:.2f}M parameters) from {args.path}")
    print(f"wrote {args.out}: {', '.join(result.files)}")


def cmd_export(args: argparse.Namespace) -> None:
    """Write a model directory as a CTranslate2 (--to ct2) or Hugging Face (--to hf) model."""
    from ..export import export_model

    out = export_model(args.model_dir, args.to, args.out, quantization=args.quantization)
    print(f"wrote {out} ({args.to}): see {out}/README.md for how to run it")


def cmd_data_bible(args: argparse.Namespace) -> None:
    """Build aligned train/valid/test files from two SWORD Bible modules."""
    from ..data.bible import build_bible_corpus

    report = build_bible_corpus(args.src, args.tgt, args.out, args.sword_dir, add_targets=tuple(args.add_target))
    pairs = report["pairs"]
    added = "".join(f" + {extra['pairs']:,} {code} (tagged <{code}>)" for code, extra in report["added"].items())
    print(f"wrote {args.out}: train {pairs['train']:,}{added}, valid {pairs['valid']:,}, test {pairs['test']:,} verse pairs "
          f"({args.src} -> {args.tgt}); dropped {len(report['dropped_chapters'])} misaligned chapters, "
          f"{report['misaligned_verses']} misaligned verses and {report['dropped_verses']} one-sided verses "
          f"(see {args.out}/PROVENANCE.md)")


def cmd_data_bible_genre(args: argparse.Namespace) -> None:
    """Build train/valid/test.tsv of verses labelled with their book's genre, from one SWORD module."""
    from ..data.bible import GENRES, build_genre_corpus

    report = build_genre_corpus(args.lang, args.out, args.sword_dir)
    verses, skipped = report["verses"], report["skipped_books"]
    print(f"wrote {args.out}: train {verses['train']:,}, valid {verses['valid']:,}, test {verses['test']:,} verses "
          f"({args.lang}, {len(GENRES)} genres); dropped {report['empty_verses']} empty verses and "
          f"{sum(skipped.values()):,} verses of {len(skipped)} books outside the 66 (see {args.out}/PROVENANCE.md)")


def cmd_data_bible_t2t(args: argparse.Namespace) -> None:
    """Build train/valid/test.tsv of a text-to-text mixture: translation both ways and the genre task."""
    from ..data.bible import build_t2t_corpus

    report = build_t2t_corpus(args.src, args.tgt, args.out, args.sword_dir)
    counts = report["examples"]
    per_task = ", ".join(f"{task} {counts['train'][task]:,}" for task in report["prefixes"])
    print(f"wrote {args.out}: train {sum(counts['train'].values()):,} ({per_task}), valid "
          f"{sum(counts['valid'].values()):,}, test {sum(counts['test'].values()):,} input<TAB>target lines "
          f"(see {args.out}/PROVENANCE.md)")


def cmd_data_fashion_mnist(args: argparse.Namespace) -> None:
    """Fashion-MNIST from its IDX files into train/valid/test.safetensors (see transformer.data.images)."""
    from ..data.images import build_fashion_mnist

    if args.valid < 10 or args.valid >= 60000:
        raise UserError(f"--valid {args.valid}: give a number of validation images between 10 and 59,999")
    counts = build_fashion_mnist(args.out, args.source, args.valid, args.seed)
    print(f"wrote {args.out}: train {counts['train']:,}, valid {counts['valid']:,} (stratified, seed {args.seed}), "
          f"test {counts['test']:,} images, 28 x 28 grayscale, 10 classes (see {args.out}/README.md)")


def cmd_demo(args: argparse.Namespace) -> None:
    """Spanish -> English on the Bible, end to end (see transformer.workflows.demo)."""
    from ..workflows.demo import DemoError, run_demo

    try:
        run_demo(minutes=args.minutes, data_dir=args.data, run_dir=args.out, overrides=tuple(args.set or ()))
    except DemoError as e:
        raise UserError(str(e)) from None


# dest -> (flag, whether a value is valid, what to give instead): checked before any work.
FLAG_RULES = {
    "beam_size": ("--beam", lambda v: v >= 1, "a beam size of at least 1 (1 = greedy)"),
    "n_best": ("--n-best", lambda v: v >= 1, "a number of hypotheses of at least 1"),
    "length_penalty": ("--lenpen", math.isfinite, "a number (the paper: 0.6; 0 = none)"),
    "max_len_a": ("--max-len-a", lambda v: 0 <= v < math.inf, "a number >= 0"),
    "max_len_b": ("--max-len-b", lambda v: v >= 0, "a number of tokens >= 0"),
    "min_len": ("--min-len", lambda v: v >= 0, "a number of tokens >= 0"),
    "max_new_tokens": ("--max-new-tokens", lambda v: v >= 1, "a positive number of tokens"),
    "temperature": ("--temperature", lambda v: 0 <= v < math.inf, "a temperature >= 0 (0 = greedy)"),
    "top_k": ("--top-k", lambda v: v >= 0, "a number of tokens >= 0 (0 = all)"),
    "top_p": ("--top-p", lambda v: 0 < v <= 1, "a probability above 0 and at most 1 (1 = all)"),
    "batch_tokens": ("--batch-tokens", lambda v: v >= 1, "a positive number of tokens"),
    "threads": ("--threads", lambda v: v >= 1, "a positive number of threads"),
    "seq_len": ("--seq-len", lambda v: v >= 1, "a positive sequence length"),
}


def _check_flags(args: argparse.Namespace) -> None:
    """Each flag of FLAG_RULES that the command has and was given must be valid (info, translate, generate,
    evaluate, attention; data copy's --min-len is another flag and checks its own)."""
    for dest, (flag, valid, what) in FLAG_RULES.items():
        value = getattr(args, dest, None)
        if value is not None and not valid(value):
            raise UserError(f"{flag} {value}: give {what}")


def _setup_device(args: argparse.Namespace) -> str:
    """--device auto (the default): the GPU when torch sees one, else the CPU."""
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for, but torch sees no CUDA GPU: use --device cpu (or auto)")
    if args.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return args.device


def _read_text(path: str | None, what: str) -> list[str]:
    """Lines of a UTF-8 file, or all of standard input when path is None or '-' (see transformer.cli.lines)."""
    if path in (None, "-"):
        return [line for chunk in stream_lines() for line in chunk]
    return read_lines(path, what)


def _write_text(path: str | None, lines: list[str]) -> None:
    """Lines to a file (atomically) or to standard output, one line each (see transformer.cli.lines)."""
    if path in (None, "-"):
        sys.stdout.write(format_lines(lines))
        sys.stdout.flush()
        return
    from ..files import atomic_write_text

    _check_output(path)
    atomic_write_text(path, format_lines(lines))


def _check_output(path: str) -> None:
    """An output file's directory must exist: checked before the work, not after it."""
    from pathlib import Path

    if Path(path).is_dir():
        raise UserError(f"--output {path} is a directory: give a file name")
    if not Path(path).resolve().parent.is_dir():
        raise UserError(f"--output {path}: the directory {Path(path).parent} does not exist; create it first")


def _note(command: str, text: str) -> None:
    print(f"transformer {command}: note: {text}", file=sys.stderr, flush=True)


def _load_pipeline(args: argparse.Namespace, command: str):
    """The model directory as a Pipeline on --device in --precision; "auto" says on stderr what it chose."""
    from ..decoding.pipeline import Pipeline

    pipeline = Pipeline.load(args.model_dir, _setup_device(args), precision=args.precision)
    if (args.precision or pipeline.decode.precision) == "auto":
        _note(command, f"precision {pipeline.precision.describe()}")
    return pipeline


def _decode_overrides(args: argparse.Namespace, names: list[str]) -> dict:
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def cmd_translate(args: argparse.Namespace) -> None:
    """Translate lines (stdin or --input) into detokenised lines (stdout or --output), in input order.

    A file is translated in length-sorted batches. Standard input is translated as it arrives:
    what is waiting is batched, and each line typed at a terminal is answered at once. Lines
    longer than the model takes are truncated, and a note on stderr says which.
    """
    from ..decoding.pipeline import truncation_note
    from ..model.transformer import EncoderDecoder

    _check_flags(args)
    if args.output not in (None, "-"):
        _check_output(args.output)
    if args.n_best is not None and args.beam_size is not None and args.n_best > args.beam_size:
        raise UserError(f"--n-best {args.n_best} is more than --beam {args.beam_size}: a beam returns at most "
                        f"as many hypotheses as it keeps; give --beam {args.n_best} or more")
    pipeline = _load_pipeline(args, "translate")
    if not isinstance(pipeline.model, EncoderDecoder):  # before reading any input: stdin may be empty or slow
        raise UserError("this is a language model: use generate, not translate")
    decode = _decode_overrides(args, ["beam_size", "length_penalty", "length_penalty_kind", "max_len_a",
                                      "max_len_b", "min_len", "n_best"])
    n_best = decode.get("n_best", pipeline.decode.n_best)
    beam = decode.get("beam_size", pipeline.decode.beam_size)
    if n_best > beam:  # both flags together were checked above: one of the two is the model's default
        if "n_best" in decode:
            raise UserError(f"--n-best {n_best} is more than the model's beam size {beam} (decode.json): "
                            f"give --beam {n_best} or more")
        raise UserError(f"--beam {beam} is less than the model's n_best={n_best} (decode.json): give --n-best {beam}")
    cut: list[int] = []
    done = 0

    def translate(lines: list[str]) -> list[str]:
        nonlocal done
        first = done
        if args.prefix:  # a text-to-text model's task; blank lines stay blank
            lines = [args.prefix + line if line.strip() else line for line in lines]
        outputs = pipeline.translate(lines, batch_tokens=args.batch_tokens, **decode,
                                     on_truncate=lambda numbers: cut.extend(first + n for n in numbers))
        done += len(lines)
        if n_best > 1:  # an empty line has no hypotheses: n_best empty ones keep n_best lines per line
            return [f"{first + i}\t{rank}\t{h}" for i, hyps in enumerate(outputs)
                    for rank, h in enumerate(hyps or [""] * n_best, 1)]
        return outputs

    if args.input not in (None, "-"):
        _write_text(args.output, translate(read_lines(args.input, "--input")))
    elif args.output not in (None, "-"):
        _write_text(args.output, [out for chunk in stream_lines() for out in translate(chunk)])
    else:
        for chunk in stream_lines():
            sys.stdout.write(format_lines(translate(chunk)))
            sys.stdout.flush()
    if cut:
        _note("translate", truncation_note(cut, done, pipeline.max_source_tokens))


def cmd_generate(args: argparse.Namespace) -> None:
    """Continue a prompt with a language model (or answer it with --chat); an encoder-decoder
    (text-to-text) model answers it as translate would, after --prefix."""
    from ..model.transformer import EncoderDecoder

    _check_flags(args)
    pipeline = _load_pipeline(args, "generate")
    if isinstance(pipeline.model, EncoderDecoder):
        sampling = [f"--{name.replace('_', '-')}" for name in ("max_new_tokens", "temperature", "top_k", "top_p", "seed")
                    if getattr(args, name) is not None] + (["--chat"] if args.chat else [])
        if sampling:
            raise UserError(f"{', '.join(sampling)}: an encoder-decoder answers with beam search (--beam) as "
                            "translate does; sampling and chat are for language models")
        decode = _decode_overrides(args, ["beam_size"])
        print(pipeline.translate([(args.prefix or "") + args.prompt], **decode,
                                 on_truncate=lambda _: _note("generate", "the prompt was cut to the model's "
                                                                         f"{pipeline.max_source_tokens} tokens"))[0])
        return
    if args.prefix:
        raise UserError("--prefix names a text-to-text model's task: it is for encoder-decoder models")
    decode = _decode_overrides(args, ["max_new_tokens", "temperature", "top_k", "top_p", "beam_size"])
    print(pipeline.generate(args.prompt, chat=args.chat, seed=args.seed, **decode,
                            on_truncate=lambda message: _note("generate", message)))


def _classify(pipeline, lines: list[str], top_k: int, command: str) -> list:
    """Pipeline.classify over the non-blank lines (a blank line gets None), truncation noted on stderr."""
    from ..decoding.pipeline import truncation_note

    kept = [i for i, line in enumerate(lines) if line.strip()]
    cut: list[int] = []
    results = pipeline.classify([lines[i] for i in kept], top_k=top_k, on_truncate=cut.extend)
    if cut:
        limit = pipeline.model.config.max_positions - 2
        _note(command, truncation_note([kept[n - 1] + 1 for n in cut], len(lines), limit))
    out: list = [None] * len(lines)
    for i, result in zip(kept, results, strict=True):
        out[i] = result
    return out


def cmd_classify(args: argparse.Namespace) -> None:
    """Label each line of text (stdin or --input): label<TAB>probability per line, the top K pairs with --top-k K."""
    _check_flags(args)
    if args.top_k < 0:
        raise UserError(f"--top-k {args.top_k}: give a number of labels (0 = all)")
    if args.output not in (None, "-"):
        _check_output(args.output)
    pipeline = _load_pipeline(args, "classify")
    pairs = lambda r: "\t".join(f"{label}\t{p:.4f}" for label, p in r)  # noqa: E731
    if pipeline.model.config.vision is not None:
        if not args.input:
            raise UserError("give the images to classify: --input FILE... or a folder of them")
        files = _image_files(args.input)
        results = pipeline.classify_images(files, top_k=args.top_k)
        _write_text(args.output, [f"{file}\t{pairs(r)}" for file, r in zip(files, results, strict=True)])
        return
    if args.input and len(args.input) > 1:
        raise UserError(f"--input takes one text file for a text classifier, not {len(args.input)}")
    lines = _read_text(args.input[0] if args.input else None, "--input")
    results = _classify(pipeline, lines, args.top_k, "classify")
    _write_text(args.output, ["" if r is None else pairs(r) for r in results])


def _image_files(paths: list[str]) -> list[str]:
    """Image files named, and those inside named folders (recursively, sorted)."""
    from ..data.images import IMAGE_SUFFIXES

    files = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix.lower() in IMAGE_SUFFIXES)
            if not found:
                raise UserError(f"--input {name} has no image file ({'/'.join(IMAGE_SUFFIXES)})")
            files += found
        elif path.is_file():
            files.append(name)
        else:
            raise UserError(f"--input {name} not found")
    return files


def _evaluate_tsv(args: argparse.Namespace, pipeline) -> None:
    """Accuracy, macro-F1, per-class precision/recall and the confusion matrix on a label<TAB>text file."""
    from ..data.text import DataError
    from ..decoding.pipeline import truncation_note
    from ..evaluation.scoring import score_classifier

    if pipeline.labels is None:
        raise UserError(f"{args.model_dir} has no labels.json: evaluate --tsv needs a classifier trained here")
    cut: list[int] = []
    try:
        scores, predicted = score_classifier(pipeline, args.tsv, on_truncate=cut.extend)
    except DataError as e:
        raise UserError(str(e)) from None
    if cut:
        _note("evaluate", truncation_note(cut, scores.total, pipeline.model.config.max_positions - 2))
    _report(args, scores, predicted, f"texts of {args.tsv}", args.tsv)


def _evaluate_images(args: argparse.Namespace, pipeline) -> None:
    """The same report as --tsv on labelled images (a prepared split or a folder of class folders)."""
    from ..evaluation.scoring import score_classifier

    scores, predicted = score_classifier(pipeline, args.images)
    _report(args, scores, predicted, f"images of {args.images}", args.images)


def _report(args: argparse.Namespace, scores, predicted: list[int], what: str, source: str) -> None:
    """Accuracy, macro-F1, the per-class table and the confusion matrix (and --output, --plot)."""
    labels = scores.labels
    if args.output:
        _write_text(args.output, [labels[p] for p in predicted])
    print(f"accuracy {scores.accuracy:.2%}  macro-F1 {scores.macro_f1:.4f}  ({scores.total:,} {what})")
    width = max(map(len, labels))
    print(f"{'label':<{width}}  precision  recall      F1  support")
    for row in scores.per_class():
        print(f"{row['label']:<{width}}  {row['precision']:9.4f}  {row['recall']:6.4f}  {row['f1']:6.4f}  {row['support']:7,}")
    print("confusion matrix (rows: gold, columns: predicted, in the order above):")
    for label, counts in zip(labels, scores.confusion, strict=True):
        print(f"{label:<{width}}  " + " ".join(f"{n:6,}" for n in counts))
    if args.plot:
        from ..viz.confusion import plot_confusion

        plot_confusion(scores, args.plot, title=f"{Path(args.model_dir).name} on {Path(source).name}: "
                                                 f"accuracy {scores.accuracy:.1%}, macro-F1 {scores.macro_f1:.3f}")
        print(f"wrote {args.plot}")


def cmd_evaluate(args: argparse.Namespace) -> None:
    """BLEU and chrF of translations against references, perplexity of a language model on text, or a
    classifier's accuracy on labelled text."""
    from ..decoding.pipeline import truncation_note
    from ..evaluation.metrics import bleu, chrf
    from ..evaluation.scoring import text_perplexity
    from ..model.transformer import DecoderOnly, EncoderDecoder, EncoderOnly

    _check_flags(args)
    if args.pairs:
        if args.text or args.src or args.ref or args.tsv or args.images or args.plot:
            raise UserError("give --pairs (a text-to-text model's scores per task) alone, without --text, --src, "
                            "--ref, --tsv, --images or --plot")
        return _evaluate_pairs(args)
    if args.tsv or args.images:
        flag = "--tsv" if args.tsv else "--images"
        if args.text or args.src or args.ref or (args.tsv and args.images):
            raise UserError(f"give {flag} (a classifier's accuracy) alone, without --text, --src, --ref or the other")
        if args.plot:
            _check_plot(args.plot)
        pipeline = _load_pipeline(args, "evaluate")
        if not isinstance(pipeline.model, EncoderOnly) or pipeline.model.config.n_classes == 0:
            raise UserError(f"{flag} is for classifiers: this model is not one")
        if (pipeline.model.config.vision is None) != bool(args.tsv):
            raise UserError("this is an image classifier: use --images" if args.tsv else
                            "this is a text classifier: use --tsv")
        return _evaluate_tsv(args, pipeline) if args.tsv else _evaluate_images(args, pipeline)
    if args.plot:
        raise UserError("--plot draws a classifier's confusion matrix: it goes with --tsv or --images")
    if args.text and (args.src or args.ref):
        raise UserError("give either --text (perplexity) or --src and --ref (BLEU, chrF), not both")
    if not args.text and not (args.src and args.ref):
        raise UserError("give --src and --ref (BLEU, chrF), --text (perplexity), --tsv (classification) or --pairs "
                        "(text-to-text)")
    if args.output:
        _check_output(args.output)
    pipeline = _load_pipeline(args, "evaluate")
    if args.text and not isinstance(pipeline.model, DecoderOnly):
        raise UserError("this is a translation model: perplexity (--text) needs a language model; "
                        "use --src and --ref (BLEU, chrF)")
    if isinstance(pipeline.model, EncoderOnly):
        raise UserError("this is an encoder: evaluate a classifier with --tsv FILE (label<TAB>text lines)")
    if not args.text and not isinstance(pipeline.model, EncoderDecoder):
        raise UserError("this is a language model: use --text (perplexity), not --src and --ref")
    if args.text:
        cfg = pipeline.model.config
        tok = pipeline.target_tokenizer
        lines = _read_text(args.text, "--text")
        if not any(line.strip() for line in lines):
            raise UserError(f"--text {args.text} has no non-empty line: give text to measure perplexity on")
        ppl = text_perplexity(pipeline.model, lines, lambda line: [cfg.bos_id] + tok.encode(line) + [cfg.eos_id])
        print(f"perplexity {ppl:.3f} on {args.text} (per token, </s> included)")
        return
    sources, references = _read_text(args.src, "--src"), _read_text(args.ref, "--ref")
    if len(sources) != len(references):
        raise UserError(f"--src has {len(sources):,} lines but --ref has {len(references):,}: they must be aligned line by line")
    decode = _decode_overrides(args, ["beam_size", "length_penalty", "length_penalty_kind"])
    cut: list[int] = []
    hypotheses = pipeline.translate(sources, **decode, on_truncate=cut.extend)
    if cut:
        _note("evaluate", truncation_note(cut, len(sources), pipeline.max_source_tokens))
    if args.output:
        _write_text(args.output, hypotheses)
    for score in (bleu(hypotheses, references), chrf(hypotheses, references)):
        print(score)


def _evaluate_pairs(args: argparse.Namespace) -> None:
    from ..decoding.pipeline import truncation_note
    from ..evaluation.scoring import score_pairs
    from ..model.transformer import EncoderDecoder

    if not Path(args.pairs).is_file():
        raise UserError(f"--pairs {args.pairs} not found: give a file of input<TAB>target lines")
    if args.output:
        _check_output(args.output)
    pipeline = _load_pipeline(args, "evaluate")
    if not isinstance(pipeline.model, EncoderDecoder):
        raise UserError("--pairs is for encoder-decoder (text-to-text) models: this model is not one")
    decode = _decode_overrides(args, ["beam_size", "length_penalty", "length_penalty_kind"])
    cut: list[int] = []
    scores, outputs = score_pairs(pipeline, args.pairs, on_truncate=cut.extend, **decode)
    if cut:
        _note("evaluate", truncation_note(cut, len(outputs), pipeline.max_source_tokens))
    if args.output:
        _write_text(args.output, outputs)
    width = max(len(task) for task in scores)
    print(f"{'task':<{width}}  {'lines':>6}  {'BLEU':>6}  {'chrF':>6}  {'exact':>6}")
    for task, s in scores.items():
        print(f"{task:<{width}}  {s['lines']:>6,}  {s['bleu']:>6.2f}  {s['chrf']:>6.2f}  {s['exact']:>5.1f}%")


def _check_plot(path: str) -> None:
    from ..viz import FORMATS

    if Path(path).suffix[1:].lower() not in FORMATS:
        raise UserError(f"--plot {path}: the picture is written as .png, .svg or .pdf; give a file name with one of those")
    if not Path(path).resolve().parent.is_dir():
        raise UserError(f"--plot {path}: the directory {Path(path).parent} does not exist; create it first")


def cmd_attention(args: argparse.Namespace) -> None:
    """Decode one text and plot one layer's attention weights as a heatmap (last layer, mean over heads by default)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UserError("plotting needs matplotlib: pip install matplotlib (or the project's [viz] extra)")
    from pathlib import Path

    from ..decoding.pipeline import Pipeline
    from ..viz import FORMATS
    from ..viz.attention import attention_map, plot_attention

    _check_flags(args)
    if Path(args.out).is_dir():
        raise UserError(f"--out {args.out} is a directory: give an image file name (.png, .svg or .pdf)")
    if Path(args.out).suffix[1:].lower() not in FORMATS:
        raise UserError(f"--out {args.out}: the heatmap is written as .png, .svg or .pdf; give a file name "
                        "with one of those")
    head = args.head
    if head not in ("mean", "all"):
        try:
            head = int(head)
        except ValueError:
            raise UserError(f"--head {head}: give a head number (from 0), mean or all") from None
    if (args.text is None) == (args.image is None):
        raise UserError("give --text (a sentence or prompt) or --image (for an image encoder), one of the two")
    pipeline = Pipeline.load(args.model_dir, _setup_device(args))
    if args.image is not None:
        return _image_attention(args, pipeline)
    if pipeline.model.config.vision is not None:
        raise UserError("this is an image encoder: give --image FILE, not --text")
    m = attention_map(pipeline, args.text, layer=args.layer, kind=args.kind, head=head, beam_size=args.beam_size)
    plot_attention(m.weights, m.columns, m.rows, args.out, title=m.title)
    print(f"wrote {args.out}: {m.title}")
    if m.kind != "encoder":
        print(f"output: {m.output_text}")


def _image_attention(args: argparse.Namespace, pipeline) -> None:
    import torch

    from ..data.images import read_image, to_pixels
    from ..viz.image_attention import image_attention, plot_image_attention

    v = pipeline.model.config.vision
    if v is None:
        raise UserError("this model reads text: give --text, not --image")
    image = torch.from_numpy(read_image(args.image, "L" if v.channels == 1 else "RGB", v.image_size))
    device = next(pipeline.model.parameters()).device
    maps = image_attention(pipeline.model, to_pixels(image[None]).to(device), args.layer, pipeline.labels)
    guess = ", ".join(f"{label} {p:.1%}" for label, p in maps.probabilities)
    title = f"{Path(args.image).name}: [CLS] attention, layer {maps.layer} of 0-{maps.n_layers - 1}, and rollout" + \
        (f"\nmodel: {guess}" if guess else "")
    plot_image_attention(image, maps, args.out, title=title)
    print(f"wrote {args.out}: [CLS] attention per head, layer {maps.layer} of 0-{maps.n_layers - 1}, and the "
          f"rollout over all layers" + (f"; model: {guess}" if guess else ""))


def cmd_serve(args: argparse.Namespace) -> None:
    """Serve the model directory until SIGTERM / SIGINT (see transformer.serve)."""
    import importlib.util
    import os
    from pathlib import Path

    _check_flags(args)
    for flag, value in [("--port", args.port), ("--max-batch-tokens", args.max_batch_tokens),
                        ("--max-queue", args.max_queue), ("--max-lines", args.max_lines),
                        ("--max-body-bytes", args.max_body_bytes)]:
        if value < (0 if flag == "--port" else 1) or (flag == "--port" and value > 65535):
            raise UserError(f"{flag} {value}: give a positive number" + (" up to 65535" if flag == "--port" else ""))
    for flag, value in [("--max-wait-ms", args.max_wait_ms), ("--timeout", args.timeout),
                        ("--drain-timeout", args.drain_timeout)]:
        if not 0 <= value < math.inf or (flag == "--timeout" and value == 0):
            raise UserError(f"{flag} {value}: give a number of {'milliseconds' if 'ms' in flag else 'seconds'} >= 0")
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise UserError("serve needs FastAPI and uvicorn: pip install 'transformer[serve]'")
    if not (Path(args.model_dir) / "config.json").is_file():
        raise UserError(f"{args.model_dir} is not a model directory (no config.json)")
    from ..serve import API_KEY_ENV, ServeConfig, serve

    config = ServeConfig(max_batch_tokens=args.max_batch_tokens, max_wait_ms=args.max_wait_ms,
                         max_queue=args.max_queue, timeout=args.timeout, max_lines=args.max_lines,
                         max_body_bytes=args.max_body_bytes, api_key=args.api_key or os.environ.get(API_KEY_ENV) or None,
                         cors_origin=args.cors_origin)
    status = serve(args.model_dir, args.host, args.port, config, device=_setup_device(args), precision=args.precision,
                   drain_timeout=args.drain_timeout)
    if status:
        raise SystemExit(status)


def _add_device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="where to run (default auto: the GPU when torch sees one, else the CPU)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")


def _add_precision_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=["fp32", "bf16", "int8", "auto"],
                   help="fp32 (exact), bf16, int8 (linear layers, CPU only) or auto (bf16 where measured faster); "
                        "default from the model's decode.json (fp32 unless set)")


def _add_beam_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--beam", dest="beam_size", type=int, help="beam size (1 = greedy; default from the model's decode.json)")
    p.add_argument("--lenpen", dest="length_penalty", type=float, help="length penalty alpha (the paper: 0.6)")
    p.add_argument("--lenpen-kind", dest="length_penalty_kind", choices=["wu", "power"],
                   help="wu: ((5+|Y|)/6)^alpha (the paper's); power: |Y|^alpha")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="transformer", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__} ({_versions()})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="the main job: Spanish -> English on the Bible, trained here in ~15 minutes")
    p.add_argument("--minutes", type=float, default=15.0, help="training time budget (default 15)")
    p.add_argument("--data", default="data/bible", help="corpus directory (built when missing; default data/bible)")
    p.add_argument("--out", default="runs/demo", help="run directory (replaced; default runs/demo)")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value (repeatable)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("info", help="print a model directory's config, parameters and FLOPs/token")
    p.add_argument("model_dir")
    p.add_argument("--seq-len", type=int, default=128, help="sequence length for the FLOP count (default 128; an image model counts per image)")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("import-hf", help="convert a Hugging Face model (directory or .gguf file) into a model directory")
    p.add_argument("path", help="a Hugging Face model directory (config.json + weights) or a .gguf file")
    p.add_argument("--out", required=True, metavar="MODEL_DIR", help="the model directory to write")
    p.set_defaults(func=cmd_import_hf)

    p = sub.add_parser("export", help="write a model directory as a CTranslate2 or Hugging Face model")
    p.add_argument("model_dir")
    p.add_argument("--to", required=True, choices=["ct2", "hf"],
                   help="ct2: CTranslate2 (any encoder-decoder or decoder-only model we train); "
                        "hf: Hugging Face transformers (Marian, GPT-2, Llama or BERT layouts)")
    p.add_argument("--out", required=True, help="the directory to write (must not exist, or be empty)")
    p.add_argument("--quantization", help="ct2 only: weights as int8, int8_float32, int16, float16, bfloat16, ... "
                                          "(default float32)")
    p.set_defaults(func=cmd_export)

    data = sub.add_parser("data", help="build datasets").add_subparsers(dest="dataset", required=True, metavar="DATASET")
    p = data.add_parser("bible", help="a parallel corpus from the SWORD Bible modules (spa, eng, kjv)")
    texts = ["spa", "eng", "kjv"]
    p.add_argument("--src", default="spa", choices=texts, help="source text: spa (Reina-Valera 1909), eng (World English Bible), kjv (King James)")
    p.add_argument("--tgt", default="eng", choices=texts, help="target text (same codes)")
    p.add_argument("--add-target", action="append", default=[], choices=texts, metavar="CODE",
                   help="also train on this text as a second target (repeatable): its training-chapter pairs follow "
                        "the main ones, each source prefixed by <CODE>; valid and test stay --tgt alone")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help="SWORD module directory (default: $SWORD_PATH, /usr/share/sword)")
    p.set_defaults(func=cmd_data_bible)
    p = data.add_parser("bible-genre", help="verses labelled with their book's genre (8 classes), from one SWORD Bible module")
    p.add_argument("--lang", default="eng", choices=texts, help="the text: eng (World English Bible, default), kjv (King James), spa (Reina-Valera 1909)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help="SWORD module directory (default: $SWORD_PATH, /usr/share/sword)")
    p.set_defaults(func=cmd_data_bible_genre)
    p = data.add_parser("bible-t2t", help="a text-to-text mixture (input<TAB>target): translation both ways and "
                                           "the genre task, each input starting with its task's prefix")
    p.add_argument("--src", default="spa", choices=texts, help="one language (default spa)")
    p.add_argument("--tgt", default="eng", choices=texts, help="the other (default eng; its verses make the genre task)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--sword-dir", default=None, help="SWORD module directory (default: $SWORD_PATH, /usr/share/sword)")
    p.set_defaults(func=cmd_data_bible_t2t)

    p = data.add_parser("fashion-mnist", help="Fashion-MNIST images (apt-get install -y dataset-fashion-mnist) as "
                                               "train/valid/test.safetensors")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--source", default=None, help="folder of the four IDX files (default /usr/share/datasets/fashion-mnist)")
    p.add_argument("--valid", type=int, default=5000, help="training images held out for validation, stratified (default 5000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the validation draw (default 0)")
    p.set_defaults(func=cmd_data_fashion_mnist)

    p = sub.add_parser("train", help="train a model from a TOML config (see configs/)")
    p.add_argument("config", help="TOML file with [model], [data], [train], [decode] sections")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                   help="override a config value (repeatable; values are TOML literals, e.g. train.max_steps=100)")
    p.add_argument("--out", help="run directory (default runs/CONFIG_NAME)")
    p.add_argument("--resume", action="store_true", help="continue from the run directory's latest checkpoint")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("sweep", help="train each variant of a grid of config changes for the same budget, and score them")
    p.add_argument("config", help="the TOML config every variant starts from")
    p.add_argument("--grid", action="append", metavar="KEY=V1,V2,...",
                   help="a config key and the values to try (repeatable: the variants are the product of the grids)")
    p.add_argument("--zip", action="store_true", help="pair the grids' values one to one instead (changes that go together)")
    p.add_argument("--minutes", type=float, help="training budget of each run (train.max_minutes; default the config's)")
    p.add_argument("--repeats", type=int, default=1, help="runs per variant, with seeds train.seed, +1, ... (default 1)")
    p.add_argument("--average", type=int, default=3, metavar="N", help="score the average of the last N checkpoints (default 3)")
    p.add_argument("--test", nargs="+", metavar="FILE",
                   help="test data to score too: SRC REF for translation, a TSV or an image split/folder for a classifier")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="a change every variant gets (as for train)")
    p.add_argument("--out", required=True, help="the sweep directory")
    p.add_argument("--resume", action="store_true", help="continue a stopped sweep: finished runs are not run again")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("average", help="average checkpoints into a model directory (the paper: last 5 or 20)")
    p.add_argument("checkpoints", nargs="+", metavar="CKPT_DIR", help="checkpoint directories, or one run directory with --last")
    p.add_argument("--last", type=int, metavar="N", help="average the last N checkpoints of the run directory")
    p.add_argument("--out", required=True, help="model directory to write")
    p.set_defaults(func=cmd_average)

    p = data.add_parser("prepare", help="tokenize a config's training data into the corpus cache (train does it on "
                                        "first use; this does it ahead, e.g. before torchrun)")
    p.add_argument("config", help="TOML config whose [data] to prepare")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="override a config value (as for train)")
    p.set_defaults(func=cmd_data_prepare)

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

    p = sub.add_parser("tokenize", help="show the tokens and ids of a text, or compare word/char/BPE/Unigram on a config")
    p.add_argument("tokenizer", nargs="?", metavar="MODEL_DIR|TOKENIZER_JSON")
    p.add_argument("--text", action="append", help="text to cut into tokens (repeatable)")
    p.add_argument("--side", choices=["source", "target"], default="source",
                   help="which tokenizer of a model directory with separate vocabularies (default source)")
    p.add_argument("--compare", metavar="CONFIG", help="train the four kinds on this config's data and compare them")
    p.add_argument("--sample", type=int, default=50000,
                   help="with --compare: training examples to train each on (default 50000; 0: all)")
    p.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE", help="with --compare: override a config value")
    p.set_defaults(func=cmd_tokenize)

    p = sub.add_parser("translate", help="translate lines with an encoder-decoder model directory")
    p.add_argument("model_dir")
    _add_beam_args(p)
    p.add_argument("--n-best", dest="n_best", type=int, help="hypotheses per line, written as INDEX<TAB>RANK<TAB>TEXT")
    p.add_argument("--max-len-a", dest="max_len_a", type=float, help="output length bound a * source_length + b")
    p.add_argument("--max-len-b", dest="max_len_b", type=int, help="see --max-len-a (the paper: +50)")
    p.add_argument("--min-len", dest="min_len", type=int, help="minimum output length in tokens")
    p.add_argument("--input", help="file of source lines (default: standard input)")
    p.add_argument("--output", help="file for the translations (default: standard output)")
    p.add_argument("--batch-tokens", type=int, default=4000, help="source tokens per batch (default 4000)")
    p.add_argument("--prefix", help="put this before every input line: a text-to-text model's task, e.g. "
                                    "'translate Spanish to English: '")
    _add_device_args(p)
    _add_precision_arg(p)
    p.set_defaults(func=cmd_translate)

    p = sub.add_parser("classify", help="label lines of text with an encoder classifier's model directory")
    p.add_argument("model_dir")
    p.add_argument("--input", nargs="+", help="file of texts, one per line (default: standard input); for an image "
                                                "classifier, image files or folders of them")
    p.add_argument("--output", help="file for label<TAB>probability lines (images: file<TAB>label<TAB>probability; "
                                    "default: standard output)")
    p.add_argument("--top-k", dest="top_k", type=int, default=1,
                   help="label/probability pairs per line, most likely first (default 1; 0 = all labels)")
    _add_device_args(p)
    _add_precision_arg(p)
    p.set_defaults(func=cmd_classify)

    p = sub.add_parser("generate", help="continue a prompt with a language model directory (or answer it with a "
                                        "text-to-text model)")
    p.add_argument("model_dir")
    p.add_argument("--prompt", required=True, help="the text to continue (or the question, with --chat)")
    p.add_argument("--prefix", help="an encoder-decoder (text-to-text) model: put this task prefix before the prompt")
    p.add_argument("--chat", action="store_true", help="apply the model's chat template (imported chat models)")
    p.add_argument("--max-new-tokens", dest="max_new_tokens", type=int, help="tokens to generate (default 50)")
    p.add_argument("--temperature", type=float, help="sampling temperature (0 = greedy; default 1)")
    p.add_argument("--top-k", dest="top_k", type=int, help="sample among the k most likely tokens (0 = all)")
    p.add_argument("--top-p", dest="top_p", type=float, help="sample from the smallest set reaching probability p")
    p.add_argument("--beam", dest="beam_size", type=int, help="beam search with this width instead of sampling")
    p.add_argument("--seed", type=int, help="random seed, for reproducible samples")
    _add_device_args(p)
    _add_precision_arg(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("evaluate", help="BLEU and chrF (--src, --ref) or perplexity (--text) of a model directory")
    p.add_argument("model_dir")
    p.add_argument("--src", help="source lines to translate")
    p.add_argument("--ref", help="reference translations, aligned with --src")
    p.add_argument("--text", help="text for perplexity (language models)")
    p.add_argument("--tsv", help="label<TAB>text lines: a classifier's accuracy, macro-F1, per-class scores, confusion matrix")
    p.add_argument("--pairs", help="input<TAB>target lines: a text-to-text model's BLEU, chrF and exact matches per "
                                   "task (the input's text before its first ': ')")
    p.add_argument("--images", help="labelled images (a prepared .safetensors split or a folder of class folders): "
                                     "an image classifier's accuracy, macro-F1, per-class scores, confusion matrix")
    p.add_argument("--plot", help="with --tsv or --images: draw the confusion matrix to this image (.png, .svg, .pdf)")
    p.add_argument("--output", help="also write the translations (with --tsv: the predicted labels) to this file")
    _add_beam_args(p)
    _add_device_args(p)
    _add_precision_arg(p)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("attention", help="plot a heatmap of the attention weights while decoding a text")
    p.add_argument("model_dir")
    p.add_argument("--text", help="the sentence to translate (or the prompt, for a language model)")
    p.add_argument("--image", help="an image file, for an image encoder: [CLS] attention per head and the rollout")
    p.add_argument("--out", required=True, help="the image to write (.png, .svg or .pdf)")
    p.add_argument("--layer", type=int, default=-1, help="layer, counted from 0 (default -1: the last)")
    p.add_argument("--head", default="mean", help="head number (from 0), mean or all (one panel per head; default mean)")
    p.add_argument("--kind", choices=["cross", "self", "encoder"],
                   help="cross: output over source (default for translation); self: decoder over its inputs "
                        "(the only kind for language models); encoder: source over source")
    p.add_argument("--beam", dest="beam_size", type=int,
                   help="beam size (1 = greedy; default: decode.json for translation, greedy for language models)")
    _add_device_args(p)
    p.set_defaults(func=cmd_attention)

    p = sub.add_parser("serve", help="serve a model directory over HTTP (JSON API, streaming, a page with the attention)")
    p.add_argument("model_dir")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--max-batch-tokens", dest="max_batch_tokens", type=int, default=4000,
                   help="source tokens decoded together at most (default 4000)")
    p.add_argument("--max-wait-ms", dest="max_wait_ms", type=float, default=10.0,
                   help="how long a request waits for others to batch with (default 10)")
    p.add_argument("--max-queue", dest="max_queue", type=int, default=256,
                   help="requests waiting at most; more are refused with 503 (default 256)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a request may take, then 504 (default 60)")
    p.add_argument("--max-lines", dest="max_lines", type=int, default=256,
                   help="lines in one translate request at most (default 256)")
    p.add_argument("--max-body-bytes", dest="max_body_bytes", type=int, default=1 << 20,
                   help="request body size at most (default 1 MiB)")
    p.add_argument("--api-key", dest="api_key",
                   help="require 'Authorization: Bearer KEY' (better: the TRANSFORMER_API_KEY environment variable, "
                        "which ps does not show)")
    p.add_argument("--cors-origin", dest="cors_origin", help="allow browser calls from this origin (default: none)")
    p.add_argument("--drain-timeout", dest="drain_timeout", type=float, default=30.0,
                   help="on SIGTERM/SIGINT, seconds to let requests in flight finish (default 30)")
    _add_device_args(p)
    _add_precision_arg(p)
    p.set_defaults(func=cmd_serve)

    _remember_parsers(parser)
    return parser


def _versions() -> str:
    import platform

    import torch

    return f"torch {torch.__version__}, Python {platform.python_version()}"


def _remember_parsers(parser: argparse.ArgumentParser) -> None:
    """Each command's own parser, as args.parser, so that its errors show its usage."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.set_defaults(parser=child)
                _remember_parsers(child)


def _unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """'unrecognized argument --beams (did you mean --beam?)' for each unknown flag."""
    flags = [flag for action in parser._actions for flag in action.option_strings]
    parts: list[str] = []
    for extra in extras:
        if parts and not extra.startswith("-") and parts[-1].startswith("-") and "=" not in parts[-1]:
            parts[-1] += f" {extra}"  # the value of the unknown flag before it
        else:
            parts.append(extra)
    shown = []
    for part in parts:
        close = difflib.get_close_matches(part.split("=")[0].split()[0], flags, n=1) if part.startswith("-") else []
        shown.append(part + (f" (did you mean {close[0]}?)" if close else ""))
    return f"unrecognized argument{'s' if len(parts) > 1 else ''}: {', '.join(shown)}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        getattr(args, "parser", parser).error(_unrecognized(getattr(args, "parser", parser), extras))
    name = getattr(args, "parser", parser).prog  # "transformer translate", "transformer data copy"
    try:
        args.func(args)
    except BrokenPipeError:  # the reader went away (`transformer translate ... | head`): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141
    except USER_ERRORS as e:
        message = " ".join(str(e).splitlines())  # one line, even for a library's multi-line message
        print(f"{name}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
