"""The client covers the API: its route table is the app's (a new route without a client method
fails here), both clients have a method per route with the call's signature, and the response
types have the keys of the server's response schemas."""

from __future__ import annotations

import inspect
import typing

import pytest
from pydantic import BaseModel

from api.test_authorization_matrix import _bare_app, app_routes
from cronwheel.api.routes.audit import AuditEntryOut
from cronwheel.api.routes.output import RunOutputOut
from cronwheel.api.routes.secrets import ReencryptOut, SecretOut
from cronwheel.api.routes.system import Health, Ready
from cronwheel.api.routes.tokens import TokenCreated, TokenOut
from cronwheel.api.schemas.jobs import JobOut, JobValidation, LastRunOut, RecentRunOut
from cronwheel.api.schemas.preview import PreviewOut
from cronwheel.api.schemas.runs import RunDetailOut, RunOut
from cronwheel.client import AsyncClient, Client, calls, types
from cronwheel.client.calls import ROUTES

# Routes of the app that are not the client's to call, and why.
NOT_FOR_THE_CLIENT = {
    ("GET", "/healthz"): "the probes' root alias of /v1/healthz",
    ("GET", "/readyz"): "the probes' root alias of /v1/readyz",
    ("GET", "/metrics"): "the scrapers' root alias of /v1/metrics",
    ("GET", "/docs"): "the Swagger UI page, for browsers",
    ("GET", "/docs/assets"): "the Swagger UI's files, for browsers",
    # the web dashboard (cronwheel.api.routes.ui): its page, files and cookie session are a browser's
    ("GET", "/ui"): "the dashboard's address, redirected to its page",
    ("GET", "/ui/"): "the dashboard's page, for browsers",
    ("GET", "/ui/assets"): "the dashboard's files, for browsers",
    ("GET", "/ui/session"): "the dashboard's session (a cookie), for browsers",
    ("POST", "/ui/session"): "the dashboard's login, for browsers",
    ("DELETE", "/ui/session"): "the dashboard's logout, for browsers",
    ("GET", "/ui/api"): "the dashboard's bridge to /v1 (a session cookie), for browsers",
    ("GET", "/v1/events"): "a stream of server-sent events, for the dashboard's pages (an EventSource)",
}


def _client_routes() -> set[tuple[str, str]]:
    return {(route.method, path) for route in ROUTES.values() for path in route.paths()}


def test_the_clients_routes_are_the_apps() -> None:
    app = app_routes(_bare_app())
    served = app - NOT_FOR_THE_CLIENT.keys()
    assert served - _client_routes() == set(), "routes of the app the client has no method for"
    assert _client_routes() - served == set(), "client routes the app no longer has"
    assert NOT_FOR_THE_CLIENT.keys() <= app, "exclusions of routes the app no longer has"


@pytest.mark.parametrize("kind", [Client, AsyncClient])
@pytest.mark.parametrize("name", sorted(ROUTES))
def test_each_route_is_a_method_with_the_calls_signature(kind: type, name: str) -> None:
    method = getattr(kind, name)
    assert inspect.signature(method) == inspect.signature(getattr(calls, name))
    assert method.__doc__ == getattr(calls, name).__doc__


@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_each_listing_has_an_iterator(kind: type) -> None:
    listings = {name for name in ROUTES if name.startswith("list_")}
    assert {f"iter_{name.removeprefix('list_')}" for name in listings} == {
        name for name in dir(kind) if name.startswith("iter_")
    }


@pytest.mark.parametrize(
    ("typed", "model"),
    [
        (types.Job, JobOut),
        (types.LastRun, LastRunOut),
        (types.RecentRun, RecentRunOut),
        (types.Run, RunOut),
        (types.RunDetail, RunDetailOut),
        (types.RunOutput, RunOutputOut),
        (types.Token, TokenOut),
        (types.AuditEntry, AuditEntryOut),
        (types.NewToken, TokenCreated),
        (types.Secret, SecretOut),
        (types.Reencryption, ReencryptOut),
        (types.Preview, PreviewOut),
        (types.JobValidation, JobValidation),
        (types.Health, Health),
        (types.Ready, Ready),
    ],
)
def test_each_response_type_has_the_keys_of_the_servers_schema(typed: type, model: type[BaseModel]) -> None:
    assert set(typing.get_type_hints(typed)) == set(model.model_fields)
