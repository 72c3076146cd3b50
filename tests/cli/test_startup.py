"""Start-up: what needs no model never imports torch (`--help`, `--version`, usage errors, the flag
checks), and `import transformer` loads its public API on first use. Speed is measured in
benchmarks/startup.py, not here."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
RUN = """
import sys
from transformer.cli import main
try:
    code = main({argv!r})
except SystemExit as e:
    code = e.code
print("exit", code, "torch", "torch" in sys.modules, file=sys.stderr)
"""


def run(argv: list[str]) -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", RUN.format(argv=argv)], capture_output=True,
                          text=True, env=ENV, timeout=120)
    return done.stdout, done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, code", [
    (["--help"], 0),
    (["--version"], 0),
    (["translate", "--help"], 0),
    (["translate"], 2),  # a usage error: the model directory is missing
    (["translate", "m", "--beams", "4"], 2),  # an unknown flag
    (["translate", "m", "--beam", "0"], 2),  # a flag check
    (["data", "copy", "--out", "x", "--n-train", "0"], 2),
])
def test_what_needs_no_model_does_not_import_torch(argv, code):
    _, last = run(argv)
    assert last == f"exit {code} torch False"


def test_a_command_that_runs_a_model_does_import_it(tmp_path):
    _, last = run(["info", str(tmp_path)])  # fails on the empty directory, after loading torch
    assert last == "exit 2 torch True"


def test_version_names_torch_and_python_without_importing_torch():
    import platform
    from importlib import metadata

    out, last = run(["--version"])
    assert out.strip() == (f"transformer 0.1.0 (torch {metadata.version('torch')}, "
                           f"Python {platform.python_version()})")
    assert last.endswith("torch False")


def test_the_public_api_is_loaded_on_first_use():
    code = ("import sys, transformer\n"
            "print('torch' in sys.modules, end=' ')\n"
            "cfg = transformer.ModelConfig(vocab_size=10)\n"
            "print('torch' in sys.modules, end=' ')\n"
            "model = transformer.build_model(cfg)\n"
            "print('torch' in sys.modules, type(model).__name__, sorted(transformer.__all__) == "
            "sorted(n for n in dir(transformer) if not n.startswith('_') and n in transformer.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         timeout=120).stdout
    assert out.strip() == "False False True EncoderDecoder True"


def test_every_public_name_resolves_and_an_unknown_one_is_an_attribute_error():
    import transformer

    assert sorted(transformer.__all__) == sorted(transformer._PUBLIC)
    for name in transformer.__all__:
        assert getattr(transformer, name).__name__ == name
    with pytest.raises(AttributeError, match="has no attribute 'build_modle'"):
        transformer.build_modle  # noqa: B018


def test_one_command_builds_only_its_own_parser_and_the_table_names_each_module():
    import argparse

    from transformer.cli import COMMANDS, build_parser

    full = build_parser()
    subparsers = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    assert list(subparsers.choices) == [name for name, _ in COMMANDS]
    for name, _ in COMMANDS:
        alone = build_parser(only=name)
        (sub,) = (a for a in alone._actions if isinstance(a, argparse._SubParsersAction))
        assert list(sub.choices) == [name]
        assert sub.choices[name].format_help() == subparsers.choices[name].format_help()


def test_a_command_does_not_import_the_other_commands():
    _, last = run(["translate", "--help"])
    code = ("import sys\nfrom transformer.cli import main\n"
            "try:\n    main(['translate', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('transformer.cli.') and m.count('.') == 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120).stdout
    loaded = eval(out.strip().splitlines()[-1])
    assert "transformer.cli.translate" in loaded
    assert not {"transformer.cli.data", "transformer.cli.evaluation", "transformer.cli.serve"} & set(loaded), loaded
