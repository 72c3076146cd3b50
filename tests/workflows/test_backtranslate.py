"""`transformer backtranslate` (transformer.workflows.backtranslate) with a tiny untrained
English -> Spanish model directory written here: what it writes must be aligned with its input
line by line, the English side unchanged, the tag before each synthetic source; greedy by
default, sampling seeded; bad requests are one line and exit status 2."""

from pathlib import Path

import pytest
import torch

import transformer
from transformer.cli import main
from transformer.config import DecodeConfig, cpu_tiny
from transformer.data.tokenizer import train_bpe
from transformer.decoding.pipeline import Pipeline
from transformer.workflows.backtranslate import synthetic_source, write_pairs

TEXT = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "<bt> el gato se sentó",
    "<bt> un perro corrió",
    "hace sol hoy",
    "los pájaros cantan",
] * 20
LINES = [
    "the cat sat on the mat",
    "",
    "a dog ran in the park today",
    "birds sing",
    "the sun is warm",
    "   ",
    "a cat and a dog",
]
# what is translated: blank lines stay blank
TEXTS = [line if line.strip() else "" for line in LINES]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    tok = train_bpe(TEXT, vocab_size=300)
    model = transformer.build_model(
        cpu_tiny(
            vocab_size=tok.vocab_size,
            d_model=32,
            d_ff=64,
            n_heads=2,
            n_encoder_layers=1,
            n_decoder_layers=1,
            max_positions=32,
        )
    )
    # decode.json says beam 4; backtranslate is greedy unless told
    decode = DecodeConfig(beam_size=4, max_len_a=0.0, max_len_b=6, min_len=1)
    return transformer.save_model(
        model, tmp_path_factory.mktemp("en-es") / "model", tokenizer=tok, decode=decode
    )


@pytest.fixture
def mono(tmp_path) -> Path:
    path = tmp_path / "mono.eng"
    path.write_text("".join(line + "\n" for line in LINES), encoding="utf-8")
    return path


def run(model_dir, mono, *flags) -> tuple[int, list[str], list[str]]:
    src, tgt = mono.parent / "bt.spa", mono.parent / "bt.eng"
    rc = main(
        [
            "backtranslate",
            str(model_dir),
            "--input",
            str(mono),
            "--out-src",
            str(src),
            "--out-tgt",
            str(tgt),
            "--device",
            "cpu",
            *flags,
        ]
    )
    if rc:
        return rc, [], []
    return (
        rc,
        src.read_text(encoding="utf-8").split("\n")[:-1],
        tgt.read_text(encoding="utf-8").split("\n")[:-1],
    )


def test_pairs_are_aligned_tagged_and_greedy_by_default(model_dir, mono, capsys):
    rc, tagged, english = run(model_dir, mono, "--tag", "<bt>")
    assert rc == 0 and english == LINES  # the English side is the input, unchanged, blank lines too
    _, plain, _ = run(model_dir, mono)
    greedy = Pipeline.load(model_dir).translate(TEXTS, beam_size=1)  # not decode.json's beam 4
    assert plain == [" ".join(g.split()) for g in greedy]
    assert tagged == [f"<bt> {p}" if p else "" for p in plain]
    assert tagged[1] == tagged[5] == ""
    assert all(tagged[i].startswith("<bt> ") for i in (0, 2, 3, 4, 6))
    out = capsys.readouterr()
    assert "7 pairs (greedy" in out.out and "lines/s" in out.err


def test_limit_beam_and_seeded_sampling(model_dir, mono):
    assert len(run(model_dir, mono, "--limit", "3")[1]) == 3
    _, beam, _ = run(model_dir, mono, "--beam", "2")
    assert beam == [
        " ".join(b.split()) for b in Pipeline.load(model_dir).translate(TEXTS, beam_size=2)
    ]
    first = run(model_dir, mono, "--temperature", "1.5", "--seed", "3")[1]
    assert len(first) == len(LINES)
    assert first == run(model_dir, mono, "--temperature", "1.5", "--seed", "3")[1]
    # sampling among the top 1 token is greedy search (max_len_a 0: the same length bound for every row)
    assert run(model_dir, mono, "--top-k", "1")[1] == run(model_dir, mono)[1]


@pytest.mark.parametrize(
    "flags, words",
    [
        ((), "has no text"),
        (("--beam", "2", "--top-k", "10"), "it has no beam"),
        (("--tag", "<b t>"), "one word without spaces"),
    ],
)
def test_bad_requests_are_one_line_and_write_nothing(model_dir, tmp_path, capsys, flags, words):
    empty = tmp_path / "empty.eng"
    empty.write_text("\n\n" if not flags else "a line\n")
    rc, _, _ = run(model_dir, empty, *flags)
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "bt.spa").exists() and not (tmp_path / "bt.eng").exists()


def test_a_missing_model_or_input_is_one_line(tmp_path, mono, capsys):
    assert run(tmp_path / "no-model", mono)[0] == 2
    assert run(tmp_path, tmp_path / "missing.eng")[0] == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "no-model" in lines[0] and "missing.eng not found" in lines[1], lines


def test_synthetic_sources_are_one_line_and_an_empty_one_is_untagged():
    assert synthetic_source("hola\nmundo ", "<bt>") == "<bt> hola mundo"
    assert synthetic_source("", "<bt>") == "" and synthetic_source("hola", None) == "hola"


def test_the_tag_is_cut_the_same_way_on_every_line():
    tok = train_bpe(TEXT, vocab_size=300)
    pieces = [
        [tok.id_to_token(i) for i in tok.encode(line)]
        for line in ("<bt> el gato", "<bt> Hace sol hoy")
    ]
    assert pieces[0][:3] == pieces[1][:3] == ["<", "bt", ">"]


def test_a_failure_leaves_the_files_that_were_there(tmp_path):
    src, tgt = tmp_path / "bt.spa", tmp_path / "bt.eng"
    src.write_text("old\n")
    tgt.write_text("old\n")

    def pairs():
        yield "hola", "hello"
        raise RuntimeError("the model failed")

    with pytest.raises(RuntimeError):
        write_pairs(src, tgt, pairs())
    assert src.read_text() == tgt.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bt.eng", "bt.spa"]  # no temporary file
