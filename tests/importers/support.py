"""What the importer tests share: the fixtures, fixed options, and the report as tuples."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cronwheel.importers.options import Options
from cronwheel.importers.report import ImportResult

FIXTURES = Path(__file__).parent / "fixtures"
OPTIONS = Options(team="ops", now=datetime(2026, 12, 7, 8, tzinfo=UTC))


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def notes(result: ImportResult) -> list[tuple[str, str | None, str]]:
    """The report as (source, job, kind), in order."""
    return [(note.source, note.job, note.kind.value) for note in result.notes]


def note(result: ImportResult, job: str | None, kind: str) -> str:
    """The message of the one note of ``job`` and ``kind``."""
    found = [n.message for n in result.notes if n.job == job and n.kind.value == kind]
    assert len(found) == 1, found
    return found[0]


def job(result: ImportResult, name: str) -> dict[str, Any]:
    return next(item for item in result.jobs if item["name"] == name)
