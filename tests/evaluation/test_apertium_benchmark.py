"""benchmarks/apertium.py without Apertium: its marks are cleaned, and its output stays one line per
input line, whatever the lines hold or however the (faked) translator splits them."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "apertium.py"
spec = importlib.util.spec_from_file_location("apertium_benchmark", BENCHMARK)
apertium = importlib.util.module_from_spec(spec)
spec.loader.exec_module(apertium)


class FakeApertium:
    """subprocess.run for `apertium -u spa-eng`: upper-cases each paragraph; a paragraph holding
    "JOIN" is merged with the next and "SPLIT" breaks one in two (as a translator that moves
    paragraph breaks would); records each input."""

    def __init__(self, returncode=0):
        self.inputs, self.returncode = [], returncode

    def __call__(self, argv, input, capture_output, text, check):
        assert argv == ["apertium", "-u", "spa-eng"] and capture_output and text and not check
        self.inputs.append(input)
        paragraphs = input.removesuffix("\n").split("\n\n")
        out, pending = [], ""
        for k, paragraph in enumerate(paragraphs):
            if "JOIN" in paragraph and k < len(paragraphs) - 1:
                pending = paragraph.upper() + " "
            else:
                out += (pending + paragraph.upper()).split("SPLIT")
                pending = ""
        stdout = "\n\n".join(out) + "\n"
        return subprocess.CompletedProcess(argv, self.returncode, stdout, "Mode does not exist")


def test_clean_strips_marks_at_word_starts_only():
    raw = 'It could not  open the archive "*x.*txt" <*b> I will #take @foo: item #1, 5*3 e@mail *'
    assert (
        apertium.clean(raw)
        == 'It could not open the archive "x.txt" <b> I will take foo: item #1, 5*3 e@mail *'
    )


def test_one_line_out_per_line_in_with_special_characters():
    lines = [
        "hola",
        "",
        "   ",
        "a\rb",
        "forma\fdos",
        "^$ [x] {y} <z> \\",
        "¿qué?",
        "línea\u2028partida",
    ]
    fake = FakeApertium()
    out = apertium.apertium_lines(lines, run=fake)
    assert len(out) == len(lines) and len(fake.inputs) == 1
    sent = (
        fake.inputs[0].removesuffix("\n").split("\n\n")
    )  # a paragraph a line, blank ones left out
    assert len(sent) == 6 and "\n" not in "".join(sent) and "\r" not in "".join(sent)
    assert out[0] == "HOLA" and out[1] == out[2] == "" and out[3] == "A B" and out[4] == "FORMA DOS"
    assert out[5] == "^$ [X] {Y} <Z> \\"


def test_merged_or_split_lines_are_translated_again_in_halves():
    fake = FakeApertium()
    out = apertium.apertium_lines(["uno", "dos JOIN", "tres", "cuatro", "cinco"], run=fake)
    assert out == ["UNO", "DOS JOIN", "TRES", "CUATRO", "CINCO"]
    assert len(fake.inputs) == 3  # the whole came back a paragraph short: then each half
    out = apertium.apertium_lines(["seis SPLIT siete", "ocho"], run=fake)
    assert [apertium.clean(line) for line in out] == [
        "SEIS SIETE",
        "OCHO",
    ]  # one line as two: joined
    assert apertium.apertium_lines([], run=fake) == [] and apertium.apertium_lines(
        [" "], run=fake
    ) == [""]


def test_a_failed_run_says_how_to_install_the_pair():
    with pytest.raises(ValueError, match="apt-get install apertium-eng-spa"):
        apertium.apertium_lines(["hola"], run=FakeApertium(returncode=1))


def test_outputs_are_cached_per_file_content(tmp_path):
    source = tmp_path / "test.spa"
    source.write_text("hola *mundo\n\n¿qué tal?\n", encoding="utf-8")
    lines = ["hola *mundo", "", "¿qué tal?"]
    fake = FakeApertium()
    first = apertium.apertium_file(source, lines, tmp_path / "cache", "0.8.1-2", run=fake)
    again = apertium.apertium_file(source, lines, tmp_path / "cache", "0.8.1-2", run=fake)
    assert first == again == ["HOLA MUNDO", "", "¿QUÉ TAL?"] and len(fake.inputs) == 1
    apertium.apertium_file(source, lines, tmp_path / "cache", "0.9", run=fake)  # another version
    assert len(fake.inputs) == 2


def test_the_required_examples_are_among_the_examples():
    assert set(apertium.REQUIRED) <= set(apertium.EXAMPLES)
    assert "Whose is it?" in apertium.REQUIRED["De quién es"]


def test_placeholders_kept_counts_the_lines_with_placeholders_only():
    sources = ["Abre %s", "Sin marcas", "<b>Hola</b> {0}", "x &amp; y"]
    hypotheses = ["Open %s", "No marks", "<b>Hello {0}", "x & y"]
    result = apertium.scores(hypotheses, ["Open %s", "No marks", "<b>Hello</b> {0}", "x &amp; y"], sources)
    assert (result["placeholders_kept"], result["placeholder_lines"]) == (1, 3)
    assert apertium.placeholders_cell(result) == "33.3% (1/3)"
    assert apertium.placeholders_cell({"placeholders_kept": 0, "placeholder_lines": 0}) == "-"
