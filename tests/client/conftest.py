"""The client against a real uvicorn server (tests/cli's ``server``: a SqlStore on a tmp SQLite
file, an admin token of every team) and, for the asyncio client, the app in-process (tests/api's
``env``)."""

from api.conftest import env
from cli.conftest import server

__all__ = ["env", "server"]
