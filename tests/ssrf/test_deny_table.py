"""The SSRF guard's own tables and readings (no traffic): the deny table refuses every range it
lists and everything ``ipaddress`` calls non-global, also where ``ipaddress`` calls an address
global that no webhook can live at; numeric hosts are read as the C library reads them."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from yarl import URL

from cronwheel.targets.ssrf import (
    DENY_TABLE,
    GLOBAL_UNICAST_V6,
    address_refusal,
    deny_reason,
    endpoint,
    host_address,
    inet_aton,
    parse_networks,
    url_refusal,
)


@pytest.mark.parametrize(("network", "reason"), DENY_TABLE, ids=[str(net) for net, _ in DENY_TABLE])
def test_every_entry_refuses_its_whole_range(network: ipaddress.IPv4Network, reason: str) -> None:
    middle = network[network.num_addresses // 2]
    for address in (network[0], middle, network[-1]):
        assert deny_reason(address) is not None, address
        assert address_refusal(address) is not None, address
    assert deny_reason(network[-1]) in {r for net, r in DENY_TABLE if network[-1] in net}


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("192.88.99.1", "6to4 relay anycast"),
        ("192.0.0.192", "IETF protocol assignment"),
        ("224.0.0.1", "multicast"),
        ("3fff::1", "documentation"),
        ("64:ff9b:1::a9fe:a9fe", "local-use NAT64"),
        ("::ffff:0:7f00:1", "IPv4-translated"),
        ("5f00::1", "outside global unicast"),
    ],
)
def test_the_table_refuses_what_ipaddress_calls_global(address: str, reason: str) -> None:
    """Python 3.11's ``ipaddress`` calls each of these global: flags alone would let them pass."""
    ip = ipaddress.ip_address(address)
    refusal = deny_reason(ip)
    assert refusal is not None
    assert reason in refusal
    assert address_refusal(ip) == refusal


# The ranges ipaddress flags (Python 3.11's private/non-global lists), sampled inside, and the
# whole address space: whatever ipaddress calls non-global, the table alone refuses.
_FLAGGED = [
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
    "203.0.113.0/24", "240.0.0.0/4", "::/8", "::ffff:0:0/96", "64:ff9b:1::/48", "100::/64",
    "2001::/23", "2001:db8::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
]  # fmt: skip


@given(
    st.one_of(
        st.ip_addresses(),
        st.sampled_from(_FLAGGED).flatmap(lambda net: st.ip_addresses(network=net)),
    )
)
def test_the_table_alone_holds_every_address_ipaddress_calls_non_global(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    if not ip.is_global and not (ip.version == 6 and ip in ipaddress.ip_network("2002::/16")):
        assert deny_reason(ip) is not None, ip  # (6to4 is judged by the address it carries)
    if ip.version == 6 and ip not in GLOBAL_UNICAST_V6:
        assert deny_reason(ip) is not None, ip


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("::ffff:127.0.0.1", "a loopback address (IPv4-mapped for 127.0.0.1)"),
        ("64:ff9b::a9fe:a9fe", "a link-local address (NAT64 for 169.254.169.254)"),
        ("2002:a9fe:a9fe::1", "a link-local address (6to4 for 169.254.169.254)"),
        ("fd00:ec2::254", "a private (unique local) address"),
        ("fe80::1%eth0", "a link-local address"),
    ],
)
def test_ipv4_carried_in_ipv6_is_judged_as_itself(address: str, kind: str) -> None:
    assert address_refusal(address) == kind


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"]
)
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(address) is None


def test_allowed_networks_open_only_themselves() -> None:
    allowed = parse_networks(["10.1.0.0/16", "127.0.0.0/8"])
    assert address_refusal("10.1.2.3", allowed) is None
    assert address_refusal("::ffff:10.1.2.3", allowed) is None
    assert address_refusal("64:ff9b::a01:203", allowed) is None  # NAT64 of 10.1.2.3
    assert address_refusal("10.2.0.1", allowed) == "a private address"
    assert address_refusal("::1", allowed) == "a loopback address"  # not in 127.0.0.0/8
    assert url_refusal(URL("http://0x0a010203/"), allowed) is None
    assert url_refusal(URL("http://localhost./"), allowed) is None


# -- numeric hosts, read as the C library reads them ------------------------------------------------


@given(st.text(alphabet="0123456789abcdefxX.", max_size=24))
@example("0x")
@example("08")
@example("1.2.3.4.5")
@example("4294967295")
@example("4294967296")
@example("1.16777216")
@example("00000000000000000000177.1")
@example("")
@example(".")
@example("1..1")
@example("1.2.3.")
def test_inet_aton_reads_as_the_c_library(text: str) -> None:
    try:
        expected: str | None = socket.inet_ntoa(socket.inet_aton(text))
    except OSError:
        expected = None
    found = inet_aton(text)
    assert (None if found is None else str(found)) == expected


@pytest.mark.parametrize(
    ("host", "address", "canonical"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1.", "127.0.0.1", False),
        ("0x7f000001", "127.0.0.1", False),
        ("2130706433", "127.0.0.1", False),
        ("0", "0.0.0.0", False),
        ("::1", "::1", True),
        ("fe80::1%25eth0", "fe80::1", True),
        ("localhost", "127.0.0.1", True),
        ("localhost.", "127.0.0.1", True),
        ("api.localhost", "127.0.0.1", True),
        ("metadata.google.internal", "169.254.169.254", True),
    ],
)
def test_host_address(host: str, address: str, canonical: bool) -> None:
    found = host_address(host)
    assert found is not None
    assert (str(found.address), found.canonical) == (address, canonical)


@pytest.mark.parametrize(
    "host", ["hooks.example.com", "localhost.example.com", "1.2.3.4.5", "127.0.0.1.nip.io"]
)
def test_names_are_left_to_the_resolver(host: str) -> None:
    assert host_address(host) is None


def test_the_endpoint_names_no_secret() -> None:
    url = URL("https://admin:HUNTER2@[::1]:8443/x?token=s3cr3t#frag")
    assert endpoint(url) == "https://[::1]:8443"
    refusal = url_refusal(url)
    assert refusal == "::1, a loopback address"
