"""What a target can hold: the limits of the things that run it, checked where a job is written
and again where an attempt starts.

These are not the operator's choices (that is :class:`cronwheel.service.TargetPolicy`) but what
the operating system, the HTTP client and the import system cannot take at all. A target that
breaks one of them could never make a single attempt, so :meth:`JobService.validate
<cronwheel.service.JobService.validate>` refuses it whole, for every writer (API, CLI, ``apply``).
The executors run the same checks before each attempt, so that a job stored before a check
existed, or written around the service, ends as an ``error`` outcome that says why, not as an
exception inside the worker.

* **command** (``execve``): C strings, so no NUL byte in ``argv``, ``env`` or ``cwd``; UTF-8 text
  (a lone surrogate has no bytes); an environment name that is not empty and holds no ``=``; one
  argument or ``NAME=value`` of at most :data:`MAX_ARG_BYTES` (Linux's ``MAX_ARG_STRLEN``), and
  all of them together at most :data:`MAX_EXEC_BYTES` (``E2BIG``); ``cwd`` absolute. A ``cwd``
  that is not an existing directory is the target's fault at run time: it may be created later.
* **http** (aiohttp, yarl, the resolver): a URL without control characters that yarl parses,
  ``http`` or ``https`` with a host
  whose name the IDNA codec can encode (what ``getaddrinfo`` is handed); a numeric IPv4 host only
  as a dotted quad (aiohttp refuses ``2130706433``, ``127.1`` or ``0177.0.0.1``; the resolver
  would read ``0x7f000001`` but no one writes that but to hide an address); a method that is an
  HTTP token; header names that are tokens and values without the control characters aiohttp
  refuses (all but horizontal tab); not both user info in the URL and an ``Authorization``
  header (aiohttp sends the user info as one and refuses the pair). Non-ASCII header values are
  sent as UTF-8, so they are accepted.
* **python** (``importlib``): ``package.module:function``, a dotted module path and one function
  name (not a ``__dunder__``). Which functions may run is :mod:`cronwheel.python_targets`.
* **rabbitmq** (aiormq, AMQP 0-9-1): ``amqp://host[:port][/vhost]`` or ``amqps://`` with a host,
  no user info (credentials go in ``username``/``password``, as secret references), no query or
  fragment (aiormq would read options such as ``no_verify_ssl`` there), the virtual host one path
  segment; an exchange name of AMQP's grammar; exchange, routing key and virtual host at most
  :data:`MAX_SHORTSTR` bytes (AMQP ``shortstr``).
* **kafka** (aiokafka): 1-:data:`MAX_BOOTSTRAP_SERVERS` ``host:port`` servers; a topic name Kafka
  takes (``[A-Za-z0-9._-]{1,249}``, not ``.`` or ``..``); SASL with both credentials, credentials
  only with SASL.
* **broker headers** (both): names are tokens of at most 255 characters, values UTF-8 text.
* **secret references** (:class:`~cronwheel.model.SecretRef`, in a header or environment value,
  as an HTTP target's ``signing_secret``, as a broker's ``username``/``password``): a secret name
  (:data:`SECRET_NAME`). What the secret holds is checked where it is known, when the worker has
  resolved it: the resolved target goes through the same checks before the attempt is made.

Every check raises :class:`~cronwheel.errors.InvalidInputError` whose message names the field
(``target.argv[1] contains a NUL byte``) and never quotes a value: header and environment values
may be secrets.
"""

from __future__ import annotations

import os
import re

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.model import (
    CommandTarget,
    HttpTarget,
    KafkaTarget,
    PythonTarget,
    RabbitMqTarget,
    SecretRef,
    Target,
    Value,
)
from cronwheel.ssrf import host_address

MAX_ARG_BYTES = 128 * 1024 - 1
"""One argument or ``NAME=value``, in bytes: Linux refuses a longer one (``MAX_ARG_STRLEN`` is 32
pages, the terminating NUL included) whatever the stack limit."""

MAX_EXEC_BYTES = 1024 * 1024
"""``argv`` and ``env`` together as ``execve`` counts them (each string with its NUL, plus a
pointer). Linux allows a quarter of the stack limit, 2 MiB with the usual 8 MiB; half of that
leaves room for the worker's own variables. A worker with a smaller stack limit may still refuse
less, which its attempts then report as an error."""

_POINTER_BYTES = 8
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token (header names, methods)
_HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what aiohttp refuses in a header
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SECRET_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")  # as the API's names of teams and jobs


def check_target(target: Target) -> None:
    """Refuse (InvalidInputError, naming the field) a target nothing could ever run."""
    if isinstance(target, CommandTarget):
        check_command(target)
    elif isinstance(target, HttpTarget):
        check_http(target)
    elif isinstance(target, RabbitMqTarget):
        check_rabbitmq(target)
    elif isinstance(target, KafkaTarget):
        check_kafka(target)
    else:
        check_python(target)


# -- command -------------------------------------------------------------------------------------


def check_command(target: CommandTarget) -> None:
    if not target.argv:
        raise InvalidInputError("target.argv must not be empty")
    if not target.argv[0]:
        raise InvalidInputError("target.argv[0] (the program) must not be empty")
    total = 0
    for index, arg in enumerate(target.argv):
        total += _exec_string(f"target.argv[{index}]", arg) + _POINTER_BYTES
    for name, value in target.env:
        if not name:
            raise InvalidInputError("target.env has an empty variable name")
        field = f"target.env[{name!r}]"
        _c_text(f"{field} (the name)", name)
        if "=" in name:
            raise InvalidInputError(f"{field}: a variable name cannot contain '='")
        if isinstance(value, SecretRef):  # measured once resolved, by the worker
            _check_reference(field, value)
            continue
        total += _exec_string(field, f"{name}={value}") + _POINTER_BYTES
    if target.cwd is not None:
        _c_text("target.cwd", target.cwd)
        if not os.path.isabs(target.cwd):
            raise InvalidInputError("target.cwd must be an absolute path")
    if total > MAX_EXEC_BYTES:
        raise InvalidInputError(
            f"target.argv and target.env take {total} bytes to start the program; "
            f"at most {MAX_EXEC_BYTES} are accepted"
        )


def _exec_string(field: str, text: str) -> int:
    """The bytes ``execve`` copies for ``text`` (its NUL included), once it is known to fit."""
    size = len(_c_text(field, text)) + 1
    if size > MAX_ARG_BYTES + 1:
        raise InvalidInputError(f"{field} is {size - 1} bytes; at most {MAX_ARG_BYTES} are accepted")
    return size


def _c_text(field: str, text: str) -> bytes:
    """``text`` as the bytes a C string gets, or why it cannot be one."""
    if "\0" in text:
        raise InvalidInputError(f"{field} contains a NUL byte")
    return _utf8(field, text)


def _utf8(field: str, text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise InvalidInputError(f"{field} is not valid Unicode text (it holds a lone surrogate)") from None


# -- http ----------------------------------------------------------------------------------------


def check_http(target: HttpTarget) -> URL:
    """Refuse what aiohttp cannot send; returns the URL as it will use it."""
    url = parse_url(target.url)
    found = host_address(url.raw_host or "")
    if found is not None and not found.canonical:
        raise InvalidInputError(
            f"target.url has the IPv4 address {found.address} spelled {found.spelling!r}: "
            f"write it as {found.address}"
        )
    if not _TOKEN.fullmatch(target.method):
        raise InvalidInputError("target.method must be an HTTP method name (a token such as POST)")
    for name, value in target.headers:
        if not _TOKEN.fullmatch(name):
            raise InvalidInputError(f"target.headers has a name that is not an HTTP token: {name!r}")
        if isinstance(value, SecretRef):  # checked once resolved, by the worker
            _check_reference(f"target.headers[{name!r}]", value)
            continue
        if _HEADER_CONTROL.search(value):
            raise InvalidInputError(f"target.headers[{name!r}] contains a control character")
        _utf8(f"target.headers[{name!r}]", value)
    credentials = url.raw_user is not None or url.raw_password is not None
    if credentials and any(name.lower() == "authorization" for name, _ in target.headers):
        raise InvalidInputError(
            "target.url has user info and target.headers an Authorization header: "
            "the HTTP client sends the user info as that header, so keep only one of them"
        )
    if target.signing_secret is not None:
        _check_reference("target.signing_secret", target.signing_secret)
    return url


def parse_url(text: str) -> URL:
    """The target URL as the HTTP client will use it. Messages never quote the URL: its query or
    user info may hold a secret."""
    if _CONTROL.search(text):
        raise InvalidInputError("target.url contains a control character")
    _utf8("target.url", text)
    try:
        url = URL(text)
        host = url.host  # decodes punycode ("xn--..."), which may fail
    except (ValueError, TypeError):  # UnicodeError is a ValueError
        raise InvalidInputError("target.url is not a valid URL") from None
    if url.scheme not in ("http", "https") or not host:
        raise InvalidInputError("target.url must be an absolute http:// or https:// URL")
    try:  # what the resolver hands to getaddrinfo (an IP literal always passes)
        (url.raw_host or "").encode("idna")
    except UnicodeError:
        raise InvalidInputError(
            "target.url has a host name that cannot be looked up "
            "(an empty label, or one longer than 63 characters)"
        ) from None
    return url


def redacted_url(text: str) -> str:
    """A target URL as tables, plans and logs may show it: the user info and every query value
    become ``***`` (they may be credentials or tokens), the fragment goes; a URL that does not
    parse is not shown at all. Errors name ``scheme://host:port`` only
    (:func:`cronwheel.ssrf.endpoint`)."""
    try:
        url = URL(text)
        shown = url.with_user(None).with_query([(key, "***") for key in url.query]).with_fragment(None)
    except (ValueError, TypeError):
        return "(a URL that does not parse)"
    masked = str(shown)
    if url.raw_user is not None or url.raw_password is not None:
        scheme, sep, rest = masked.partition("://")
        masked = f"{scheme}{sep}***@{rest}" if sep else "***@" + masked
    return masked


# -- python --------------------------------------------------------------------------------------


def check_python(target: PythonTarget) -> None:
    """``package.module:function``: a dotted module path and one function name, as the API's
    schema says. An attribute path (``mod:helper.attr``) would reach whatever ``mod`` imported,
    and a ``__dunder__`` name what every module has (:mod:`cronwheel.python_targets`)."""
    module, sep, function = target.function.partition(":")
    dunder = function.startswith("__") and function.endswith("__")
    if not sep or not _dotted(module) or not function.isidentifier() or dunder:
        raise InvalidInputError(
            "target.function must be 'package.module:function' (a dotted module path, then one function name)"
        )


def _dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


# -- broker targets (shared by rabbitmq and kafka) -------------------------------------------------


def _check_message_headers(target: RabbitMqTarget | KafkaTarget) -> None:
    """Message header names are tokens (as HTTP header names, so one name works for every
    target) of at most :data:`MAX_SHORTSTR` bytes; values are text (secret references checked
    once resolved)."""
    for name, value in target.headers:
        if not _TOKEN.fullmatch(name) or len(name) > MAX_SHORTSTR:
            raise InvalidInputError(
                f"target.headers has a name that is not a token of at most {MAX_SHORTSTR} characters: "
                f"{name!r}"
            )
        field = f"target.headers[{name!r}]"
        if isinstance(value, SecretRef):
            _check_reference(field, value)
        else:
            _utf8(field, value)


def _check_credentials(target: RabbitMqTarget | KafkaTarget) -> None:
    for field, value in (("target.username", target.username), ("target.password", target.password)):
        if isinstance(value, SecretRef):
            _check_reference(field, value)
        elif value is not None:
            _utf8(field, value)
            if "\0" in value:
                raise InvalidInputError(f"{field} contains a NUL byte")


def _no_user_info(field: str, url: URL) -> None:
    if url.raw_user is not None or url.raw_password is not None:
        raise InvalidInputError(
            f"{field} must not hold credentials (user info): give target.username and "
            'target.password, as {"secret": NAME} references to team secrets'
        )


def _canonical_host(field: str, raw_host: str) -> None:
    """A numeric IPv4 host only as a dotted quad (as for HTTP URLs)."""
    found = host_address(raw_host)
    if found is not None and not found.canonical:
        raise InvalidInputError(
            f"{field} has the IPv4 address {found.address} spelled {found.spelling!r}: "
            f"write it as {found.address}"
        )


# -- rabbitmq ------------------------------------------------------------------------------------

MAX_SHORTSTR = 255
"""AMQP 0-9-1 ``shortstr``: exchange names, routing keys, virtual hosts, header names (bytes)."""

AMQP_PORTS = {"amqp": 5672, "amqps": 5671}
_EXCHANGE = re.compile(r"[A-Za-z0-9_.:\-]*")  # AMQP 0-9-1's exchange-name grammar


def check_rabbitmq(target: RabbitMqTarget) -> URL:
    """Refuse what no AMQP connection could publish; returns the URL as the executor uses it."""
    url = parse_amqp_url(target.url)
    _canonical_host("target.url", url.raw_host or "")
    if not _EXCHANGE.fullmatch(target.exchange) or len(target.exchange) > MAX_SHORTSTR:
        raise InvalidInputError(
            f"target.exchange must be at most {MAX_SHORTSTR} of A-Z a-z 0-9 - _ . : "
            "(empty: the default exchange)"
        )
    if len(_utf8("target.routing_key", target.routing_key)) > MAX_SHORTSTR:
        raise InvalidInputError(f"target.routing_key is longer than {MAX_SHORTSTR} bytes (an AMQP shortstr)")
    _check_message_headers(target)
    _check_credentials(target)
    return url


def parse_amqp_url(text: str) -> URL:
    """``amqp://host[:port][/vhost]`` (``amqps://`` for TLS) as the executor reads it: a host, a
    port (default 5672, or 5671 with TLS), one path segment naming the virtual host (none:
    ``/``; a ``/`` inside it written ``%2f``), no user info, query or fragment. Messages never
    quote the URL."""
    if _CONTROL.search(text):
        raise InvalidInputError("target.url contains a control character")
    _utf8("target.url", text)
    try:
        url = URL(text)
        host = url.host
        port = url.port
    except (ValueError, TypeError):
        raise InvalidInputError("target.url is not a valid URL") from None
    if url.scheme not in AMQP_PORTS or not host:
        raise InvalidInputError("target.url must be an absolute amqp:// or amqps:// URL with a host")
    _no_user_info("target.url", url)
    if port == 0:
        raise InvalidInputError("target.url has port 0")
    if url.raw_query_string or url.raw_fragment:
        raise InvalidInputError("target.url must have no query or fragment (the target's fields say it all)")
    if "/" in url.raw_path.removeprefix("/"):
        raise InvalidInputError(
            "target.url has more than one path segment: the virtual host is one (write / as %2f)"
        )
    if len(amqp_vhost(url).encode()) > MAX_SHORTSTR:
        raise InvalidInputError(f"target.url's virtual host is longer than {MAX_SHORTSTR} bytes")
    try:
        (url.raw_host or "").encode("idna")
    except UnicodeError:
        raise InvalidInputError("target.url has a host name that cannot be looked up") from None
    return url


def amqp_vhost(url: URL) -> str:
    """The virtual host an AMQP URL names (RFC-style AMQP URI: the decoded path without its
    leading ``/``; none: ``/``)."""
    vhost = url.path.removeprefix("/")
    return vhost or "/"


def amqp_port(url: URL) -> int:
    return url.port or AMQP_PORTS[url.scheme]


# -- kafka ---------------------------------------------------------------------------------------

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
MAX_BOOTSTRAP_SERVERS = 20


def check_kafka(target: KafkaTarget) -> list[tuple[str, int]]:
    """Refuse what no Kafka producer could send; returns the bootstrap (host, port) pairs."""
    if not target.bootstrap_servers:
        raise InvalidInputError("target.bootstrap_servers must list at least one host:port")
    if len(target.bootstrap_servers) > MAX_BOOTSTRAP_SERVERS:
        raise InvalidInputError(f"target.bootstrap_servers lists more than {MAX_BOOTSTRAP_SERVERS} servers")
    servers = [kafka_server(f"target.bootstrap_servers[{index}]", text)
               for index, text in enumerate(target.bootstrap_servers)]  # fmt: skip
    if not _TOPIC.fullmatch(target.topic) or target.topic in (".", ".."):
        raise InvalidInputError('target.topic must be 1-249 of A-Z a-z 0-9 . _ - (and not "." or "..")')
    if target.key is not None:
        _utf8("target.key", target.key)
    _check_message_headers(target)
    _check_credentials(target)
    credentials = target.username is not None or target.password is not None
    if target.sasl_mechanism is not None and (target.username is None or target.password is None):
        raise InvalidInputError(
            f"target.sasl_mechanism {target.sasl_mechanism} needs target.username and target.password"
        )
    if target.sasl_mechanism is None and credentials:
        raise InvalidInputError(
            "target.username and target.password need target.sasl_mechanism "
            "(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
        )
    return servers


def kafka_server(field: str, text: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets) as (host, port); the host as the resolver gets
    it (IDNA, lower case, no brackets)."""
    if _CONTROL.search(text) or "/" in text or "@" in text or "?" in text or "#" in text:
        raise InvalidInputError(f"{field} must be host:port")
    try:
        url = URL(f"kafka://{text}")
        host, port = url.raw_host, url.explicit_port
    except (ValueError, TypeError):
        raise InvalidInputError(f"{field} must be host:port") from None
    if not host or port is None or not 0 < port < 65536:
        raise InvalidInputError(f"{field} must be host:port (a port of 1-65535)")
    try:
        host.encode("idna")
    except UnicodeError:
        raise InvalidInputError(f"{field} has a host name that cannot be looked up") from None
    _canonical_host(field, host)
    return host, port


# -- secret references ---------------------------------------------------------------------------


def _check_reference(field: str, reference: SecretRef) -> None:
    if not isinstance(reference.name, str) or not SECRET_NAME.fullmatch(reference.name):
        raise InvalidInputError(f"{field} must name a secret with 1-100 of A-Z a-z 0-9 . _ -")


def secret_references(target: Target) -> list[tuple[str, SecretRef]]:
    """Every secret ``target`` refers to, with the field that refers to it, in the API's dotted
    form (``target.headers.Authorization``, ``target.env.TOKEN``, ``target.signing_secret``)."""
    found = [(field, value) for field, value in _values(target) if isinstance(value, SecretRef)]
    if isinstance(target, HttpTarget) and target.signing_secret is not None:
        found.append(("target.signing_secret", target.signing_secret))
    return found


def plain_values(target: Target) -> list[str]:
    """The header and environment values of ``target`` held in clear in the job (not secret
    references), by field: what ``cronwheel secrets adopt`` moves into secrets."""
    return [field for field, value in _values(target) if isinstance(value, str)]


def _values(target: Target) -> list[tuple[str, Value]]:
    if isinstance(target, HttpTarget):
        return [(f"target.headers.{name}", value) for name, value in target.headers]
    if isinstance(target, CommandTarget):
        return [(f"target.env.{name}", value) for name, value in target.env]
    if isinstance(target, (RabbitMqTarget, KafkaTarget)):
        return _broker_values(target)
    return []


def _broker_values(target: RabbitMqTarget | KafkaTarget) -> list[tuple[str, Value]]:
    """A broker target's header values, then its username and password (those set)."""
    found: list[tuple[str, Value]] = [(f"target.headers.{name}", value) for name, value in target.headers]
    for field, value in (("target.username", target.username), ("target.password", target.password)):
        if value is not None:
            found.append((field, value))
    return found
