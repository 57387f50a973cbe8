"""The OpenAPI document says what the server enforces: each test names a place where the document
could be looser than the server, or where the server could answer something the document does not
name (the kinds of mismatch Schemathesis finds), and checks both sides.

Some values are checked by code, not by a schema (the schedule parser, the zone database,
cronwheel.targets.checks); the document states a pattern for them (``Documented`` in
cronwheel.api.schemas.jobs) that must never refuse what that code accepts, which the property tests
at the end prove.
"""

from __future__ import annotations

import re
import zoneinfo
from typing import Any

import httpx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.schemas.base import CRON_PATTERN, URL_PATTERN, ZONE_PATTERN
from cronwheel.errors import InvalidInputError
from cronwheel.schedule import ScheduleError, parse_schedule
from cronwheel.targets.checks import parse_url

from .conftest import job_body

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    services = ApiServices(store=None, job_service=None, clock=None)  # type: ignore[arg-type]
    return create_app(services).openapi()  # the document needs no service behind it


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def _parameter(document: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    found = [p for p in document["paths"][path][method]["parameters"] if p["name"].lower() == name.lower()]
    assert len(found) == 1, name
    schema: dict[str, Any] = found[0]["schema"]
    value: dict[str, Any] = schema.get("anyOf", [schema])[0]  # the value's schema, not its null
    return value


async def _create(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job_body(**changes))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


# -- If-Match ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ['"1"', 'W/"1"', "1", "*"])
async def test_if_match_values_the_document_allows_are_accepted(
    client: httpx.AsyncClient, document: dict[str, Any], value: str
) -> None:
    job = await _create(client)
    pattern = _parameter(document, "/v1/jobs/{job_id}", "delete", "If-Match")["pattern"]
    assert re.search(pattern, value)
    assert (await client.delete(f"/v1/jobs/{job['id']}", headers={"If-Match": value})).status_code == 204


@pytest.mark.parametrize("value", ["null", "yesterday", '"1', "W/1", "\xb2", "9" * 5000, '"1", "2"'])
async def test_if_match_values_the_document_refuses_are_400_not_500(
    client: httpx.AsyncClient, document: dict[str, Any], value: str
) -> None:
    """The document's pattern refuses what the server refuses, and the server answers 400, never
    500: ``²`` is a digit to ``str.isdigit``, not to ``int``; 5,000 digits are past ``int``'s limit."""
    job = await _create(client)
    pattern = _parameter(document, "/v1/jobs/{job_id}", "delete", "If-Match")["pattern"]
    assert not re.search(pattern, value)
    response = await client.delete(f"/v1/jobs/{job['id']}", headers={b"If-Match": value.encode("latin-1")})
    assert response.status_code == 400
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["errors"][0]["code"] == "bad_etag"


# -- error responses -----------------------------------------------------------------------------


def test_every_error_response_is_documented_as_a_problem(document: dict[str, Any]) -> None:
    """FastAPI's own 422 (``HTTPValidationError``, application/json) is a shape the server never
    answers: path-parameter refusals came as problem+json where it documented JSON."""
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for path, method, operation in _operations(document):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert list(response["content"]) == [PROBLEM], (path, method, status)
                assert response["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}
        if path.startswith("/v1/"):
            assert "503" in operation["responses"], (path, method)


async def test_a_refused_path_parameter_is_a_documented_problem(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    path = "/v1/teams/{team}/jobs/{name}"
    pattern = _parameter(document, path, "get", "team")["pattern"]
    for team in ("x" * 101, "a b"):
        assert not re.search(pattern, team)
        response = await client.get(f"/v1/teams/{team}/jobs/nightly")
        assert response.status_code == 422
        assert response.headers["content-type"] == PROBLEM
        assert "422" in document["paths"][path]["get"]["responses"]


def test_no_parameter_is_documented_as_null(document: dict[str, Any]) -> None:
    """``X | None = None`` must not be documented ``anyOf: [X, null]``: a client that sends
    ``If-Match: null`` (or ``paused=null``) would do as documented and get 400."""
    for path, method, operation in _operations(document):
        for parameter in operation.get("parameters", []):
            assert "null" not in str(parameter["schema"]), (path, method, parameter["name"])


async def test_integral_numbers_are_integers(client: httpx.AsyncClient) -> None:
    """To JSON Schema 3.0 is the integer 3: the server refused it (strict ``int``)."""
    body = job_body(retry={"max_attempts": 3.0}, misfire={"max_catch_up": 5.0})
    body["target"]["expected_status"] = [200.0, 204]
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job = response.json()
    assert (job["retry"]["max_attempts"], job["misfire"]["max_catch_up"]) == (3, 5)
    assert job["target"]["expected_status"] == [200, 204]
    preview = await client.post("/v1/schedules/preview", json={"expression": "0 3 * * *", "count": 2.0})
    assert len(preview.json()["fires"]) == 2
    bounded = job_body(name="bounded")
    bounded["target"]["expected_status"] = [99.0]
    assert (await client.post("/v1/jobs", json=bounded)).status_code == 422
    for wrong in (3.5, True, "3"):
        refused = await client.post("/v1/jobs", json=job_body(name="other", retry={"max_attempts": wrong}))
        assert refused.status_code == 422, wrong


def test_bounds_are_json_schema_keywords(document: dict[str, Any]) -> None:
    """pydantic writes ``ge``/``le`` (not JSON Schema) for a bound it cannot place, and a
    generator then ignores it."""

    def keys(node: Any) -> set[str]:
        if isinstance(node, dict):
            return set(node) | {key for value in node.values() for key in keys(value)}
        if isinstance(node, list):
            return {key for value in node for key in keys(value)}
        return set()

    assert not keys(document["components"]) & {"ge", "le", "gt", "lt"}


async def test_a_refused_preview_names_its_code(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/schedules/preview", json={"expression": "@0"})
    assert response.status_code == 422
    assert [entry["code"] for entry in response.json()["errors"]] == ["invalid_schedule"]


# -- Allow and OPTIONS ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "documented"),
    [
        ("/v1/jobs", "/v1/jobs"),
        ("/v1/jobs/abc", "/v1/jobs/{job_id}"),
        ("/v1/teams/t/jobs/n", "/v1/teams/{team}/jobs/{name}"),
    ],
)
async def test_options_and_405_name_every_method_of_the_path(
    client: httpx.AsyncClient, document: dict[str, Any], path: str, documented: str
) -> None:
    """Starlette's 405 named the methods of the first route that matched the path only
    (``OPTIONS /v1/jobs``: ``Allow: POST``, and GET missing)."""
    methods = {method.upper() for method in document["paths"][documented]} | {"OPTIONS"}
    options = await client.options(path)
    assert options.status_code == 204
    assert set(options.headers["allow"].split(", ")) == methods
    assert options.content == b""
    refused = await client.request("TRACE", path)
    assert refused.status_code == 405
    assert refused.headers["content-type"] == PROBLEM
    assert set(refused.headers["allow"].split(", ")) == methods


async def test_options_of_no_route_is_404(client: httpx.AsyncClient) -> None:
    assert (await client.options("/v1/nothing")).status_code == 404


# -- the document's shapes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "field"),
    [("JobCreate", "labels"), ("HttpTargetSpec-Input", "headers"), ("CommandTargetSpec-Input", "env")],
)
def test_maps_allow_no_key_outside_their_key_pattern(
    document: dict[str, Any], schema: str, field: str
) -> None:
    """``patternProperties`` alone lets any other key through, which the server refused."""
    found = document["components"]["schemas"][schema]["properties"][field]
    assert found["patternProperties"]
    assert found["additionalProperties"] is False


async def test_a_key_outside_the_pattern_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(labels={"not a key": "x"}))
    assert response.status_code == 422


def test_the_program_must_not_be_empty_in_the_document_too(document: dict[str, Any]) -> None:
    argv = document["components"]["schemas"]["CommandTargetSpec-Input"]["properties"]["argv"]
    assert argv["prefixItems"][0]["minLength"] == 1


# -- cursors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs"])
async def test_cursors_have_a_documented_form(
    client: httpx.AsyncClient, document: dict[str, Any], path: str
) -> None:
    """A cursor is documented as base64url, not any string, and one of that form that the server
    did not make is refused with its own code (no schema can tell which ones it made)."""
    pattern = _parameter(document, path, "get", "cursor")["pattern"]
    for junk in ("!!", "a b", "0=0"):
        assert not re.search(pattern, junk)
        response = await client.get(path, params={"cursor": junk})
        assert response.status_code == 422
    assert re.search(pattern, "0000")
    unknown = await client.get(path, params={"cursor": "0000"})
    assert unknown.status_code == 422
    assert [entry["code"] for entry in unknown.json()["errors"]] == ["invalid_cursor"]


async def test_label_filters_have_a_documented_form(
    client: httpx.AsyncClient, document: dict[str, Any]
) -> None:
    pattern = _parameter(document, "/v1/jobs", "get", "label")["items"]["pattern"]
    assert not re.search(pattern, "tier")
    assert (await client.get("/v1/jobs", params={"label": "tier"})).status_code == 422
    assert re.search(pattern, "tier=gold")
    assert (await client.get("/v1/jobs", params={"label": "tier=gold"})).status_code == 200


# -- instants and fields judged against each other -----------------------------------------------


@pytest.mark.parametrize("instant", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"])
async def test_instants_outside_the_calendar_are_422_not_500(client: httpx.AsyncClient, instant: str) -> None:
    """Valid RFC 3339 text whose UTC time is before year 1 or after 9999 is a 422, not an
    OverflowError's 500."""
    created = await client.post("/v1/jobs", json=job_body(end_at=instant))
    assert created.status_code == 422
    assert created.json()["errors"][0]["field"] == "end_at"
    preview = await client.post("/v1/schedules/preview", json={"expression": "0 3 * * *", "after": instant})
    assert preview.status_code == 422
    assert preview.json()["errors"][0]["field"] == "after"


async def test_fields_judged_against_each_other_have_their_own_code(client: httpx.AsyncClient) -> None:
    """No JSON Schema can say that end_at is after start_at: the refusal says which kind it is."""
    window = job_body(start_at="2030-01-02T00:00:00Z", end_at="2030-01-01T00:00:00Z")
    retry = job_body(retry={"initial_delay_s": 10, "max_delay_s": 5})
    for body, field in ((window, "end_at"), (retry, "retry.max_delay_s")):
        response = await client.post("/v1/jobs", json=body)
        assert response.status_code == 422
        assert [(entry["field"], entry["code"]) for entry in response.json()["errors"]] == [
            (field, "field_order")
        ]


# -- patterns stated for what code checks ----------------------------------------------------------

_CRON_TEXT = st.text(alphabet="0123456789*?,/#()-LWHhMONJANlw \t\x1c\xa0\u3000@dailyXY", max_size=40)


@settings(max_examples=2000, deadline=None)
@given(_CRON_TEXT)
@example("* * * * *")
@example("\x1c0\x1c3 * * *\x1c")
@example("\u30000 3 * * *")
@example("@daily")
@example("@DAILY")
@example("H(0-5)/2 H * * MON#1")
def test_the_schedule_pattern_never_refuses_what_the_parser_accepts(text: str) -> None:
    try:
        parse_schedule(text)
    except ScheduleError:
        return
    assert re.search(CRON_PATTERN, text), text


def test_the_schedule_pattern_refuses_what_no_schedule_is() -> None:
    for text in ("0", "* * * *", "* * * * * * *", "@", "* * * * * ;"):
        assert not re.search(CRON_PATTERN, text), text


def test_every_zone_the_server_knows_matches_the_zone_pattern() -> None:
    for zone in zoneinfo.available_timezones():
        assert re.search(ZONE_PATTERN, zone), zone
    assert not re.search(ZONE_PATTERN, "0 0")


@settings(max_examples=2000, deadline=None)
@given(st.from_regex(r"\A *(?:[Hh][Tt][Tt][Pp][Ss]?|ftp|)(?::|://|:/)?.{0,20}\Z"))
@example(" HTTPS://example.com/a")
@example("http://[::1]:80/")
def test_the_url_pattern_never_refuses_what_the_url_check_accepts(text: str) -> None:
    try:
        parse_url(text)
    except InvalidInputError:
        return
    assert re.search(URL_PATTERN, text), text
