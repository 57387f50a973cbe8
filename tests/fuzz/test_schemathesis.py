"""The CI fuzz run: Schemathesis against the OpenAPI document of the API as it serves it, over
each store (SQLite and PostgreSQL), every check, a fixed seed, a few examples per operation,
bounded in time. No 5xx, no response outside its schema, no schema-valid request refused for a
reason the document could have stated. ``scripts/fuzz`` runs the same, longer
(docs/security.md, "Fuzzing")."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from suite_stores import BACKENDS, fresh_postgres_database

from .run import fuzz
from .served import serve_api

pytestmark = pytest.mark.slow  # about 50 s a store

EXAMPLES = int(os.environ.get("CRONWHEEL_FUZZ_EXAMPLES", "5"))  # per operation
TIMEOUT_S = 300.0  # a hung run fails; a normal one takes well under a minute on 2 cores


@contextlib.asynccontextmanager
async def _database(backend: str, tmp_path: Path) -> AsyncIterator[Path | str]:
    if backend == "sqlite":
        yield tmp_path / "fuzz.db"
        return
    async with fresh_postgres_database(migrated=True) as url:
        yield url


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_api_keeps_to_its_openapi_document(tmp_path: Path, backend: str) -> None:
    async with _database(backend, tmp_path) as database:
        with serve_api(database) as api:
            run = (api.url, api.token)
            outcome = await asyncio.to_thread(fuzz, *run, examples=EXAMPLES, timeout_s=TIMEOUT_S)
    print(f"schemathesis: {outcome.seconds:.1f} s, {EXAMPLES} examples per operation")  # seen with -s
    assert outcome.returncode == 0, outcome.summary
    assert " generated" in outcome.output  # it ran: "N generated, ..." closes its report
