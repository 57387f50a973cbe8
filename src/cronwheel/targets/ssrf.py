"""Where an HTTP target must never make a worker connect: the deny table, and the address a URL's
host stands for before any DNS lookup.

A cron service that calls URLs for many teams must not become a way to reach what only its
workers can reach: cloud metadata (169.254.169.254, ``fd00:ec2::254``), databases on private
networks, admin ports on loopback. The decision is taken on addresses, in two places that share
this module:

* **when a job is written** (:class:`cronwheel.jobs.service.TargetPolicy`): the host is read exactly as
  the HTTP client will read it (yarl's parsing and IDNA mapping, so full-width digits and
  ideographic dots are already ASCII), then as the resolver would read a numeric host
  (:func:`inet_aton`: ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``127.1``, ``0`` are all
  IPv4 addresses to ``getaddrinfo``), with one trailing dot ignored; names that always mean this
  machine or a metadata service (``localhost``, ``*.localhost``, ``metadata.google.internal``)
  count as their address. Other names are accepted then: what they resolve to is only known later.
* **at every attempt** (:mod:`cronwheel.worker.executors.http`): the same host check first, then
  every resolver answer and the very address each socket connects to.

:data:`DENY_TABLE` is our own list of the special-purpose ranges (IANA's IPv4 and IPv6
special-purpose registries, multicast, and everything outside IPv6 global unicast ``2000::/3``),
each with its reason, so that the decision does not rest on the ``ipaddress`` module's flags alone
(they call ``192.88.99.1``, ``64:ff9b:1::1``, ``::ffff:0:7f00:1`` and ``3fff::1`` global). Those
flags remain a second net: an address the table passes but ``is_global`` refuses is refused too.
IPv6 addresses that carry an IPv4 address the network will deliver to (IPv4-mapped
``::ffff:a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``, 6to4 ``2002:aabb:ccdd::``) are judged by that IPv4
address as well; ``allowed_networks`` (the operator's ``--allow-network``) is the only way around.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

DENY_TABLE: tuple[tuple[IPNetwork, str], ...] = (
    # IPv4 (RFC 6890 and IANA's IPv4 special-purpose address registry)
    (_V4("0.0.0.0/32"), "an unspecified address"),
    (_V4("0.0.0.0/8"), "a 'this network' address"),  # RFC 791: reaches this host on Linux
    (_V4("10.0.0.0/8"), "a private address"),  # RFC 1918
    (_V4("100.64.0.0/10"), "a shared (carrier-grade NAT) address"),  # RFC 6598; Alibaba metadata
    (_V4("127.0.0.0/8"), "a loopback address"),
    (_V4("169.254.0.0/16"), "a link-local address"),  # cloud metadata 169.254.169.254
    (_V4("172.16.0.0/12"), "a private address"),
    (_V4("192.0.0.0/24"), "an IETF protocol assignment"),  # RFC 6890
    (_V4("192.0.2.0/24"), "a documentation address"),  # TEST-NET-1
    (_V4("192.88.99.0/24"), "a 6to4 relay anycast address"),  # RFC 7526 (deprecated)
    (_V4("192.168.0.0/16"), "a private address"),
    (_V4("198.18.0.0/15"), "a benchmarking address"),  # RFC 2544
    (_V4("198.51.100.0/24"), "a documentation address"),  # TEST-NET-2
    (_V4("203.0.113.0/24"), "a documentation address"),  # TEST-NET-3
    (_V4("224.0.0.0/4"), "a multicast address"),
    (_V4("240.0.0.0/4"), "a reserved address"),  # 255.255.255.255 (broadcast) included
    # IPv6 (RFC 4291 and IANA's IPv6 special-purpose address registry)
    (_V6("::/128"), "an unspecified address"),
    (_V6("::1/128"), "a loopback address"),
    (_V6("::/96"), "an IPv4-compatible address"),  # deprecated (RFC 4291): ::7f00:1 is 127.0.0.1
    (_V6("::ffff:0:0:0/96"), "an IPv4-translated address"),  # RFC 2765 (SIIT)
    (_V6("64:ff9b:1::/48"), "a local-use NAT64 address"),  # RFC 8215
    (_V6("100::/64"), "a discard-only address"),  # RFC 6666
    (_V6("2001::/32"), "a Teredo address"),  # carries an IPv4 server and client
    (_V6("2001:2::/48"), "a benchmarking address"),
    (_V6("2001:10::/28"), "an ORCHID address"),
    (_V6("2001:20::/28"), "an ORCHID address"),
    (_V6("2001:db8::/32"), "a documentation address"),
    (_V6("2001::/23"), "an IETF protocol assignment"),  # AMT, AS112, ...: no webhook lives there
    (_V6("3fff::/20"), "a documentation address"),  # RFC 9637
    (_V6("fc00::/7"), "a private (unique local) address"),  # AWS metadata fd00:ec2::254
    (_V6("fe80::/10"), "a link-local address"),
    (_V6("fec0::/10"), "a site-local address"),
    (_V6("ff00::/8"), "a multicast address"),
)
"""(network, reason) pairs, most specific first; any address in one is refused."""

GLOBAL_UNICAST_V6 = _V6("2000::/3")
"""The only IPv6 addresses the Internet routes (RFC 4291); everything else is refused."""

_MAPPED = _V6("::ffff:0:0/96")
_NAT64 = _V6("64:ff9b::/96")

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
"""Names that mean this machine wherever they are looked up (RFC 6761 for ``localhost``; the
others are in every Debian ``/etc/hosts``). ``*.localhost`` too."""

METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "instance-data.ec2.internal"})
"""Names of cloud metadata services: 169.254.169.254 wherever they resolve."""

_LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
_METADATA = ipaddress.IPv4Address("169.254.169.254")


def parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """``allowed_networks`` as networks; a malformed CIDR is a configuration error (ValueError)."""
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in cidrs)


# -- addresses --------------------------------------------------------------------------------------


def address_refusal(address: str | IPAddress, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why a worker must not connect to ``address``, or None when it may.

    ``address`` is an IP address (an IPv6 zone suffix ``%eth0`` is ignored); anything that does
    not parse as one is refused. IPv4-mapped and NAT64 addresses are judged as the IPv4 address
    they carry; a 6to4 address must pass both as itself and as its IPv4 address.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0] if isinstance(address, str) else address)
    except ValueError:
        return "not an IP address"
    carried = embedded_ipv4(ip)
    judged = ip if carried is None else carried[0]
    if any(judged.version == net.version and judged in net for net in allowed):
        return None
    reason = _classify(judged)
    if reason is not None and carried is not None:
        return f"{reason} ({carried[1]} for {judged})"
    if reason is None and isinstance(ip, ipaddress.IPv6Address) and ip.sixtofour is not None:
        embedded = _classify(ip.sixtofour)
        reason = None if embedded is None else f"{embedded} (6to4 for {ip.sixtofour})"
    return reason


def embedded_ipv4(ip: IPAddress) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address stands for on the wire, and how: IPv4-mapped (the socket
    talks IPv4 to it) and NAT64 (the translator forwards to it); None for any other address."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip in _MAPPED:
        assert ip.ipv4_mapped is not None
        return ip.ipv4_mapped, "IPv4-mapped"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "NAT64"
    return None


def deny_reason(ip: IPAddress) -> str | None:
    """Our own verdict on ``ip`` as it is (nothing unwrapped): the reason of the first
    :data:`DENY_TABLE` entry holding it, or of IPv6 outside global unicast."""
    for network, reason in DENY_TABLE:
        if ip.version == network.version and ip in network:
            return reason
    if isinstance(ip, ipaddress.IPv6Address) and ip not in GLOBAL_UNICAST_V6:
        return "a reserved address (outside global unicast 2000::/3)"
    return None


def _classify(ip: IPAddress) -> str | None:
    """:func:`deny_reason`, then whatever ``ipaddress`` still calls non-global (a second net:
    the tests show the table alone holds every address it flags)."""
    reason = deny_reason(ip)
    if reason is None and not ip.is_global:
        return "a non-global address"
    return reason


# -- hosts ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostAddress:
    """The address a URL's host stands for without asking DNS."""

    address: IPAddress
    spelling: str  # the host as the HTTP client has it (yarl's raw_host)
    canonical: bool  # the client sends it as it is (a dotted quad or an IPv6 literal, or a name)


def inet_aton(text: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address the C library's ``inet_aton`` (and so ``getaddrinfo``) reads in ``text``,
    or None: one to four parts separated by dots, each decimal, octal (a leading ``0``) or hex
    (``0x``), the last one filling the bytes that are left (``127.1`` is 127.0.0.1, ``0`` is
    0.0.0.0, ``2130706433`` is 127.0.0.1)."""
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values = [_aton_part(part) for part in parts]
    *head, last = values
    if last is None or any(value is None or value > 255 for value in head):
        return None
    if last >= 256 ** (4 - len(head)):
        return None
    number = last
    for index, value in enumerate(head):
        assert value is not None
        number += value << (8 * (3 - index))
    return ipaddress.IPv4Address(number)


_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _aton_part(part: str) -> int | None:
    base, digits = 10, part
    if part[:2] in ("0x", "0X"):
        base, digits = 16, part[2:]
    elif part.startswith("0") and len(part) > 1:
        base, digits = 8, part[1:]
    if not digits or any(char not in _DIGITS[base] for char in digits):
        return None
    return int(digits, base)


def host_address(raw_host: str) -> HostAddress | None:
    """The address ``raw_host`` (yarl's ``URL.raw_host``: IDNA-encoded, lower case) stands for
    before any DNS lookup: an IPv6 literal, a numeric IPv4 host in any spelling ``inet_aton``
    reads (one trailing dot ignored), or a loopback or metadata name; None for a name only the
    resolver can answer."""
    if ":" in raw_host:  # an IPv6 literal, which yarl has validated; a zone is "%25eth0"
        try:
            address = ipaddress.ip_address(raw_host.replace("%25", "%").split("%", 1)[0])
        except ValueError:  # not one after all: the socket's own check refuses what is no address
            return None
        return HostAddress(address, raw_host, canonical=True)
    name = raw_host[:-1] if raw_host.endswith(".") else raw_host
    numeric = inet_aton(name) if name else None
    if numeric is not None:
        return HostAddress(numeric, raw_host, canonical=raw_host == str(numeric))
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return HostAddress(_LOOPBACK, raw_host, canonical=True)
    if name in METADATA_NAMES:
        return HostAddress(_METADATA, raw_host, canonical=True)
    return None


def url_refusal(url: URL, allowed: Sequence[IPNetwork] = ()) -> str | None:
    """Why ``url`` (parsed by :func:`cronwheel.targets.checks.parse_url`) must not be requested, judged
    on its host alone (no DNS), or None. The reason names the host and its address, never the
    URL's user info, path or query."""
    found = host_address(url.raw_host or "")
    if found is None:
        return None
    address = str(found.address)
    where = address if found.spelling == address else f"{found.spelling} is {address}"
    reason = address_refusal(found.address, allowed)
    return None if reason is None else f"{where}, {reason}"


def endpoint(url: URL) -> str:
    """``scheme://host:port`` of ``url``: what errors and logs may show of a target URL (its user
    info, path and query may hold secrets)."""
    host = url.host or ""
    return f"{url.scheme}://{f'[{host}]' if ':' in host else host}:{url.port}"
