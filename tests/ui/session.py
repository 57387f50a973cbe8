"""Logging in to the dashboard, one way for every browser test: the token typed into the login
page, and a page of the server's admin (a context of its own, page errors collected); and the
pages' screenshots."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser, BrowserContext, Page, expect
from server_harness import ServerProcess

WAIT_MS = 15_000  # the longest a test waits for a state of the page
# where each page's screenshot goes (docs/images/ui-*.png are copies)
SCREENSHOTS = Path(__file__).resolve().parents[2] / "reports" / "ui-screenshots"


async def screenshot(page: Page, name: str) -> None:
    """The whole page, as ``reports/ui-screenshots/ui-<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"ui-{name}.png"), full_page=True)


async def log_in(page: Page, url: str, token: str) -> None:
    await page.goto(f"{url}/ui")
    await page.fill("#token", token)
    await page.click("#login-button")


async def admin_page(browser: Browser, server: ServerProcess) -> tuple[BrowserContext, Page, list[str]]:
    """A page logged in with the server's admin token, and the errors it raises as they come."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await log_in(page, server.url, server.token_file.read_text().strip())
    await expect(page.locator("#whoami")).to_contain_text("every team")
    return context, page, errors
