"""The API fixtures of ``tests/api`` (a real SqlStore on a tmp SQLite file, httpx over ASGI)."""

from __future__ import annotations

from api.conftest import client, env

__all__ = ["client", "env"]
