"""The page at `/` in a real browser: Debian's chromium driven by playwright.

It types a sentence, presses the button, checks that the page shows the API's translation (or, for
a language model, the streamed text), hovers output tokens and checks that the source highlighting
follows the weights the API returns, for the mean of the heads and for one head. For classifiers it
types texts or drops image files and checks the labels and probabilities shown against the
pipeline's; for a chat model it holds a two-turn conversation and checks each streamed answer
against the non-streamed API's, and that the second request carries the first turn. A screenshot is
saved in the test's directory, or where $SERVE_SCREENSHOT says; $SERVE_MODEL serves another model
directory (the README's screenshot: SERVE_MODEL=runs/demo/averaged
SERVE_SCREENSHOT=docs/img/serve.png pytest tests/serve/test_serve_page.py -k translation).
"""

import os
import shutil
import socket
import threading
import time

import pytest
import torch

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed: pip install playwright"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "Debian's chromium is not installed (apt-get install -y chromium): the page test needs a browser",
        allow_module_level=True,
    )

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import ENCODER_SPECIALS, train_bpe  # noqa: E402
from transformer.decoding.pipeline import Pipeline  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

TEXT = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "el gato se sentó",
    "un perro corrió en el parque",
] * 20

CHAT = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("page")
    tokenizer = train_bpe(TEXT, vocab_size=300)
    out = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(1)
        model = transformer.build_model(
            cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=48)
        )
        out[arch] = transformer.save_model(
            model,
            tmp / arch,
            tokenizer=tokenizer,
            decode=DecodeConfig(beam_size=1, max_len_b=10, max_new_tokens=10),
            languages={"source": "es", "target": "en"} if arch == "encoder-decoder" else None,
        )
    torch.manual_seed(1)  # a language model with a chat template, room for a two-turn conversation
    model = transformer.build_model(
        cpu_tiny(vocab_size=tokenizer.vocab_size, arch="decoder", max_positions=128)
    )
    out["chat"] = transformer.save_model(
        model,
        tmp / "chat",
        tokenizer=tokenizer,
        chat={"chat_template": CHAT},
        decode=DecodeConfig(max_new_tokens=10),
    )
    if os.environ.get("SERVE_MODEL"):
        out["encoder-decoder"] = os.environ["SERVE_MODEL"]
    return out


@pytest.fixture(scope="module")
def classifier_dirs(tmp_path_factory):
    """A text classifier (3 labels) and an image classifier (2 labels, 8 x 8 grayscale), untrained: as
    test_serve.py's."""
    tmp = tmp_path_factory.mktemp("classifiers")
    tokenizer = train_bpe(TEXT, vocab_size=300, specials=ENCODER_SPECIALS)
    torch.manual_seed(0)
    text = transformer.build_model(
        cpu_tiny(
            vocab_size=tokenizer.vocab_size,
            arch="encoder",
            max_positions=8,
            n_classes=3,
            pad_id=0,
            bos_id=2,
            eos_id=3,
        )
    )
    image = transformer.build_model(
        cpu_tiny(
            vocab_size=1,
            pad_id=0,
            bos_id=0,
            eos_id=0,
            arch="encoder",
            norm_position="pre",
            n_classes=2,
            vision={"image_size": 8, "patch_size": 4, "channels": 1},
        )
    )
    return (
        transformer.save_model(text, tmp / "text", tokenizer=tokenizer, labels=["a", "b", "c"]),
        transformer.save_model(image, tmp / "image", labels=["dark", "light"]),
    )


class Server:
    """uvicorn in a thread on a free loopback port."""

    def __init__(self, model_dir):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(
            create_app(str(model_dir), ServeConfig()),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not start")

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


def shown_weights(page) -> list[float]:
    return [
        float(w)
        for w in page.eval_on_selector_all(
            "#columns .tok", "spans => spans.map(s => s.dataset.weight)"
        )
    ]


def alphas(page) -> list[float]:
    """The opacity of each source token's computed background colour (rgba(r, g, b, a); rgb(...) is 1)."""
    styles = page.eval_on_selector_all(
        "#columns .tok", "spans => spans.map(s => getComputedStyle(s).backgroundColor)"
    )
    return [float(s.rsplit(",", 1)[1].strip(" )")) if s.startswith("rgba") else 1.0 for s in styles]


def test_page_translation_and_attention_highlighting(model_dirs, browser, tmp_path):
    sentence = (
        "Y dijo Dios: Sea la luz." if os.environ.get("SERVE_MODEL") else "the cat sat on the mat"
    )
    with Server(model_dirs["encoder-decoder"]) as server:
        api = httpx.post(server.url + "/v1/translate", json={"text": sentence}, timeout=60).json()
        weights = httpx.post(
            server.url + "/v1/attention", json={"text": sentence}, timeout=60
        ).json()
        page = browser.new_page(viewport={"width": 1000, "height": 640})
        page.goto(server.url + "/")
        page.wait_for_selector("#go:enabled")
        assert page.inner_text("#go") == "Translate"
        if not os.environ.get("SERVE_MODEL"):
            assert "translates es → en" in page.inner_text("#info")  # the model directory's pair
        page.fill("#text", sentence)
        page.click("#go")
        page.wait_for_selector("#attention-box:not([hidden])")
        assert page.inner_text("#output").strip() == api["translations"][0]
        rows = page.eval_on_selector_all("#rows .tok", "spans => spans.map(s => s.textContent)")
        columns = page.eval_on_selector_all(
            "#columns .tok", "spans => spans.map(s => s.textContent)"
        )
        assert rows == weights["rows"] and columns == weights["columns"] and len(rows) >= 2
        w = torch.tensor(weights["weights"])  # (H, T, S), the last layer
        for row in (len(rows) - 1, 0):  # hover the last output token, then the first
            page.hover(f'#rows .tok[data-index="{row}"]')
            mean = w[:, row].mean(0)
            assert torch.allclose(torch.tensor(shown_weights(page)), mean, atol=1e-5)
            assert torch.allclose(
                torch.tensor(alphas(page)), mean / mean.max(), atol=4e-3
            )  # shade ~ weight (alpha kept in 1/255 steps)
        page.select_option("#head", "0")
        assert torch.allclose(torch.tensor(shown_weights(page)), w[0, 0], atol=1e-5)
        page.select_option("#head", "mean")
        page.hover('#rows .tok[data-index="1"]')
        page.screenshot(
            path=os.environ.get("SERVE_SCREENSHOT") or str(tmp_path / "serve.png"), full_page=True
        )
        page.select_option("#layer", "0")  # another layer: fetched again
        page.wait_for_function("document.querySelector('#layer').value === '0'")
        first = httpx.post(
            server.url + "/v1/attention", json={"text": sentence, "layer": 0}, timeout=60
        ).json()
        page.hover('#rows .tok[data-index="0"]')
        page.wait_for_function(
            f"Math.abs(Number(document.querySelector('#columns .tok').dataset.weight) - "
            f"{torch.tensor(first['weights'])[:, 0, 0].mean().item()}) < 1e-5"
        )


def test_page_streams_a_language_models_text(model_dirs, browser):
    with Server(model_dirs["decoder"]) as server:
        api = httpx.post(
            server.url + "/v1/generate", json={"prompt": "the cat", "temperature": 0}, timeout=60
        ).json()
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#go:enabled")
        assert page.inner_text("#go") == "Generate"
        page.fill("#text", "the cat")
        page.click("#go")
        page.wait_for_selector("#attention-box:not([hidden])")
        assert page.inner_text("#output") == api["text"]
        assert page.eval_on_selector_all("#kind option", "o => o.map(x => x.value)") == ["self"]


def shown_results(page) -> list[tuple[str, list[tuple[str, str]]]]:
    """Each result row: its text (or its thumbnail's name), and its (label, shown probability) pairs."""
    return [
        (text, [tuple(x) for x in labels])
        for text, labels in page.eval_on_selector_all(
            ".result",
            """rows =>
        rows.map(r => [r.querySelector("img") ? r.querySelector("img").alt : r.querySelector(".input").textContent,
                       [...r.querySelectorAll(".label")].map(l => [l.querySelector(".name").textContent,
                                                                   l.querySelector(".probability").textContent])])""",
        )
    ]


def percent(p: float) -> str:
    """A probability as the page shows it (after the API's rounding to 6 places)."""
    return f"{100 * round(p, 6):.1f}%"


def test_page_classifies_texts(classifier_dirs, browser):
    lines = ["a dog", "un perro corrió en el parque", " ".join(["the cat sat on the mat"] * 4)]
    cut: list[int] = []  # 1-based numbers of the lines longer than the model takes
    want = Pipeline.load(classifier_dirs[0]).classify(lines, top_k=0, on_truncate=cut.extend)
    with Server(classifier_dirs[0]) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#classify:enabled")
        assert page.is_hidden("#go") and page.is_hidden("#drop") and page.is_hidden("#output")
        page.fill("#lines", "\n".join([lines[0], "", *lines[1:]]) + "\n")  # blank lines are skipped
        page.fill("#top-k", "0")
        page.click("#classify")
        page.wait_for_selector(".result >> nth=2")
        assert 1 not in cut and 3 in cut
        assert shown_results(page) == [
            (
                line + (" (cut to the model's length)" if i in cut else ""),
                [(label, percent(p)) for label, p in labels],
            )
            for i, (line, labels) in enumerate(zip(lines, want, strict=True), start=1)
        ]
        widths = page.eval_on_selector_all(
            ".result >> nth=0 >> .bar div", "bars => bars.map(b => b.style.width)"
        )
        assert widths == [percent(p) for _, p in want[0]]
        page.fill("#top-k", "1")
        page.click("#classify")
        page.wait_for_function("document.querySelectorAll('.label').length === 3")
        assert [labels for _, labels in shown_results(page)] == [
            [(r[0][0], percent(r[0][1]))] for r in want
        ]


def test_page_classifies_dropped_and_chosen_images(classifier_dirs, browser):
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    import base64
    import io

    def png(pixels) -> bytes:
        buffer = io.BytesIO()
        image.fromarray(pixels).save(buffer, format="PNG")
        return buffer.getvalue()

    pictures = [
        np.zeros((8, 8), np.uint8),
        np.full((8, 8), 255, np.uint8),
        np.arange(64, dtype=np.uint8).reshape(8, 8) * 4,
    ]
    names = ["dark.png", "light.png", "ramp.png"]
    want = Pipeline.load(classifier_dirs[1]).classify_images(
        torch.from_numpy(np.stack(pictures))[:, None], top_k=2
    )
    expected = [
        (name, [(label, percent(p)) for label, p in labels])
        for name, labels in zip(names, want, strict=True)
    ]
    with Server(classifier_dirs[1]) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#classify:enabled")
        assert page.is_hidden("#lines") and page.is_visible("#drop")
        page.fill("#top-k", "2")
        page.set_input_files(
            "#files",
            [
                {"name": n, "mimeType": "image/png", "buffer": png(p)}
                for n, p in zip(names, pictures, strict=True)
            ],
        )
        page.wait_for_selector(".result >> nth=2")
        assert shown_results(page) == expected
        thumbnails = page.eval_on_selector_all(".result img", "imgs => imgs.map(i => i.src)")
        assert thumbnails == [
            "data:image/png;base64," + base64.b64encode(png(p)).decode() for p in pictures
        ]
        # dropped on the page: one of the right size and one of the wrong size -> the server's
        # message, with the file's name
        wrong = png(np.zeros((9, 8), np.uint8))
        drop = """(files) => {
            const dt = new DataTransfer();
            for (const [name, b64] of files) {
                dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name, {type: "image/png"}));
            }
            document.body.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
        }"""
        b64 = [base64.b64encode(png(p)).decode() for p in pictures] + [
            base64.b64encode(wrong).decode()
        ]
        page.evaluate(drop, [[names[2], b64[2]], ["tall.png", b64[3]]])
        page.wait_for_function("document.querySelector('#error').textContent !== ''")
        refused = httpx.post(server.url + "/v1/classify", json={"images": b64[2:]}, timeout=60)
        message = refused.json()["error"]["message"]
        assert message.startswith("images[1] is 8 x 9 pixels")
        assert page.inner_text("#error") == message.replace("images[1]", "images[1] (tall.png)")
        assert shown_results(page) == expected  # the last results stay
        page.evaluate(drop, [list(x) for x in zip(names[1:], b64[1:3], strict=True)])
        page.wait_for_function("document.querySelectorAll('.result').length === 2")
        assert shown_results(page) == expected[1:] and page.inner_text("#error") == ""


def test_page_detects_objects_and_draws_their_boxes(browser, tmp_path):
    """A detector's page: the detect view; a chosen image drawn (scaled up) with the API's boxes, each
    listed, its edge in its class's colour; the threshold sent with the request."""
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    import base64
    import io

    from tests.viz.detector import LABELS, tiny_detector
    from transformer.viz.boxes import PALETTE

    buffer = io.BytesIO()
    image.fromarray(np.random.default_rng(3).integers(0, 256, (40, 60), dtype=np.uint8)).save(
        buffer, format="PNG"
    )
    data = base64.b64encode(buffer.getvalue()).decode()
    with Server(tiny_detector(tmp_path / "det", bias={1: 2.0})) as server:
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#detect-view", state="visible")
        assert page.is_hidden("#plain-view") and page.is_hidden("#classify-view")
        page.fill("#threshold", "0.3")
        page.set_input_files(
            "#detect-file", {"name": "x.png", "mimeType": "image/png", "buffer": buffer.getvalue()}
        )
        page.wait_for_function(
            "document.querySelector('#detect-caption').textContent.startsWith('x.png')"
        )
        want = httpx.post(
            server.url + "/v1/detect", json={"images": [data], "threshold": 0.3}, timeout=60
        ).json()["detections"][0]
        shown = page.eval_on_selector_all(
            "#objects .object",
            "rows => rows.map(r => [r.dataset.label, Number(r.dataset.score), JSON.parse(r.dataset.box)])",
        )
        assert len(want) > 0 and shown == [[o["label"], o["score"], o["box"]] for o in want]
        canvas = "document.querySelector('#detect-canvas')"
        assert page.evaluate(f"[{canvas}.width, {canvas}.height]") == [420, 280]  # 7 x 60 by 7 x 40
        x0, y0, x1, y1 = (7 * v for v in want[0]["box"])  # the most likely, drawn on top
        pixel = page.evaluate(
            f"([x, y]) => Array.from({canvas}.getContext('2d').getImageData(x, y, 1, 1).data)",
            [int(x0) + 1, int((y0 + y1) / 2)],
        )
        assert pixel == [*PALETTE[LABELS.index(want[0]["label"])], 255]
        page.fill("#threshold", "1")
        page.dispatch_event("#threshold", "change")
        page.wait_for_function(
            "document.querySelector('#detect-caption').textContent.includes('no object')"
        )
        assert page.eval_on_selector_all("#objects .object", "rows => rows.length") == 0


def test_page_chats_with_a_chat_model(model_dirs, browser):
    with Server(model_dirs["chat"]) as server:
        model = httpx.get(server.url + "/v1/models", timeout=60).json()["data"][0]["id"]
        page = browser.new_page()
        sent = []  # the bodies of the page's /v1/chat/completions requests
        page.on(
            "request",
            lambda r: (
                sent.append(r.post_data_json) if r.url.endswith("/v1/chat/completions") else None
            ),
        )
        page.goto(server.url + "/")
        page.wait_for_selector("#send:enabled")
        assert (
            page.is_visible("#chat-view")
            and page.is_hidden("#plain-view")
            and page.is_visible("#tabs")
        )
        assert page.input_value("#max-tokens") == "10"
        page.fill("#system", "be brief")
        page.fill("#temperature", "0")
        answers = []
        for i, message in enumerate(["the cat", "a dog ran"]):
            page.fill("#message", message)
            page.press("#message", "Enter")  # Enter sends
            page.wait_for_selector(f".turn.assistant[data-finish] >> nth={i}")
            answers.append(page.text_content(f".turn.assistant >> nth={i} >> .text"))
            api = httpx.post(
                server.url + "/v1/chat/completions", json={**sent[i], "stream": False}, timeout=60
            ).json()
            assert answers[i] == api["choices"][0]["message"]["content"] and answers[i]
        system, first, second = (
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "the cat"},
            {"role": "user", "content": "a dog ran"},
        )
        assert sent[0] == {
            "model": model,
            "messages": [system, first],
            "stream": True,
            "max_tokens": 10,
            "temperature": 0,
        }
        assert sent[1]["messages"] == [
            system,
            first,
            {"role": "assistant", "content": answers[0]},
            second,
        ]
        assert (
            page.eval_on_selector_all(
                ".turn .caption:first-child", "c => c.map(x => x.textContent)"
            )
            == ["you", "assistant"] * 2
        )
        # Stop: a stream that sends one piece and then waits for ever (a real one ends too soon to catch) is
        # aborted; the piece stays as the answer, marked, and the next request carries it
        page.evaluate("""() => {
            const real = window.fetch;
            window.fetch = (path, init) => {
                if (path !== "/v1/chat/completions") return real(path, init);
                const piece = 'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"half"},"finish_reason":null}]}\\n\\n';
                const body = new ReadableStream({start(c) {
                    c.enqueue(new TextEncoder().encode(piece));
                    init.signal.addEventListener("abort", () => c.error(new DOMException("aborted", "AbortError")));
                }});
                window.fetch = real;
                return Promise.resolve(new Response(body, {status: 200, headers: {"Content-Type": "text/event-stream"}}));
            };
        }""")
        page.fill("#message", "the park")
        page.click("#send")
        page.wait_for_function(
            "document.querySelectorAll('.turn.assistant .text')[2]?.textContent === 'half'"
        )
        assert page.is_enabled("#stop") and page.is_disabled("#send")
        page.click("#stop")
        page.wait_for_selector('.turn.assistant[data-finish="stopped"]')
        assert page.text_content(".turn.assistant >> nth=2 >> .text") == "half" and page.is_enabled(
            "#send"
        )
        page.fill("#message", "the sun")
        page.click("#send")
        page.wait_for_selector(".turn.assistant[data-finish] >> nth=3")
        assert sent[-1]["messages"][-2:] == [
            {"role": "assistant", "content": "half"},
            {"role": "user", "content": "the sun"},
        ]
        page.click("#tab-plain")  # the plain view stays for a chat model
        assert page.is_visible("#go") and page.is_hidden("#chat-view")
