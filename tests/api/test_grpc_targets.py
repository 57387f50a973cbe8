"""gRPC targets through the API and the service: the JSON shape, what is refused (422 naming the
field, nothing written), the SSRF policy on the address, secret references and plain values."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import GrpcTarget, SecretRef
from cronwheel.store import JobQuery
from cronwheel.targets import kinds
from cronwheel.targets.kinds import check_target, plain_values, secret_references
from grpc_echo import SAY, descriptor_set

from .conftest import Env, job_body

ADDRESS = "orders.example.com:50051"


def grpc_target(**fields: Any) -> dict[str, Any]:
    return {"type": "grpc", "address": ADDRESS, "method": "shop.Orders/Nightly", **fields}


async def test_created_and_read_back_in_the_shape_it_was_given(client: httpx.AsyncClient, env: Env) -> None:
    given = grpc_target(
        tls=True,
        metadata={"x-tenant": "acme", "authorization": {"secret": "orders-token"}},
        descriptor_set=None,
    )
    await env.store.put_secret(codec_secret("data", "orders-token"))
    response = await client.post("/v1/jobs", json=job_body(target=given))
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["target"] == given
    assert job["plain_values"] == ["target.metadata.x-tenant"]  # held in clear: reported as such
    stored = await env.store.get_job(job["id"])
    assert stored.target == GrpcTarget(
        ADDRESS,
        "shop.Orders/Nightly",
        tls=True,
        metadata=(("x-tenant", "acme"), ("authorization", SecretRef("orders-token"))),
    )
    defaults = await client.post(
        "/v1/jobs", json=job_body(name="lean", target={"type": "grpc", "address": ADDRESS, "method": "Svc/M"})
    )
    assert defaults.status_code == 201, defaults.text
    assert defaults.json()["target"] == {
        "type": "grpc",
        "address": ADDRESS,
        "method": "Svc/M",
        "tls": False,
        "metadata": {},
        "descriptor_set": None,
    }


def codec_secret(team: str, name: str) -> Any:
    from cronwheel.secrets.crypto import Keyring, new_key, seal
    from cronwheel.store.port import StoredSecret

    sealed = seal(Keyring([new_key("k1")]), team, name, "value")
    return StoredSecret(team, name, sealed.key_id, sealed.value)


async def test_a_descriptor_set_defining_the_method_is_accepted(client: httpx.AsyncClient, env: Env) -> None:
    target = grpc_target(method=SAY, descriptor_set=descriptor_set())
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 201, response.text
    assert response.json()["target"]["descriptor_set"] == descriptor_set()


NOT_A_SET = base64.b64encode(b"\xff\xff\xff").decode()

# (target of a body, the field, what the detail says)
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    (grpc_target(address="orders.example.com"), "target.address", "target.address must be host:port"),
    (grpc_target(address="orders.example.com:0"), "target.address", "a port 1-65535"),
    (grpc_target(address="orders.example.com:70000"), "target.address", "not host:port"),
    (grpc_target(address="grpc://orders.example.com:443"), "target.address", "no scheme, path"),
    (grpc_target(address="::1:443"), "target.address", "not host:port (IPv6 goes in brackets)"),
    (
        grpc_target(address="user:s3cr3t@orders.example.com:443"),
        "target.address",
        "must not hold credentials",
    ),
    (grpc_target(address="134744072:443"), "target.address", "8.8.8.8 spelled '134744072'"),
    (grpc_target(address="orders..example.com:443"), "target.address", "cannot be looked up"),
    (grpc_target(method="shop.Orders.Nightly"), "target.method", "'package.Service/Method'"),
    (grpc_target(method="shop.Orders/Night/ly"), "target.method", "'package.Service/Method'"),
    (grpc_target(metadata={"X-Upper": "v"}), "target.metadata", "should match pattern"),
    (grpc_target(metadata={"grpc-timeout": "1S"}), "target.metadata", "reserved to gRPC"),
    (grpc_target(metadata={"trace-bin": "AAEC"}), "target.metadata", "binary ('-bin') metadata"),
    (grpc_target(metadata={"x-note": "caf\u00e9"}), "target.metadata", "printable ASCII"),
    (grpc_target(descriptor_set="%%%"), "target.descriptor_set", "target.descriptor_set is not base64"),
    (grpc_target(descriptor_set=NOT_A_SET), "target.descriptor_set", "not a serialized FileDescriptorSet"),
    (
        grpc_target(method="cwtest.Echo/Shout", descriptor_set=descriptor_set()),
        "target.descriptor_set",
        "does not define the method cwtest.Echo/Shout",
    ),
    (
        grpc_target(method="shop.Orders/Nightly", descriptor_set=descriptor_set()),
        "target.descriptor_set",
        "does not define the service shop.Orders",
    ),
    (grpc_target(tls="yes"), "target.tls", ""),
    (grpc_target(port=443), "target.port", ""),
]


@pytest.mark.parametrize(("target", "field", "detail"), REFUSED, ids=[d or f for _, f, d in REFUSED])
async def test_refused_when_created_naming_the_field(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str, detail: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    problem = response.json()
    # the schema's errors name the union's branch ("target.grpc.tls"), the checks' the field
    fields = [error["field"].replace("target.grpc.", "target.") for error in problem.get("errors", [])]
    assert any(name.startswith(field) for name in fields), problem
    assert detail in response.text
    assert "s3cr3t" not in response.text  # a refused value is not echoed
    assert (await env.store.list_jobs(JobQuery())).items == []


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.0.0.1:50051", "10.0.0.1, a private address"),
        ("127.0.0.1:50051", "127.0.0.1, a loopback address"),
        ("[::1]:50051", "::1, a loopback address"),
        ("localhost:50051", "localhost is 127.0.0.1, a loopback address"),
        ("169.254.169.254:80", "169.254.169.254, a link-local address"),
    ],
)
async def test_a_non_public_address_is_refused_by_the_policy(
    client: httpx.AsyncClient, env: Env, address: str, reason: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=grpc_target(address=address)))
    assert response.status_code == 422, response.text
    (error,) = response.json()["errors"]
    assert error["field"] == "target.address"
    assert error["message"] == (
        f"target.address points to a non-public address: {reason}; "
        "an operator must allow its network (--allow-network)"
    )
    assert (await env.store.list_jobs(JobQuery())).items == []


def test_an_allowed_network_lets_the_address_through() -> None:
    target = GrpcTarget("10.1.2.3:50051", "shop.Orders/Nightly")
    with pytest.raises(InvalidInputError, match="non-public address"):
        TargetPolicy().check(target)
    TargetPolicy(allowed_networks=("10.0.0.0/8",)).check(target)


async def test_a_secret_the_team_does_not_have_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    target = grpc_target(metadata={"authorization": {"secret": "nope"}})
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert "target.metadata.authorization" in response.text
    assert (await env.store.list_jobs(JobQuery())).items == []


def test_secret_references_and_plain_values_name_the_metadata() -> None:
    target = GrpcTarget(ADDRESS, "a.B/C", metadata=(("x-plain", "p"), ("authorization", SecretRef("tok"))))
    assert secret_references(target) == [("target.metadata.authorization", SecretRef("tok"))]
    assert plain_values(target) == ["target.metadata.x-plain"]


@pytest.mark.parametrize(
    "target",
    [
        GrpcTarget("orders.example.com:443", "shop.v1.Orders/Nightly", tls=True),
        GrpcTarget("[2606:4700:4700::1111]:8443", "Orders/Nightly"),
        GrpcTarget("b\u00fccher.example:50051", "a.B/C", metadata=(("x_y.z-w", " spaced ~ "),)),
        GrpcTarget("8.8.8.8:1", SAY, descriptor_set=descriptor_set(include_imports=False)),
    ],
)
def test_accepted_by_the_check(target: GrpcTarget) -> None:
    check_target(target)


@pytest.mark.parametrize(
    "target",
    [
        GrpcTarget(ADDRESS, "a.B/C"),
        GrpcTarget(ADDRESS, "a.B/C", True, (("k", "v"), ("s", SecretRef("n"))), descriptor_set()),
    ],
)
def test_the_store_round_trips_grpc_targets(target: GrpcTarget) -> None:
    data = kinds.target_to_json(target)
    assert data["type"] == "grpc"
    assert kinds.target_from_json(data) == target


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (GrpcTarget(ADDRESS, "a.B/C", metadata=(("X-Upper", "v"),)), "target.metadata has a key that is not"),
        (
            GrpcTarget(ADDRESS, "a.B/C", metadata=(("x", "\n"),)),
            "target.metadata['x'] must be printable ASCII",
        ),
        (
            GrpcTarget(ADDRESS, "a.B/C", metadata=(("x", SecretRef("no way")),)),
            "target.metadata['x'] must name",
        ),
        (GrpcTarget("orders.example.com:443\udc80", "a.B/C"), "target.address is not valid Unicode"),
    ],
)
def test_refused_by_the_check_for_every_writer(target: GrpcTarget, message: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_target(target)
    assert str(refused.value).startswith(message)
