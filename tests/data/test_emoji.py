"""Emoji data: every split is a prepared image split, whole emoji are held out by a hash of their
name, the names are Unicode's, the renderings keep the rule (scale, position, light background),
differ from one another and rebuild byte for byte, and bad settings are one line saying the fix."""

from __future__ import annotations

import hashlib
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from tests.cli.common import run
from transformer.cli.data.tasks import EMOJI_SIZES
from transformer.data.images import load_images
from transformer.data.sources.emoji import (
    BACKGROUND,
    FONT,
    SIZES,
    SPLITS,
    EmojiDataError,
    build_emoji,
    render,
)

needs_font = pytest.mark.skipif(
    not FONT.is_file(), reason="apt-get install -y fonts-noto-color-emoji (make setup)"
)
SEEN = ["abacus", "accordion", "cat face", "grinning face", "rainbow", "red apple", "snowman"]
UNSEEN = ["aerial tramway", "alembic", "bucket", "cow"]  # sha256(name) mod 10,000 < 1,000


def hashed_out(name: str) -> bool:
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % 10_000 < 1_000


def splits(out, size: int = 16) -> dict:
    return {split: load_images(out / f"{split}.safetensors", 3, size) for split in SPLITS}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """11 emoji, 16 px, 3 training renderings and 2 of each in valid, test and unseen."""
    if not FONT.is_file():
        pytest.skip("apt-get install -y fonts-noto-color-emoji (make setup)")
    out = tmp_path_factory.mktemp("emoji") / "small"
    build_emoji(out, size=16, per_emoji=3, n_eval=2, names=SEEN + UNSEEN)
    return out


def test_every_split_is_a_prepared_split_of_the_right_shape(small):
    data = splits(small)
    assert data["train"].names == data["valid"].names == data["test"].names == sorted(SEEN)
    assert data["unseen"].names == sorted(UNSEEN)
    for split, per in (("train", 3), ("valid", 2), ("test", 2), ("unseen", 2)):
        images, labels = data[split].images, data[split].labels
        assert images.shape == (len(data[split].names) * per, 3, 16, 16)
        assert labels.bincount().tolist() == [per] * len(data[split].names)


def test_whole_emoji_are_held_out_by_a_hash_of_their_name(small):
    data = splits(small)
    assert not set(data["unseen"].names) & set(data["train"].names)
    assert all(hashed_out(name) for name in data["unseen"].names)
    assert not any(hashed_out(name) for name in data["train"].names)


def test_images_are_not_blank_and_every_rendering_differs(small):
    data = splits(small)
    images = np.concatenate([data[split].images.numpy() for split in SPLITS])  # (N, 3, 16, 16)
    assert (images.reshape(len(images), -1).std(1) > 10).all()  # a glyph, not a plain background
    assert len({image.tobytes() for image in images}) == len(images)


def test_a_rebuild_is_byte_identical_and_an_emoji_does_not_depend_on_the_others(small, tmp_path):
    build_emoji(tmp_path / "again", size=16, per_emoji=3, n_eval=2, names=SEEN + UNSEEN)
    for split in SPLITS:
        name = f"{split}.safetensors"
        assert (tmp_path / "again" / name).read_bytes() == (small / name).read_bytes()
    build_emoji(tmp_path / "two", size=16, per_emoji=3, n_eval=2, names=["red apple", "snowman"])
    alone, among = splits(tmp_path / "two")["valid"], splits(small)["valid"]
    for i, name in enumerate(alone.names):
        j = among.names.index(name)
        assert np.array_equal(alone.images[alone.labels == i], among.images[among.labels == j])
    build_emoji(tmp_path / "seed", size=16, per_emoji=3, n_eval=2, names=SEEN, seed=1)
    other_seed = splits(tmp_path / "seed")["train"].images
    assert not np.array_equal(other_seed, splits(small)["train"].images)


def test_a_rendering_keeps_the_rule():
    """An opaque 100 x 50 red glyph: a red box 0.75-1.0 of the side wide and half as high, inside
    the image, on one light background colour (white about a fifth of the time). (A uniform
    glyph stays uniform when resampled, so its box is exact.)"""
    from PIL import Image

    glyph = Image.new("RGBA", (100, 50), (255, 0, 0, 255))
    rng, size, white = np.random.default_rng(0), 32, 0
    for _ in range(200):
        image = render(glyph, size, rng)  # (3, 32, 32)
        assert image.shape == (3, size, size) and image.dtype == np.uint8
        background = image[:, 0, 0] if image[1, 0, 0] > 100 else image[:, -1, 0]
        assert (background >= BACKGROUND[0]).all()
        white += (background == 255).all()
        rows, cols = np.nonzero((image != background[:, None, None]).any(0))
        width, height = cols.max() + 1 - cols.min(), rows.max() + 1 - rows.min()
        assert 0.75 * size <= width <= size and abs(height - width / 2) <= 1
        assert (image[:, rows, cols] == np.array([[255], [0], [0]])).all()  # all glyph, no blur
        assert len(rows) == width * height  # one box
    assert 20 <= white <= 60


@needs_font
def test_every_emoji_through_the_command_line(tmp_path, capsys):
    """Every emoji of the font, 16 px, one rendering per split."""
    out = tmp_path / "every"
    argv = ["data", "emoji", "--out", out, "--size", "16", "--per-emoji", "1", "--n-eval", "1"]
    rc, stdout, err = run(argv, capsys)
    assert rc == 0 and len(stdout.splitlines()) == 1 and err == "", err
    assert stdout.startswith(f"wrote {out}: train ") and "PROVENANCE.md" in stdout
    data = splits(out)
    seen, unseen = data["train"].names, data["unseen"].names
    every = set(seen + unseen)
    assert 1_300 <= len(seen) + len(unseen) <= 1_500 and 0.05 < len(unseen) / len(seen) < 0.15
    assert not any(map(hashed_out, seen)) and all(map(hashed_out, unseen))
    for name in seen + unseen:  # lowercase Unicode names of single code points
        char = unicodedata.lookup(name)
        assert len(char) == 1 and unicodedata.name(char).lower() == name
    assert {"red apple", "snowman", "copyright sign", "face with tears of joy"} <= every
    for component in (
        "digit one",
        "number sign",
        "regional indicator symbol letter a",
        "emoji modifier fitzpatrick type-4",
        "emoji component red hair",
    ):
        assert component not in every
    provenance = (out / "PROVENANCE.md").read_text()
    assert "- regional indicators: 26" in provenance and "SIL Open Font License 1.1" in provenance
    assert f"| unseen | {len(unseen):,} | {len(unseen):,} |" in provenance


# ---- bad settings ----


def test_the_command_lines_sizes_are_the_builders():
    assert EMOJI_SIZES == SIZES  # the CLI's copy (checking flags imports nothing heavy)


@pytest.mark.parametrize(
    "flags, phrase",
    [
        (["--size", "8"], "--size 8: give an image side from 16 to 128 pixels"),
        (["--size", "129"], "--size 129: give an image side from 16 to 128 pixels"),
        (["--per-emoji", "0"], "--per-emoji 0: give a number of at least 1"),
        (["--n-eval", "0"], "--n-eval 0: give a number of at least 1"),
        (["--unseen-share", "1"], "--unseen-share 1.0: give a share from 0 to below 1"),
        (
            ["--font", "/no.ttf"],
            "/no.ttf not found: install the emoji font with `apt-get install -y fonts-noto-color-emoji`",
        ),
    ],
)
def test_the_command_line_refuses_bad_settings_in_one_line(tmp_path, capsys, flags, phrase):
    rc, out, err = run(["data", "emoji", "--out", tmp_path / "e", *flags], capsys)
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("transformer data emoji: error: ") and phrase in err, err
    assert not (tmp_path / "e").exists()


def test_the_builder_refuses_bad_settings(tmp_path):
    (tmp_path / "file").write_text("x")
    for kwargs, phrase in (
        ({"size": 200}, "size 200: give an image side from 16 to 128 px"),
        ({"unseen_share": -0.1}, "unseen_share -0.1: give a share from 0 to below 1"),
        ({"font": tmp_path / "file"}, "cannot be opened as a 109 px bitmap font"),
    ):
        with pytest.raises(EmojiDataError, match=phrase):
            build_emoji(tmp_path / "e", **kwargs)
    with pytest.raises(EmojiDataError, match="is a file: give a directory"):
        build_emoji(tmp_path / "file")
    assert not (tmp_path / "e").exists()


@needs_font
def test_unknown_names_and_a_text_font_are_refused(tmp_path):
    with pytest.raises(EmojiDataError, match="'red aple' is not an emoji of .*: give lowercase"):
        build_emoji(tmp_path / "e", names=["red aple"])
    text_font = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    if text_font.is_file():
        with pytest.raises(EmojiDataError, match="is a text font"):
            build_emoji(tmp_path / "e", font=text_font)
    assert not (tmp_path / "e").exists()
