"""The security review's first finding: a DNS-rebinding page could read the API (``Host:
rebind.attacker.example`` answered 200), and body-less cross-site "simple requests" paused and
triggered jobs (``Content-Type: text/plain``, ``Origin: https://evil.example`` answered 200 and
the trigger was queued). Both are refused before any route runs (cronwheel.api.guards.host), even for a
request that carries a valid token."""

from __future__ import annotations

import ipaddress

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwheel.api.callers.access import AccessPolicy
from cronwheel.api.guards.host import authority, host_allowed, hostname, refusal
from cronwheel.store import JobQuery

from .conftest import Env, job_body

PROBLEM_JSON_TYPE = "application/problem+json"

REBOUND = {"Host": "rebind.attacker.example:8080"}
SIMPLE_CROSS_SITE = {"Content-Type": "text/plain", "Origin": "https://evil.example"}


async def _job(client: httpx.AsyncClient) -> str:
    response = await client.post("/v1/jobs", json=job_body())
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def test_a_rebound_host_cannot_read_the_api_even_with_a_token(client: httpx.AsyncClient) -> None:
    job_id = await _job(client)
    for path in ("/v1/jobs", f"/v1/jobs/{job_id}", "/openapi.json", "/docs", "/metrics", "/readyz"):
        response = await client.get(path, headers=REBOUND)
        assert response.status_code == 421, (path, response.text)
        assert response.headers["content-type"] == PROBLEM_JSON_TYPE
        assert response.json()["detail"] == (
            "this server does not serve the host named in Host (see --allowed-host)"
        )
        assert response.json()["instance"] == path
        assert "nightly" not in response.text
    assert (await client.get("/healthz", headers=REBOUND)).status_code == 200  # says "ok", no more


@pytest.mark.parametrize("action", ["pause", "resume", "trigger"])
async def test_a_cross_site_simple_request_changes_nothing(
    env: Env, client: httpx.AsyncClient, action: str
) -> None:
    job_id = await _job(client)
    if action == "resume":
        assert (await client.post(f"/v1/jobs/{job_id}/pause", json={})).status_code == 200
    before = (await client.get(f"/v1/jobs/{job_id}")).json()

    response = await client.post(f"/v1/jobs/{job_id}/{action}", headers=SIMPLE_CROSS_SITE)

    assert response.status_code == 403, response.text
    assert response.json()["type"] == "urn:cronwheel:problem:cross-site"
    assert (await client.get(f"/v1/jobs/{job_id}")).json() == before
    assert env.queue.published == []  # no trigger queued, so no webhook sent


async def test_a_browser_marking_the_request_cross_site_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(), headers={"Sec-Fetch-Site": "cross-site"})
    assert response.status_code == 403
    assert (await client.get("/v1/jobs")).json()["items"] == []
    same_site = await client.post("/v1/jobs", json=job_body(), headers={"Sec-Fetch-Site": "same-site"})
    assert same_site.status_code == 403  # another port or subdomain of this site is another origin


async def test_same_origin_pages_and_non_browser_clients_may_change_state(client: httpx.AsyncClient) -> None:
    same_origin = {"Origin": "http://cronwheel.test", "Sec-Fetch-Site": "same-origin"}
    assert (await client.post("/v1/jobs", json=job_body("a"), headers=same_origin)).status_code == 201
    behind_tls = {"Origin": "https://cronwheel.test"}  # TLS ended by a proxy: same host, other scheme
    assert (await client.post("/v1/jobs", json=job_body("b"), headers=behind_tls)).status_code == 201
    assert (await client.post("/v1/jobs", json=job_body("c"))).status_code == 201  # curl, the CLI


async def test_a_null_origin_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=job_body(), headers={"Origin": "null"})
    assert response.status_code == 403


async def test_a_state_change_without_credentials_is_refused_before_routing(
    anonymous: httpx.AsyncClient,
) -> None:
    response = await anonymous.post("/v1/jobs/whatever/pause", headers={"Content-Type": "text/plain"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="cronwheel"'


async def test_a_body_that_is_not_json_is_refused(client: httpx.AsyncClient) -> None:
    for content_type in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ):
        response = await client.post(
            "/v1/jobs", content=b'{"team": "data"}', headers={"Content-Type": content_type}
        )
        assert response.status_code == 415, content_type
        assert response.json()["type"] == "urn:cronwheel:problem:unsupported-media-type"
    merge = await client.post(
        "/v1/schedules/preview",
        content=b'{"expression": "@daily"}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert merge.status_code == 200


async def test_two_host_headers_are_refused(env: Env) -> None:
    async with env.client(env.admin_token) as http:
        request = http.build_request("GET", "/v1/jobs")
        request.headers = httpx.Headers([*request.headers.multi_items(), ("Host", "rebind.attacker.example")])
        assert (await http.send(request)).status_code == 400


async def _with(http: httpx.AsyncClient, method: str, extra: list[tuple[str, str]]) -> httpx.Response:
    request = http.build_request(method, "/v1/jobs", json=job_body() if method == "POST" else None)
    request.headers = httpx.Headers([*request.headers.multi_items(), *extra])
    return await http.send(request)


async def test_a_valid_authorization_then_another_is_refused(env: Env) -> None:
    """The first of two Authorization headers was the credential: valid first, invalid second,
    and the request was served (200)."""
    async with env.client(env.admin_token) as http:
        response = await _with(http, "GET", [("Authorization", "Bearer cw_wrong")])
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["type"] == "urn:cronwheel:problem:bad-header"
        assert response.json()["detail"] == "a request has one Authorization header"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("Authorization", "Bearer cw_wrong"),
        ("Proxy-Authorization", "Basic abc"),
        ("Content-Type", "text/plain"),
        ("Origin", "http://cronwheel.test"),
        ("Sec-Fetch-Site", "same-origin"),
        ("X-Cronwheel-CSRF", "x"),
        ("Idempotency-Key", "k"),
        ("If-Match", '"1"'),
    ],
)
async def test_a_repeated_header_of_one_value_is_refused_naming_it(env: Env, name: str, value: str) -> None:
    async with env.client(env.admin_token) as http:
        for method in ("GET", "POST"):
            response = await _with(http, method, [(name, value), (name, value)])
            assert response.status_code == 400, (name, method)
            assert response.json()["detail"] == f"a request has one {name} header"
        assert (await env.store.list_jobs(JobQuery())).items == []


@pytest.mark.parametrize("host", ["127.0.0.1:8080@evil.example", "[::1]evil.example", "127.0.0.1:99999"])
async def test_a_host_that_is_not_a_host_and_port_is_refused_without_echoing_it(env: Env, host: str) -> None:
    """They were served: the part before ``@`` or after ``]`` was taken for the host."""
    async with env.client(env.admin_token) as http:
        for path in ("/v1/jobs", "/healthz"):
            response = await http.get(path, headers={"Host": host})
            assert response.status_code == 400, (host, path)
            assert response.headers["content-type"] == PROBLEM_JSON_TYPE
            assert response.json()["type"] == "urn:cronwheel:problem:bad-host"
            assert "evil" not in response.text
            assert "99999" not in response.text


async def test_list_headers_may_be_repeated(client: httpx.AsyncClient) -> None:
    extra = [
        ("Accept", "application/json"),
        ("Accept", "*/*"),
        ("X-Forwarded-For", "a"),
        ("X-Forwarded-For", "b"),
    ]
    assert (await _with(client, "GET", extra)).status_code == 200


# -- the decisions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authority", "served"),
    [
        ("127.0.0.1:8080", True),
        ("[::1]:8080", True),
        ("10.1.2.3", True),  # an IP origin can only be served from that address
        ("localhost:8080", True),
        ("LOCALHOST.", True),
        ("api.localhost", True),
        ("cron.example.com", True),
        ("CRON.example.com:443", True),
        ("eu.cron.example.com", False),
        ("jobs.internal", True),
        ("a.jobs.internal", True),
        ("rebind.attacker.example", False),
        ("localhost.attacker.example", False),
        ("127.0.0.1.nip.io", False),
        ("0x7f000001", False),  # not an IP a browser would send: a name, and not one served
        ("", False),
    ],
)
def test_host_allowed(authority: str, served: bool) -> None:
    assert host_allowed(authority, ("cron.example.com", "*.jobs.internal", "jobs.internal")) is served


def test_any_host_is_served_when_the_operator_says_so() -> None:
    assert host_allowed("rebind.attacker.example", ("*",))


def test_hostname() -> None:
    assert hostname("[::1]:80") == "::1"
    assert hostname("Example.COM.:8080") == "example.com"
    assert hostname("127.0.0.1:8080@evil.example") is None


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("127.0.0.1:8080", ("127.0.0.1", "8080")),
        ("[::1]:8080", ("::1", "8080")),
        ("[2001:DB8::1]", ("2001:db8::1", "")),
        ("cron.example.com", ("cron.example.com", "")),
        ("localhost.:65535", ("localhost.", "65535")),
        ("host:", ("host", "")),  # port = *DIGIT (RFC 3986)
        ("0x7f000001", ("0x7f000001", "")),  # a name
        ("", ("", "")),
    ],
)
def test_authority_of_hosts(text: str, parts: tuple[str, str]) -> None:
    assert authority(text) == parts


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:8080@evil.example",
        "user@127.0.0.1",
        "[::1]anything",
        "[::1]:80evil",
        "[::1",
        "::1",  # an IPv6 address needs its brackets
        "[fe80::1%25eth0]",
        "[fe80::1%eth0]",
        "[127.0.0.1]",
        "[evil.example]",
        "127.0.0.1:65536",
        "127.0.0.1:123456",
        "127.0.0.1:-1",
        "127.0.0.1: 80",
        "127.0.0.1:80:80",
        "evil.example/127.0.0.1",
        "evil example",
        "evil.example#",
        "évil.example",
    ],
)
def test_anything_else_is_not_an_authority(text: str) -> None:
    assert authority(text) is None
    assert not host_allowed(text, ("*",))
    refused = refusal("GET", "/healthz", {"host": text}, AccessPolicy())
    assert refused is not None
    assert (refused.status, refused.slug) == (400, "bad-host")


@given(
    st.one_of(st.ip_addresses(v=4).map(str), st.ip_addresses(v=6).map(lambda ip: f"[{ip}]")),
    st.integers(0, 65535),
)
def test_every_address_and_port_is_an_authority(address: str, port: int) -> None:
    assert authority(f"{address}:{port}") == (address.strip("[]").lower(), str(port))


@given(st.text(max_size=40))
def test_what_authority_accepts_is_a_host_and_a_port(text: str) -> None:
    parts = authority(text)
    if parts is None:
        return
    host, port = parts
    assert not {"@", "/", "%", "[", "]"} & set(host)
    assert port == "" or (port.isascii() and port.isdigit() and int(port) <= 65535)
    if ":" in host:
        assert text.strip().lower().startswith(f"[{host}]")
        assert ipaddress.IPv6Address(host)


def test_pages_on_operator_named_hosts_may_change_state() -> None:
    policy = AccessPolicy(allowed_hosts=("cron.example.com", "console.example.com"))
    base = {"host": "cron.example.com", "authorization": "Bearer x"}
    assert refusal("POST", "/v1/jobs", {**base, "origin": "https://console.example.com"}, policy) is None
    refused = refusal("POST", "/v1/jobs", {**base, "origin": "https://evil.example"}, policy)
    assert refused is not None
    assert refused.status == 403
    assert refusal("GET", "/v1/jobs", {**base, "origin": "https://evil.example"}, policy) is None  # a read
