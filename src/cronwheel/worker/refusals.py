"""Stored jobs this worker will refuse, said once at start.

The target options (``--allow-commands``, ``--allow-python``) are checked when a job is written,
on the API node, and again at every attempt, on the worker. A worker started without an option
that an existing job needs (restarted without ``--allow-commands``; a ``--allow-python`` pattern
narrowed) turns every run of that job into an ``error`` outcome, silently until someone reads the
runs. At start the worker therefore reads the live jobs of the queues it serves and logs, as
WARNING facts, how many it will refuse and the first :data:`LISTED` of them with the option that
would allow each (``action=refused_jobs``, then ``action=refused_job`` per job).

One pass over the jobs (pages of :data:`PAGE`), in the background: it delays nothing, and a store
that cannot be read now only loses the warning.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cronwheel.errors import TransientError
from cronwheel.model import CommandTarget, Job, PythonTarget, Target
from cronwheel.store.port import JobQuery, JobReads
from cronwheel.targets import python as python_targets
from cronwheel.worker.executors.base import WorkerSettings

log = logging.getLogger("cronwheel.worker")

LISTED = 20  # jobs named one by one; the count covers the rest
PAGE = 1000


def refusal(target: Target, settings: WorkerSettings) -> str | None:
    """The option that would let this worker run ``target`` (or "no option: why" when none
    would); None when it runs it already (the same rules as the command and python executors)."""
    if isinstance(target, CommandTarget) and not settings.allow_commands:
        return "--allow-commands"
    if isinstance(target, PythonTarget):
        refused = python_targets.refusal(target.function, settings.python_allow)
        if refused is None:
            return None
        if python_targets.refusal(target.function, (target.function,)) is None:  # a pattern helps
            return f"--allow-python '{target.function}'"
        return f"no option: {refused}"
    return None


async def refused_jobs(
    store: JobReads, settings: WorkerSettings, queues: Sequence[str], listed: int = LISTED
) -> tuple[int, list[tuple[Job, str]]]:
    """How many live jobs of ``queues`` this worker refuses, and the first ``listed`` of them
    with the option each needs."""
    served = set(queues)
    count, first = 0, list[tuple[Job, str]]()
    cursor: str | None = None
    while True:
        page = await store.list_jobs(JobQuery(limit=PAGE, cursor=cursor))
        for job in page.items:
            option = refusal(job.target, settings) if job.queue in served else None
            if option is not None:
                count += 1
                if len(first) < listed:
                    first.append((job, option))
        if page.next_cursor is None:
            return count, first
        cursor = page.next_cursor


async def warn_refused_jobs(
    store: JobReads, settings: WorkerSettings, queues: Sequence[str], node: str
) -> int:
    """Log the refused jobs (see the module docstring); returns how many there are."""
    try:
        count, first = await refused_jobs(store, settings, queues)
    except TransientError as error:
        log.warning(
            "could not check the stored jobs against this worker's options",
            extra={"action": "refused_jobs", "node": node, "error": str(error)},
        )
        return 0
    if count:
        log.warning(
            "stored jobs whose runs will fail on this worker: their targets are not allowed here",
            extra={"action": "refused_jobs", "node": node, "count": count, "listed": len(first)},
        )
    for job, option in first:
        log.warning(
            "every run of this job will fail on this worker: start the worker with the option `allow`",
            extra={
                "action": "refused_job",
                "node": node,
                "job_id": job.id,
                "team": job.team,
                "job": job.name,
                "queue": job.queue,
                "target": job.target.type,
                "allow": option,
            },
        )
    return count
