"""/docs, the API's Swagger UI page, served with its own files: no CDN, so it works offline.

FastAPI's own /docs loads Swagger UI from a CDN (a blank page without the internet). Here the page
is FastAPI's, pointed at the files the fastapi-offline package ships (Swagger UI 5, which reads
FastAPI's OpenAPI 3.1; swagger-ui-bundle's 4.x does not), served under /docs/static/. Like /docs and
/openapi.json, they need no API key (app.py's OPEN_PATHS).
"""

from __future__ import annotations

from importlib.util import find_spec

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles

from .errors import ApiError

ASSETS = "/docs/static"
"""Where Swagger UI's files are served (fastapi-offline's static/ folder)."""


def install_docs(app: FastAPI) -> None:
    """Serve /docs and its files; without fastapi-offline, /docs says how to get it."""
    installed = find_spec("fastapi_offline") is not None
    if installed:
        app.mount(ASSETS, StaticFiles(packages=[("fastapi_offline", "static")]), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request):
        if not installed:
            raise ApiError(
                404,
                "not_found",
                "the API's page needs the fastapi-offline package: "
                "pip install 'transformer[serve]'",
            )
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - API",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from swagger.io
        )
