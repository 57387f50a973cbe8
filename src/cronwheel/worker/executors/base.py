"""What every executor shares: the attempt's context, the worker's settings, the protocol.

An executor performs one attempt of a run against its target and reports an
:class:`~cronwheel.store.port.AttemptResult`. It never raises for anything the target or its
configuration did (unreachable host, bad exit code, exception, timeout): those are outcomes. It
raises only ``asyncio.CancelledError`` when the worker cancels the attempt, after cleaning up.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from cronwheel import __version__
from cronwheel.errors import TransientError
from cronwheel.model import AttemptResult, Job, Outcome, Run, Target, utc_text
from cronwheel.secrets.resolve import UNREADABLE, Resolved, SecretResolver, SecretUnavailableError
from cronwheel.targets import python as python_targets
from cronwheel.targets.kinds import secret_references
from cronwheel.worker.executors.isolation import CommandIsolation
from cronwheel.worker.executors.live import OutputSoFar

TargetT_contra = TypeVar("TargetT_contra", contravariant=True)

DEFAULT_USER_AGENT = f"cronwheel/{__version__}"


@dataclass(frozen=True, slots=True)
class AttemptContext:
    """Everything an executor may tell the target about the attempt it is making."""

    execution_id: str  # the run id: the idempotency key every attempt of the run carries
    job_id: str
    job_name: str
    team: str
    scheduled_at: datetime  # the run's slot, aware UTC
    attempt: int  # 1-based
    timeout_s: float
    payload: Any = None  # JSON value or None
    deadline: datetime | None = None  # aware UTC: the attempt must be over by then (e.g. its lease)
    # W3C ``traceparent`` (and ``tracestate``) of the attempt's span: sent by the HTTP executor;
    # empty with tracing off
    trace_headers: tuple[tuple[str, str], ...] = ()
    # where the executor shows the output so far while the attempt runs (None: nobody reads it)
    live: OutputSoFar | None = None

    @classmethod
    def for_run(
        cls,
        job: Job,
        run: Run,
        attempt: int,
        deadline: datetime | None = None,
        trace_headers: tuple[tuple[str, str], ...] = (),
        live: OutputSoFar | None = None,
    ) -> AttemptContext:
        """The context of attempt ``attempt`` of ``run``; a manual run's payload overrides the job's."""
        return cls(
            execution_id=run.id,
            job_id=job.id,
            job_name=job.name,
            team=job.team,
            scheduled_at=run.slot,
            attempt=attempt,
            timeout_s=job.timeout_s,
            payload=run.payload if run.has_payload else job.payload,
            deadline=deadline,
            trace_headers=trace_headers,
            live=live,
        )

    def budget_s(self, now: datetime) -> float:
        """Seconds the attempt may take from ``now``: its timeout, cut short by the deadline
        (0.0 when none is left, or when the timeout is not a number at all)."""
        budget = self.timeout_s
        if self.deadline is not None:
            budget = min(budget, (self.deadline - now).total_seconds())
        return budget if budget > 0 else 0.0


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What a worker lets its targets do. The defaults are the safe ones."""

    allow_commands: bool = False  # command targets run arbitrary programs: off unless opted in
    python_allow: tuple[str, ...] = ()  # fnmatch patterns on "module:function" (python_targets)
    allowed_networks: tuple[str, ...] = ()  # CIDRs HTTP targets may reach although not public
    output_limit: int = 1024  # bytes of response body / command output kept per attempt
    output_tail_bytes: int = 65_536  # ... and kept beyond that, readable with `cronwheel runs logs`
    user_agent: str = DEFAULT_USER_AGENT
    kill_grace_s: float = 2.0  # SIGTERM -> SIGKILL grace for a command's process group
    http_pool_limit: int = 512  # simultaneous HTTP connections of the whole worker
    http_pool_limit_per_host: int = 64  # ... and to one (host, port, tls) endpoint
    isolation: CommandIsolation = field(default_factory=CommandIsolation)  # user, limits, cwd
    grpc_idle_s: float = 60.0  # a gRPC channel unused this long is closed (reopened when needed)
    grpc_descriptor_ttl_s: float = 300.0  # a method's descriptors from server reflection are reused this long
    grpc_descriptor_entries: int = 1000  # ... for at most this many (address, method) pairs

    def __post_init__(self) -> None:
        python_targets.check_patterns(self.python_allow)


class Executor(Protocol[TargetT_contra]):
    """Performs one attempt against one kind of target."""

    async def execute(self, target: TargetT_contra, ctx: AttemptContext) -> AttemptResult:
        """Run the attempt and report its outcome; never raises for the target's faults."""
        ...

    async def close(self) -> None:
        """Release what the executor holds (sessions, threads)."""
        ...


async def with_secrets(
    secrets: SecretResolver,
    team: str,
    target: Target,
    attempt: Callable[[Resolved], Awaitable[AttemptResult]],
) -> AttemptResult:
    """Resolve the secrets of ``team`` that ``target`` refers to, make ``attempt`` with them, and
    keep none of their values in its result. A secret that is gone or cannot be read is an
    ``error`` outcome that says so; nothing is attempted without it."""
    names = sorted({ref.name for _, ref in secret_references(target)})
    try:
        resolved = await secrets.resolve(team, names)
    except SecretUnavailableError as error:
        return AttemptResult(Outcome.ERROR, error=str(error))
    except TransientError:
        return AttemptResult(Outcome.ERROR, error=UNREADABLE)
    return resolved.redacted(await attempt(resolved))


def rfc3339(instant: datetime) -> str:
    """``2025-03-30T01:00:00Z``: RFC 3339 in UTC with a ``Z``, sub-seconds only when present."""
    if instant.tzinfo is None:
        raise ValueError("rfc3339 needs an aware datetime")
    return utc_text(instant)


def storable(result: AttemptResult) -> AttemptResult:
    """``result`` with texts every store can keep. What a target wrote is not always text: a
    program's output or a response body may hold NUL bytes, which PostgreSQL refuses in a text
    column (the attempt could then not be recorded at all), and a Python function's return value
    or exception may hold lone surrogates, which have no UTF-8 bytes. NUL becomes U+FFFD, as an
    undecodable byte already does; a lone surrogate becomes ``?``."""
    error, output = storable_text(result.error), storable_text(result.output)
    tail = storable_text(result.output_tail)
    if error == result.error and output == result.output and tail == result.output_tail:
        return result
    return replace(result, error=error, output=output, output_tail=tail)


def storable_text(text: str | None) -> str | None:
    """``text`` as every store can keep it (see :func:`storable`)."""
    if text is None:
        return None
    if text.isascii():
        return text.replace("\0", "\ufffd")
    return text.encode(errors="replace").decode().replace("\0", "\ufffd")


def head_text(data: bytes, limit: int) -> str:
    """The first ``limit`` bytes of ``data`` as text (a UTF-8 character cut in two is dropped)."""
    if len(data) <= limit:
        return data.decode(errors="replace")
    end = max(limit, 0)
    while end > 0 and limit - end < 3 and data[end] & 0xC0 == 0x80:  # inside a character
        end -= 1
    return data[:end].decode(errors="replace")


def tail_text(data: bytes, limit: int) -> str:
    """The last ``limit`` bytes of ``data`` as text (a UTF-8 character cut in two is dropped)."""
    if len(data) <= limit:
        return data.decode(errors="replace")
    return decode_cut(data[len(data) - limit :] if limit > 0 else b"")


def decode_cut(tail: bytes) -> str:
    """Decode bytes whose beginning was cut off: leading UTF-8 continuation bytes are dropped."""
    start = 0
    while start < min(len(tail), 3) and tail[start] & 0xC0 == 0x80:
        start += 1
    return tail[start:].decode(errors="replace")
