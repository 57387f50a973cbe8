"""Fixtures for the integration tests (the harness itself is in server_harness.py)."""

from server_harness import api, server, server_factory, sink

__all__ = ["api", "server", "server_factory", "sink"]
