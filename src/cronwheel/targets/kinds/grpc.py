"""The ``grpc`` target kind: a unary gRPC method (metadata values may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    GRPC_METHOD,
    GRPC_VALUE,
    check_client_header,
    check_metadata_key,
    check_reference,
    grpc_address,
    method_descriptor,
)
from cronwheel.targets.kinds.base import Flag, Kind, values_from_json, values_to_json
from cronwheel.targets.values import SecretRef, Value


@dataclass(frozen=True, slots=True)
class GrpcTarget:
    """A unary gRPC method: the payload (JSON) becomes its request message, through the
    target's server reflection or the job's own ``descriptor_set``."""

    address: str  # "host:port", an IPv6 address in brackets ("[2001:db8::1]:443")
    method: str  # "package.Service/Method"
    tls: bool = False
    metadata: tuple[tuple[str, Value], ...] = ()  # lower-case gRPC metadata keys
    descriptor_set: str | None = None  # base64 of a serialized google.protobuf.FileDescriptorSet
    type: Literal["grpc"] = "grpc"


def check_grpc(target: GrpcTarget) -> URL:
    """Refuse what no gRPC attempt could make; returns the address as a URL (``grpc://host:port``)
    whose ``raw_host`` the SSRF guard judges as it judges an HTTP URL's."""
    url = grpc_address(target.address)
    if not GRPC_METHOD.fullmatch(target.method):
        raise InvalidInputError("target.method must be 'package.Service/Method' (the service's full name)")
    for name, value in target.metadata:
        check_metadata_key(name)
        check_client_header("target.metadata", name)
        field = f"target.metadata[{name!r}]"
        if isinstance(value, SecretRef):  # checked once resolved, by the worker
            check_reference(field, value)
        elif not GRPC_VALUE.fullmatch(value):
            raise InvalidInputError(f"{field} must be printable ASCII (gRPC text metadata)")
    if target.descriptor_set is not None:
        method_descriptor(target.descriptor_set, target.method)
    return url


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
