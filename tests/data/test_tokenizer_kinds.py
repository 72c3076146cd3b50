"""The four tokenizer kinds (bpe, unigram, word, char): what each round-trips, where <unk> appears,
stable special ids, save/reload, `transformer tokenize`, and training end to end with each."""

import random

import pytest
import torch

from transformer.cli import main
from transformer.config import build_run_config
from transformer.data.tokenizer import (
    KINDS,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    TokenizerError,
    detokenize_words,
    train_tokenizer,
)
from transformer.decoding.pipeline import Pipeline
from transformer.model_dir import load_model, load_tokenizers, save_tokenizers
from transformer.training.checkpoint import step_dirs
from transformer.training.trainer import train

CORPUS = ["¿De quién es?", "Es de Juan.", "El gato se sentó en la alfombra, ¿verdad?", "¡Hola, amigo!",
          "De quién es el perro (el negro)?", "La casa es grande; el perro no.", "Dijo: «ven aquí».",
          "¿Quién es el dueño del gato?"] * 5


@pytest.fixture(scope="module")
def toks():
    return {kind: train_tokenizer(kind, CORPUS, 300 if kind == "bpe" else 120, 1) for kind in KINDS}


def test_special_tokens_have_the_same_ids_in_every_kind(toks):
    for kind, tok in toks.items():
        assert [tok.id_to_token(i) for i in range(4)] == list(SPECIAL_TOKENS), kind
        assert tok.kind == kind


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_round_trips_its_training_text(toks, kind):
    tok = toks[kind]
    for text in CORPUS:
        assert tok.decode(tok.encode(text)) == text, (kind, text)
        assert UNK_ID not in tok.encode(text)


def test_what_each_kind_does_with_text_it_has_not_seen(toks):
    text = "Zorro ☃ es el gato-perro de  Juan."
    # BPE: bytes, so everything comes back and nothing is <unk>
    assert toks["bpe"].decode(toks["bpe"].encode(text)) == text and UNK_ID not in toks["bpe"].encode(text)
    # char: each unseen character is one <unk>, dropped when decoding
    char = toks["char"]
    unseen = {c for c in text if c not in "".join(CORPUS)}
    ids = char.encode(text)
    assert len(ids) == len(text) and ids.count(UNK_ID) == sum(c in unseen for c in text)
    assert char.decode(ids) == "".join(c for c in text if c not in unseen)
    # word: each out-of-vocabulary word is one <unk>; decoding joins words by the written rule
    word = toks["word"]
    ids = word.encode(text)
    tokens = ["Zorro", "☃", "es", "el", "gato", "-", "perro", "de", "Juan", "."]
    assert len(ids) == len(tokens)
    vocab = {t for line in CORPUS for t in line.replace(".", " . ").replace(",", " ").split()}
    assert [i == UNK_ID for i in ids] == [t not in vocab for t in tokens]
    assert word.decode(ids) == "es el gato perro de Juan."  # <unk>s lose their word ("-" was never seen)
    # unigram: unseen characters are <unk>, the rest comes back
    uni = toks["unigram"]
    ids = uni.encode(text)
    assert ids.count(UNK_ID) == len(unseen) == 3  # Z, ☃, -: one <unk> each
    assert uni.decode(ids) == "".join(c for c in text if c not in unseen)  # spaces kept, even the double one


def test_the_word_detokenization_rule():
    assert detokenize_words(["¿", "De", "quién", "es", "?"]) == "¿De quién es?"
    assert detokenize_words(["Dijo", ":", "«", "ven", "aquí", "»", "."]) == "Dijo: «ven aquí»."
    assert detokenize_words(["a", "-", "b", "(", "c", ")", "50", "%"]) == "a - b (c) 50%"
    assert detokenize_words([]) == ""


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_tokenizer_reloads_to_identical_encodings(toks, kind, tmp_path):
    save_tokenizers(tmp_path, toks[kind])
    again, _ = load_tokenizers(tmp_path)
    text = "¿De quién es el gato? Zorro ☃"
    assert again.encode(text) == toks[kind].encode(text)
    assert again.kind == kind and again.decode(again.encode(text)) == toks[kind].decode(toks[kind].encode(text))
    assert Tokenizer.load(tmp_path / "tokenizer.json").encode_batch(CORPUS) == toks[kind].encode_batch(CORPUS)


def test_tokenize_prints_the_three_token_split_of_de_quien_es(toks, tmp_path, capsys):
    toks["word"].save(tmp_path / "word.json")
    assert main(["tokenize", str(tmp_path / "word.json"), "--text", "De quién es"]) in (0, None)
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"3 token(s), 0 <unk> (word, vocabulary {toks['word'].vocab_size})"
    assert [line.split()[1] for line in out[2:]] == ["De", "quién", "es"]
    assert [int(line.split()[0]) for line in out[2:]] == toks["word"].encode("De quién es")
    main(["tokenize", str(tmp_path / "word.json"), "--text", "De Zorro"])
    assert "2 token(s), 1 <unk>" in capsys.readouterr().out


def test_too_small_char_vocabulary_and_empty_corpus_are_one_clear_line():
    n = len(set("".join(CORPUS)))
    with pytest.raises(TokenizerError, match=f"data.vocab_size=10 is too small for a character vocabulary: the text "
                                             f"has {n} characters seen at least 1 time.*set data.vocab_size to {n + 4}"):
        train_tokenizer("char", CORPUS, 10, 1)
    for kind in ("word", "char", "unigram"):
        with pytest.raises(TokenizerError, match="no text to train the .* tokenizer on: the training data is empty"):
            train_tokenizer(kind, [], 100, 1)
    with pytest.raises(TokenizerError, match="tokenizer 'chars' is not one of bpe, unigram, word, char"):
        train_tokenizer("chars", CORPUS, 100)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kinds")
    rng = random.Random(0)
    words = "el gato perro casa grande quién es de la".split()
    src = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(300)]
    (tmp / "train.src").write_text("\n".join(src) + "\n")
    (tmp / "train.tgt").write_text("\n".join(s.upper() for s in src) + "\n")
    (tmp / "valid.src").write_text("\n".join(src[:10]) + "\n")
    (tmp / "valid.tgt").write_text("\n".join(s.upper() for s in src[:10]) + "\n")
    return tmp


@pytest.mark.parametrize("kind", ["word", "char", "unigram"])
def test_training_resuming_and_translating_with_each_kind(pairs, kind, tmp_path):
    config = build_run_config({
        "model": {"d_model": 32, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 64,
                  "max_positions": 128},
        "data": {"train_src": str(pairs / "train.src"), "train_tgt": str(pairs / "train.tgt"),
                 "valid_src": str(pairs / "valid.src"), "valid_tgt": str(pairs / "valid.tgt"),
                 "tokenizer": kind, "vocab_size": 100, "max_len": 64, "shared_vocab": False},
        "train": {"batch_tokens": 512, "max_steps": 4, "warmup_steps": 2, "valid_every": 4, "save_every": 2,
                  "log_every": 2, "precision": "fp32", "bleu_samples": 0},
        "decode": {"beam_size": 2}})
    said = []
    train(config, tmp_path / "run", log=said.append)
    source, target = load_tokenizers(tmp_path / "run")
    assert source.kind == target.kind == kind and source is not target
    assert any(line.startswith("trained ") and "vocabulary" in line for line in said)
    out = Pipeline.load(tmp_path / "run" / "last").translate(["el gato es grande"])
    assert isinstance(out[0], str)
    # exact resume holds whatever the tokenizer: cut at step 2, resume, same last weights
    cut = tmp_path / "cut"
    train(build_run_config({**config.to_dict(), "train": {**config.to_dict()["train"], "max_steps": 2}}), cut,
          log=lambda _: None)
    assert [p.name for p in step_dirs(cut)] == ["step-000002"]
    train(config, cut, resume=True, log=lambda _: None)
    a, b = load_model(tmp_path / "run" / "last"), load_model(cut / "last")
    for p, q in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q)


def test_train_says_a_too_small_char_vocabulary_in_one_line(pairs, tmp_path, capsys):
    config = build_run_config({"data": {"train_src": str(pairs / "train.src"), "train_tgt": str(pairs / "train.tgt"),
                                        "tokenizer": "char", "vocab_size": 8}})
    (tmp_path / "c.toml").write_text(config.to_toml())
    assert main(["train", str(tmp_path / "c.toml"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "data.vocab_size=8 is too small for a character vocabulary" in err and "set data.vocab_size to" in err
