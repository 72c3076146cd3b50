"""The layout's seams (shared/DESIGN.md), read from the source with `ast`, so that a lazy import
inside a function counts too:

- config/ is the bottom of the house: it imports nothing from the other packages;
- model/ and data/ never import each other; model/ takes from config/ only types and choice lists;
- training/ imports nothing from decoding/ or viz/ (what needs both lives in evaluation.scoring);
- tasks/ (the table of tasks) stands on training/, evaluation/ and decoding/'s parts and below them
  nothing imports it but training's entry, decoding's Pipeline and the top;
- evaluation/metrics.py works on plain strings and numbers: nothing of the package;
- nothing below serve/ and export/ imports them, and nothing imports workflows/ or cli/
  (but cli/, which stands on everything).
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer"

TOP = {"cli", "workflows", "serve", "export"}
"""What stands on everything else: nothing below imports these."""

# package (or module) -> the top-level parts of `transformer` it must never import
FORBIDDEN = {
    "config": {"tasks", "model", "data", "training", "decoding", "evaluation", "model_dir", "interop", "viz", "runtime",
               "files", *TOP},
    "files": {"tasks", "config", "model", "data", "training", "decoding", "evaluation", "model_dir", "interop", "viz",
              "runtime", *TOP},
    "model": {"tasks", "data", "training", "decoding", "evaluation", "model_dir", "interop", "viz", "runtime", *TOP},
    "data": {"tasks", "model", "training", "decoding", "evaluation", "model_dir", "interop", "viz", "runtime", *TOP},
    "runtime": {"tasks", "data", "training", "decoding", "evaluation", "model_dir", "interop", "viz", *TOP},
    "model_dir": {"tasks", "training", "decoding", "evaluation", "interop", "viz", "runtime", *TOP},
    "decoding": {"training", "evaluation", "interop", "viz", *TOP},
    "evaluation": {"tasks", "training", "interop", "viz", *TOP},
    "training": {"decoding", "viz", "interop", *TOP},
    "interop": {"tasks", "training", "decoding", "evaluation", "viz", "runtime", *TOP},
    "viz": {"training", "interop", *TOP},
    "export": {"training", "viz", "cli", "workflows", "serve"},
    "serve": {"training", "cli", "workflows", "export"},
    "workflows": {"cli", "serve", "export"},
    "tasks": {"viz", "interop", *TOP},
}


def module_name(file: Path) -> tuple[str, ...]:
    """('transformer', 'model', 'io') for src/transformer/model/io.py; a package's __init__ is the package."""
    parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def imports(file: Path) -> list[tuple[tuple[str, ...], list[str]]]:
    """Every import of a module under `transformer`, relative or absolute: (module path, names imported)."""
    module = module_name(file)
    package = module if file.name == "__init__.py" else module[:-1]
    found = []
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                base = package[: len(package) - node.level + 1]
                if node.module:
                    found.append(((*base, *node.module.split(".")), names))
                else:  # from . import x: x is a module of the package
                    found += [((*base, name), []) for name in names]
            else:
                found.append((tuple((node.module or "").split(".")), names))
        elif isinstance(node, ast.Import):
            found += [(tuple(a.name.split(".")), []) for a in node.names]
    return [(path, names) for path, names in found if len(path) > 1 and path[0] == "transformer"]


def imported_parts(file: Path) -> set[str]:
    """The first component under `transformer` of every import in a module."""
    return {path[1] for path, _ in imports(file)}


def files_of(part: str) -> list[Path]:
    path = PACKAGE / part
    return sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]


def test_the_scanner_sees_relative_and_lazy_imports():
    assert {"config", "files", "model"} <= imported_parts(PACKAGE / "model_dir.py")
    assert "data" in imported_parts(PACKAGE / "model_dir.py")
    # cli/__init__.py's `from ..workflows.demo import ...` sits inside a function
    assert "workflows" in set().union(*(imported_parts(f) for f in files_of("cli")))
    # a package's __init__ resolves `.x` inside the package, `..x` one above
    assert imported_parts(PACKAGE / "evaluation" / "__init__.py") == {"evaluation"}


def test_every_part_of_the_package_has_its_seams_stated():
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py")}
    assert parts - set(FORBIDDEN) - {"__init__", "__main__", "cli"} == set()


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_part_does_not_import_across_its_seam(part):
    for file in files_of(part):
        crossing = imported_parts(file) & FORBIDDEN[part]
        assert not crossing, f"{file.relative_to(PACKAGE)} imports transformer.{', '.join(sorted(crossing))}"


def test_model_takes_only_types_and_choice_lists_from_config():
    for file in files_of("model"):
        for path, names in imports(file):
            if path[1] != "config":
                continue
            bad = [n for n in names if not (n[0].isupper())]  # ModelConfig, VisionConfig, GATED_ACTIVATIONS
            assert not bad, f"{file.relative_to(PACKAGE)} imports {', '.join(bad)} from config: only types and choice lists"


def test_string_metrics_import_nothing_of_the_package():
    assert imported_parts(PACKAGE / "evaluation" / "metrics.py") == set()
