"""Fixtures of the browser tests: the real server and webhook sink of tests/integration, and headless
Chromium (Debian's ``chromium``, which ``scripts/test`` installs) driven by Playwright.

Without the browser the tests are skipped, unless ``CRONWHEEL_TEST_REQUIRE_BACKENDS`` is set (as
``scripts/test`` sets it): then a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))  # the server harness

from playwright.async_api import Browser, async_playwright, expect
from server_harness import server_factory, sink

from .session import WAIT_MS

__all__ = ["browser", "server_factory", "sink"]

CHROMIUM = os.environ.get("CRONWHEEL_CHROMIUM", "/usr/bin/chromium")

# An expected state of a page is waited for as long as an action is (Playwright's own default is
# 5 s: a form's first validation round trip took longer than that on a loaded machine).
expect.set_options(timeout=WAIT_MS)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if shutil.which(CHROMIUM) is None:
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium; scripts/test installs it)"
        if os.environ.get("CRONWHEEL_TEST_REQUIRE_BACKENDS"):
            pytest.fail(message)
        pytest.skip(message)
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            yield launched
        finally:
            await launched.close()
