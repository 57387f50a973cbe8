"""The ``http`` target kind: a webhook request (headers may refer to team secrets; a signing
secret signs each request, Standard Webhooks)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import HttpTarget, SecretRef
from cronwheel.targets.checks import check_http, parse_url, redacted_url
from cronwheel.targets.kinds.base import HEADER, SECRET_HEADER, Flag, Kind, values_from_json, values_to_json


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
