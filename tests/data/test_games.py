"""The game-dialogue readers on files written here (a small .mo catalog, a small drascula.dat with
the real layout), the casing rules as tables, and checks on the real Debian files when installed
(under / or TRANSFORMER_TEST_DEB_ROOT)."""

import os
import struct
from collections import Counter
from pathlib import Path

import pytest

from transformer.data.sources.everyday import cataclysm, drascula
from transformer.data.sources.everyday.casing import lowercase_words, sentence_case, soften_caps
from transformer.data.sources.everyday.cataclysm import cataclysm_pairs, find_mo, half_of_double
from transformer.data.sources.everyday.drascula import drascula_pairs, find_dat, read_table
from transformer.data.sources.gettext_ui import read_mo
from transformer.data.sources.splits import Pair
from transformer.data.text import DataError

HEADER = "Content-Type: text/plain; charset=UTF-8\nPlural-Forms: nplurals=2; plural=(n != 1);\n"


def mo_bytes(entries: list[tuple[str, str]]) -> bytes:
    """A GNU .mo file: magic, revision, count, the offsets of the two string tables, an empty hash
    table, then the (length, offset) tables and the NUL-terminated strings, keys sorted."""
    entries = sorted([("", HEADER), *entries])
    keys = [k.encode() for k, _ in entries]
    values = [v.encode() for _, v in entries]
    count = len(entries)
    originals, translations = 28, 28 + 8 * count
    at = 28 + 16 * count
    tables = {"keys": b"", "values": b""}
    data = b""
    for name, strings in (("keys", keys), ("values", values)):
        for string in strings:
            tables[name] += struct.pack("<2I", len(string), at + len(data))
            data += string + b"\0"
    head = struct.pack("<7I", 0x950412DE, 0, count, originals, translations, 0, at)
    return head + tables["keys"] + tables["values"] + data


def write_mo(root: Path, variant: str, entries: list[tuple[str, str]]) -> None:
    path = root / cataclysm.MO_PATH.format(variant=variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(mo_bytes(entries))


LONG = (
    "A thick fur trenchcoat lined with many pockets, great for storage and warm enough for the "
    "coldest of winters up north."
)  # 21 words
ES_ES = [
    ("Hi, Uyen. Got a minute?", "Hola, Uyen. ¿Tienes un minuto?"),
    ("A strong ale.", "Una cerveza fuerte."),
    ("Get with it.", "Hazte cargo.Hazte cargo."),  # the translation written twice
    ("Clank!  Clank!", "¡Clank! ¡Clank!"),  # doubled on both sides: kept whole
    ("Got it.", "Ya lo tengo."),
    ("     Traveled south and joined\na settlement.", " Viajó al sur y se unió a un asentamiento."),
    ("prof_desc_male\x04You were a cook.", "Eras un cocinero."),
    ("prof_desc_female\x04You were a cook.", "Eras una cocinera."),
    ("You hear a distant scream.\0You hear distant screams.", "Oyes un grito.\0Oyes gritos."),
    ("coconut", "coco"),
    ("nopalito", "nopalito"),
    ("You see <color_red>blood</color>.", "Ves <color_red>sangre</color>."),
    ("<npcname> waves at you.", "<npcname> te saluda."),
    ("%s helps with this task…", "%s te ayuda con esta tarea..."),
    ("Deal {damage} damage.", "Causa {damage} de daño."),
    ("[$5] I'll have a shave.", "[$5] Quiero que me afeites."),
    ("[STR 11] I'm tougher than it seems!", "[FUE 11] ¡Soy más duro de lo que parece!"),
    ("This is a u_compare_var test response.", "Esta es una respuesta de prueba u_compare_var."),
    ("Health modifier", "Modificadores de salud"),
    (LONG, "Una gabardina gruesa de piel con muchos bolsillos, muy buena para guardar cosas."),
    ("Hello! Glad to meet another survivor.", "¡Hola!"),
]
ES_AR = [
    ("Hi, Uyen. Got a minute?", "Hola, Uyen. ¿Tenés un minuto?"),
    ("Get with it.", "Metele."),
    ("Health modifier", "Modificador de salud"),
]


def test_mo_writer_reads_back_with_gettext(tmp_path):
    write_mo(tmp_path, "es_ES", [("Yes.", "Sí."), ("ctx\x04No.", "No."), ("a\0as", "una\0unas")])
    entries, _ = read_mo(find_mo(tmp_path, "es_ES"))
    assert sorted(entries) == [("No.", "No."), ("Yes.", "Sí."), ("a", "una")]


def test_cataclysm_keeps_dialogue_and_sentences_and_counts_each_drop(tmp_path):
    write_mo(tmp_path, "es_ES", ES_ES)
    dropped = Counter()
    pairs = cataclysm_pairs(tmp_path, dropped, variants=("es_ES",))
    assert sorted((p.spa, p.eng) for p in pairs) == sorted(
        [
            ("Hola, Uyen. ¿Tienes un minuto?", "Hi, Uyen. Got a minute?"),
            ("Una cerveza fuerte.", "A strong ale."),
            ("Hazte cargo.", "Get with it."),
            ("¡Clank! ¡Clank!", "Clank! Clank!"),
            ("Ya lo tengo.", "Got it."),
            (
                "Viajó al sur y se unió a un asentamiento.",
                "Traveled south and joined a settlement.",
            ),
            ("Eras un cocinero.", "You were a cook."),
            ("Eras una cocinera.", "You were a cook."),
            ("Oyes un grito.", "You hear a distant scream."),
        ]
    )
    assert dropped == Counter(
        {
            "single word": 1,
            "Spanish equal to the English (untranslated)": 1,
            "colour tag <color_...>": 1,
            "markup tag <...>": 1,
            "printf placeholder (%s, %d ...)": 1,
            "{...} placeholder": 1,
            "$ token": 1,
            "game mechanics (digits and symbols)": 2,
            "no sentence ending (UI label, name or fragment)": 1,
            "more than 20 words": 1,
            "Spanish/English length ratio outside 0.4-2.5": 1,
        }
    )
    group = {p.eng: p.group for p in pairs}
    assert group["You were a cook."] == "cataclysm/you were a cook"  # both contexts, one group
    assert cataclysm.subset_of("Hi, Uyen. Got a minute?") == "conversational"
    assert cataclysm.subset_of("Got it.") == "conversational"
    assert cataclysm.subset_of("A strong ale.") == "sentence-like"


def test_both_variants_share_groups(tmp_path):
    write_mo(tmp_path, "es_ES", ES_ES)
    write_mo(tmp_path, "es_AR", ES_AR)
    dropped = Counter()
    pairs = cataclysm_pairs(tmp_path, dropped)
    argentine = [p for p in pairs if p.spa in ("Hola, Uyen. ¿Tenés un minuto?", "Metele.")]
    assert argentine == [  # in the catalog's order: msgids sorted
        Pair("Metele.", "Get with it.", "cataclysm/get with it"),
        Pair("Hola, Uyen. ¿Tenés un minuto?", "Hi, Uyen. Got a minute?", "cataclysm/hi uyen got a minute"),
    ]  # fmt: skip
    groups: dict[str, set[str]] = {}
    for pair in pairs:
        groups.setdefault(pair.eng, set()).add(pair.group)
    assert all(len(g) == 1 for g in groups.values())
    assert dropped["no sentence ending (UI label, name or fragment)"] == 2


def test_group_key_joins_near_duplicates():
    assert cataclysm.group_of("I'm thirsty…") == cataclysm.group_of("I'm  thirsty.")
    assert cataclysm.group_of("A 10-round magazine.") == cataclysm.group_of("A 20-round magazine.")
    assert cataclysm.group_of("A strong ale.") != cataclysm.group_of("A strong beer.")


def test_doubled_spanish():
    assert half_of_double("Hazte cargo.Hazte cargo.") == "Hazte cargo."
    assert half_of_double("No quiero irme. No quiero irme.") == "No quiero irme."
    assert half_of_double("coco") is None and half_of_double("Bamm Bamm") is None
    assert cataclysm.undouble("¡Clank! ¡Clank!", "Clank! Clank!") == "¡Clank! ¡Clank!"


def test_missing_files_say_what_to_install(tmp_path):
    with pytest.raises(DataError) as error:
        find_mo(tmp_path, "es_AR")
    message = str(error.value)
    assert "\n" not in message and "Cataclysm: DDA's Spanish catalogs are missing" in message
    assert "apt-get install cataclysm-dda-data (or apt-get download cataclysm-dda-data" in message
    with pytest.raises(DataError, match="apt-get install scummvm-data") as error:
        find_dat(tmp_path)
    assert "\n" not in str(error.value)


def dat_line(text: str) -> bytes:
    raw = text.encode("cp850") + b"\0"
    raw += b"\0" * (-len(raw) % 4)  # NUL padding, as the real file has
    return struct.pack(">I", 4 + len(raw)) + raw


def dat_bytes(groups: list[list[tuple[str, str]]]) -> bytes:
    """A drascula.dat: magic, version, engine bytes (with a decoy 00 06), then the text table of
    six languages; de/fr/it/ru lines are "x"."""
    table = struct.pack(">H", 6)
    for group in groups:
        table += struct.pack(">H", len(group))
        for language in range(6):
            lines = [pair[language] if language < 2 else "x" for pair in group]
            block = b"".join(dat_line(line) for line in lines) + b"\0\0"
            table += struct.pack(">H", len(block)) + block
    return b"DRASCULA\x06" + b"\x00\x06\x00\x01\x12\x34\x00\x06\xff" + table


DAT = [
    [
        ("", ""),
        ("WHERE ARE YOU?", "¿DONDE ESTAS?"),
        ("HACKER", "hacker"),
        ("HI", ""),
        ("I HAVE IT", "YAºLOºTENGO"),
        ("YES, DARLING?", "¿SI, CARIÑO?"),
    ],
    [("", "")] + [(f"LINE {n}", f"LINEA {n}") for n in range(1, 22)] + [("4447222", "4447")],
]


def write_dat(root: Path, data: bytes) -> None:
    path = root / drascula.DAT_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_drascula_pairs_by_group_and_index(tmp_path):
    write_dat(tmp_path, dat_bytes(DAT))
    dropped = Counter()
    pairs = drascula_pairs(tmp_path, dropped)
    assert pairs[:3] == [
        Pair("¿DONDE ESTAS?", "WHERE ARE YOU?", "drascula/0/0"),
        Pair("YA LO TENGO", "I HAVE IT", "drascula/0/0"),
        Pair("¿SI, CARIÑO?", "YES, DARLING?", "drascula/0/0"),
    ]
    rest = pairs[3:]
    assert [p.spa for p in rest] == [f"LINEA {n}" for n in range(1, 22)]
    assert [p.group for p in rest] == ["drascula/1/0"] * 19 + ["drascula/1/1"] * 2
    assert dropped == Counter(
        {
            "empty line": 3,
            "Spanish equal to the English (untranslated)": 1,
            "no letter (digits or symbols only)": 1,
        }
    )


def test_drascula_table_layout_and_errors(tmp_path):
    table = read_table(dat_bytes(DAT))
    assert [len(group) for group in table] == [6, 6]
    assert [len(table[1][language]) for language in range(6)] == [23] * 6
    assert table[0][1][5] == "¿SI, CARIÑO?" and table[0][2][5] == "x"
    with pytest.raises(DataError, match="does not start with DRASCULA"):
        read_table(b"SCUMMVM!" + dat_bytes(DAT)[8:])
    with pytest.raises(DataError, match="no text table"):
        read_table(dat_bytes(DAT)[:-3])  # truncated: no table reads to the end


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Where did you FIND them?", "Where did you find them?"),
        ("¿Dónde las ENCONTRASTE?", "¿Dónde las encontraste?"),
        ("Yo podría DARLE DE COMER...", "Yo podría darle de comer..."),
        ("I could FEED her for you...", "I could feed her for you..."),
        ("Well, you're about to show them!  SHOW THEM ALL!", "Well, you're about to show them!  Show them all!"),
        ("I told you NOT TO do it, I'M SURE.", "I told you not to do it, I'm sure."),
        ("Nos vemos… ¡EN EL INFIERNO!", "Nos vemos… ¡En el infierno!"),
        ("¡NO ESTÁ AQUÍ! dijo él", "¡No está aquí! dijo él"),
        ("Watch TV with the LINC terminal, OK?", "Watch TV with the LINC terminal, OK?"),
        ("The CBM fits an MP5 and the FEMA camp.", "The CBM fits an MP5 and the FEMA camp."),
        ("World War II was over.", "World War II was over."),
        ("A is for apple, I said.", "A is for apple, I said."),
        ("HELLO THERE", "HELLO THERE"),  # wholly capitals: sentence_case's job
    ],
)  # fmt: skip
def test_soften_caps(text, expected):
    assert soften_caps(text) == expected


def test_soften_caps_with_a_vocabulary_keeps_words_never_lowercase():
    vocabulary = lowercase_words(["an error occurred", "it was real"])
    text = "ERROR: the STANAG magazine is REAL."
    assert soften_caps(text, vocabulary) == "Error: the STANAG magazine is real."
    assert soften_caps(text) == "Error: the stanag magazine is real."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("¿DÓNDE ESTÁS?", "¿Dónde estás?"),
        ("JOHNY, QUERIDO. ¿DONDE ESTAS?", "Johny, querido. ¿Donde estas?"),
        ("¡CACHIS! ¡SE ME HA ROTO!", "¡Cachis! ¡Se me ha roto!"),
        ("SHOOT! IT'S BROKEN!", "Shoot! It's broken!"),
        ("I'M SURE I'LL FIND IT. I THINK", "I'm sure I'll find it. I think"),
        ("WELL...THAT DOESN'T MATTER. OK?", "Well...that doesn't matter. OK?"),
        ("B.J. IS IN ROOM 512", "B.J. is in room 512"),
        ("AÑO NUEVO, VIDA NUEVA", "Año nuevo, vida nueva"),
        ("Already mixed Case", "Already mixed Case"),
        ("4447222", "4447222"),
    ],
)
def test_sentence_case(text, expected):
    assert sentence_case(text) == expected


def real_root(relative: str) -> Path:
    """The first of / and $TRANSFORMER_TEST_DEB_ROOT holding relative, or skip."""
    roots = ["/", os.environ.get("TRANSFORMER_TEST_DEB_ROOT", "")]
    for root in filter(None, roots):
        if (Path(root) / relative).is_file():
            return Path(root)
    pytest.skip(f"{relative} is not installed (apt-get install the package, or set "
                "TRANSFORMER_TEST_DEB_ROOT to an extracted tree)")  # fmt: skip


def test_real_cataclysm_catalogs():
    root = real_root(cataclysm.MO_PATH.format(variant="es_ES"))
    if not (root / cataclysm.MO_PATH.format(variant="es_AR")).is_file():
        pytest.skip(f"{root} has es_ES's catalog but not es_AR's")
    for variant in cataclysm.VARIANTS:
        dropped = Counter()
        pairs = cataclysm_pairs(root, dropped, variants=(variant,))
        assert 13_000 < len(pairs) < 18_000, variant
        subsets = Counter(cataclysm.subset_of(p.eng) for p in pairs)
        assert 5_000 < subsets["conversational"] < 9_000 and subsets["sentence-like"] > 6_000
        assert dropped["printf placeholder (%s, %d ...)"] > 1_000
        for pair in pairs:
            assert not any(mark in pair.spa + pair.eng for mark in ("<color_", "%s", "$", "\n"))
            assert half_of_double(pair.spa) is None or half_of_double(pair.eng) is not None
    pairs = cataclysm_pairs(root, Counter())
    assert Pair("Aléjate de mí.", "Get away from me.", "cataclysm/get away from me") in pairs
    assert Pair("Salí de acá.", "Get away from me.", "cataclysm/get away from me") in pairs
    assert Pair("Hazte cargo.", "Get with it.", "cataclysm/get with it") in pairs  # undoubled


def test_real_drascula_table():
    root = real_root(drascula.DAT_PATH)
    table = read_table(find_dat(root).read_bytes())
    sizes = (501, 84, 15, 29, 24, 33, 32, 20, 25, 63, 4, 5, 6, 7, 11)
    assert tuple(len(group[0]) for group in table) == sizes
    dropped = Counter()
    pairs = drascula_pairs(root, dropped)
    assert 700 < len(pairs) < 800
    assert Pair("¡CACHIS! ¡SE ME HA ROTO!", "SHOOT! IT'S BROKEN!", "drascula/0/21") in pairs
    assert Pair("YA TENGO TODOS LOS INGREDIENTES DE ESA POCION", "I HAVE ALL THE INGREDIENTS OF "
                "THAT BREW", "drascula/0/20") in pairs  # fmt: skip
    assert dropped["no letter (digits or symbols only)"] == 11  # group 14's digit strings
