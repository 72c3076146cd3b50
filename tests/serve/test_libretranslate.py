"""LibreTranslate's API (serve/libretranslate.py): its documented request and response shapes (a
string or a list q, JSON or a form, html, auto + detectedLanguage, alternatives), its errors
({"error"}: a pair not served, a missing field, the key), /languages, the same answers as
/v1/translate in both batching modes, and libretranslatepy's client against a running server."""

from collections import Counter

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.markup import span_texts  # noqa: E402
from transformer.data.tokenizer import train_bpe, with_slot_tokens  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "hace sol hoy",
        "los pájaros cantan", "un perro corrió en el parque"] * 20
LINES = ["el gato se sentó", "hace sol hoy", "un perro corrió en el parque\nlos pájaros cantan"]
HTML = '<p class="x">el gato &amp; el perro</p> <a href="https://x.org/a">hace sol</a>&nbsp;hoy'
PAIR = {"source_lang": "es", "target_lang": "en"}


def model_dir(tmp, name: str, markup: bool, beam_size: int = 3):
    tokenizer = train_bpe(TEXT, vocab_size=300)
    if markup:
        tokenizer = with_slot_tokens(tokenizer)
    torch.manual_seed(0)
    model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, max_positions=32))
    decode = DecodeConfig(beam_size=beam_size, max_len_b=10, max_new_tokens=8)
    return transformer.save_model(model, tmp / name, tokenizer=tokenizer, decode=decode)


@pytest.fixture(scope="module")
def mt(tmp_path_factory):
    """A translation model trained with protect_markup's slot tokens (untrained weights)."""
    return Pipeline.load(model_dir(tmp_path_factory.mktemp("lt"), "mt", markup=True))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A translation model without slot tokens, greedy (beam 1)."""
    return Pipeline.load(model_dir(tmp_path_factory.mktemp("lt"), "plain", False, beam_size=1))


def client(pipeline, **config) -> TestClient:
    return TestClient(create_app(pipeline, ServeConfig(**{**PAIR, **config})))


def lt_error(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and isinstance(body["error"], str), body
    for word in words:
        assert word in body["error"], body
    return body["error"]


@pytest.mark.parametrize("batching", ["continuous", "whole"])
def test_a_string_or_a_list_is_translated_as_v1_translate_translates_it(mt, batching):
    with client(mt, batching=batching) as c:
        ours = c.post("/v1/translate", json={"text": LINES}).json()["translations"]
        one = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en"})
        assert one.status_code == 200 and one.json() == {"translatedText": ours[0]}
        many = c.post("/translate", json={"q": LINES, "source": "es", "target": "en"})
        assert many.json() == {"translatedText": ours}  # line breaks kept, as /v1/translate
        assert ours == [t for t in mt.translate(LINES[:2])] + [
            "\n".join(mt.translate(LINES[2].split("\n")))
        ]


def test_a_form_is_read_as_libretranslatepy_sends_it(mt):
    with client(mt) as c:
        want = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en"}).json()
        form = c.post("/translate", data={"q": LINES[0], "source": "es", "target": "en"})
        assert form.status_code == 200 and form.json() == want
        # a form sends numbers as text; q sent twice is a list
        r = c.post("/translate", data={"q": LINES[:2], "source": "es", "target": "en",
                                       "alternatives": "1"})
        body = r.json()
        assert len(body["translatedText"]) == 2 and len(body["alternatives"]) == 2, body


def test_auto_is_the_model_source_language_and_says_so(mt):
    with client(mt) as c:
        one = c.post("/translate", json={"q": LINES[0], "source": "auto", "target": "en"}).json()
        assert one["detectedLanguage"] == {"confidence": 100.0, "language": "es"}
        assert one["translatedText"] == mt.translate([LINES[0]])[0]
        many = c.post("/translate", json={"q": LINES[:2], "source": "auto", "target": "en"}).json()
        assert many["detectedLanguage"] == [{"confidence": 100.0, "language": "es"}] * 2
        given = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en"}).json()
        assert "detectedLanguage" not in given


def test_alternatives_are_the_rest_of_the_models_own_beam(mt, plain):
    with client(mt) as c:
        plain_answer = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en"})
        r = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en",
                                       "alternatives": 5}).json()
        assert r["translatedText"] == plain_answer.json()["translatedText"]  # the beam not widened
        hypotheses = mt.translate([LINES[0]], n_best=3)[0]
        assert r["alternatives"] == [h for h in dict.fromkeys(hypotheses[1:]) if h and h != hypotheses[0]]
        assert len(r["alternatives"]) <= 2
        lst = c.post("/translate", json={"q": LINES[:2], "source": "es", "target": "en",
                                         "alternatives": 1}).json()
        assert len(lst["alternatives"]) == 2 and all(len(a) <= 1 for a in lst["alternatives"])
    with client(plain) as c:  # greedy: no other hypothesis to give
        r = c.post("/translate", json={"q": LINES[0], "source": "es", "target": "en",
                                       "alternatives": 2}).json()
        assert r["alternatives"] == [] and r["translatedText"] == plain.translate([LINES[0]])[0]


@pytest.mark.parametrize("batching", ["continuous", "whole"])
def test_html_keeps_every_tag_and_entity_with_slot_tokens(mt, batching):
    with client(mt, batching=batching) as c:
        r = c.post("/translate", json={"q": [HTML, "sin marcas"], "source": "es", "target": "en",
                                       "format": "html"})
        assert r.status_code == 200, r.text
        got = r.json()["translatedText"]
        assert got == c.post("/v1/translate", json={"text": [HTML, "sin marcas"],
                                                    "keep_markup": True}).json()["translations"]
        assert Counter(span_texts(got[0])) == Counter(span_texts(HTML)), got[0]
        assert "&amp;" in got[0] and "&nbsp;" in got[0]


def test_html_for_a_model_without_slot_tokens_translates_between_the_markup(plain):
    with client(plain) as c:
        r = c.post("/translate", json={"q": HTML, "source": "es", "target": "en", "format": "html",
                                       "alternatives": 1})
        assert r.status_code == 200, r.text
        runs = ["el gato", "el perro", "hace sol", "hoy"]
        t = dict(zip(runs, plain.translate(runs), strict=True))
        assert r.json() == {
            "translatedText": f'<p class="x">{t["el gato"]} &amp; {t["el perro"]}</p> '
                              f'<a href="https://x.org/a">{t["hace sol"]}</a>&nbsp;{t["hoy"]}',
            "alternatives": [],
        }


def test_languages_lists_the_pair(mt):
    with client(mt) as c:
        r = c.get("/languages")
        assert r.status_code == 200
        assert r.json() == [{"code": "es", "name": "Spanish", "targets": ["en"]},
                            {"code": "en", "name": "English", "targets": []}]
        assert c.get("/v1/model").json()["languages"] == {"source": "es", "target": "en"}
    with client(mt, source_lang="ast", target_lang="en") as c:  # a code without a name here
        assert c.get("/languages").json()[0] == {"code": "ast", "name": "ast", "targets": ["en"]}


def test_another_pair_is_a_400_naming_the_pair_served(mt):
    with client(mt) as c:
        for source, target in (("fr", "en"), ("es", "de"), ("en", "es"), ("auto", "fr")):
            r = c.post("/translate", json={"q": "hola", "source": source, "target": target})
            message = lt_error(r, 400, "this server translates es (Spanish) to en (English)",
                               f"not {source} to {target}")
            assert "send source 'es' (or 'auto') and target 'en'" in message


def test_missing_and_malformed_fields_are_400_in_libretranslates_shape(mt):
    with client(mt) as c:
        ok = {"q": "hola", "source": "es", "target": "en"}
        for name in ("q", "source", "target"):
            body = {k: v for k, v in ok.items() if k != name}
            lt_error(c.post("/translate", json=body), 400, f"Invalid request: missing {name} parameter")
        lt_error(c.post("/translate", json={**ok, "q": ""}), 400, "missing q parameter")
        lt_error(c.post("/translate", json={**ok, "q": [1, 2]}), 400, "q must be a text or a list")
        lt_error(c.post("/translate", json={**ok, "format": "pdf"}), 400, "'pdf' is not supported")
        lt_error(c.post("/translate", json={**ok, "alternatives": "x"}), 400, "not a number")
        lt_error(c.post("/translate", json={**ok, "alternatives": 1.5}), 400, "not a number")
        assert c.post("/translate", json={**ok, "alternatives": 1.0}).json()["alternatives"] is not None
        lt_error(c.post("/translate", json={**ok, "alternatives": 64}), 400, "must be <= 63")
        lt_error(c.post("/translate", content=b"{", headers={"Content-Type": "application/json"}),
                 400, "not valid JSON")
        lt_error(c.post("/translate", json=["hola"]), 400, "a JSON object")
        lt_error(c.post("/translate", content=b'{"q": "\\ud800", "source": "es", "target": "en"}',
                     headers={"Content-Type": "application/json"}), 400, "q holds a lone surrogate")
        lt_error(c.post("/translate", json={**ok, "q": ["hola"] * 300}), 400, "--max-lines")
        lt_error(c.get("/translate"), 405)
        assert c.post("/translate", json={**ok, "secret": "x"}).status_code == 200  # ignored


def test_the_api_key_is_the_api_key_field(mt):
    with client(mt, api_key="k3y") as c:
        ok = {"q": "hola", "source": "es", "target": "en"}
        lt_error(c.post("/translate", json=ok), 403, "needs an API key", "api_key")
        lt_error(c.post("/translate", json={**ok, "api_key": "wrong"}), 403, "Invalid API key")
        lt_error(c.post("/translate", data={**ok, "api_key": "wrong"}), 403, "Invalid API key")
        assert c.post("/translate", json={**ok, "api_key": "k3y"}).status_code == 200
        assert c.post("/translate", data={**ok, "api_key": "k3y"}).status_code == 200
        assert c.post("/translate", json=ok, headers={"Authorization": "Bearer k3y"}).status_code == 200
        assert c.get("/languages").status_code == 200  # as LibreTranslate's: no key needed
        assert c.post("/v1/translate", json={"text": "hola", "api_key": "k3y"}).status_code == 401
    with client(mt) as c:  # no key configured: api_key is ignored
        assert c.post("/translate", json={"q": "hola", "source": "es", "target": "en",
                                          "api_key": "anything"}).status_code == 200


def test_without_languages_and_for_other_models_a_clear_400(mt, tmp_path):
    with TestClient(create_app(mt, ServeConfig())) as c:
        for r in (c.get("/languages"), c.post("/translate", json={"q": "hola", "source": "es",
                                                                  "target": "en"})):
            lt_error(r, 400, "does not know which languages", "--source-lang", "--target-lang")
    tokenizer = train_bpe(TEXT, vocab_size=300)
    lm = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch="decoder"))
    path = transformer.save_model(lm, tmp_path / "lm", tokenizer=tokenizer)
    with client(Pipeline.load(path)) as c:
        lt_error(c.get("/languages"), 400, "/languages needs a translation model", "/v1/generate")
        r = c.post("/translate", json={"q": "hola", "source": "es", "target": "en"})
        lt_error(r, 400, "/translate needs a translation model", "/v1/generate")


def test_the_pair_a_model_directory_records_is_served_without_flags(tmp_path):
    """languages.json (training writes it from data.source_lang/target_lang) names the pair; the
    flags, when given, win; /v1/model reports the pair served."""
    path = model_dir(tmp_path, "recorded", markup=False)
    (path / "languages.json").write_text('{"source": "es", "target": "en"}\n')
    pipeline = Pipeline.load(path)
    assert pipeline.languages == {"source": "es", "target": "en"}
    with TestClient(create_app(pipeline, ServeConfig())) as c:
        assert [x["code"] for x in c.get("/languages").json()] == ["es", "en"]
        assert c.post("/translate", json={"q": "hola", "source": "es", "target": "en"}).status_code == 200
        assert c.get("/v1/model").json()["languages"] == {"source": "es", "target": "en"}
    with TestClient(create_app(pipeline, ServeConfig(source_lang="ast", target_lang="en"))) as c:
        assert [x["code"] for x in c.get("/languages").json()] == ["ast", "en"]


def test_metrics_count_the_libretranslate_paths_by_name(mt):
    with client(mt) as c:
        c.post("/translate", json={"q": "hola", "source": "es", "target": "en"})
        c.get("/languages")
        text = c.get("/metrics").text
        assert 'endpoint="/translate"' in text and 'endpoint="/languages"' in text


def test_libretranslatepy_talks_to_the_server(mt):
    api = pytest.importorskip(
        "libretranslatepy", reason="libretranslatepy is not installed: pip install libretranslatepy"
    )
    pytest.importorskip("uvicorn")
    from tests.serve.test_serve import running

    with running(create_app(mt, ServeConfig(api_key="k3y", **PAIR))) as port:
        lt = api.LibreTranslateAPI(f"http://127.0.0.1:{port}", api_key="k3y")
        assert lt.languages() == [{"code": "es", "name": "Spanish", "targets": ["en"]},
                                  {"code": "en", "name": "English", "targets": []}]
        assert lt.translate(LINES[0], "es", "en") == mt.translate([LINES[0]])[0]
        assert lt.translate(LINES[0], "auto", "en") == mt.translate([LINES[0]])[0]
        import urllib.error

        with pytest.raises(urllib.error.HTTPError) as refused:
            lt.translate(LINES[0], "fr", "en")
        assert refused.value.code == 400
        with pytest.raises(urllib.error.HTTPError) as refused:
            api.LibreTranslateAPI(f"http://127.0.0.1:{port}", api_key="no").translate("hola", "es", "en")
        assert refused.value.code == 403
