"""The flags derived from a handler's typed signature (transformer.cli.args), the settings' flags
derived from their config fields, and the `transformer data` table: every row a builder, a parser
and a report line."""

import argparse
import inspect
import typing
from typing import Annotated, Literal

import pytest

from transformer.cli import build_parser
from transformer.cli.args import Arg, Settings, add_arguments, add_settings, call, given_settings
from transformer.cli.common import ModelRun, UserError, check_flags
from transformer.cli.data import DATASETS
from transformer.config import Bounds, DecodeConfig, ServeConfig, settings_of
from transformer.config.checks import field_docs


def handler(
    file: Annotated[str, Arg("the input", positional=True)],
    out: Annotated[str, Arg("where to write")],
    n: Annotated[int, Arg("how many", Bounds(ge=1), "a number of at least 1")] = 3,
    share: Annotated[float, Arg("a share")] = 0.5,
    lang: Annotated[Literal["en", "es"], Arg("the language")] = "en",
    tag: Annotated[list[str], Arg("a tag (repeatable)", metavar="TAG")] = [],  # noqa: B006
    note: Annotated[str | None, Arg("a note")] = None,
    clean: Annotated[bool, Arg("keep it dirty")] = True,
    loud: Annotated[bool, Arg("shout")] = False,
    sized: Annotated[int, Arg("a size", flag="--size")] = 0,
) -> dict:
    return dict(locals())


def parser_of(function) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_arguments(p, function)
    return p


def test_a_signature_gives_its_flags():
    p = parser_of(handler)
    by_dest = {a.dest: a for a in p._actions}
    assert by_dest["file"].option_strings == [] and by_dest["file"].help == "the input"
    assert by_dest["out"].option_strings == ["--out"] and by_dest["out"].required
    assert by_dest["n"].option_strings == ["--n"] and by_dest["n"].type is int
    assert by_dest["n"].help == "how many (default 3)" and not by_dest["n"].required
    assert by_dest["share"].type is float and by_dest["share"].default == 0.5
    assert by_dest["lang"].choices == ["en", "es"] and by_dest["lang"].default == "en"
    assert isinstance(by_dest["tag"], argparse._AppendAction) and by_dest["tag"].metavar == "TAG"
    assert by_dest["note"].default is None and by_dest["note"].type is str
    assert by_dest["clean"].option_strings == ["--no-clean"] and by_dest["clean"].default is True
    assert by_dest["loud"].option_strings == ["--loud"] and by_dest["loud"].default is False
    assert by_dest["sized"].option_strings == ["--size"] and by_dest["sized"].help == "a size (default 0)"


def test_the_parsed_values_call_the_handler():
    p = parser_of(handler)
    args = p.parse_args(["in.txt", "--out", "o", "--n", "5", "--tag", "a", "--tag", "b", "--no-clean", "--loud"])
    got = call(handler, args)
    assert got == dict(file="in.txt", out="o", n=5, share=0.5, lang="en", tag=["a", "b"], note=None,
                       clean=False, loud=True, sized=0)
    assert call(handler, p.parse_args(["x", "--out", "o"]))["tag"] == []  # the default list is not shared


def test_a_bounded_flag_is_checked_before_the_command_runs():
    p = parser_of(handler)
    with pytest.raises(UserError, match=r"^--n 0: give a number of at least 1$"):
        check_flags(p.parse_args(["x", "--out", "o", "--n", "0"]))
    check_flags(p.parse_args(["x", "--out", "o", "--n", "1"]))


def test_a_parameter_without_its_doc_is_refused():
    def undocumented(out: str) -> None: ...

    with pytest.raises(TypeError, match=r"undocumented\(out\): annotate it Annotated\[type, Arg\(help\)\]"):
        parser_of(undocumented)


@pytest.mark.parametrize("cls", [DecodeConfig, ServeConfig])
def test_a_settings_flag_matches_its_config_field(cls):
    p = argparse.ArgumentParser(prog="t")
    names = add_settings(p, cls, note="")
    flagged = {n for n, f in settings_of(cls).items() if f.metadata.get("flag")}
    assert set(names) == flagged and flagged
    by_dest = {a.dest: a for a in p._actions}
    for name in names:
        f, action = settings_of(cls)[name], by_dest[name]
        bounds = f.metadata["bounds"]
        assert action.option_strings == [f.metadata["flag"]]
        assert action.default is None  # the model's (or the server's) own value applies
        assert action.help.startswith(field_docs(cls)[name].rstrip(".").replace("%", "%%"))
        if bounds.choices is not None:
            assert action.choices == list(bounds.choices)
        elif isinstance(f.default, bool):  # --no-keep-markup: the other value, no argument
            assert action.nargs == 0 and action.const is (not f.default)
        else:
            assert action.type.__name__ == str(f.type).split("|")[0].strip()
    given = given_settings(p.parse_args([]), names)
    assert given == {}


def test_a_given_setting_outside_its_bounds_is_refused_with_its_phrase():
    p = argparse.ArgumentParser(prog="t")
    names = add_settings(p, DecodeConfig, ("beam_size", "length_penalty_kind"))
    args = p.parse_args(["--beam", "0"])
    with pytest.raises(UserError, match=r"^--beam 0: give a beam size of at least 1 \(1 = greedy\)$"):
        check_flags(args)
    assert given_settings(p.parse_args(["--beam", "2"]), names) == {"beam_size": 2}


# ---- the data table ----


def data_commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    data = top.choices["data"]
    return next(a for a in data._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_every_dataset_row_has_a_builder_a_parser_and_a_report_line():
    commands = data_commands()
    names = [d.name for d in DATASETS]
    assert len(set(names)) == len(names) == 25
    assert list(commands) == names  # each row is a `transformer data` subcommand, in order
    for dataset in DATASETS:
        assert dataset.help and callable(dataset.build) and callable(dataset.line)
        params = inspect.signature(dataset.build).parameters
        hints = typing.get_type_hints(dataset.build, include_extras=True)
        assert all(typing.get_origin(hints[n]) is Annotated for n in params), dataset.name
        dests = {a.dest for a in commands[dataset.name]._actions} - {"help"}
        assert dests == set(params), dataset.name  # the parser is the builder's signature
        line = inspect.signature(dataset.line).parameters
        named = [n for n, q in line.items() if q.kind is q.KEYWORD_ONLY or q.kind is q.POSITIONAL_OR_KEYWORD]
        assert set(named[1:]) <= set(params), dataset.name  # the line reads the builder's arguments


def test_the_tables_copies_of_builder_constants_match_them():
    from transformer.cli.data import corpora, tasks
    from transformer.data.sources import summaries
    from transformer.data.sources.bible import MODULES
    from transformer.data.sources.copy import SYMBOLS

    assert corpora.COPY_SYMBOLS == len(SYMBOLS)
    assert typing.get_args(typing.get_args(typing.get_type_hints(
        tasks.wiki_summaries, include_extras=True)["target"])[0]) == summaries.TARGETS
    assert set(typing.get_args(corpora.Bible)) <= set(MODULES)


def test_a_report_line_is_printed_from_the_builders_report(tmp_path, capsys):
    from tests.cli.common import run

    code, out, _ = run(["data", "copy", "--out", tmp_path, "--n-train", "2", "--n-valid", "1", "--n-test", "1"], capsys)
    assert code == 0
    assert out.strip() == (f"wrote test.src, test.tgt, train.src, train.tgt, valid.src, valid.tgt into {tmp_path}")


def model_handler(
    run: ModelRun,
    text: Annotated[str, Arg("a text")],
    decode: Annotated[dict, Settings(DecodeConfig, ("beam_size", "length_penalty_kind"))] = None,
) -> tuple:
    return run, text, decode


def test_a_model_run_and_a_settings_group_in_a_signature():
    """ModelRun gives the model directory (positional, in place) and --device, --threads,
    --precision (after the others); a Settings group gives its settings' flags and, to the handler,
    a dict of those given."""
    p = parser_of(model_handler)
    flags = [a.option_strings[0] if a.option_strings else a.dest for a in p._actions if a.dest != "help"]
    assert flags == ["model_dir", "--text", "--beam", "--lenpen-kind", "--device", "--threads", "--precision"]
    run, text, decode = call(model_handler, p.parse_args(["m", "--text", "t", "--beam", "2"]))
    assert run == ModelRun("m", "auto", None, None) and text == "t" and decode == {"beam_size": 2}
    assert call(model_handler, p.parse_args(["m", "--text", "t"]))[2] == {}
    with pytest.raises(UserError, match=r"^--threads 0: give a positive number of threads$"):
        check_flags(p.parse_args(["m", "--text", "t", "--threads", "0"]))


@pytest.mark.parametrize("command", ["translate", "classify", "answer", "transcribe", "detect", "caption",
                                     "embed", "serve", "generate", "attention", "backtranslate",
                                     "evaluate"])
def test_every_model_command_takes_the_one_definition_of_where_to_run(command):
    """--device, --threads and --precision are written once (common.ModelRun) for every command."""
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    actions = {a.dest: a for a in top.choices[command]._actions}
    reference = {a.dest: a for a in parser_of(model_handler)._actions}
    for dest in ("device", "threads", "precision")[: 2 if command == "attention" else 3]:
        mine, theirs = actions[dest], reference[dest]
        assert (mine.option_strings, mine.help, mine.choices, mine.default) == (
            theirs.option_strings, theirs.help, theirs.choices, theirs.default), (command, dest)
