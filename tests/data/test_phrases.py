"""`data phrases` (transformer.data.sources.phrases: skills, skill_lines) on fake skill folders written
here (the locale/ layout, the older dialog/ + vocab/ layout, equal and unequal line counts,
alternations, slots, skill.json examples), and on the installed skill packages where there are
some."""

import json
from importlib import metadata
from pathlib import Path

import pytest

from transformer.cli import main
from transformer.data.sources.phrases import skill_lines, skills
from transformer.data.sources.phrases.corpus import build_phrases_corpus
from transformer.data.text import DataError


def name_in(split: str, start: int = 0) -> str:
    """A skill name that the module's percentages send to `split`."""
    names = (f"ovos-skill-fake-{i}" for i in range(start, 5000))
    return next(n for n in names if skills.phrases_split(n) == split)


TRAIN, TRAIN_2, VALID, TEST = (
    name_in("train"),
    name_in("train", 50),
    name_in("valid"),
    name_in("test"),
)


def write(folder: Path, files: dict[str, str | list]) -> Path:
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, list):
            content = json.dumps({"name": "x", "examples": content})
        path.write_text(content, encoding="utf-8")
    return folder


def fake_skills(root: Path) -> list[Path]:
    """Four skills: TRAIN (locale/ layout, every rule), TRAIN_2 (dialog/ + vocab/ layout, es-ES,
    English only files), VALID and TEST (one pair each, TEST's English also in TRAIN)."""
    train = write(
        root / TRAIN,
        {
            "locale/en-us/time.dialog": "It's {time}\nThe time is {{time}}\n",
            "locale/es-es/time.dialog": "Son las {time}\n\nLa hora es { time }\n",
            "locale/en-us/what.intent": "(what|which) time is it\n# a comment\nwhat's the hour\n",
            "locale/es-es/what.intent": "(qué|cuál) hora es\nqué hora es\n",
            "locale/en-us/timer.intent": "(set|start) a timer\n",
            "locale/es-es/timer.intent": "(pon|inicia|crea) un temporizador\n",
            "locale/en-us/yes.voc": "yes\nyeah\nsure\n",
            "locale/es-es/yes.voc": "sí\nclaro\n",
            "locale/en-us/slots.dialog": "Timer for {duration}\nHello {name}\nbulbasaur\n",
            "locale/es-es/slots.dialog": "Temporizador de {minutes}\nHola {name}\nBulbasaur\n",
            "locale/en-us/skill.json": ["What time is it?", "Tell me the time", "[UNUSED]"],
            "locale/es-es/skill.json": ["¿Qué hora es?", "Dime la hora", "[UNUSED]"],
            "locale/en-us/number.entity": "one\ntwo\n",
            "locale/es-es/number.entity": "uno\ndos\n",
            "skill_fake/__init__.py": "raise SystemExit('never imported')\n",
        },
    )
    train_2 = write(
        root / TRAIN_2,
        {
            "dialog/en-us/bye.dialog": "Goodbye (for now|for today)\n",
            "dialog/es-ES/bye.dialog": "Adiós (por ahora|por hoy)\n",
            "vocab/en-us/stop.voc": "stop|halt\n",
            "vocab/es-es/stop.voc": "# auto translated from en-us to es-es\npara|detente\n",
            "dialog/en-us/only.dialog": "Good night\nSee you\n",
            "dialog/es-lm/only.dialog": "Buenas noches\nNos vemos\n",
            "locale/en-us/skill.json": ["One", "Two"],
            "locale/es-es/skill.json": ["Uno"],
        },
    )
    valid = write(
        root / VALID,
        {
            "locale/en-us/a.dialog": "Tell me a joke\n",
            "locale/es-es/a.dialog": "Cuéntame un chiste\n",
            "locale/en-us/s.voc": "stop\n",
            "locale/es-es/s.voc": "# auto translated\npara\n",
        },
    )
    test = write(
        root / TEST,
        {
            "locale/en-us/b.dialog": "It's {time}\nThe volume is {level}\n",
            "locale/es-es/b.dialog": "Ya son las {time}\nEl volumen es {level}\n",
            "locale/en-us/c.dialog": "Good night\n",
        },
    )
    return [train, train_2, valid, test]


def read_pairs(out: Path, split: str) -> list[tuple[str, str]]:
    spa = (out / f"{split}.spa").read_text(encoding="utf-8").splitlines()
    eng = (out / f"{split}.eng").read_text(encoding="utf-8").splitlines()
    assert len(spa) == len(eng)
    return list(zip(spa, eng, strict=True))


def test_alternations_expand_together_or_take_the_first():
    together, yes = skill_lines.expand_pair(
        "(change|set) the (eye|eyes) color", "(cambia|pon) el color de (ojo|ojos)"
    )
    assert yes and together == [
        ("change the eye color", "cambia el color de ojo"),
        ("set the eyes color", "pon el color de ojos"),
        ("change the eyes color", "cambia el color de ojos"),
        ("set the eye color", "pon el color de ojo"),
    ]
    first, yes = skill_lines.expand_pair("(a|b) (c|d)", "(x|y|z) (w|v)")
    assert not yes and first == [("a c", "x w")]
    assert skill_lines.expand_one("take (my user |)picture") == [
        "take my user picture",
        "take picture",
    ]
    assert skill_lines.expand_one("dime|di") == ["dime", "di"]
    assert skill_lines.expand_one("Born 1428 (d. 1458)[citation needed]") == ["Born 1428 (d. 1458)"]
    many = skill_lines.expand_one("(a|b|c|d|e) (f|g|h) (i|j)")
    assert len(many) == skill_lines.MAX_EXPANSIONS  # capped: 30 combinations
    assert {w for text in many for w in text.split()} == set("abcdefghij")  # every alternative


def test_sorted_lists_and_unrelated_texts_do_not_pair_by_position():
    sorted_en, sorted_es = ["cancel", "clear", "stop"], ["borrar", "cancelar", "parar"]
    assert skills.misalignment(sorted_en, sorted_es).startswith("lines sorted alphabetically")
    assert skills.misalignment(["stop", "cancel", "clear"], ["parar", "cancelar", "borrar"]) == ""
    english = ["a" * 10, "b" * 40, "c" * 20, "d" * 60, "e" * 15]
    other_quotes = ["x" * 60, "y" * 12, "z" * 45, "w" * 11, "v" * 30]
    translations = ["x" * 12, "y" * 45, "z" * 22, "w" * 70, "v" * 16]
    assert skills.misalignment(english, other_quotes).startswith("line lengths do not correspond")
    assert skills.misalignment(english, translations) == ""


def test_pairs_counts_and_held_out_skills(tmp_path):
    out = tmp_path / "out"
    r = build_phrases_corpus(out, fake_skills(tmp_path / "skills"))
    train = read_pairs(out, "train")
    assert train == [
        ("¿Qué hora es?", "What time is it?"),
        ("Dime la hora", "Tell me the time"),
        ("Hola {name}", "Hello {name}"),
        ("Son las {time}", "It's {time}"),
        ("La hora es {time}", "The time is {time}"),
        ("pon un temporizador", "set a timer"),  # 2 vs 3 alternatives: the first of each
        ("qué hora es", "what time is it"),
        ("cuál hora es", "which time is it"),
        ("qué hora es", "what's the hour"),
        ("Adiós por ahora", "Goodbye for now"),
        ("Adiós por hoy", "Goodbye for today"),
        ("para", "stop"),  # machine-translated: kept in train
        ("detente", "halt"),
    ]
    # dropped: slots differ (Timer for), equal sides (bulbasaur), auto-translated in valid (stop)
    assert read_pairs(out, "valid") == [("Cuéntame un chiste", "Tell me a joke")]
    # the test skill's "It's {time}" is in train: dropped; its English never occurs in train
    assert read_pairs(out, "test") == [("El volumen es {level}", "The volume is {level}")]
    dropped = r["dropped"]
    assert dropped["different {slot} names on the two sides"] == 1
    assert dropped["Spanish equal to English (untranslated)"] == 1
    assert dropped["machine-translated Spanish in a valid or test skill"] == 1
    assert dropped["in test but its English is also in train"] == 1
    assert dropped["skill.json example that is not text or is [UNUSED]"] == 1
    assert r["skipped"]["different numbers of lines"] == 1
    assert r["skipped"]["skill.json examples of different lengths"] == 1
    assert r["skipped"]["English file without a Spanish one"] == 2  # es-lm is not es-es
    assert r["skipped"]["English .entity file (not read)"] == 1
    assert r["files"]["lines, paired"] == 9 and r["files"]["lines, unequal"] == 1
    assert r["unequal_share"] == pytest.approx(1 / 10)  # 9 paired, 1 unequal, 0 misaligned
    assert r["skills_read"] == 4 and r["skills_with_spanish"] == 4
    assert r["pairs"] == {"train": 13, "valid": 1, "test": 1}
    assert r["questions"]["train"] == 1
    # English without Spanish: the unequal .voc, the English-only files, the unequal examples;
    # once each, never an English of a written pair
    english_only = (out / "english-only.eng").read_text(encoding="utf-8").splitlines()
    assert english_only == ["yes", "yeah", "sure", "Good night", "See you", "One", "Two"]
    assert r["english_only"] == 7
    held_out = {eng for split in ("valid", "test") for _, eng in read_pairs(out, split)}
    assert not held_out & {eng for _, eng in train} and not held_out & set(english_only)
    tsv = (out / "skills.tsv").read_text(encoding="utf-8").splitlines()
    assert tsv[1].split("\t")[:4] == [TRAIN, "-", "unknown", "train"]
    assert "Test skills: " + TEST in (out / "PROVENANCE.md").read_text(encoding="utf-8")


def test_the_command_and_its_one_line_errors(tmp_path, capsys, monkeypatch):
    dirs = [str(d) for d in fake_skills(tmp_path / "skills")]
    command = ["data", "phrases", "--out", str(tmp_path / "out")]
    assert main([*command, *(a for d in dirs for a in ("--skill-dir", d))]) == 0
    assert capsys.readouterr().out == (
        f"wrote {tmp_path / 'out'}: train 13, valid 1, test 1 phrase pairs from 4 skills (4 of 4 "
        "have Spanish), 7 English-only lines in english-only.eng; dropped 5 pairs (see "
        f"{tmp_path / 'out'}/PROVENANCE.md)\n"
    )
    assert main([*command, "--skill-dir", str(tmp_path / "nowhere")]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    monkeypatch.setattr(skills.metadata, "distributions", lambda: [])
    assert main(command) == 2
    assert capsys.readouterr().err == (
        f"transformer data phrases: error: no OpenVoiceOS or Neon skill package is installed: "
        f"{skills.INSTALL}\n"
    )


def installed_skills() -> list[str]:
    return [
        d.metadata["Name"]
        for d in metadata.distributions()
        if skills.normalized(d.metadata["Name"] or "").startswith(skills.PREFIXES)
    ]


@pytest.mark.skipif(
    not installed_skills(), reason="no skill package installed (make setup installs them)"
)
def test_the_installed_skills(tmp_path):
    with pytest.raises(DataError):  # nothing pairs in an empty folder
        build_phrases_corpus(tmp_path / "none", [tmp_path])
    r = build_phrases_corpus(tmp_path / "out")
    assert r["skills_read"] >= r["skills_with_spanish"] > 0
    assert r["pairs"]["train"] > 0
    total = sum(r["pairs"].values())
    assert r["distinct_spanish"] <= total
    for split in ("train", "valid", "test"):
        for spa, eng in read_pairs(tmp_path / "out", split):
            assert skill_lines.slots(spa) == skill_lines.slots(eng)
            assert "|" not in spa + eng and spa.casefold() != eng.casefold()
    if r["skills_with_spanish"] >= 50:  # the pinned requirements-skills.txt
        assert total > 1000 and r["pairs"]["valid"] > 50 and r["pairs"]["test"] > 50
        assert 0.05 < r["unequal_share"] < 0.5
