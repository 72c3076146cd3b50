"""Emoji images for the image encoder: Noto Color Emoji's glyphs, rendered with random scales,
shifts and backgrounds, labelled with their Unicode names, as `transformer data emoji` writes them.

Source: NotoColorEmoji.ttf of Debian's fonts-noto-color-emoji (SIL Open Font License 1.1), a
colour bitmap font (CBDT) that FreeType opens at 109 px only; Pillow draws a glyph with
embedded_color=True. Names come from Python's unicodedata, lowercased ("red apple").

What is kept: every single code point that has a unicodedata name and a glyph in the font (a
non-empty bounding box: the font's cmap seen through Pillow), less Unicode's emoji components
(UTS #51, emoji-data.txt, Emoji_Component), which are parts of emoji rather than pictures:
    # * 0-9              keycap bases (the font draws them as plain characters)
    U+20E3               the combining enclosing keycap
    U+1F1E6..U+1F1FF     regional indicators (the letter halves of a flag)
    U+1F3FB..U+1F3FF     skin-tone modifiers (colour swatches)
    U+1F9B0..U+1F9B3     hair components (red, curly, bald, white)
    ZWJ, U+FE0F, tags    have no glyph of their own
Sequences (flags, keycaps, skin tones, ZWJ families) are not single code points: left out. A
glyph whose rendering has no visible pixel is left out. Glyphs at code points newer than Python's
Unicode version have no name: left out, counted (in U+1F000..U+1FAFF) in PROVENANCE.md.

Split rule: an emoji goes whole to `unseen` when sha256(name) mod 10,000 < unseen_share * 10,000
(the same name always lands on the same side, whatever the font or Python version adds). Every
other ("seen") emoji has per_emoji renderings in train and n_eval each in valid and in test;
every unseen emoji has n_eval renderings in unseen (test's count). train, valid and test share one
label list, the seen names sorted; unseen's list is the unseen names sorted.

Rendering rule (one rendering, size x size RGB): the glyph is drawn once at 109 px and cropped to
its alpha's bounding box; its longer side is scaled to a share of the side drawn uniformly from
SCALES (aspect kept, Lanczos, premultiplied alpha), placed at a uniform position with the whole
glyph inside, over a background of one colour: white with probability WHITE_SHARE, else each
channel uniform in BACKGROUND. Each (emoji, split) draws from numpy default_rng([seed, code
point, split index]): an emoji's renderings do not change with the other emoji or the other
splits' counts, and a rebuild is byte-identical.

On disk: DIR/{train,valid,test,unseen}.safetensors, prepared splits (transformer.data.images:
images uint8 (N, 3, size, size) in emoji order then rendering order, labels int64 (N,), the
names as JSON in the metadata key "labels"), and DIR/PROVENANCE.md.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FONT = Path("/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf")
FONT_PACKAGE = "fonts-noto-color-emoji"
INSTALL = f"apt-get install -y {FONT_PACKAGE}"
GLYPH_PX = 109
"""The one pixel size of the font's bitmaps."""
SIZES = (16, 128)
SCALES = (0.75, 1.0)
"""The glyph's longer side, as a share of the image side."""
BACKGROUND = (150, 255)
"""Each channel of a coloured background, inclusive."""
WHITE_SHARE = 0.2
SPLITS = ("train", "valid", "test", "unseen")
COMPONENTS = (
    ("keycap bases (# * 0-9)", [0x23, 0x2A, *range(0x30, 0x3A)]),
    ("combining enclosing keycap", [0x20E3]),
    ("regional indicators", range(0x1F1E6, 0x1F200)),
    ("skin-tone modifiers", range(0x1F3FB, 0x1F400)),
    ("hair components", range(0x1F9B0, 0x1F9B4)),
    ("ZWJ, variation selector 16, tags", [0x200D, 0xFE0F, *range(0xE0020, 0xE0080)]),
)
NEWER = range(0x1F000, 0x1FB00)
"""Where unnamed glyphs (emoji newer than Python's Unicode) are counted."""


class EmojiDataError(ValueError):
    """The font is missing or unusable, or a setting is out of range; the message says the fix."""


@dataclass(frozen=True)
class Emoji:
    """One emoji: its character, lowercase name and glyph (RGBA, cropped to its alpha)."""

    char: str
    name: str
    glyph: object  # PIL.Image.Image


def open_font(path: str | os.PathLike | None = None):
    """The emoji font at its 109 px (Pillow's basic layout: one code point, one glyph)."""
    from PIL import ImageFont

    path = Path(path) if path else FONT
    if not path.is_file():
        raise EmojiDataError(
            f"{path} not found: install the emoji font with `{INSTALL}` (or pass --font PATH)"
        )
    try:
        font = ImageFont.truetype(str(path), GLYPH_PX, layout_engine=ImageFont.Layout.BASIC)
    except OSError as e:
        raise EmojiDataError(
            f"{path} cannot be opened as a {GLYPH_PX} px bitmap font ({e}): give "
            f"NotoColorEmoji.ttf ({INSTALL})"
        ) from None
    if has_glyph(font, "A"):
        raise EmojiDataError(
            f"{path} is a text font (it draws the letter A): give a colour emoji font, "
            f"NotoColorEmoji.ttf ({INSTALL})"
        )
    return font


def has_glyph(font, char: str) -> bool:
    """Whether the font draws something for char: a missing glyph has an empty bounding box."""
    x0, y0, x1, y1 = font.getbbox(char)
    return x1 > x0 and y1 > y0


def find_emoji(font) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """(every (char, lowercase name) kept by the module doc's rule, sorted by name; the counts
    left out, by reason)."""
    component = {cp: why for why, cps in COMPONENTS for cp in cps}
    kept, skipped = [], {why: 0 for why, _ in COMPONENTS}
    for cp in range(sys.maxunicode + 1):
        char = chr(cp)
        name = unicodedata.name(char, "")
        if not name or not has_glyph(font, char):
            continue
        if cp in component:
            skipped[component[cp]] += 1
        else:
            kept.append((char, name.lower()))
    skipped["newer than Python's Unicode (no name)"] = sum(
        not unicodedata.name(chr(cp), "") and has_glyph(font, chr(cp)) for cp in NEWER
    )
    return sorted(kept, key=lambda e: e[1]), skipped


def draw_glyph(font, char: str):
    """The glyph of char at 109 px, RGBA, cropped to its alpha's bounding box; None if empty."""
    from PIL import Image, ImageDraw

    _, _, width, height = font.getbbox(char)
    canvas = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    ImageDraw.Draw(canvas).text((0, 0), char, font=font, embedded_color=True)
    box = canvas.getchannel("A").getbbox()
    return canvas.crop(box) if box else None


def is_unseen(name: str, share: float) -> bool:
    """Whether an emoji is held out whole: sha256(name) mod 10,000 < share * 10,000."""
    return int(hashlib.sha256(name.encode("utf-8")).hexdigest(), 16) % 10_000 < share * 10_000


def render(glyph, size: int, rng: np.random.Generator) -> np.ndarray:
    """One rendering (the module doc's rule) of a glyph: uint8 (3, size, size)."""
    from PIL import Image

    width, height = glyph.size
    side = rng.uniform(*SCALES) * size / max(width, height)
    w, h = max(1, round(width * side)), max(1, round(height * side))
    x, y = int(rng.integers(0, size - w + 1)), int(rng.integers(0, size - h + 1))
    colour = rng.integers(BACKGROUND[0], BACKGROUND[1] + 1, 3)
    if rng.random() < WHITE_SHARE:
        colour[:] = 255
    image = Image.new("RGB", (size, size), tuple(int(c) for c in colour))
    small = glyph.resize((w, h), Image.Resampling.LANCZOS)  # RGBA: resampled premultiplied
    image.paste(small, (x, y), small)
    return np.asarray(image).transpose(2, 0, 1)


def _check(size: int, per_emoji: int, n_eval: int, unseen_share: float) -> None:
    if not SIZES[0] <= size <= SIZES[1]:
        raise EmojiDataError(f"size {size}: give an image side from {SIZES[0]} to {SIZES[1]} px")
    if per_emoji < 1 or n_eval < 1:
        raise EmojiDataError(
            f"per_emoji {per_emoji}, n_eval {n_eval}: give at least 1 rendering of each"
        )
    if not 0 <= unseen_share < 1:
        raise EmojiDataError(f"unseen_share {unseen_share}: give a share from 0 to below 1")


def build_emoji(
    out_dir: str | os.PathLike,
    size: int = 32,
    per_emoji: int = 16,
    n_eval: int = 2,
    unseen_share: float = 0.1,
    seed: int = 0,
    font: str | os.PathLike | None = None,
    names: Collection[str] | None = None,
) -> dict:
    """Write DIR/{train,valid,test,unseen}.safetensors and PROVENANCE.md (see the module doc);
    `names` keeps only those emoji (lowercase names; small sets and tests). A report: "images"
    and "emoji" per split, "skipped" (counts by reason), "seconds"."""
    import time

    from ...files import atomic_write_text
    from ..images import save_split

    start = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise EmojiDataError(f"--out {out} is a file: give a directory for the dataset")
    _check(size, per_emoji, n_eval, unseen_share)
    face = open_font(font)
    found, skipped = find_emoji(face)
    if names is not None:
        unknown = sorted(set(names) - {name for _, name in found})
        if unknown:
            raise EmojiDataError(
                f"{unknown[0]!r} is not an emoji of {font or FONT}: give lowercase Unicode names "
                '("red apple")'
            )
        wanted = set(names)
        found = [(char, name) for char, name in found if name in wanted]
    emoji = []
    skipped["empty rendering"] = 0
    for char, name in found:
        glyph = draw_glyph(face, char)
        if glyph is None:
            skipped["empty rendering"] += 1
        else:
            emoji.append(Emoji(char, name, glyph))
    if not emoji:
        raise EmojiDataError(f"{font or FONT} has no emoji glyph: give NotoColorEmoji.ttf")
    unseen = [e for e in emoji if is_unseen(e.name, unseen_share)]
    seen = [e for e in emoji if not is_unseen(e.name, unseen_share)]
    if not seen:
        raise EmojiDataError(f"unseen_share {unseen_share} holds out every emoji: give less")
    plan = {"train": (seen, per_emoji), "valid": (seen, n_eval), "test": (seen, n_eval)}
    plan["unseen"] = (unseen, n_eval)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"images": {}, "emoji": {}, "skipped": skipped}
    for k, (split, (members, count)) in enumerate(plan.items()):
        images = np.zeros((len(members) * count, 3, size, size), np.uint8)
        for i, e in enumerate(members):
            rng = np.random.default_rng([seed, ord(e.char), k])
            for j in range(count):
                images[i * count + j] = render(e.glyph, size, rng)
        labels = np.repeat(np.arange(len(members)), count)
        save_split(out / f"{split}.safetensors", images, labels, [e.name for e in members])
        report["images"][split], report["emoji"][split] = len(images), len(members)
    report["seconds"] = time.perf_counter() - start
    command = ["transformer", "data", "emoji", "--out", str(out), "--size", str(size)]
    command += ["--per-emoji", str(per_emoji), "--n-eval", str(n_eval)]
    command += ["--unseen-share", str(unseen_share), "--seed", str(seed)]
    command += ["--font", str(font)] if font else []
    made = shlex.join(command)
    if names is not None:
        made += f"  # only {len(names)} emoji: build_emoji(names=...) in Python"
    atomic_write_text(
        out / "PROVENANCE.md",
        _provenance(report, size, per_emoji, n_eval, unseen_share, seed, font, made),
    )
    return report


def _provenance(report, size, per_emoji, n_eval, unseen_share, seed, font, made) -> str:
    from .packages import versions

    version = versions([FONT_PACKAGE]).get(FONT_PACKAGE, "unknown")
    skipped = report["skipped"]
    return "\n".join(
        [
            "# Emoji images, by `transformer data emoji`",
            "",
            f"Glyphs of {font or FONT} (Debian's {FONT_PACKAGE} {version}; Google's Noto Color "
            "Emoji, SIL Open Font License 1.1), drawn by Pillow at 109 px, labelled with their "
            f"names from Python's unicodedata (Unicode {unicodedata.unidata_version}), lowercased.",
            "",
            "Kept: every single code point with a name and a glyph, less the emoji components "
            "(UTS #51 Emoji_Component), which are parts of emoji, not pictures. Left out:",
            "",
            *[f"- {why}: {n:,}" for why, n in skipped.items()],
            "",
            f"An emoji is held out whole for `unseen` when sha256(name) mod 10,000 < "
            f"{unseen_share} x 10,000. Each other emoji has {per_emoji} renderings in train and "
            f"{n_eval} each in valid and test; each held-out emoji {n_eval} in unseen. A "
            f"rendering ({size} x {size} RGB): the glyph cropped to its alpha, its longer side "
            f"scaled to {SCALES[0]}-{SCALES[1]} of the side (Lanczos), at a uniform position "
            f"inside, over white ({WHITE_SHARE:.0%}) or a colour with each channel uniform in "
            f"{BACKGROUND[0]}-{BACKGROUND[1]}; drawn from numpy default_rng([{seed}, code point, "
            "split index 0-3]), so a rebuild is byte-identical.",
            "",
            "Each `{split}.safetensors` holds `images` (uint8, N x 3 x size x size) and `labels` "
            "(int64, N), the names as JSON in the metadata key `labels` (train, valid and test: "
            "the seen names, sorted; unseen: the held-out names, sorted).",
            "",
            "| split | emoji | images |",
            "|---|---:|---:|",
            *[
                f"| {split} | {report['emoji'][split]:,} | {report['images'][split]:,} |"
                for split in SPLITS
            ],
            "",
            f"Seed {seed}. Made with:",
            "",
            f"    {made}",
            "",
        ]
    )
