"""/docs, the API's Swagger UI page, works offline: it names no other host, its files are served by
the server itself (no API key needed), and in Chromium with every other host blocked it shows the
API's operations."""

import re
import shutil

import pytest

pytest.importorskip("fastapi")
pytest.importorskip(
    "fastapi_offline", reason="the docs page's files: pip install 'transformer[serve]'"
)
from fastapi.testclient import TestClient  # noqa: E402

from transformer.serve import ServeConfig, create_app  # noqa: E402

TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


def referenced(html: str) -> list[str]:
    """Every URL the page loads or links: src=, href= and Swagger UI's `url:`."""
    return re.findall(r'(?:src|href)="([^"]*)"', html) + re.findall(r"url: '([^']*)'", html)


def test_docs_name_no_other_host_and_their_files_are_served_without_the_key():
    with TestClient(create_app(None, ServeConfig(api_key="k"))) as c:
        page = c.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        urls = referenced(page.text)
        assert len(urls) == 4 and all(
            url.startswith("/") and not url.startswith("//") for url in urls
        ), urls
        assert not re.search(r"https?://|//cdn", page.text), page.text
        for url in urls:
            r = c.get(url)  # no Authorization header: open, like /docs
            assert r.status_code == 200, url
            want = TYPES.get(url[url.rfind(".") :], "application/json")
            assert r.headers["content-type"].startswith(want), (url, r.headers["content-type"])
        assert "/v1/translate" in c.get("/openapi.json").json()["paths"]
        assert c.get("/docs/static/nothing.js").status_code == 404
        assert c.get("/v1/model").status_code == 401  # the key still guards the API
        redoc = c.get("/redoc", headers={"Authorization": "Bearer k"})
        assert redoc.status_code == 404  # its page would load a CDN's script


def test_docs_render_the_operations_in_chromium_with_every_other_host_blocked():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed: pip install playwright"
    )
    pytest.importorskip("uvicorn")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip(
            "Debian's chromium is not installed (apt-get install -y chromium): the page test needs a browser"
        )
    from tests.serve.test_serve import running

    with running(create_app(None, ServeConfig())) as port:
        own, blocked = f"http://127.0.0.1:{port}/", []
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page()

            def only_the_server(route):
                if route.request.url.startswith(own) or route.request.url.startswith("data:"):
                    route.continue_()
                else:
                    blocked.append(route.request.url)
                    route.abort()

            page.route("**/*", only_the_server)
            page.goto(own + "docs")
            page.wait_for_function(
                "document.body.innerText.includes('/v1/translate')", timeout=20_000
            )
            text = page.inner_text("body")
            browser.close()
        assert all(
            path in text for path in ("/v1/translate", "/v1/generate", "/v1/classify", "/health")
        ), text
        assert blocked == []  # it did not even try another host
