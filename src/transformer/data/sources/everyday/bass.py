"""Spanish -> English dialogue pairs from the subtitles of *Beneath a Steel Sky* (Debian
beneath-a-steel-sky 0.0372: sky.dnr and sky.dsk), decoded with the Huffman tree compiled into
ScummVM's executable (Debian scummvm 2.7.0). Nothing is run; the files are only read.

The format, as read here:
- sky.dnr: a u32 LE count, then 8-byte entries: u16 file number, a 24-bit LE offset (bit 23 set:
  the low 23 bits count 16-byte units) and 24-bit LE flags (the low 22 bits are the size; bit 22:
  drop the 22-byte header after unpacking; bit 23: stored as is). The data lies at the offset in
  sky.dsk. A file that is not stored and whose header's first u16 has bit 7 set holds, after its
  22-byte header, an RNC method-1 stream (rnc_unpack), unless that stream lacks the "RNC\\x01"
  magic (then the bytes are taken as they are). The packer may end a stream with a one-byte
  word: its missing high byte reads as 0. In 0.0372 every text section is stored; 4,764 other
  files are packed (the unpacker checks their lengths and both CRCs).
- Text: file 60600 + 8 * language + section (8 sections); languages 0 en-GB, 3 en-US, 7 es. A
  section starts with u16 A (the skip table), u16 B (the bit stream), then one u16 per block of
  32 ids: the block's length in 2-bit units. Text id = section << 12 | block << 5 | index. A
  text starts at the sum of the earlier blocks' lengths plus the skip bytes (at A + 32 * block)
  of the earlier indices of its block; a skip byte b counts (b & 0x7f) << 3 units when b & 0x80
  is set, else b. Bits are read most significant first from byte B + pos // 4.
- Characters come from a 245-node tree (left child, right child, value; a node whose children
  are both 0 is a leaf; bit 0 goes left) that ends a text at NUL. Its 735-byte table lies in
  the scummvm executable; of the tables that start with TREE_SIGNATURE the first that decodes
  English text id 1 as "Foster" is used.
- Characters: the game's font draws ` as a quote mark ('), 0x80 < 0x81 > 0x82 /, and, in
  Spanish, + é, < á, \\ ú, # ü, } Ü, 0x87 í, 0x88 ó, 0x8a ¿, 0x8b ¡, 0x8c Ñ, 0x8d ñ (SPANISH).
  Any other byte above 0x7f reads as U+FFFD.

Pairs (bass_pairs): es -> en-GB by text id, en-US kept as a second reference where it differs
(second_references). A developer's note after a run of NOTE_GAP or more blanks ("unused",
"please report if seen!", "###") is cut off. Dropped, each counted by reason: placeholders
(Spanish "Dummy message" or English "?"), texts empty on either side once the note is cut, the
scrambled letters and digits of computer screens (SCRAMBLED matches twice or more), and
Spanish identical to English (names, numbers, credits). ALL-CAPS emphasis is kept as it is.
The group of a pair is "bass/<section>/<block>": the 32 ids of a block are mostly one
conversation or one room's descriptions, so a block goes whole to train, valid or test.
"""

from __future__ import annotations

import mmap
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...text import DataError
from ..splits import Pair, one_line

DATA_DIR = "usr/share/scummvm/beneath-a-steel-sky"
EXECUTABLE = "usr/games/scummvm"
TEXT_FILE = 60600  # + 8 * language + section
SECTIONS = 8
LANGUAGES = {"en-GB": 0, "en-US": 3, "es": 7}
BLOCK = 32  # ids per block
TREE_SIGNATURE = bytes.fromhex("011400020700030400000020050600000065000061")
TREE_NODES = 245
MAX_TEXT = 4096  # characters: a longer text means a wrong tree or a broken section
HEADER = 22  # bytes of the game's file header before an RNC stream
NOTE_GAP = 8  # blanks before a developer's note
SCRAMBLED = re.compile(r"(?=[a-z][0-9]|[0-9][a-z]|[a-z][A-Z])")
COMMON = {0x60: "'", 0x80: "<", 0x81: ">", 0x82: "/"}
SPANISH = COMMON | {
    0x2B: "é", 0x3C: "á", 0x5C: "ú", 0x23: "ü", 0x7D: "Ü",
    0x87: "í", 0x88: "ó", 0x8A: "¿", 0x8B: "¡", 0x8C: "Ñ", 0x8D: "ñ",
}  # fmt: skip


def find_files(root: str | Path = "/") -> tuple[Path, Path, Path]:
    """(sky.dnr, sky.dsk, the scummvm executable) under root; DataError when one is missing."""
    base = Path(root)
    files = (base / DATA_DIR / "sky.dnr", base / DATA_DIR / "sky.dsk", base / EXECUTABLE)
    if not all(path.is_file() for path in files):
        raise DataError(
            f"Beneath a Steel Sky's data or ScummVM's executable is missing under {root}: "
            "apt-get install beneath-a-steel-sky scummvm (or apt-get download both and "
            "dpkg-deb -x each into DIR, then --root DIR)"
        )
    return files


# ----- the disk: directory, RNC method 1 ---------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """Where one file lies in sky.dsk and how it is kept."""

    offset: int
    size: int
    stored: bool  # no header to look at, no packing
    drop_header: bool  # after unpacking, leave out the 22-byte header


def read_directory(dnr: bytes) -> dict[int, Entry]:
    """File number -> Entry, from the bytes of sky.dnr."""
    (count,) = struct.unpack_from("<I", dnr)
    if len(dnr) < 4 + 8 * count:
        raise DataError(f"sky.dnr is cut short: {count} entries need {4 + 8 * count} bytes")
    entries = {}
    for at in range(4, 4 + 8 * count, 8):
        number = int.from_bytes(dnr[at : at + 2], "little")
        offset = int.from_bytes(dnr[at + 2 : at + 5], "little")
        flags = int.from_bytes(dnr[at + 5 : at + 8], "little")
        start = (offset & 0x7FFFFF) << 4 if offset & 0x800000 else offset & 0x7FFFFF
        stored, drop_header = bool(flags & 0x800000), bool(flags & 0x400000)
        entries[number] = Entry(start, flags & 0x3FFFFF, stored, drop_header)
    return entries


def _crc_step(value: int) -> int:
    for _ in range(8):
        value = (value >> 1) ^ 0xA001 if value & 1 else value >> 1
    return value


CRC_TABLE = tuple(_crc_step(byte) for byte in range(256))


def rnc_crc(data: bytes) -> int:
    """RNC's CRC-16 (polynomial 0xA001 reflected, initial 0: CRC-16/ARC)."""
    crc = 0
    for byte in data:
        crc = CRC_TABLE[(crc ^ byte) & 0xFF] ^ crc >> 8
    return crc


class _Bits:
    """RNC's bit stream: 16-bit LE words, least significant bit first, a word read only when a
    bit is needed, so raw bytes copied in between come from right after the last word read."""

    def __init__(self, data: bytes, at: int) -> None:
        self.data, self.at, self.buffer, self.count = data, at, 0, 0

    def read(self, n: int) -> int:
        while self.count < n:
            self.buffer |= int.from_bytes(self.data[self.at : self.at + 2], "little") << self.count
            self.at, self.count = self.at + 2, self.count + 16
        value = self.buffer & ((1 << n) - 1)
        self.buffer, self.count = self.buffer >> n, self.count - n
        return value

    def table(self) -> dict[tuple[int, int], int]:
        """A Huffman table: 5 bits of symbol count, 4 bits of code length each (0: unused);
        canonical codes by (length, symbol) -> {(length, code read first bit first): symbol}."""
        lengths = [self.read(4) for _ in range(self.read(5))]
        codes, code = {}, 0
        for length in range(1, 17):
            for symbol, symbol_length in enumerate(lengths):
                if symbol_length == length:
                    codes[length, code >> (16 - length)] = symbol
                    code += 1 << (16 - length)
        return codes

    def value(self, codes: dict[tuple[int, int], int]) -> int:
        """A symbol s by its code; s >= 2 stands for 2**(s-1) plus s-1 more bits."""
        code = 0
        for length in range(1, 17):
            code = code << 1 | self.read(1)
            if (length, code) in codes:
                symbol = codes[length, code]
                return symbol if symbol < 2 else 1 << (symbol - 1) | self.read(symbol - 1)
        raise DataError("RNC stream: a code not in its table")


def rnc_unpack(packed: bytes) -> bytes:
    """Unpack an RNC method-1 stream ("RNC\\x01", u32 BE unpacked and packed lengths, u16 BE
    CRCs of both, leeway, chunk count; then per chunk three Huffman tables, a u16 count of
    literal runs, each run but the last followed by a copy of length+2 from distance+1 back).
    The packed CRC is checked before, the unpacked length and CRC after."""
    if packed[:4] != b"RNC\x01":
        raise DataError("not an RNC method-1 stream (no RNC\\x01 magic)")
    size, packed_size, crc, packed_crc = struct.unpack_from(">IIHH", packed, 4)
    body = packed[18 : 18 + packed_size]
    if len(body) != packed_size or rnc_crc(body) != packed_crc:
        raise DataError("RNC stream is cut short or damaged (its packed CRC does not match)")
    out = bytearray()
    bits = _Bits(body + b"\0\0", 0)  # the last word may be written with one byte
    bits.read(2)  # the lock and key flags
    try:
        for _ in range(packed[17]):
            raw, distances, lengths = bits.table(), bits.table(), bits.table()
            for left in range(bits.read(16), 0, -1):
                run = bits.value(raw)
                out += body[bits.at : bits.at + run]
                bits.at += run
                if left > 1:
                    distance, length = bits.value(distances) + 1, bits.value(lengths) + 2
                    if distance > len(out):
                        raise DataError("RNC stream copies from before its start")
                    for _ in range(length):
                        out.append(out[-distance])
    except IndexError as error:
        raise DataError("RNC stream is damaged (it reads past its end)") from error
    if len(out) != size or rnc_crc(out) != crc:
        raise DataError(f"RNC stream unpacked to {len(out)} bytes, not {size}, or a wrong CRC")
    return bytes(out)


def load_file(dsk, entry: Entry) -> bytes:
    """One file's bytes from the open sky.dsk, unpacked when it is packed."""
    dsk.seek(entry.offset)
    data = dsk.read(entry.size)
    if len(data) != entry.size:
        raise DataError(f"sky.dsk is cut short at offset {entry.offset}")
    packed = not entry.stored and len(data) > HEADER and data[0] & 0x80
    if not packed or data[HEADER : HEADER + 4] != b"RNC\x01":
        return data
    unpacked = rnc_unpack(data[HEADER:])
    return unpacked if entry.drop_header else data[:HEADER] + unpacked


# ----- the text: tree, sections, characters ------------------------------------------------


def decode_text(section: bytes, index: int, tree: bytes) -> bytes:
    """The bytes of text `index` (block << 5 | position) of one section, without its NUL."""
    skips, stream = struct.unpack_from("<HH", section)
    block, position = divmod(index, BLOCK)
    units = sum(struct.unpack_from(f"<{block}H", section, 4))  # 2-bit units
    for skip in section[skips + BLOCK * block : skips + BLOCK * block + position]:
        units += (skip & 0x7F) << 3 if skip & 0x80 else skip
    bit, end = stream * 8 + units * 2, len(section) * 8
    out = bytearray()
    while len(out) <= MAX_TEXT:
        node = 0
        while tree[3 * node] or tree[3 * node + 1]:
            if bit >= end:
                raise DataError(f"text {index} runs past the end of its section")
            right = section[bit >> 3] >> (7 - (bit & 7)) & 1
            node = tree[3 * node + right]
            bit += 1
        if not tree[3 * node + 2]:
            return bytes(out)
        out.append(tree[3 * node + 2])
    raise DataError(f"text {index} has no end within {MAX_TEXT} characters")


def block_count(section: bytes) -> int:
    """Blocks of 32 ids in a section: the u16 lengths between the 4-byte head and the skips."""
    return (struct.unpack_from("<H", section)[0] - 4) // 2


def find_tree(executable: Path, english: bytes) -> bytes:
    """The 735-byte tree table in the executable that decodes text 1 of English section 0
    (`english`) as "Foster": the first of the tables that start with TREE_SIGNATURE."""
    size = 3 * TREE_NODES
    with executable.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as exe:
        at = exe.find(TREE_SIGNATURE)
        while at >= 0:
            table = exe[at : at + size]
            children = table[0::3] + table[1::3]
            if len(table) == size and max(children) < TREE_NODES:
                try:
                    if decode_text(english, 1, table) == b"Foster":
                        return table
                except DataError:
                    pass  # another table
            at = exe.find(TREE_SIGNATURE, at + 1)
    raise DataError(
        f"no Huffman table in {executable} decodes English text 1 as 'Foster': "
        "apt-get install scummvm (2.7.0 has it) or give the root where it is"
    )


def to_unicode(raw: bytes, language: str) -> str:
    """A text's bytes as Unicode by the game's font: SPANISH for es, COMMON otherwise."""
    chars = SPANISH if language == "es" else COMMON
    return "".join(chars.get(byte) or (chr(byte) if byte < 0x80 else "\ufffd") for byte in raw)


def read_texts(root: str | Path = "/") -> dict[int, dict[str, str]]:
    """Text id -> {"en-GB": ..., "en-US": ..., "es": ...}: every id of every section."""
    dnr, dsk, executable = find_files(root)
    entries = read_directory(dnr.read_bytes())
    sections: dict[tuple[str, int], bytes] = {}
    with dsk.open("rb") as file:
        for number in range(SECTIONS):
            if TEXT_FILE + number not in entries:  # en-GB's file numbers
                continue
            for language, code in LANGUAGES.items():
                entry = entries.get(TEXT_FILE + 8 * code + number)
                if entry is None:
                    raise DataError(f"sky.dnr lacks text section {number} in {language}")
                sections[language, number] = load_file(file, entry)
    if ("en-GB", 0) not in sections:
        raise DataError(f"sky.dnr under {root} has no English text section (file {TEXT_FILE})")
    tree = find_tree(executable, sections["en-GB", 0])
    texts: dict[int, dict[str, str]] = {}
    for (language, number), section in sections.items():
        blocks = block_count(section)
        if blocks != block_count(sections["en-GB", number]):
            raise DataError(f"text section {number}: {blocks} blocks in {language}, not as en-GB")
        for index in range(blocks * BLOCK):
            text = to_unicode(decode_text(section, index, tree), language)
            texts.setdefault(number << 12 | index, {})[language] = text
    return texts


# ----- pairs -------------------------------------------------------------------------------

NOTE = re.compile(rf"[ \t]{{{NOTE_GAP},}}.*", re.DOTALL)


def clean(text: str) -> str:
    """One line, a developer's note after NOTE_GAP or more blanks cut off."""
    return one_line(NOTE.sub("", text))


def group_of(text_id: int) -> str:
    """ "bass/<section>/<block>": the held-out unit of a text id."""
    return f"bass/{text_id >> 12}/{(text_id >> 5) & 0x7F}"


def _pairs(texts: dict[int, dict[str, str]], dropped: Counter) -> dict[int, Pair]:
    """Text id -> (es, en-GB) pair for the ids kept by the module's rules."""
    pairs = {}
    for text_id, text in sorted(texts.items()):
        if text["es"] == "Dummy message" or text["en-GB"] == "?":
            dropped["placeholder (Spanish 'Dummy message' or English '?')"] += 1
            continue
        spanish, english = clean(text["es"]), clean(text["en-GB"])
        if not spanish or not english:
            dropped["empty (or only a developer's note)"] += 1
        elif len(SCRAMBLED.findall(english)) >= 2:
            dropped["scrambled letters and digits of a computer screen"] += 1
        elif spanish == english:
            dropped["Spanish identical to English (names, numbers, credits)"] += 1
        else:
            pairs[text_id] = Pair(spanish, english, group_of(text_id))
    return pairs


def bass_pairs(root: str | Path, dropped: Counter) -> list[Pair]:
    """(es, en-GB) pairs in text id order; group "bass/<section>/<block>" (32 ids of a block:
    mostly one conversation). Drops are counted in `dropped` by reason."""
    return list(_pairs(read_texts(root), dropped).values())


def second_references(root: str | Path) -> dict[str, str]:
    """Spanish of a kept pair -> its en-US text, where that differs from en-GB (first id wins)."""
    texts = read_texts(root)
    references: dict[str, str] = {}
    for text_id, pair in _pairs(texts, Counter()).items():
        american = clean(texts[text_id]["en-US"])
        if american and american != "?" and american != pair.eng:
            references.setdefault(pair.spa, american)
    return references
