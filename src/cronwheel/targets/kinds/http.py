"""The ``http`` target kind: a webhook request (headers may refer to team secrets; a signing
secret signs each request, Standard Webhooks)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    HEADER_CONTROL,
    TOKEN,
    check_client_header,
    check_reference,
    parse_url,
    redacted_url,
    utf8,
)
from cronwheel.targets.kinds.base import HEADER, SECRET_HEADER, Flag, Kind, values_from_json, values_to_json
from cronwheel.targets.ssrf import host_address
from cronwheel.targets.values import SecretRef, Value


@dataclass(frozen=True, slots=True)
class HttpTarget:
    url: str
    method: str = "POST"
    headers: tuple[tuple[str, Value], ...] = ()
    expected_status: tuple[int, ...] = ()  # empty: any 2xx
    # signs every request (Standard Webhooks); None: the team's default signing secret, if any
    signing_secret: SecretRef | None = None
    type: Literal["http"] = "http"


def check_http(target: HttpTarget) -> URL:
    """Refuse what aiohttp cannot send; returns the URL as it will use it."""
    url = parse_url(target.url)
    found = host_address(url.raw_host or "")
    if found is not None and not found.canonical:
        raise InvalidInputError(
            f"target.url has the IPv4 address {found.address} spelled {found.spelling!r}: "
            f"write it as {found.address}"
        )
    if not TOKEN.fullmatch(target.method):
        raise InvalidInputError("target.method must be an HTTP method name (a token such as POST)")
    for name, value in target.headers:
        if not TOKEN.fullmatch(name):
            raise InvalidInputError(f"target.headers has a name that is not an HTTP token: {name!r}")
        check_client_header("target.headers", name)
        if isinstance(value, SecretRef):  # checked once resolved, by the worker
            check_reference(f"target.headers[{name!r}]", value)
            continue
        if HEADER_CONTROL.search(value):
            raise InvalidInputError(f"target.headers[{name!r}] contains a control character")
        utf8(f"target.headers[{name!r}]", value)
    credentials = url.raw_user is not None or url.raw_password is not None
    if credentials and any(name.lower() == "authorization" for name, _ in target.headers):
        raise InvalidInputError(
            "target.url has user info and target.headers an Authorization header: "
            "the HTTP client sends the user info as that header, so keep only one of them"
        )
    if target.signing_secret is not None:
        check_reference("target.signing_secret", target.signing_secret)
    return url


def to_json(target: HttpTarget) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "http",
        "url": target.url,
        "method": target.method,
        "headers": values_to_json(target.headers),
        "expected_status": list(target.expected_status),
    }
    if target.signing_secret is not None:  # absent: rows written before it existed read the same
        data["signing_secret"] = {"secret": target.signing_secret.name}
    return data


def from_json(data: Mapping[str, Any]) -> HttpTarget:
    signing = data.get("signing_secret")
    return HttpTarget(
        url=data["url"],
        method=data["method"],
        headers=values_from_json(data["headers"]),
        expected_status=tuple(int(code) for code in data["expected_status"]),
        signing_secret=None if signing is None else SecretRef(str(signing["secret"])),
    )


def summary(target: Mapping[str, Any]) -> str:
    return f"http {target['method']} {redacted_url(target['url'])}"


def addresses(target: HttpTarget) -> list[tuple[str, URL]]:
    return [("target.url", parse_url(target.url))]


KIND = Kind(
    tag="http",
    record=HttpTarget,
    check=check_http,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="headers",
    references=("signing_secret",),
    credential_url=True,
    addresses=addresses,
    flags=(
        Flag("--http", "http_url", "Target: POST to this webhook URL.", metavar="URL"),
        Flag("--method", "method", choices=("GET", "POST", "PUT", "PATCH", "DELETE")),
        HEADER,
        SECRET_HEADER,
        Flag(
            "--signing-secret",
            "signing_secret",
            "Sign webhooks with the team's secret SECRET.",
            metavar="SECRET",
        ),
    ),
)
