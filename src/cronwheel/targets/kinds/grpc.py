"""The ``grpc`` target kind: a unary gRPC method (metadata values may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import GrpcTarget
from cronwheel.targets.checks import check_grpc, grpc_address
from cronwheel.targets.kinds.base import Flag, Kind, values_from_json, values_to_json


def to_json(target: GrpcTarget) -> dict[str, Any]:
    return {
        "type": "grpc",
        "address": target.address,
        "method": target.method,
        "tls": target.tls,
        "metadata": values_to_json(target.metadata),
        "descriptor_set": target.descriptor_set,
    }


def from_json(data: Mapping[str, Any]) -> GrpcTarget:
    return GrpcTarget(
        address=data["address"],
        method=data["method"],
        tls=bool(data["tls"]),
        metadata=values_from_json(data["metadata"]),
        descriptor_set=data.get("descriptor_set"),
    )


def summary(target: Mapping[str, Any]) -> str:
    return f"grpc{'s' if target['tls'] else ''} {target['address']} {target['method']}"


def addresses(target: GrpcTarget) -> list[tuple[str, URL]]:
    return [("target.address", grpc_address(target.address))]


KIND = Kind(
    tag="grpc",
    record=GrpcTarget,
    check=check_grpc,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="metadata",
    addresses=addresses,
    refused_field="target.address",
    flags=(
        Flag("--grpc", "grpc_address", "Target: call a gRPC method here.", metavar="HOST:PORT"),
        Flag("--grpc-method", "grpc_method", "The gRPC method (with --grpc).", metavar="PKG.SVC/METHOD"),
        Flag("--grpc-tls", "grpc_tls", "Call the gRPC method over TLS.", is_flag=True),
        Flag("--metadata", "metadata", "gRPC metadata (repeat).", metavar="K=V", multiple=True),
        Flag(
            "--secret-metadata",
            "secret_metadata",
            "gRPC metadata whose value is the team's secret SECRET (repeat).",
            metavar="K=SECRET",
            multiple=True,
        ),
    ),
)
