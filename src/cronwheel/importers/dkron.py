"""Dkron jobs as its API lists them (``GET /v1/jobs``: a JSON array of job objects; one object
alone is read too).

Dkron's schedules are six-field cron (seconds first), the usual macros, ``@every <Go duration>``,
``@at <RFC 3339>`` and ``@manually``. ``~`` (a value hashed from the job's name) becomes
cronwheel's ``H``, hashed from the job's id: another value. The ``shell`` and ``http`` executors
become command and http targets; other executors, job chains (``parent_job``) and processors have
no equivalent here and are said.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from cronwheel.importers.commands import command
from cronwheel.importers.draft import PAUSE_AFTER_APPLY, Draft, finish, skipped
from cronwheel.importers.notify import email_rule_command
from cronwheel.importers.options import LABEL, Options
from cronwheel.importers.report import ImportResult, Note, NoteKind, UnreadableInputError
from cronwheel.importers.timing import (
    EVERY_FROM_EPOCH,
    NO_LIMIT_S,
    every,
    folded_fires,
    instant,
    known_zone,
    schedule_problem,
)

_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_AT_ONCE = {"initial_delay_s": 1.0, "multiplier": 1.0, "max_delay_s": 1.0, "jitter": False}
_STATE = {  # what the API answers about a job's runs, not part of its definition
    "success_count", "error_count", "last_success", "last_error", "status", "next", "id", "ephemeral",
}  # fmt: skip
_HANDLED = {
    "name", "displayname", "schedule", "timezone", "disabled", "concurrency", "retries", "executor",
    "executor_config", "metadata", "expires_at", "owner", "owner_email", "tags", "processors",
    "parent_job", "dependent_jobs",
}  # fmt: skip


def convert(text: str, options: Options) -> ImportResult:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise UnreadableInputError(f"not valid JSON: {error}") from None
    jobs = data if isinstance(data, list) else [data]
    entries: list[Draft | Note] = []
    for index, job in enumerate(jobs, start=1):
        if not isinstance(job, dict) or not isinstance(job.get("name"), str):
            raise UnreadableInputError(f"item {index} is not a Dkron job (an object with a name)")
        entries.append(_job(job, f"job {job['name']}", options))
    return finish(entries, options.team)


def _job(job: dict[str, Any], where: str, options: Options) -> Draft | Note:
    if job.get("parent_job"):
        return skipped(
            where, f"it runs after job {job['parent_job']!r} succeeds (a Dkron chain): no equivalent"
        )
    draft = Draft(where, job["name"])
    zone = known_zone(job.get("timezone")) or options.zone
    schedule = _schedule(str(job.get("schedule", "")), zone, draft)
    if schedule is None:
        return skipped(where, f"schedule {job.get('schedule')!r} has no cronwheel equivalent")
    if schedule.startswith("@every ") or schedule.startswith("@at "):
        pass  # elapsed time, or an instant with its offset: the zone changes nothing
    elif job.get("timezone") and zone != job.get("timezone"):
        draft.note(NoteKind.TIMEZONE, f"timezone {job['timezone']!r} is not a known zone; imported as {zone}")
    elif not job.get("timezone"):
        draft.note(NoteKind.TIMEZONE, f"no timezone: Dkron used its servers' zone; imported as {zone}")
    target = _target(job, draft)
    if target is None:
        return skipped(
            where, f"executor {job.get('executor')!r} has no cronwheel target; give it one by hand"
        )
    draft.job = {  # after what the target's reading set (timeout_s, payload)
        "description": str(job.get("displayname") or f"Dkron job {job['name']}")[:2000],
        "schedule": schedule,
        "timezone": zone,
        "target": target,
        **draft.job,
    }
    _policies(job, draft, options)
    return draft


def _schedule(text: str, zone: str, draft: Draft) -> str | None:
    text = text.strip()
    if text.startswith("@every "):
        seconds = _go_seconds(text.removeprefix("@every ").strip())
        if seconds is None:
            return None
        if seconds != round(seconds) or seconds < 1:
            rounded = every(seconds)
            draft.note(NoteKind.SCHEDULE, f"{text}: cronwheel's intervals are whole seconds: {rounded}")
        return every(seconds)
    if text.startswith("@at "):
        try:
            return "@at " + instant(datetime.fromisoformat(text.removeprefix("@at ").strip()))
        except ValueError:
            return None
    if text.startswith("@manually") or not text:
        return None
    if "~" in text:
        text = text.replace("~", "H")
        draft.note(
            NoteKind.SCHEDULE,
            "'~' (hashed from the job's name by Dkron) became 'H' (hashed from the job's id): "
            "it fires at another minute",
        )
    return None if schedule_problem(text, zone) else text


def _go_seconds(text: str) -> float | None:
    """A Go duration (``1h30m``, ``90s``, ``500ms``) in seconds, or None."""
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(value + unit for value, unit in parts) != text:
        return None
    return sum(float(value) * _GO_UNITS[unit] for value, unit in parts)


def _target(job: dict[str, Any], draft: Draft) -> dict[str, Any] | None:
    config = job.get("executor_config") or {}
    if not isinstance(config, dict):
        return None
    if job.get("executor") == "shell":
        return _shell(config, draft)
    if job.get("executor") == "http":
        return _http(config, draft)
    if job.get("executor") == "kafka":
        return _kafka(config, draft)
    return None


def _kafka(config: dict[str, Any], draft: Draft) -> dict[str, Any] | None:
    brokers = [item.strip() for item in str(config.get("brokerAddress", "")).split(",") if item.strip()]
    if not brokers or not config.get("topic"):
        return None
    target: dict[str, Any] = {"type": "kafka", "bootstrap_servers": brokers, "topic": str(config["topic"])}
    if config.get("key"):
        target["key"] = str(config["key"])
    if config.get("message"):
        draft.job["payload"] = _json_or_text(str(config["message"]))
        draft.note(
            NoteKind.TARGET, "message: published as the payload's JSON (a JSON string unless it parses)"
        )
    return target


def _shell(config: dict[str, Any], draft: Draft) -> dict[str, Any] | None:
    line = str(config.get("command", "")).strip()
    if not line:
        return None
    if str(config.get("shell", "false")).lower() == "true":
        argv = ["/bin/sh", "-c", line]
        draft.note(NoteKind.SHELL, "shell: true: run as ['/bin/sh', '-c', command], as Dkron did")
    else:
        run = command(line)
        argv = run.argv
        if run.wrapped:
            draft.note(
                NoteKind.SHELL,
                "the command uses shell syntax that Dkron (shell: false) passed as plain words: "
                "run as ['/bin/sh', '-c', command]; check that this is what was meant",
            )
    target: dict[str, Any] = {"type": "command", "argv": argv}
    env = dict(item.split("=", 1) for item in str(config.get("env", "")).split(",") if "=" in item)
    if env:
        target["env"] = env
    if config.get("cwd"):
        target["cwd"] = str(config["cwd"])
    draft.job["timeout_s"] = _timeout(config.get("timeout"), draft)
    if config.get("mem_limit_kb"):
        draft.note(NoteKind.DROPPED, "mem_limit_kb: the worker's command limits apply instead")
    draft.note(
        NoteKind.TARGET,
        "the command runs on a cronwheel worker (--allow-commands), not on the Dkron agent the tags chose",
    )
    return target


def _http(config: dict[str, Any], draft: Draft) -> dict[str, Any] | None:
    url = config.get("url")
    if not isinstance(url, str):
        return None
    target: dict[str, Any] = {"type": "http", "url": url, "method": str(config.get("method", "GET")).upper()}
    headers: dict[str, str] = {}
    given = config.get("headers") or "[]"
    try:
        listed = given if isinstance(given, list) else json.loads(str(given))
    except ValueError:
        listed = []
    for header in listed if isinstance(listed, list) else []:
        name, sep, value = str(header).partition(":")
        if sep:
            headers[name.strip()] = value.strip()
    if headers:
        target["headers"] = headers
    code = str(config.get("expectCode", "")).strip()
    if code.isdigit():
        target["expected_status"] = [int(code)]
    if config.get("body"):
        draft.note(
            NoteKind.TARGET,
            "body: sent as the job's payload (JSON) when it parses as JSON, else a JSON string",
        )
        draft.job["payload"] = _json_or_text(str(config["body"]))
    for key in ("expectBody", "tlsNoVerify", "tlsCertificateFile", "tlsCertificateKeyFile", "tlsRootCAsFile"):
        if config.get(key):
            draft.note(NoteKind.DROPPED, f"{key}: no cronwheel equivalent")
    draft.job["timeout_s"] = _timeout(config.get("timeout"), draft)
    return target


def _json_or_text(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return body


def _timeout(value: Any, draft: Draft) -> float:
    """Dkron's executor timeout (Go duration, or seconds for http), or the most there is."""
    text = str(value or "").strip()
    seconds = float(text) if text.isdigit() else _go_seconds(text) if text else None
    if seconds is None or not 0 < seconds <= NO_LIMIT_S:
        draft.note(NoteKind.TIMEOUT, f"no timeout (or above the most): timeout_s {NO_LIMIT_S:g}")
        return NO_LIMIT_S
    return seconds


def _policies(job: dict[str, Any], draft: Draft, options: Options) -> None:
    schedule = draft.job["schedule"]
    fold = None if schedule.startswith("@") else folded_fires(schedule, draft.job["timezone"], options.now)
    if fold is not None:
        draft.note(
            NoteKind.DST,
            f"{fold} happens twice in {draft.job['timezone']}: Dkron may run the job on both passes, "
            "cronwheel once (first pass); set dst_fold: both for both",
        )
    if schedule.startswith("@every"):
        draft.note(NoteKind.SCHEDULE, EVERY_FROM_EPOCH + ", not from when Dkron loaded the job")
    draft.job["overlap"] = "forbid" if job.get("concurrency") == "forbid" else "allow"
    retries = job.get("retries")
    if isinstance(retries, int) and retries > 0:
        draft.job["retry"] = {"max_attempts": min(retries + 1, 100), **_AT_ONCE}
        draft.note(
            NoteKind.RETRY,
            f"retries {retries}: {min(retries + 1, 100)} attempts, 1 s apart (Dkron retries at once; "
            "cronwheel waits at least a moment)",
        )
    if job.get("expires_at"):
        try:
            draft.job["end_at"] = instant(datetime.fromisoformat(str(job["expires_at"])))
        except ValueError:
            draft.note(NoteKind.DROPPED, f"expires_at {job['expires_at']!r} is not an RFC 3339 instant")
    labels = {LABEL: "dkron"}
    labels.update({str(k): str(v) for k, v in _metadata(job).items() if _label(str(k), str(v))})
    draft.job["labels"] = labels
    if job.get("disabled") is True:
        draft.job["paused"] = True  # apply leaves pausing alone, and says so where this differs
        draft.note(NoteKind.PAUSED, PAUSE_AFTER_APPLY, "cronwheel jobs pause {job}")
    _dropped(job, draft)


def _label(key: str, value: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9._/-]{1,100}", key)) and len(value) <= 200 and value.isprintable()


def _dropped(job: dict[str, Any], draft: Draft) -> None:
    if job.get("owner_email"):
        draft.note(
            NoteKind.NOTIFICATION,
            f"owner_email {job['owner_email']}: Dkron mailed it through its mail processor; "
            "cronwheel can email when a run fails",
            email_rule_command([str(job["owner_email"])]),
        )
    if job.get("tags"):
        draft.note(
            NoteKind.DROPPED,
            f"tags {job['tags']}: agent selection; cronwheel runs it on any worker of its queue",
        )
    if job.get("processors"):
        draft.note(NoteKind.DROPPED, f"processors {job['processors']!r}: cronwheel keeps output with the run")
    if job.get("dependent_jobs"):
        draft.note(NoteKind.DROPPED, f"dependent_jobs {job['dependent_jobs']}: chains are not imported")
    for key in sorted(set(job) - _HANDLED - _STATE):
        draft.note(NoteKind.DROPPED, f"{key}: not a field this importer knows; left out")
    for key, value in _metadata(job).items():
        if not _label(str(key), str(value)):
            draft.note(NoteKind.DROPPED, f"metadata {key!r}: not a valid label")


def _metadata(job: dict[str, Any]) -> dict[str, Any]:
    metadata = job.get("metadata")
    return metadata if isinstance(metadata, dict) else {}
