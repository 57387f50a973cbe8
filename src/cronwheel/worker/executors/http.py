"""HTTP webhook targets: one request per attempt over one shared, guarded connection pool
(:mod:`cronwheel.worker.executors.wire`).

The webhook contract (docs/service.md, the HTTP headers): every attempt carries the execution id
as ``Idempotency-Key`` and as the Standard Webhooks ``webhook-id`` (with ``webhook-timestamp``),
the job id, the slot (RFC 3339 UTC) and the attempt number. Redirects are never followed. Success
is any 2xx, or exactly the target's ``expected_status`` codes when it lists them.

**SSRF guard.** A worker must not become a way to reach what only the worker can reach (cloud
metadata at 169.254.169.254, databases on 10/8, admin ports on loopback). The check runs on the
addresses the socket actually connects to, at two points of the client's connection pool:

1. the pool's resolver is wrapped (:class:`GuardedResolver`): a host name whose answer
   contains any refused address is refused whole, before any connection is tried;
2. the pool's socket factory (:func:`guarded_socket_factory`) checks the very address each
   socket is about to connect to. This covers IP-literal URLs (which are never resolved) and
   anything that could get past step 1, so a DNS answer that changes between a check and the
   connect (DNS rebinding) cannot slip through: the check and the connect use the same address.

Before either, the URL's host itself is judged as the service judged it when the job was written
(:func:`cronwheel.targets.ssrf.url_refusal`: numeric hosts in every spelling ``inet_aton`` reads, IPv6
literals, ``localhost`` and metadata names), for jobs stored before that check existed; that
judgement and the header rules depend on the target alone, so the executor makes them once per
job target and keeps the answer (a target with secret references: at every attempt, once they
are resolved, and nothing resolved is kept). What is
refused is :data:`cronwheel.targets.ssrf.DENY_TABLE` (private, loopback, link-local, multicast, reserved,
documentation, unspecified ... IPv4 and IPv6, IPv4 carried in IPv6 judged as itself), unless inside
``WorkerSettings.allowed_networks``. A refused attempt is ``Outcome.ERROR`` and nothing is sent.
The client never uses a proxy, so the checked address is always the target's own, and keeps no
cookies: one team's target cannot set cookies that another team's request would carry.

Header values (they may hold secrets) are never logged; neither is the URL's query string or user
info (error strings name ``scheme://host:port`` only). What the attempt keeps of the request's
headers (``AttemptResult.request_headers``, shown on the run page) is what the client wrote, in
order (every header: ours, the target's, ``Host`` and ``Content-Length``), and goes through
:func:`cronwheel.redaction.kept_headers`: credentials by name, the signature, and every value
that came from or holds a team secret become ``[redacted]``. The headers of the answer
(``AttemptResult.response_headers``) are kept the same way (``Set-Cookie`` included).

**Secrets and signatures.** A header value may be a reference to a team secret; the attempt
resolves it first (:mod:`cronwheel.secrets.resolve`: one store read, or a cached sealed copy),
sends the value, and redacts every resolved value from what it keeps (the response's head, the
error). When the job names a signing secret, or its team has a default one
(:data:`~cronwheel.secrets.signing.TEAM_DEFAULT`), the request carries a Standard Webhooks
``webhook-signature`` over ``webhook-id``, ``webhook-timestamp`` and the exact body bytes sent
(:mod:`cronwheel.secrets.signing`). A secret that cannot be had (deleted, no key on this worker)
ends the attempt as ``Outcome.ERROR`` saying which and why, and nothing is sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import math
import re
import socket
from collections.abc import Sequence
from datetime import UTC, datetime

import aiohttp
from aiohappyeyeballs import AddrInfoType, SocketFactoryType
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInputError, TransientError
from cronwheel.model import AttemptResult, HttpTarget, Outcome, SecretRef
from cronwheel.redaction import kept_headers
from cronwheel.secrets.resolve import UNREADABLE, Resolved, SecretResolver, SecretUnavailableError
from cronwheel.secrets.signing import TEAM_DEFAULT, SigningSecretError, signature_header, signing_keys
from cronwheel.targets.checks import parse_url
from cronwheel.targets.kinds.http import check_http
from cronwheel.targets.ssrf import IPNetwork, address_refusal, endpoint, parse_networks, url_refusal
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, head_text, rfc3339
from cronwheel.worker.executors.wire import (
    ConnectError,
    DisconnectedError,
    HttpPool,
    InvalidResponseError,
    ResolveError,
    WireError,
)

log = logging.getLogger(__name__)

__all__ = ["BlockedAddressError", "GuardedResolver", "HttpExecutor", "address_refusal", "parse_networks"]

_RETRY_AFTER_STATUSES = frozenset({429, 503})
_DELTA_SECONDS = re.compile(r"[0-9]+")


# -- the address check -----------------------------------------------------------------------------


class BlockedAddressError(OSError):
    """The SSRF guard refused to connect to ``address``."""

    def __init__(self, address: str, reason: str, host: str | None = None) -> None:
        where = f"{host} resolves to {address}" if host and host != address else address
        super().__init__(f"refused by the SSRF guard: {where} is {reason} (not in allowed_networks)")
        self.address = address
        self.reason = reason
        self.host = host


class GuardedResolver(AbstractResolver):
    """Wraps a resolver: an answer holding any refused address is refused whole."""

    def __init__(self, inner: AbstractResolver, allowed: Sequence[IPNetwork]) -> None:
        self._inner = inner
        self._allowed = tuple(allowed)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        for answer in answers:
            reason = address_refusal(answer["host"], self._allowed)
            if reason is not None:
                raise BlockedAddressError(answer["host"], reason, host)
        return answers

    async def close(self) -> None:
        await self._inner.close()


def guarded_socket_factory(allowed: Sequence[IPNetwork]) -> SocketFactoryType:
    """A connector ``socket_factory`` that refuses to create a socket for a refused address."""
    networks = tuple(allowed)

    def create(addr_info: AddrInfoType) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        address = str(sockaddr[0])
        reason = address_refusal(address, networks)
        if reason is not None:
            raise BlockedAddressError(address, reason)
        return socket.socket(family=family, type=type_, proto=proto)

    return create


# -- Retry-After -------------------------------------------------------------------------------------


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (RFC 9110 §10.2.3: delta-seconds or an
    HTTP-date), never negative; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322
        when = when.replace(tzinfo=UTC)
    return max((when - now).total_seconds(), 0.0)


# -- the executor ----------------------------------------------------------------------------------


class HttpExecutor:
    """Delivers HTTP webhook attempts over one lazily created, shared :class:`HttpPool`."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        resolver: AbstractResolver | None = None,
        secrets: SecretResolver | None = None,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._secrets = secrets or SecretResolver(None, None)
        self._allowed = parse_networks(self._settings.allowed_networks)
        self._clock: Clock = clock or SystemClock()
        self._inner_resolver = resolver  # default: aiohttp's DefaultResolver, made with the pool
        self._pool: HttpPool | None = None
        self._resolver: GuardedResolver | None = None
        # per job target, what does not change from one attempt to the next: the secrets it
        # names, and (for a target without secret references) its checked URL or refusal
        self._plans: dict[HttpTarget, _Plan] = {}

    @property
    def secrets(self) -> SecretResolver:
        """What resolves the teams' secrets for this executor's requests."""
        return self._secrets

    @property
    def _kept_bytes(self) -> int:
        """How much of a response body is read: the excerpt, or the longer kept output."""
        return max(self._settings.output_limit, self._settings.output_tail_bytes)

    def _longer(self, head: bytes) -> str | None:
        """The kept start of a body longer than the excerpt (None: the excerpt holds it all)."""
        return head_text(head, self._kept_bytes) if len(head) > self._settings.output_limit else None

    def _get_pool(self) -> HttpPool:
        if self._pool is None:
            self._resolver = GuardedResolver(self._inner_resolver or aiohttp.DefaultResolver(), self._allowed)
            self._pool = HttpPool(
                self._resolver,
                guarded_socket_factory(self._allowed),
                limit=self._settings.http_pool_limit,
                limit_per_host=self._settings.http_pool_limit_per_host,
                keepalive_s=30,
                dns_ttl_s=30,  # answers are checked before they are kept
            )
        return self._pool

    async def close(self) -> None:
        pool, resolver = self._pool, self._resolver
        self._pool = self._resolver = None
        if pool is not None:
            await pool.close()
        if resolver is not None:
            await resolver.close()

    def _plan(self, target: HttpTarget) -> _Plan:
        plan = self._plans.get(target)
        if plan is None:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            plan = self._plans[target] = _Plan.of(target, self)
        return plan

    async def execute(self, target: HttpTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, deliver the request, and keep none of them in the result."""
        plan = self._plan(target)
        try:
            resolved = await self._secrets.resolve(ctx.team, plan.required, plan.optional)
            keys = _signing(target, resolved, ctx.team)
        except (SecretUnavailableError, SigningSecretError) as error:
            return AttemptResult(Outcome.ERROR, error=str(error))
        except TransientError:
            return AttemptResult(Outcome.ERROR, error=UNREADABLE)
        sent = _SentHeaders()
        if plan.checked is not None:  # no secret in it: the target as stored, checked before
            sending, checked = target, plan.checked
        else:
            sending = resolved.target(target)
            checked = self._check_target(sending)
        result = resolved.redacted(await self._deliver(sending, ctx, keys, sent, checked))
        return dataclasses.replace(
            result,
            request_headers=sent.kept(plan.from_secrets, resolved),
            response_headers=sent.answer_kept(resolved),
        )

    async def _deliver(
        self,
        target: HttpTarget,
        ctx: AttemptContext,
        keys: tuple[bytes, ...],
        sent: _SentHeaders,
        checked: tuple[URL | None, str | None],
    ) -> AttemptResult:
        url, problem = checked
        if problem is not None:
            return AttemptResult(Outcome.ERROR, error=problem)
        assert url is not None
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        body = None if ctx.payload is None else json.dumps(ctx.payload, separators=(",", ":")).encode()
        headers = self._headers(target, ctx, body, keys)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(budget if math.isfinite(budget) else None):
                response, sent.headers = await self._get_pool().request(
                    target.method.upper(), url, headers, body, self._kept_bytes
                )
        except TimeoutError:
            return AttemptResult(Outcome.TIMEOUT, error=f"no complete response within {budget:g} s")
        except (WireError, OSError) as exc:
            return AttemptResult(Outcome.ERROR, error=_describe(exc, url, endpoint(url)))
        status, head = response.status, response.body
        sent.answer = tuple(response.headers)
        log.debug(
            "http attempt job=%s run=%s attempt=%d %s -> %d in %.3f s",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            endpoint(url),
            status,
            loop.time() - started,
        )
        ok = status in target.expected_status if target.expected_status else 200 <= status < 300
        error = None if ok else _status_error(status, target.expected_status)
        return AttemptResult(
            Outcome.SUCCESS if ok else Outcome.FAILURE,
            status_code=status,
            error=error,
            output=head_text(head, self._settings.output_limit),
            output_tail=self._longer(head),
            retry_after_s=(
                parse_retry_after(response.header("Retry-After"), self._clock.now())
                if status in _RETRY_AFTER_STATUSES
                else None
            ),
        )

    def _check_target(self, target: HttpTarget) -> tuple[URL | None, str | None]:
        """The target's URL, or why no request may be made: what the service refuses when a job
        is written (:mod:`cronwheel.targets.checks`, and a host that is a refused address however it
        is spelled, :mod:`cronwheel.targets.ssrf`), checked again for jobs stored before."""
        try:
            refusal = url_refusal(parse_url(target.url), self._allowed)  # first: the sharper reason
            if refusal is not None:
                return None, f"refused by the SSRF guard: {refusal} (not in allowed_networks)"
            return check_http(target), None
        except InvalidInputError as error:
            return None, str(error)

    def _headers(
        self, target: HttpTarget, ctx: AttemptContext, body: bytes | None, keys: tuple[bytes, ...]
    ) -> list[tuple[str, str]]:
        """The request's headers but Host and Content-Length (the client writes those): the
        target's, then cronwheel's own, which win over the target's (they are the contract)."""
        timestamp = int(self._clock.now().timestamp())
        ours = [
            ("Idempotency-Key", ctx.execution_id),
            ("webhook-id", ctx.execution_id),
            ("webhook-timestamp", str(timestamp)),
        ]
        if keys:  # over the exact bytes sent: the body, or nothing
            signature = signature_header(keys, ctx.execution_id, timestamp, body or b"")
            ours.append(("webhook-signature", signature))
        ours += [
            ("X-Cronwheel-Job-Id", ctx.job_id),
            ("X-Cronwheel-Scheduled-At", rfc3339(ctx.scheduled_at)),
            ("X-Cronwheel-Attempt", str(ctx.attempt)),
            *ctx.trace_headers,  # the attempt's span as the parent (tracing on)
        ]
        if ctx.payload is not None:
            ours.append(("Content-Type", "application/json"))
        replaced = {name.lower() for name, _ in ours}
        headers: list[tuple[str, str]] = []
        for name, value in target.headers:  # none the client writes: check_http refused them
            assert isinstance(value, str), "secret references are resolved before the request is made"
            if name.lower() not in replaced:
                headers.append((name, value))
        if not any(name.lower() == "user-agent" for name, _ in headers):
            headers.append(("User-Agent", self._settings.user_agent))
        return headers + ours


class _SentHeaders:
    """The headers one request was sent with, as the client wrote them (None: it was not sent),
    and those its answer came with, as read (None: no answer was read)."""

    def __init__(self) -> None:
        self.headers: tuple[tuple[str, str], ...] | None = None
        self.answer: tuple[tuple[str, str], ...] | None = None

    def answer_kept(self, resolved: Resolved) -> tuple[tuple[str, str], ...] | None:
        """What the attempt may keep of the answer's headers (credentials and values of the
        attempt's secrets redacted, bounded as the request's)."""
        if self.answer is None:
            return None
        return kept_headers(self.answer, (), list(resolved.values.values()))

    def kept(self, from_secrets: Sequence[str], resolved: Resolved) -> tuple[tuple[str, str], ...] | None:
        """What the attempt may keep of them: ``from_secrets`` names the job's headers whose
        value is a secret reference, ``resolved`` holds the secrets' values."""
        if self.headers is None:
            return None
        return kept_headers(self.headers, from_secrets, list(resolved.values.values()))


_MAX_PLANS = 4096  # job targets whose plan an executor keeps (all forgotten when it is full)


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """What an attempt of one job target needs that depends on the target alone."""

    required: list[str]  # the secrets it cannot go without
    optional: list[str]  # the team default signing secret, when it names none
    from_secrets: tuple[str, ...]  # the names of its headers whose value is a secret reference
    checked: tuple[URL | None, str | None] | None  # its URL or refusal; None: it holds secrets

    @classmethod
    def of(cls, target: HttpTarget, executor: HttpExecutor) -> _Plan:
        from_secrets = tuple(name for name, value in target.headers if isinstance(value, SecretRef))
        # a target with secret references is checked once they are resolved, at each attempt
        checked = None if from_secrets else executor._check_target(target)
        return cls(_required(target), _optional(target), from_secrets, checked)


def _required(target: HttpTarget) -> list[str]:
    """The secrets the attempt cannot go without: the headers' and the named signing secret."""
    names = [value.name for _, value in target.headers if not isinstance(value, str)]
    return names + ([target.signing_secret.name] if target.signing_secret is not None else [])


def _optional(target: HttpTarget) -> list[str]:
    """The team's default signing secret, when the job names none (it signs if it exists)."""
    return [TEAM_DEFAULT] if target.signing_secret is None else []


def _signing(target: HttpTarget, resolved: Resolved, team: str) -> tuple[bytes, ...]:
    """The HMAC keys to sign with (none: the request is not signed)."""
    name = TEAM_DEFAULT if target.signing_secret is None else target.signing_secret.name
    value = resolved.get(name)
    if value is None:
        return ()
    return signing_keys(value, f"signing secret {name!r} of team {team!r}")


def _status_error(status: int, expected: tuple[int, ...]) -> str:
    wanted = "/".join(str(code) for code in expected) if expected else "2xx"
    text = f"HTTP {status}, expected {wanted}"
    if 300 <= status < 400:
        text += " (redirects are not followed)"
    return text


def _blocked(exc: BaseException) -> BlockedAddressError | None:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, BlockedAddressError):
            return item
        todo += [getattr(item, "os_error", None), item.__cause__, item.__context__]
    return None


def _os_text(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _describe(exc: WireError | OSError, url: URL, where: str) -> str:
    """A clear error string for a failed request, without the URL's query or user info."""
    blocked = _blocked(exc)
    if blocked is not None:
        return str(blocked)
    if isinstance(exc, ResolveError):
        return f"cannot resolve {url.host}: {_os_text(exc.error)}"
    if isinstance(exc, ConnectError | OSError):  # OSError: the connection broke while sending
        return f"cannot connect to {where}: {_os_text(exc.error if isinstance(exc, ConnectError) else exc)}"
    if isinstance(exc, DisconnectedError):
        return f"{where} closed the connection before responding"
    text = _scrubbed(str(exc).replace(str(url), where), url)
    if isinstance(exc, InvalidResponseError):
        return f"invalid response from {where}: {text or 'unreadable'}"
    return f"request to {where} failed: {type(exc).__name__}" + (f": {text}" if text else "")


def _scrubbed(text: str, url: URL) -> str:
    """``text``, or nothing when it quotes the URL's user info or query in any spelling."""
    secrets = (url.raw_user, url.user, url.raw_password, url.password, url.raw_query_string, url.query_string)
    return "" if any(secret and secret in text for secret in secrets) else text
