"""What a target can hold: the limits of the things that run it, checked where a job is written
and again where an attempt starts. Each kind's own check (``check_http`` ...) is in its module of
:mod:`cronwheel.targets.kinds`; the limits and rules below, which kinds share, are here.

These are not the operator's choices (that is :class:`cronwheel.jobs.service.TargetPolicy`) but what
the operating system, the HTTP client and the import system cannot take at all. A target that
breaks one of them could never make a single attempt, so :meth:`JobService.validate
<cronwheel.jobs.service.JobService.validate>` refuses it whole, for every writer (API, CLI, ``apply``).
The executors run the same checks before each attempt, so that a job stored before a check
existed, or written around the service, ends as an ``error`` outcome that says why, not as an
exception inside the worker.

* **command** (``execve``): C strings, so no NUL byte in ``argv``, ``env`` or ``cwd``; UTF-8 text
  (a lone surrogate has no bytes); an environment name that is not empty and holds no ``=``; one
  argument or ``NAME=value`` of at most :data:`MAX_ARG_BYTES` (Linux's ``MAX_ARG_STRLEN``), and
  all of them together at most :data:`MAX_EXEC_BYTES` (``E2BIG``); ``cwd`` absolute. A ``cwd``
  that is not an existing directory is the target's fault at run time: it may be created later.
* **hosts** (every kind that names one: HTTP and broker URLs, gRPC addresses, Kafka servers,
  notification webhooks): no forbidden domain code point of the WHATWG URL Standard once
  percent-decoded (:func:`forbidden_host_code_point`: ``127.0.0.1%09``, ``hooks example.com``).
* **http** (aiohttp, yarl, the resolver): a URL without control characters that yarl parses,
  ``http`` or ``https`` with a host
  whose name the IDNA codec can encode (what ``getaddrinfo`` is handed); a numeric IPv4 host only
  as a dotted quad (aiohttp refuses ``2130706433``, ``127.1`` or ``0177.0.0.1``; the resolver
  would read ``0x7f000001`` but no one writes that but to hide an address); a method that is an
  HTTP token; header names that are tokens and values without the control characters aiohttp
  refuses (all but horizontal tab); not both user info in the URL and an ``Authorization``
  header (aiohttp sends the user info as one and refuses the pair). Non-ASCII header values are
  sent as UTF-8, so they are accepted.
* **grpc** (grpcio, protobuf): an ``address`` ``host:port`` (a port 1-65535; a numeric IPv4 host
  only as a dotted quad, as for HTTP; an IPv6 host in brackets; no user info: credentials go in
  ``metadata`` as secret references); a ``method`` ``package.Service/Method``; ``metadata`` keys
  that gRPC takes as text keys (lower-case ``0-9 a-z _ . -``, not ``grpc-`` reserved ones, not
  ``-bin`` binary ones) with printable ASCII values; a ``descriptor_set`` that is base64 of a
  serialized ``google.protobuf.FileDescriptorSet`` defining the method (:func:`method_descriptor`).
* **python** (``importlib``): ``package.module:function``, a dotted module path and one function
  name (not a ``__dunder__``). Which functions may run is :mod:`cronwheel.targets.python`.
* **nats** and **mqtt** (nats-py, aiomqtt): a broker URL ``nats://`` or ``tls://`` (NATS),
  ``mqtt://`` or ``mqtts://`` (MQTT) with a host (as for HTTP) and nothing after the port, and never
  user info (credentials go in the target's ``user``/``username``, ``password`` and ``token``
  fields, as secret references); a NATS subject to publish to (``.``-separated tokens, none empty,
  no whitespace and no wildcard ``*`` or ``>``), NATS header names that are tokens and values
  without control characters; an MQTT topic name to publish to (1 to 65535 bytes of UTF-8, no NUL
  and no wildcard ``+`` or ``#``), QoS 1 or 2.
* **rabbitmq** (aiormq, AMQP 0-9-1): ``amqp://host[:port][/vhost]`` or ``amqps://`` with a host,
  no user info (credentials go in ``username``/``password``, as secret references), no query or
  fragment (aiormq would read options such as ``no_verify_ssl`` there), the virtual host one path
  segment; an exchange name of AMQP's grammar; exchange, routing key and virtual host at most
  :data:`MAX_SHORTSTR` bytes (AMQP ``shortstr``).
* **kafka** (aiokafka): 1-:data:`MAX_BOOTSTRAP_SERVERS` ``host:port`` servers; a topic name Kafka
  takes (``[A-Za-z0-9._-]{1,249}``, not ``.`` or ``..``); SASL with both credentials, credentials
  only with SASL.
* **broker headers** (both): names are tokens of at most 255 characters, values UTF-8 text.
* **secret references** (:class:`~cronwheel.targets.values.SecretRef`, in a header or environment value,
  as an HTTP target's ``signing_secret``, as a broker's credentials): a secret name
  (:data:`SECRET_NAME`). What the secret holds is checked where it is known, when the worker has
  resolved it: the resolved target goes through the same checks before the attempt is made.

Every check raises :class:`~cronwheel.errors.InvalidInputError` whose message names the field
(``target.argv[1] contains a NUL byte``) and never quotes a value: header and environment values
may be secrets.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.ssrf import host_address
from cronwheel.targets.values import SecretRef, Value

if TYPE_CHECKING:
    from google.protobuf.descriptor import MethodDescriptor

MAX_ARG_BYTES = 128 * 1024 - 1
"""One argument or ``NAME=value``, in bytes: Linux refuses a longer one (``MAX_ARG_STRLEN`` is 32
pages, the terminating NUL included) whatever the stack limit."""

MAX_EXEC_BYTES = 1024 * 1024
"""``argv`` and ``env`` together as ``execve`` counts them (each string with its NUL, plus a
pointer). Linux allows a quarter of the stack limit, 2 MiB with the usual 8 MiB; half of that
leaves room for the worker's own variables. A worker with a smaller stack limit may still refuse
less, which its attempts then report as an error."""

POINTER_BYTES = 8
TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token (header names, methods)
HEADER_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what aiohttp refuses in a header
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SECRET_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")  # as the API's names of teams and jobs


# -- command -------------------------------------------------------------------------------------


def exec_string(field: str, text: str) -> int:
    """The bytes ``execve`` copies for ``text`` (its NUL included), once it is known to fit."""
    size = len(c_text(field, text)) + 1
    if size > MAX_ARG_BYTES + 1:
        raise InvalidInputError(f"{field} is {size - 1} bytes; at most {MAX_ARG_BYTES} are accepted")
    return size


def c_text(field: str, text: str) -> bytes:
    """``text`` as the bytes a C string gets, or why it cannot be one."""
    if "\0" in text:
        raise InvalidInputError(f"{field} contains a NUL byte")
    return utf8(field, text)


def utf8(field: str, text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise InvalidInputError(f"{field} is not valid Unicode text (it holds a lone surrogate)") from None


# -- http ----------------------------------------------------------------------------------------


def parse_url(text: str) -> URL:
    """The target URL as the HTTP client will use it. Messages never quote the URL: its query or
    user info may hold a secret."""
    if _CONTROL.search(text):
        raise InvalidInputError("target.url contains a control character")
    utf8("target.url", text)
    try:
        url = URL(text)
        host = url.host  # decodes punycode ("xn--..."), which may fail
    except (ValueError, TypeError):  # UnicodeError is a ValueError
        raise InvalidInputError("target.url is not a valid URL") from None
    if url.scheme not in ("http", "https") or not host:
        raise InvalidInputError("target.url must be an absolute http:// or https:// URL")
    check_host_code_points("target.url", url)
    try:  # what the resolver hands to getaddrinfo (an IP literal always passes)
        (url.raw_host or "").encode("idna")
    except UnicodeError:
        raise InvalidInputError(
            "target.url has a host name that cannot be looked up "
            "(an empty label, or one longer than 63 characters)"
        ) from None
    return url


FORBIDDEN_HOST_CODE_POINTS = frozenset("\x00\t\n\r #/:<>?@[\\]^|")
"""The WHATWG URL Standard's forbidden host code points."""
FORBIDDEN_DOMAIN_CODE_POINTS = (
    FORBIDDEN_HOST_CODE_POINTS | {chr(code) for code in range(0x20)} | {"%", "\x7f"}
)
"""The WHATWG URL Standard's forbidden domain code points: the host ones, C0 controls, ``%`` and
DELETE. No name a resolver looks up holds one."""
NOT_UTF8 = "\ufffd"
"""What :func:`forbidden_host_code_point` answers for a host whose percent-decoded bytes are not
UTF-8."""


def forbidden_host_code_point(host: str) -> str | None:
    """The first forbidden domain code point of ``host`` (a URL's host as written, an IPv6
    literal's brackets excluded) once percent-decoded, :data:`NOT_UTF8` when the decoded bytes are
    not UTF-8, or None: a host that holds one is no host name at all (``127.0.0.1%09``,
    ``hooks example.com``, ``a%2fb``), and no attempt could reach it."""
    try:
        decoded = unquote(host, errors="strict")
    except UnicodeDecodeError:
        return NOT_UTF8
    return next((char for char in decoded if char in FORBIDDEN_DOMAIN_CODE_POINTS), None)


def check_host_code_points(field: str, url: URL) -> None:
    """Refuse ``url`` whose host holds a forbidden code point (:func:`forbidden_host_code_point`);
    an IPv6 literal, which the URL parser has validated, has none. The message names the code
    point, never the host."""
    raw = url.raw_host or ""
    found = None if ":" in raw else forbidden_host_code_point(raw)
    if found == NOT_UTF8:
        raise InvalidInputError(f"{field} has a host whose percent-encoded bytes are not UTF-8")
    if found is not None:
        raise InvalidInputError(
            f"{field} has a host holding U+{ord(found):04X}, which no host name may contain "
            "(once percent-decoded)"
        )


def redacted_url(text: str) -> str:
    """A target URL as tables, plans and logs may show it: the user info and every query value
    become ``***`` (they may be credentials or tokens), the fragment goes; a URL that does not
    parse is not shown at all. Errors name ``scheme://host:port`` only
    (:func:`cronwheel.targets.ssrf.endpoint`)."""
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


# -- reserved header names -------------------------------------------------------------------------

HOP_BY_HOP_HEADERS = frozenset(
    {"connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade", "trailer"}
)
"""Connection-specific header fields (RFC 9110 section 7.6.1; HTTP/2 and so gRPC forbid them)."""
CLIENT_HEADERS = HOP_BY_HOP_HEADERS | {"host", "content-length", "content-type"}
"""What the client writes from the URL, the body and the connection (lower case). A target's
``Content-Type`` stays allowed over HTTP (cronwheel sets it only with a payload); gRPC's is its own."""
CRONWHEEL_HEADERS = frozenset(
    {"idempotency-key", "webhook-id", "webhook-timestamp", "webhook-signature", "nats-msg-id",
     "traceparent", "tracestate"}
)  # fmt: skip
"""What cronwheel sets on each attempt (lower case), besides every ``X-Cronwheel-*`` name: the
webhook contract, NATS's message id and the trace context. Over any of them an attempt's own
value wins."""
CRONWHEEL_PREFIX = "x-cronwheel-"


def client_header(name: str, *, grpc: bool = False) -> str | None:
    """Why no target may set the header (or gRPC metadata key, ``grpc``) ``name``, any case,
    because the client writes it (:data:`CLIENT_HEADERS`; ``Content-Type`` only for gRPC), or
    None. An attempt could not honour it, and ``Host`` would name another site than the URL's."""
    lowered = name.lower()
    if lowered in HOP_BY_HOP_HEADERS:
        return "a hop-by-hop header, which only the client sets for its connection"
    if lowered in CLIENT_HEADERS and (grpc or lowered != "content-type"):
        return "set by the client from the URL and the body"
    return None


def reserved_header(name: str, *, grpc: bool = False) -> str | None:
    """Why a target may not set the header ``name``, any case: :func:`client_header`, or one
    cronwheel sets itself (:data:`CRONWHEEL_HEADERS`, ``X-Cronwheel-*``); None when it may."""
    why = client_header(name, grpc=grpc)
    lowered = name.lower()
    if why is None and (lowered in CRONWHEEL_HEADERS or lowered.startswith(CRONWHEEL_PREFIX)):
        return "set by cronwheel on each attempt"
    return why


def check_client_header(field: str, name: str) -> None:
    """Refuse what :func:`client_header` says; asked before every HTTP and gRPC attempt too."""
    why = client_header(name, grpc=field == "target.metadata")
    if why is not None:
        raise InvalidInputError(f"{field}.{name} is {why}; a target may not set it")


# -- brokers (nats, mqtt) ------------------------------------------------------------------------

NATS_SCHEMES = {"nats": 4222, "tls": 4222}  # scheme -> default port
MQTT_SCHEMES = {"mqtt": 1883, "mqtts": 8883}
MAX_NATS_SUBJECT = 1024  # characters: a subject is a routing key, not a message
MAX_MQTT_TOPIC_BYTES = 65535  # a UTF-8 string of MQTT is prefixed by its 16-bit length
NATS_SUBJECT_BAD = re.compile(r"[\s*>\x00-\x1f\x7f]")


def parse_broker_url(text: str, schemes: dict[str, int]) -> URL:
    """``target.url`` of a broker target as the executor connects to it: one of ``schemes``, a
    host, an optional port, nothing else. User info is refused (credentials belong in the
    target's credential fields, as secret references). Messages never quote the URL."""
    wanted = " or ".join(f"{scheme}://host:port" for scheme in schemes)
    if _CONTROL.search(text):
        raise InvalidInputError("target.url contains a control character")
    utf8("target.url", text)
    try:
        url = URL(text)
        host = url.host
        url.port  # noqa: B018 - a port out of range raises here
    except (ValueError, TypeError):
        raise InvalidInputError(f"target.url is not a valid URL (want {wanted})") from None
    if url.scheme not in schemes or not host:
        raise InvalidInputError(f"target.url must be {wanted}")
    if url.raw_user is not None or url.raw_password is not None:
        raise InvalidInputError(
            "target.url must not hold credentials (user info): put them in the target's credential "
            'fields, as secret references ({"secret": NAME})'
        )
    if url.raw_path not in ("", "/") or url.raw_query_string or url.raw_fragment:
        raise InvalidInputError(f"target.url must be {wanted}, with nothing after the port")
    return _checked_host(url, "target.url")


# -- grpc ----------------------------------------------------------------------------------------

GRPC_METHOD = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)/([A-Za-z_][A-Za-z0-9_]*)")
"""``package.Service/Method``: the service's full name (the package may be empty), one method."""
GRPC_METADATA_KEY = re.compile(r"[0-9a-z_.-]{1,200}")  # gRPC's text keys (lower-case ASCII)
GRPC_VALUE = re.compile(r"[\x20-\x7e]*")  # gRPC's ASCII values: printable, no control characters
MAX_DESCRIPTOR_SET_CHARS = 256 * 1024
"""Base64 characters of a job's ``descriptor_set`` (it is stored with the job and read by every
attempt); a service's own .proto files with their imports are a few KiB."""


def grpc_address(text: str) -> URL:
    """``host:port`` as ``grpc://host:port``, or why it is not one (never quoting it)."""
    if _CONTROL.search(text) or any(char in text for char in "/?#\\ "):
        raise InvalidInputError(
            "target.address must be host:port (no scheme, path, spaces or control characters)"
        )
    if "@" in text:
        raise InvalidInputError(
            "target.address must not hold credentials (user info); send them in target.metadata "
            'with a secret reference ({"secret": NAME})'
        )
    utf8("target.address", text)
    try:
        url = URL(f"grpc://{text}")
        host, port = url.host, url.explicit_port
    except (ValueError, TypeError):
        raise InvalidInputError("target.address is not host:port (IPv6 goes in brackets)") from None
    if not host or port is None or not 0 < port < 65536:
        raise InvalidInputError("target.address must be host:port with a port 1-65535")
    return _checked_host(url, "target.address")


def _checked_host(url: URL, field: str) -> URL:
    """``url`` once its host can be looked up and an IPv4 address in it is spelled as a dotted
    quad (what the resolver and the connecting client will read); messages name ``field``."""
    check_host_code_points(field, url)
    try:
        (url.raw_host or "").encode("idna")
    except UnicodeError:
        raise InvalidInputError(
            f"{field} has a host name that cannot be looked up "
            "(an empty label, or one longer than 63 characters)"
        ) from None
    found = host_address(url.raw_host or "")
    if found is not None and not found.canonical:
        raise InvalidInputError(
            f"{field} has the IPv4 address {found.address} spelled {found.spelling!r}: "
            f"write it as {found.address}"
        )
    return url


def check_metadata_key(name: str) -> None:
    if not GRPC_METADATA_KEY.fullmatch(name):
        raise InvalidInputError(
            f"target.metadata has a key that is not a gRPC metadata key (lower-case 0-9 a-z _ . -): {name!r}"
        )
    if name.startswith("grpc-"):
        raise InvalidInputError(f"target.metadata[{name!r}]: keys starting with 'grpc-' are reserved to gRPC")
    if name.endswith("-bin"):
        raise InvalidInputError(
            f"target.metadata[{name!r}]: binary ('-bin') metadata is not supported; values are text"
        )


def method_descriptor(descriptor_set: str, method: str) -> MethodDescriptor:
    """The descriptor of ``method`` (``package.Service/Method``) in ``descriptor_set`` (base64 of
    a serialized ``FileDescriptorSet``), or why there is none (InvalidInputError naming
    ``target.descriptor_set``). Imports the set leaves out that protobuf itself ships (the
    well-known types) are taken from protobuf."""
    from google.protobuf import descriptor_pb2  # noqa: PLC0415 - protobuf only for gRPC targets

    if len(descriptor_set) > MAX_DESCRIPTOR_SET_CHARS:
        raise InvalidInputError(
            f"target.descriptor_set is {len(descriptor_set)} characters; at most {MAX_DESCRIPTOR_SET_CHARS}"
        )
    try:
        data = base64.b64decode(descriptor_set, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInputError("target.descriptor_set is not base64") from None
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except Exception:  # protobuf's DecodeError, or a RuntimeWarning-free failure of the C parser
        raise InvalidInputError("target.descriptor_set is not a serialized FileDescriptorSet") from None
    return find_method(list(files.file), method, "target.descriptor_set")


def find_method(files: list[Any], method: str, where: str) -> MethodDescriptor:
    """``method`` in a pool built from ``files`` (``FileDescriptorProto`` records), or
    InvalidInputError saying what ``where`` lacks."""
    from google.protobuf import descriptor_database, descriptor_pool  # noqa: PLC0415

    database = descriptor_database.DescriptorDatabase()
    names = {file.name for file in files}
    todo = list(files)
    while todo:
        file = todo.pop()
        for dependency in file.dependency:  # the well-known types, when the set leaves them out
            if dependency not in names:
                names.add(dependency)
                todo.append(_builtin_file(dependency, where))
        try:
            database.Add(file)
        except Exception as error:  # two different files of one name
            raise InvalidInputError(f"{where} is inconsistent: {error}") from None
    service, _, name = method.partition("/")
    pool = descriptor_pool.DescriptorPool(database)
    try:
        found = pool.FindServiceByName(service).methods_by_name.get(name)
    except KeyError:
        raise InvalidInputError(f"{where} does not define the service {service}") from None
    except (TypeError, ValueError) as error:  # a file that does not build (a missing type ...)
        raise InvalidInputError(f"{where} does not build: {error}") from None
    if found is None:
        raise InvalidInputError(f"{where} does not define the method {method}")
    return found


def _builtin_file(name: str, where: str) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool  # noqa: PLC0415

    try:
        builtin = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise InvalidInputError(f"{where} imports {name}, which it does not include") from None
    proto = descriptor_pb2.FileDescriptorProto()
    builtin.CopyToProto(proto)
    return proto


def broker_port(url: URL, schemes: dict[str, int]) -> int:
    """The port a broker URL names, or its scheme's default."""
    return url.explicit_port or schemes[url.scheme]


def check_header(field: str, name: str, value: Value) -> None:
    if not TOKEN.fullmatch(name):
        raise InvalidInputError(f"{field} has a name that is not a header token: {name!r}")
    if isinstance(value, SecretRef):  # checked once resolved, by the worker
        check_reference(f"{field}[{name!r}]", value)
        return
    if HEADER_CONTROL.search(value):
        raise InvalidInputError(f"{field}[{name!r}] contains a control character")
    utf8(f"{field}[{name!r}]", value)


def check_credential(field: str, value: Value | None) -> None:
    if value is None:
        return
    if isinstance(value, SecretRef):
        check_reference(field, value)
        return
    if "\0" in value or _CONTROL.search(value):
        raise InvalidInputError(f"{field} contains a control character")
    utf8(field, value)


# -- python --------------------------------------------------------------------------------------


def dotted(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


# -- rabbitmq and kafka ----------------------------------------------------------------------------

MAX_SHORTSTR = 255
"""AMQP 0-9-1 ``shortstr``: exchange names, routing keys, virtual hosts, header names (bytes)."""

AMQP_SCHEMES = {"amqp": 5672, "amqps": 5671}  # scheme -> default port
EXCHANGE = re.compile(r"[A-Za-z0-9_.:\-]*")  # AMQP 0-9-1's exchange-name grammar


def parse_amqp_url(text: str) -> URL:
    """``amqp://host[:port][/vhost]`` (``amqps://`` for TLS) as the executor reads it: a host, a
    port (default 5672, or 5671 with TLS), one path segment naming the virtual host (none:
    ``/``; a ``/`` inside it written ``%2f``), no user info, query or fragment (aiormq would read
    options such as ``no_verify_ssl`` there). Messages never quote the URL."""
    if _CONTROL.search(text):
        raise InvalidInputError("target.url contains a control character")
    utf8("target.url", text)
    try:
        url = URL(text)
        host = url.host
        port = url.port
    except (ValueError, TypeError):
        raise InvalidInputError("target.url is not a valid URL") from None
    if url.scheme not in AMQP_SCHEMES or not host:
        raise InvalidInputError("target.url must be an absolute amqp:// or amqps:// URL with a host")
    if url.raw_user is not None or url.raw_password is not None:
        raise InvalidInputError(
            "target.url must not hold credentials (user info): put them in target.username and "
            'target.password, as secret references ({"secret": NAME})'
        )
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
    return _checked_host(url, "target.url")


def amqp_vhost(url: URL) -> str:
    """The virtual host an AMQP URL names (the decoded path without its leading ``/``; none:
    ``/``)."""
    vhost = url.path.removeprefix("/")
    return vhost or "/"


TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")  # what Kafka takes as a topic name (not "." or "..")
MAX_BOOTSTRAP_SERVERS = 20


def kafka_server(field: str, text: str) -> URL:
    """``host:port`` (an IPv6 host in brackets) as ``kafka://host:port``, or why it is not one."""
    if _CONTROL.search(text) or any(char in text for char in "/?#@\\ "):
        raise InvalidInputError(f"{field} must be host:port")
    utf8(field, text)
    try:
        url = URL(f"kafka://{text}")
        host, port = url.raw_host, url.explicit_port
    except (ValueError, TypeError):
        raise InvalidInputError(f"{field} must be host:port") from None
    if not host or port is None or not 0 < port < 65536:
        raise InvalidInputError(f"{field} must be host:port (a port of 1-65535)")
    return _checked_host(url, field)


def check_broker_headers(headers: tuple[tuple[str, Value], ...]) -> None:
    """A rabbitmq or kafka target's headers: names are tokens (as HTTP's) of at most
    :data:`MAX_SHORTSTR` characters (an AMQP table key), values as HTTP header values."""
    for name, value in headers:
        check_header("target.headers", name, value)
        if len(name) > MAX_SHORTSTR:
            raise InvalidInputError(f"target.headers has a name longer than {MAX_SHORTSTR} characters")


# -- secret references ---------------------------------------------------------------------------


def check_reference(field: str, reference: SecretRef) -> None:
    if not isinstance(reference.name, str) or not SECRET_NAME.fullmatch(reference.name):
        raise InvalidInputError(f"{field} must name a secret with 1-100 of A-Z a-z 0-9 . _ -")
