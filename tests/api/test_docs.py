"""/docs works without internet: Swagger UI's assets come from the package, same origin."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx

from .conftest import TYPES, Env

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")


def _references(html: str) -> list[str]:
    """Every URL the page loads: src and href attributes, and the OpenAPI document's url."""
    return re.findall(r'(?:src|href)="([^"]*)"', html) + re.findall(r"url: '([^']*)'", html)


async def test_docs_reference_only_same_origin_assets(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    references = _references(html)
    assert sorted(references) == sorted([*(f"/docs/assets/{asset}" for asset in ASSETS), "/openapi.json"])
    assert "http://" not in html
    assert "https://" not in html
    assert '"validatorUrl": null' in html  # no badge fetched from validator.swagger.io
    for reference in references:
        response = await client.get(reference)
        assert response.status_code == 200, reference
        if reference.endswith(".json"):
            assert response.headers["content-type"] == "application/json"
            continue
        suffix = Path(reference).suffix
        assert response.headers["content-type"].split(";")[0] in TYPES[suffix], reference
        assert (
            response.content
            == (ROOT / "src/cronwheel/api/static/swagger-ui" / Path(reference).name).read_bytes()
        )


async def test_docs_behind_a_prefix_keep_their_assets_under_it(env: Env) -> None:
    prefixed = httpx.ASGITransport(app=env.app, root_path="/cron")
    async with httpx.AsyncClient(transport=prefixed, base_url="http://cronwheel.test") as behind:
        html = (await behind.get("/docs")).text
    references = _references(html)
    assert len(references) == 4
    assert all(reference.startswith("/cron/") for reference in references)


async def test_no_redoc_page(client: httpx.AsyncClient) -> None:
    """ReDoc would load from a CDN too: it is not served."""
    assert (await client.get("/redoc")).status_code == 404


def test_vendored_assets_have_license_and_origin() -> None:
    folder = ROOT / "src/cronwheel/api/static/swagger-ui"
    assert (folder / "LICENSE").read_text().lstrip().startswith("Apache License")
    note = (folder / "VENDOR.md").read_text()
    assert re.search(r"swagger-ui-dist \d+\.\d+\.\d+", note)
    assert "https://registry.npmjs.org/swagger-ui-dist/-/swagger-ui-dist-" in note
    for asset in ASSETS:
        assert f"`{asset}`" in note


def test_the_wheel_carries_the_assets(tmp_path: Path) -> None:
    """The hatchling wheel includes the vendored files and the dashboard's (they are not Python modules)."""
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("cronwheel-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (*ASSETS, "LICENSE", "NOTICE", "VENDOR.md"):
        assert f"cronwheel/api/static/swagger-ui/{name}" in names
    dashboard = ROOT / "src/cronwheel/api/static/ui"  # the dashboard (cronwheel.api.routes.ui)
    files = [path.relative_to(dashboard).as_posix() for path in dashboard.rglob("*") if path.is_file()]
    assert {"index.html", "app.js", "api.js", "style.css", "pages/job.js"} <= set(files)
    for name in files:
        assert f"cronwheel/api/static/ui/{name}" in names
