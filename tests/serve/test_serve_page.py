"""The page at `/` in a real browser: Debian's chromium driven by playwright.

It types a sentence, presses the button, checks that the page shows the API's translation (or, for
a language model, the streamed text), hovers output tokens and checks that the source highlighting
follows the weights the API returns, for the mean of the heads and for one head. A screenshot is
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
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("Debian's chromium is not installed (apt-get install -y chromium): the page test needs a browser",
                allow_module_level=True)

import transformer  # noqa: E402
from transformer.config import DecodeConfig, cpu_tiny  # noqa: E402
from transformer.data.tokenizer import train_bpe  # noqa: E402
from transformer.serve import ServeConfig, create_app  # noqa: E402

TEXT = ["the cat sat on the mat", "a dog ran in the park", "el gato se sentó", "un perro corrió en el parque"] * 20


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("page")
    tokenizer = train_bpe(TEXT, vocab_size=300)
    out = {}
    for arch in ("encoder-decoder", "decoder"):
        torch.manual_seed(1)
        model = transformer.build_model(cpu_tiny(vocab_size=tokenizer.vocab_size, arch=arch, max_positions=48))
        out[arch] = transformer.save_model(model, tmp / arch, tokenizer=tokenizer,
                                           decode=DecodeConfig(beam_size=1, max_len_b=10, max_new_tokens=10))
    if os.environ.get("SERVE_MODEL"):
        out["encoder-decoder"] = os.environ["SERVE_MODEL"]
    return out


class Server:
    """uvicorn in a thread on a free loopback port."""

    def __init__(self, model_dir):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = uvicorn.Config(create_app(str(model_dir), ServeConfig()), host="127.0.0.1", port=self.port,
                                log_level="warning")
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
    return [float(w) for w in page.eval_on_selector_all("#columns .tok", "spans => spans.map(s => s.dataset.weight)")]


def alphas(page) -> list[float]:
    """The opacity of each source token's computed background colour (rgba(r, g, b, a); rgb(...) is 1)."""
    styles = page.eval_on_selector_all("#columns .tok", "spans => spans.map(s => getComputedStyle(s).backgroundColor)")
    return [float(s.rsplit(",", 1)[1].strip(" )")) if s.startswith("rgba") else 1.0 for s in styles]


def test_page_translation_and_attention_highlighting(model_dirs, browser, tmp_path):
    sentence = "Y dijo Dios: Sea la luz." if os.environ.get("SERVE_MODEL") else "the cat sat on the mat"
    with Server(model_dirs["encoder-decoder"]) as server:
        api = httpx.post(server.url + "/v1/translate", json={"text": sentence}, timeout=60).json()
        weights = httpx.post(server.url + "/v1/attention", json={"text": sentence}, timeout=60).json()
        page = browser.new_page(viewport={"width": 1000, "height": 640})
        page.goto(server.url + "/")
        page.wait_for_selector("#go:enabled")
        assert page.inner_text("#go") == "Translate"
        page.fill("#text", sentence)
        page.click("#go")
        page.wait_for_selector("#attention-box:not([hidden])")
        assert page.inner_text("#output").strip() == api["translations"][0]
        rows = page.eval_on_selector_all("#rows .tok", "spans => spans.map(s => s.textContent)")
        columns = page.eval_on_selector_all("#columns .tok", "spans => spans.map(s => s.textContent)")
        assert rows == weights["rows"] and columns == weights["columns"] and len(rows) >= 2
        w = torch.tensor(weights["weights"])  # (H, T, S), the last layer
        for row in (len(rows) - 1, 0):  # hover the last output token, then the first
            page.hover(f'#rows .tok[data-index="{row}"]')
            mean = w[:, row].mean(0)
            assert torch.allclose(torch.tensor(shown_weights(page)), mean, atol=1e-5)
            assert torch.allclose(torch.tensor(alphas(page)), mean / mean.max(), atol=4e-3)  # shade ~ weight (alpha kept in 1/255 steps)
        page.select_option("#head", "0")
        assert torch.allclose(torch.tensor(shown_weights(page)), w[0, 0], atol=1e-5)
        page.select_option("#head", "mean")
        page.hover('#rows .tok[data-index="1"]')
        page.screenshot(path=os.environ.get("SERVE_SCREENSHOT") or str(tmp_path / "serve.png"), full_page=True)
        page.select_option("#layer", "0")  # another layer: fetched again
        page.wait_for_function("document.querySelector('#layer').value === '0'")
        first = httpx.post(server.url + "/v1/attention", json={"text": sentence, "layer": 0}, timeout=60).json()
        page.hover('#rows .tok[data-index="0"]')
        page.wait_for_function(
            f"Math.abs(Number(document.querySelector('#columns .tok').dataset.weight) - "
            f"{torch.tensor(first['weights'])[:, 0, 0].mean().item()}) < 1e-5")


def test_page_streams_a_language_models_text(model_dirs, browser):
    with Server(model_dirs["decoder"]) as server:
        api = httpx.post(server.url + "/v1/generate", json={"prompt": "the cat", "temperature": 0}, timeout=60).json()
        page = browser.new_page()
        page.goto(server.url + "/")
        page.wait_for_selector("#go:enabled")
        assert page.inner_text("#go") == "Generate"
        page.fill("#text", "the cat")
        page.click("#go")
        page.wait_for_selector("#attention-box:not([hidden])")
        assert page.inner_text("#output") == api["text"]
        assert page.eval_on_selector_all("#kind option", "o => o.map(x => x.value)") == ["self"]
