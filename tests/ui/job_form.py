"""Filling the dashboard's job form the way a user does: a text per plain field, a choice per closed
set, a row per list item and per key of a map (labels, headers), a secret chosen by name from the
team's secrets. No JSON is typed: each value goes into the control the form drew for its field."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Locator, Page


def field(page: Page, path: str) -> Locator:
    """The field of the dotted ``path`` (``target.url``)."""
    return page.locator(f'.field[data-path="{path}"]')


def control_id(path: str) -> str:
    return "#field-" + path.replace(".", "-")


async def fill_job(page: Page, spec: dict[str, Any]) -> None:
    """Type ``spec`` into the form: the target's kind first, then each of its fields."""
    for key, value in spec.items():
        if key == "target":
            await page.select_option(control_id("target"), value["type"])
            for name, part in value.items():
                if name != "type":
                    await fill(page, f"target.{name}", part)
        elif key in ("retry", "misfire", "retention"):
            if await page.locator(f"{control_id(key)}[type=checkbox]").count():
                await page.set_checked(control_id(key), True)  # a policy that may be null: set it
            for name, part in value.items():
                await fill(page, f"{key}.{name}", part)
        else:
            await fill(page, key, value)


async def fill(page: Page, path: str, value: Any) -> None:
    """Put ``value`` into the field of ``path``, through the control drawn for it."""
    here = field(page, path)
    if isinstance(value, dict) and set(value) == {"secret"}:
        await _secret(here, value["secret"])
    elif isinstance(value, dict):
        for key, part in value.items():
            row = await _new_row(here)
            await row.locator(".pair-key").fill(key)
            await _value(row, part)
    elif isinstance(value, list):
        for part in value:
            row = await _new_row(here)
            await row.locator("input").fill(str(part))
    elif isinstance(value, bool):
        await here.locator(control_id(path)).set_checked(value)
    else:
        if await here.locator("select.mode").count():
            await here.locator("select.mode").select_option("text")
        control = here.locator(control_id(path))
        if await control.evaluate("node => node.tagName") == "SELECT":
            await control.select_option(label=str(value))
        else:
            await control.fill(str(value))


async def _value(row: Locator, value: str | dict[str, str]) -> None:
    """A map's value: plain text, or a secret by name."""
    if isinstance(value, dict):
        await _secret(row, value["secret"])
        return
    if await row.locator("select.mode").count():
        await row.locator("select.mode").select_option("text")
    await row.locator("input.pair-value").fill(value)


async def _new_row(here: Locator) -> Locator:
    rows = here.locator(".rows > .row")
    count = await rows.count()
    await here.locator("button.add").click()
    return rows.nth(count)


async def _secret(where: Locator, name: str) -> None:
    mode = where.locator("select.mode")
    if await mode.count():
        await mode.select_option("secret")
    choice = where.locator("select.secret[data-loaded=true]")
    await choice.select_option(name)
