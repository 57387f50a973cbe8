"""The interactive API docs at ``/docs``: Swagger UI, served from the package itself.

FastAPI's default page loads Swagger UI from a CDN, so on a machine without internet ``/docs``
is blank. The assets are vendored in ``static/swagger-ui`` (version, origin and checksums in its
``VENDOR.md``; refreshed by ``scripts/vendor-swagger-ui``) and served under ``/docs/assets``:
the page references nothing but its own origin. Swagger UI's online validator badge is off (it
would send the document's URL to validator.swagger.io). There is no ReDoc page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(__file__).parents[1] / "static" / "swagger-ui"
ASSETS_PATH = "/docs/assets"


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets on ``app`` (built with ``docs_url=None``)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS), name="docs-assets")

    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")  # behind a proxy that adds a prefix
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
