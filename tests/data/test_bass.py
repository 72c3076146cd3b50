"""The Beneath a Steel Sky reader on a small fake sky.dnr + sky.dsk + scummvm written here (a
tree table behind a decoy, texts Huffman-coded by this file's encoder, one section RNC-packed
by this file's packer), and on the real files when they are installed."""

import os
import struct
from collections import Counter
from pathlib import Path

import pytest

from transformer.data.sources.everyday import bass
from transformer.data.sources.splits import Pair
from transformer.data.text import DataError

# ----- a Huffman tree that starts with the signature, and its encoder ----------------------

SYMBOLS = [0] + [b for b in range(0x21, 0x7F) if b not in b"eao"]
SYMBOLS += [0x80, 0x81, 0x82, 0x87, 0x88, 0x8A, 0x8B, 0x8C, 0x8D]


def make_tree(symbols: list[int]) -> bytes:
    """245 nodes: the signature's seven, node 7 a leaf 'o', node 20 a balanced tree of the
    symbols (nodes 21 on), the rest unused."""
    nodes = [[1, 20, 0], [2, 7, 0], [3, 4, 0], [0, 0, 0x20], [5, 6, 0], [0, 0, 0x65], [0, 0, 0x61]]
    nodes += [[0, 0, ord("o")]] + [[0, 0, 0] for _ in range(237)]
    free = iter(range(21, 245))

    def place(index: int, part: list[int]) -> None:
        if len(part) == 1:
            nodes[index] = [0, 0, part[0]]
            return
        left, right = next(free), next(free)
        nodes[index] = [left, right, 0]
        place(left, part[: len(part) // 2])
        place(right, part[len(part) // 2 :])

    place(20, symbols)
    table = bytes(value for node in nodes for value in node)
    assert table.startswith(bass.TREE_SIGNATURE) and len(table) == 735
    return table


TREE = make_tree(SYMBOLS)
DECOY = make_tree(SYMBOLS[::-1])  # the same signature, other codes: "Foster" reads otherwise


def codes(table: bytes) -> dict[int, str]:
    """Byte -> its path from the root ("0" left, "1" right)."""
    found: dict[int, str] = {}

    def walk(node: int, path: str) -> None:
        left, right, value = table[3 * node : 3 * node + 3]
        if not left and not right:
            found[value] = path
        else:
            walk(left, path + "0")
            walk(right, path + "1")

    walk(0, "")
    return found


def encode(text: bytes) -> tuple[str, int]:
    """A text's bits (with its NUL) padded to 2-bit units, and its skip byte."""
    bits = "".join(codes(TREE)[byte] for byte in text + b"\0")
    bits += "0" * (len(bits) % 2)
    if len(bits) // 2 < 128:
        return bits, len(bits) // 2
    bits += "0" * (-len(bits) % 16)  # units in eights: the 0x80 form
    return bits, 0x80 | len(bits) // 16


def make_section(texts: dict[int, bytes], blocks: int) -> bytes:
    """A text section: skip-table offset, bit-stream offset, block lengths, skips, bits."""
    lengths, skips, stream = [], bytearray(), ""
    for block in range(blocks):
        total = 0
        for position in range(32):
            bits, skip = encode(texts.get(block * 32 + position, b""))
            skips.append(skip)
            stream += bits
            total += len(bits) // 2
        lengths.append(total)
    stream += "0" * (-len(stream) % 8)
    head_size = 4 + 2 * blocks
    start = head_size + len(skips) + 3  # three stray bytes before the bits, as the real files
    head = struct.pack(f"<HH{blocks}H", head_size, start, *lengths)
    return head + skips + b"\xee" * 3 + int(stream, 2).to_bytes(len(stream) // 8, "big")


# ----- an RNC method-1 packer --------------------------------------------------------------


class BitWriter:
    """LSB-first bits in 16-bit LE words, a word opened only when a bit needs it; raw bytes go
    right after the last word opened (as the unpacker reads them)."""

    def __init__(self) -> None:
        self.out, self.word, self.used = bytearray(), 0, 16

    def bit(self, bit: int) -> None:
        if self.used == 16:
            self.word, self.used = len(self.out), 0
            self.out += b"\0\0"
        self.out[self.word + self.used // 8] |= bit << (self.used % 8)
        self.used += 1

    def bits(self, value: int, n: int) -> None:
        for k in range(n):
            self.bit(value >> k & 1)

    def value(self, value: int) -> None:
        """Symbol s of a table of 16 four-bit codes (code = s, first bit first), extra bits."""
        symbol = value if value < 2 else value.bit_length()
        for k in (3, 2, 1, 0):
            self.bit(symbol >> k & 1)
        if symbol >= 2:
            self.bits(value - (1 << (symbol - 1)), symbol - 1)


def rnc_pack(data: bytes) -> bytes:
    """One chunk: literal runs, each but the last followed by a greedy back-reference."""
    runs, at, start = [], 0, 0
    while at < len(data):
        best = (0, 0)
        for distance in range(1, min(at, 255) + 1):
            length = 0
            while at + length < len(data) and length < 64:
                if data[at + length - distance] != data[at + length]:
                    break
                length += 1
            best = max(best, (length, distance))
        if best[0] >= 3:
            runs.append((data[start:at], best[1], best[0]))
            at = start = at + best[0]
        else:
            at += 1
    runs.append((data[start:], 0, 0))
    writer = BitWriter()
    writer.bits(0, 2)
    for _ in range(3):  # raw, distance and length tables: 16 symbols of 4 bits
        writer.bits(16, 5)
        for _ in range(16):
            writer.bits(4, 4)
    writer.bits(len(runs), 16)
    for number, (literals, distance, length) in enumerate(runs):
        writer.value(len(literals))
        writer.out += literals
        if number < len(runs) - 1:
            writer.value(distance - 1)
            writer.value(length - 2)
    body = bytes(writer.out)
    sizes = struct.pack(">IIHH", len(data), len(body), bass.rnc_crc(data), bass.rnc_crc(body))
    return b"RNC\x01" + sizes + b"\0\x01" + body


# ----- the fake installation ---------------------------------------------------------------

LONG = b"The temperature is maintained by convection from an underground source."
ENGLISH = {  # section 0; en-US differs at id 2 and 33
    1: b"Foster",
    2: b"Where did you FIND them?",
    4: b"?",
    5: b"jd93dip2!rBny2&aH,1if#jO2hf0nwJFi",
    6: LONG,
    7: b"It's switched to the `ON' position...",
    8: b"HELP me, Joey - QUICKLY!                   unused",
    9: b"Anita",
    10: b"Who the HELL is `OVERMANN'?",
    11: b"SHAME and shame! DESIGN, owner, more, you, Maria, action.",
    12: b"FILE:    \x80\x80FOLDER\x81\x81 \x82 data",
    31: b"Last of the block.",
    33: b"Can you open that door?",
}
SPANISH = {
    1: b"Foster",
    2: b"\x8aD\x88nde las ENCONTRASTE?",
    4: b"Dummy message",
    5: b"jd93dip2!rBny2&aH,1if#jO2hf0nwJFi",
    6: b"La temperatura se mantiene por convecci\x88n desde una fuente subterr<nea.",
    7: b"Est< en la posici\x88n de `ENCENDIDO`...",
    8: b"\x8bAy\\dame, Joey - \x8br<pido!          en desuso",
    9: b"Anita",
    10: b"\x8aQui+n DEMONIOS es `OVERMANN`?",
    11: b"\x8bVERG}ENZA y verg#enza! DISE\x8cO, due\x8do, m<s, t\\, Mar\x87a, acci\x88n.",
    12: b"ARCHIVO: \x80\x80CARPETA\x81\x81 \x82 datos",
    31: b"El \\ltimo del bloque.",
    33: b"\x8aPuedes abrir esa puerta?",
}
SECTION_2 = {"en-GB": b"Pleased to meet you.", "es": b"Encantado de conocerte."}
AMERICAN = ENGLISH | {2: b"Where'd you FIND them?", 33: b"Can you open that door?"}


def install(root: Path, executable: bytes | None = None) -> None:
    """sky.dnr + sky.dsk with text sections 0 (two blocks) and 2 (one block) in en-GB, en-US
    and es (es section 0 RNC-packed, header dropped, at an offset in 16-byte units), and a
    scummvm holding a decoy table before the real one."""
    files = {}
    for language, code in bass.LANGUAGES.items():
        section_0 = {"en-GB": ENGLISH, "en-US": AMERICAN, "es": SPANISH}[language]
        files[bass.TEXT_FILE + 8 * code] = make_section(section_0, 2)
        files[bass.TEXT_FILE + 8 * code + 2] = make_section({3: SECTION_2.get(language, b"")}, 1)
    dsk, entries = bytearray(b"junk"), []
    for number, data in files.items():
        if number == bass.TEXT_FILE + 8 * 7:
            dsk += b"\0" * (-len(dsk) % 16)
            packed = b"\x80\0" + b"\0" * 20 + rnc_pack(data)
            offset, flags = len(dsk) >> 4 | 0x800000, len(packed) | 0x400000
            data = packed
        else:
            offset, flags = len(dsk), len(data) | 0x800000
        entries.append(
            struct.pack("<H", number) + offset.to_bytes(3, "little") + flags.to_bytes(3, "little")
        )
        dsk += data + b"pad"
    folder = root / bass.DATA_DIR
    folder.mkdir(parents=True)
    (folder / "sky.dnr").write_bytes(struct.pack("<I", len(entries)) + b"".join(entries))
    (folder / "sky.dsk").write_bytes(bytes(dsk))
    (root / "usr/games").mkdir(parents=True)
    image = b"\x7fELF" + bytes(range(256)) * 3 + DECOY + b"\0" + bytes(500) + TREE + b"\0tail"
    (root / bass.EXECUTABLE).write_bytes(image if executable is None else executable)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    install(tmp_path)
    return tmp_path


def test_decoy_tree_does_not_read_foster() -> None:
    section = make_section(ENGLISH, 2)
    assert bass.decode_text(section, 1, TREE) == b"Foster"
    try:
        decoy = bass.decode_text(section, 1, DECOY)
    except DataError:  # or it runs off the end
        decoy = None
    assert decoy != b"Foster"


def test_texts_across_blocks_sections_and_both_skip_forms(root: Path) -> None:
    assert encode(LONG)[1] & 0x80 and not encode(ENGLISH[2])[1] & 0x80  # both skip forms
    texts = bass.read_texts(root)
    assert sorted(texts) == list(range(64)) + list(range(2 << 12, (2 << 12) + 32))
    assert texts[1] == {"en-GB": "Foster", "en-US": "Foster", "es": "Foster"}
    assert texts[2]["en-US"] == "Where'd you FIND them?"
    assert texts[6]["en-GB"] == LONG.decode()
    assert texts[7] == {  # after the long text: its skip byte in eights
        "en-GB": "It's switched to the 'ON' position...",
        "en-US": "It's switched to the 'ON' position...",
        "es": "Está en la posición de 'ENCENDIDO'...",
    }
    assert texts[31]["es"] == "El último del bloque."
    assert texts[33]["es"] == "¿Puedes abrir esa puerta?"  # block 1: after block 0's length
    assert texts[3]["en-GB"] == texts[32]["es"] == ""
    assert texts[2 << 12 | 3] == {
        "en-GB": "Pleased to meet you.", "en-US": "", "es": "Encantado de conocerte."
    }  # fmt: skip


def test_spanish_charset_and_font_marks(root: Path) -> None:
    texts = bass.read_texts(root)
    assert texts[10]["es"] == "¿Quién DEMONIOS es 'OVERMANN'?"
    assert texts[11]["es"] == "¡VERGÜENZA y vergüenza! DISEÑO, dueño, más, tú, María, acción."
    assert texts[12] == {
        "en-GB": "FILE:    <<FOLDER>> / data",
        "en-US": "FILE:    <<FOLDER>> / data",
        "es": "ARCHIVO: <<CARPETA>> / datos",
    }
    assert texts[5]["en-GB"] == ENGLISH[5].decode()  # '#' is ü only in Spanish
    assert texts[5]["es"] == ENGLISH[5].decode().replace("#", "ü")
    assert bass.to_unicode(b"a\x99b", "en-GB") == "a\ufffdb"


def test_pairs_groups_and_drops(root: Path) -> None:
    dropped = Counter()
    pairs = bass.bass_pairs(root, dropped)
    assert pairs == [
        Pair("¿Dónde las ENCONTRASTE?", "Where did you FIND them?", "bass/0/0"),
        Pair(
            SPANISH[6].decode("latin-1").replace("\x88", "ó").replace("<", "á"),
            LONG.decode(),
            "bass/0/0",
        ),
        Pair(
            "Está en la posición de 'ENCENDIDO'...",
            "It's switched to the 'ON' position...",
            "bass/0/0",
        ),
        Pair("¡Ayúdame, Joey - ¡rápido!", "HELP me, Joey - QUICKLY!", "bass/0/0"),
        Pair("¿Quién DEMONIOS es 'OVERMANN'?", "Who the HELL is 'OVERMANN'?", "bass/0/0"),
        Pair(
            "¡VERGÜENZA y vergüenza! DISEÑO, dueño, más, tú, María, acción.",
            "SHAME and shame! DESIGN, owner, more, you, Maria, action.",
            "bass/0/0",
        ),
        Pair("ARCHIVO: <<CARPETA>> / datos", "FILE: <<FOLDER>> / data", "bass/0/0"),
        Pair("El último del bloque.", "Last of the block.", "bass/0/0"),
        Pair("¿Puedes abrir esa puerta?", "Can you open that door?", "bass/0/1"),
        Pair("Encantado de conocerte.", "Pleased to meet you.", "bass/2/0"),
    ]
    assert dropped == {
        "placeholder (Spanish 'Dummy message' or English '?')": 1,
        "scrambled letters and digits of a computer screen": 1,
        "Spanish identical to English (names, numbers, credits)": 2,  # Foster, Anita
        "empty (or only a developer's note)": 96 - 14,
    }


def test_second_references(root: Path) -> None:
    assert bass.second_references(root) == {"¿Dónde las ENCONTRASTE?": "Where'd you FIND them?"}


def test_first_table_reading_foster_wins_and_a_missing_one_is_an_error(tmp_path: Path) -> None:
    install(tmp_path / "a", b"ELF" + TREE + b"\0" + DECOY)
    assert bass.read_texts(tmp_path / "a")[1]["en-GB"] == "Foster"
    install(tmp_path / "b", b"ELF" + DECOY + b"\0" + TREE[:-1])  # the real one cut short
    with pytest.raises(DataError, match="decodes English text 1 as 'Foster'"):
        bass.read_texts(tmp_path / "b")


def test_missing_files_say_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(DataError) as error:
        bass.find_files(tmp_path)
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message
    assert "apt-get install beneath-a-steel-sky scummvm" in message


def test_rnc_round_trip_and_checks() -> None:
    assert bass.rnc_crc(b"123456789") == 0xBB3D  # CRC-16/ARC's check value
    data = b"abcabcabcabc-hello hello hello-" + bytes(range(40)) + b"xyz" * 20
    packed = rnc_pack(data)
    assert len(packed) < 18 + len(data)  # back-references were used
    assert bass.rnc_unpack(packed) == data
    damaged = packed[:12] + bytes([packed[12] ^ 1]) + packed[13:]  # the unpacked CRC
    with pytest.raises(DataError, match="CRC"):
        bass.rnc_unpack(damaged)
    with pytest.raises(DataError, match="cut short"):
        bass.rnc_unpack(packed[:-1])
    with pytest.raises(DataError, match="magic"):
        bass.rnc_unpack(b"RNC\x02" + packed[4:])


# ----- the real files ----------------------------------------------------------------------


def real_root() -> Path:
    for root in ("/", os.environ.get("TRANSFORMER_TEST_DEB_ROOT")):
        if root:
            try:
                bass.find_files(root)
                return Path(root)
            except DataError:
                pass
    pytest.skip("beneath-a-steel-sky and scummvm are not installed (or TRANSFORMER_TEST_DEB_ROOT)")


def test_real_files() -> None:
    root = real_root()
    texts = bass.read_texts(root)
    assert len(texts) == 5024 and texts[1]["en-GB"] == "Foster"
    dropped = Counter()
    pairs = bass.bass_pairs(root, dropped)
    assert 4300 <= len(pairs) <= 4600
    assert Pair("¿Dónde las ENCONTRASTE?", "Where did you FIND them?", "bass/2/17") in pairs
    assert dropped["placeholder (Spanish 'Dummy message' or English '?')"] == 455
    assert dropped["scrambled letters and digits of a computer screen"] == 7
    assert 150 < len(bass.second_references(root)) < 300
    dnr, dsk, _ = bass.find_files(root)
    entries = bass.read_directory(dnr.read_bytes())
    with dsk.open("rb") as file:  # packed game files: length and both CRCs must match
        for number in (12, 13, 15, 18, 21):
            data = bass.load_file(file, entries[number])
            assert len(data) > bass.HEADER + 100 and data[0] & 0x80
