"""The layout's seams (shared/DESIGN.md): model/ and data/ never import each other, and nothing
below serve/ or export/ imports them. Read from the source with `ast`, so a lazy import inside a
function counts too."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer"

# package -> the top-level parts of `transformer` it must never import
FORBIDDEN = {
    "model": {"data", "training", "decoding", "evaluation", "model_dir", "interop", "viz", "cli", "demo"},
    "data": {"model", "training", "decoding", "evaluation", "model_dir", "interop", "viz", "cli", "demo"},
    "evaluation": {"training", "cli", "demo"},
    "decoding": {"training", "cli", "demo"},
}


def imported_parts(file: Path) -> set[str]:
    """The first component under `transformer` of every import in a module (relative or absolute)."""
    module = file.relative_to(PACKAGE.parent).with_suffix("").parts  # ('transformer', 'model', 'io')
    parts = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module[: len(module) - node.level]
                name = (*base, *node.module.split(".")) if node.module else base
                names = [name] if node.module else [(*base, a.name) for a in node.names]
            else:
                names = [tuple((node.module or "").split("."))]
        elif isinstance(node, ast.Import):
            names = [tuple(a.name.split(".")) for a in node.names]
        else:
            continue
        parts |= {n[1] for n in names if len(n) > 1 and n[0] == "transformer"}
    return parts


def test_the_scanner_sees_relative_and_lazy_imports():
    assert {"config", "files", "model"} <= imported_parts(PACKAGE / "model_dir.py")
    assert "data" in imported_parts(PACKAGE / "model_dir.py")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_across_its_seam(package):
    for file in sorted((PACKAGE / package).rglob("*.py")):
        crossing = imported_parts(file) & FORBIDDEN[package]
        assert not crossing, f"{file.relative_to(PACKAGE)} imports transformer.{', '.join(sorted(crossing))}"
