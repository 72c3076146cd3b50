"""The layout's seams (shared/DESIGN.md), read from the source with `ast`, so that a lazy import
inside a function counts too:

- config/ is the bottom of the house: it imports nothing from the other packages;
- model/ and data/ never import each other; model/ takes from config/ only types and choice lists;
- training/ imports nothing from decoding/ or viz/ (what needs both lives in evaluation.scoring);
- tasks/ (the table of tasks) stands on training/, evaluation/, decoding/'s parts and viz/'s figures,
  and below them nothing imports it but training's entry, decoding's Pipeline and the top;
- evaluation/'s metric modules work on plain strings and arrays: nothing of the package but each
  other; the modules that drive a model over a test set (scoring.py and its per-task siblings) are
  listed, and only they may use decoding/;
- a setting's choice list lives once, in config/: no module elsewhere types a copy of one;
- nothing below serve/ and export/ imports them, and nothing imports workflows/ or cli/
  (but cli/, which stands on everything); serve/ and export/ stand on Pipeline (decoding/),
  model_dir, tasks/ and runtime/: serve/ imports nothing of model/, export/ only the Model types
  and the positional tables it writes out;
- no import circles, not even inside a folder;
- no module imports a private name (one leading underscore) from another module of the package:
  such a name is made public or its caller moves (PRIVATE_IMPORTS lists what is still left).
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformer"

TOP = {"cli", "workflows", "serve", "export"}
"""What stands on everything else: nothing below imports these."""

# package (or module) -> the top-level parts of `transformer` it must never import
FORBIDDEN = {
    "config": {"tasks", "model", "data", "training", "decoding", "evaluation", "model_dir", "model_records", "interop", "viz", "runtime",
               "files", *TOP},
    "files": {"tasks", "config", "model", "data", "training", "decoding", "evaluation", "model_dir", "model_records", "interop", "viz",
              "runtime", *TOP},
    "model": {"tasks", "data", "training", "decoding", "evaluation", "model_dir", "model_records", "interop", "viz", "runtime", *TOP},
    "data": {"tasks", "model", "training", "decoding", "evaluation", "model_dir", "model_records", "interop", "viz", "runtime", *TOP},
    "runtime": {"tasks", "data", "training", "decoding", "evaluation", "model_dir", "model_records", "interop", "viz", *TOP},
    "model_dir": {"tasks", "training", "decoding", "evaluation", "interop", "viz", "runtime", *TOP},
    "model_records": {"tasks", "training", "decoding", "evaluation", "interop", "viz", "runtime", *TOP},
    "decoding": {"training", "evaluation", "interop", "viz", *TOP},
    "evaluation": {"tasks", "training", "interop", "viz", *TOP},
    "training": {"decoding", "viz", "interop", *TOP},
    "interop": {"tasks", "training", "decoding", "evaluation", "viz", "runtime", *TOP},
    "viz": {"tasks", "training", "interop", *TOP},
    "export": {"training", "viz", "cli", "workflows", "serve"},
    "serve": {"training", "cli", "workflows", "export"},
    "workflows": {"cli", "serve", "export"},
    "tasks": {"interop", *TOP},
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


METRIC_MODULES = {"metrics", "overlap", "detection", "boxes"}
"""evaluation/'s pure metric modules: plain strings, numbers and arrays in, scores out."""
DRIVERS = {"scoring", "captions", "detector", "image_lm", "retrieval", "transcripts"}
"""evaluation/'s modules that run a model over a test set (DESIGN names scoring.py; the per-task
drivers beside it do the same for captions, detection, image generation, retrieval, speech)."""


def test_evaluation_metric_modules_are_pure_and_only_drivers_use_decoding():
    for file in files_of("evaluation"):
        name = module_name(file)
        if len(name) == 2:
            continue  # evaluation/__init__.py gathers names
        assert name[2] in METRIC_MODULES | DRIVERS, f"evaluation/{file.name}: list it in METRIC_MODULES or DRIVERS"
        for path, _ in imports(file):
            if name[2] in METRIC_MODULES:
                pure = path[1] == "evaluation" and len(path) > 2 and path[2] in METRIC_MODULES
                assert pure, f"evaluation/{file.name} is a metric module but imports {'.'.join(path)}"
    for file in files_of("evaluation"):
        text = file.read_text(encoding="utf-8")
        if module_name(file)[-1] in METRIC_MODULES:
            assert "torch.nn" not in text and "Pipeline" not in text, f"evaluation/{file.name} runs a model"


SERVE_EXPORT_MAY_IMPORT = {
    "serve": {"config", "files", "data", "decoding", "model_dir", "model_records", "tasks", "runtime", "viz"},
    "export": {"config", "files", "data", "model_dir", "model_records", "tasks", "runtime", "interop", "model"},
}
"""What serve/ and export/ stand on (a model directory: model_dir and its small records,
model_records); of model/, export/ takes only EXPORT_MODEL."""
EXPORT_MODEL = {"transformer", "positional"}


@pytest.mark.parametrize("part", sorted(SERVE_EXPORT_MAY_IMPORT))
def test_serve_and_export_stand_on_pipeline_model_dir_tasks_and_runtime(part):
    for file in files_of(part):
        for path, _ in imports(file):
            where = f"{file.relative_to(PACKAGE)} imports {'.'.join(path)}"
            if path[1] == part:
                continue
            assert path[1] in SERVE_EXPORT_MAY_IMPORT[part], where
            if path[1] == "model":
                assert len(path) > 2 and path[2] in EXPORT_MODEL, f"{where}: a model/ internal"


def string_tuples(tree: ast.AST) -> Iterator[tuple[int, frozenset[str]]]:
    """(line, the strings) of every tuple, list or set literal of three or more string constants."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 3 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            yield node.lineno, frozenset(e.value for e in node.elts)


def test_choice_lists_are_typed_once_in_config_and_read_from_there():
    """The ModelConfig (and every config) readers take a setting's choices from config/, never a copy."""
    choices = {}
    for file in files_of("config"):
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                for _, values in string_tuples(node.value):
                    choices[values] = f"config/{file.name}: {node.targets[0].id}"
    assert len(choices) > 10  # ARCHS, POSITIONALS, NORMS, ACTIVATIONS, TOKENIZER_KINDS, ...
    for file in sorted(PACKAGE.rglob("*.py")):
        if module_name(file)[1:2] == ("config",):
            continue
        for line, values in string_tuples(ast.parse(file.read_text(encoding="utf-8"))):
            assert values not in choices, (f"{file.relative_to(PACKAGE)}:{line} copies {choices[values]}: "
                                           "import it from transformer.config")


def only_gathers(statement: ast.stmt) -> bool:
    """An import, a string (a docstring), `__all__ = [...]`, or an if / try of only these: what a
    package's __init__ may hold without defining anything."""
    match statement:
        case ast.Import() | ast.ImportFrom():
            return True
        case ast.Expr(value=ast.Constant(value=str())):
            return True
        case ast.Assign(targets=[ast.Name(id="__all__")]) | ast.AnnAssign(target=ast.Name(id="__all__")):
            return True
        case ast.If() | ast.Try():
            handlers = [s for h in getattr(statement, "handlers", []) for s in h.body]
            inner = [*statement.body, *statement.orelse, *getattr(statement, "finalbody", []), *handlers]
            return all(only_gathers(s) for s in inner)
    return False


def defines_code(source: str) -> bool:
    """Whether a package's __init__ defines anything (a def, a class, an assignment other than
    `__all__`, a statement that runs) rather than only importing and listing names."""
    return not all(only_gathers(s) for s in ast.parse(source).body)


def import_graph() -> dict[str, set[str]]:
    """module -> the modules it imports (a lazy import counts), as before-stop's check builds it: an
    import through a package's __init__ that only gathers names is not an edge; one into an
    __init__ that defines code is."""
    modules = {".".join(module_name(f)): f for f in PACKAGE.rglob("*.py")}
    gatherers = {m for m, f in modules.items()
                 if f.name == "__init__.py" and not defines_code(f.read_text(encoding="utf-8"))}
    graph = {m: set() for m in modules}
    for m, file in modules.items():
        for path, names in imports(file):
            for target in [".".join(path)] + [".".join((*path, n)) for n in names]:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != m and target not in gatherers:
                    graph[m].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_scanner_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_an_init_that_defines_code_is_told_from_one_that_gathers_names():
    gathers = '''"""The package."""
from .a import f
from . import b
if TYPE_CHECKING:
    from .c import C
__all__ = ["f", "b"]
"""What the package offers."""
'''
    assert not defines_code(gathers)
    for code in ("def f():\n    pass\n", "class C:\n    pass\n", "TARGETS = ('a', 'b')\n",
                 "X: int = 1\n", "if True:\n    Y = 2\n", "print('imported')\n"):
        assert defines_code(gathers + code), code
    assert defines_code((PACKAGE / "cli" / "__init__.py").read_text(encoding="utf-8"))  # COMMANDS, main
    assert not defines_code((PACKAGE / "tasks" / "__init__.py").read_text(encoding="utf-8"))  # table.py


def test_no_import_circles_anywhere():
    assert circles(import_graph()) == []


PRIVATE_IMPORTS: set[tuple[str, str]] = set()
"""(module, name) pairs still importing a private name across modules: none is left, and the
allow-list only shrinks."""


def private_imports() -> set[tuple[str, str]]:
    """(module under transformer/, name) of every `from <a module of the package> import _name`."""
    found = set()
    for file in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if not (node.level or (node.module or "").split(".")[0] == "transformer"):
                continue  # another package's private names are its business
            found |= {(file.relative_to(PACKAGE).as_posix(), a.name) for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")}
    return found


def test_no_private_name_is_imported_from_another_module():
    found = private_imports()
    assert found - PRIVATE_IMPORTS == set(), "make these names public, or move their callers"
    assert PRIVATE_IMPORTS - found == set(), "fixed: take these off PRIVATE_IMPORTS"
