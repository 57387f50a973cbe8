"""Kubernetes CronJobs (``batch/v1``) from a YAML stream of manifests; other kinds are passed
over with a note, so a whole ``kubectl get -o yaml`` or a Helm render can be given as it is.

A CronJob runs a pod; cronwheel has no container target. The first container's ``command`` and
``args`` become a command target's ``argv`` (its plain ``env`` values too); the image, resources,
volumes and the other containers stay behind, each said. A container without ``command`` runs
its image's entrypoint, which the manifest does not show: such a job is left out.
"""

from __future__ import annotations

from typing import Any

import yaml

from cronwheel.importers.draft import PAUSE_AFTER_APPLY, Draft, finish, skipped
from cronwheel.importers.options import LABEL, Options
from cronwheel.importers.report import ImportResult, Note, NoteKind, UnreadableInputError
from cronwheel.importers.timing import (
    MAX_GRACE_S,
    NO_LIMIT_S,
    fires_within,
    folded_fires,
    known_zone,
    schedule_problem,
)

_OVERLAP = {"Allow": "allow", "Forbid": "forbid", "Replace": "replace"}
_POD_BACKOFF = {"initial_delay_s": 10.0, "multiplier": 2.0, "max_delay_s": 360.0, "jitter": False}
_IGNORED_POD = ("volumes", "initContainers", "serviceAccountName", "nodeSelector", "affinity", "tolerations")


def convert(text: str, options: Options) -> ImportResult:
    """The CronJobs of a multi-document YAML text (``kind: List`` documents are opened)."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise UnreadableInputError(f"not valid YAML: {error}") from None
    entries: list[Draft | Note] = []
    for index, document in enumerate(_objects(documents), start=1):
        if not isinstance(document, dict):
            raise UnreadableInputError(f"document {index} is not a mapping (a Kubernetes object)")
        kind = document.get("kind")
        meta = _mapping(document.get("metadata"))
        name = meta.get("name")
        where = f"{kind or 'document'} {name or index}"
        if kind != "CronJob":
            entries.append(Note(where, NoteKind.SKIPPED, "not imported: not a CronJob"))
            continue
        if not isinstance(name, str) or not isinstance(document.get("spec"), dict):
            raise UnreadableInputError(f"{where}: a CronJob needs metadata.name and spec")
        if isinstance(meta.get("namespace"), str):
            where = f"CronJob {meta['namespace']}/{name}"
        entries.append(_cronjob(name, document["spec"], where, options))
    if not any(isinstance(doc, dict) and doc.get("kind") == "CronJob" for doc in _objects(documents)):
        raise UnreadableInputError("no CronJob in the input (kind: CronJob, apiVersion batch/v1)")
    return finish(entries, options.team)


def _objects(documents: list[Any]) -> list[Any]:
    found: list[Any] = []
    for document in documents:
        if (
            isinstance(document, dict)
            and document.get("kind") == "List"
            and isinstance(document.get("items"), list)
        ):
            found += document["items"]
        else:
            found.append(document)
    return found


def _cronjob(name: str, spec: dict[str, Any], where: str, options: Options) -> Draft | Note:
    schedule = spec.get("schedule")
    if not isinstance(schedule, str):
        return skipped(where, "spec.schedule is missing")
    draft = Draft(where, name)
    zone, schedule = _zone(spec, schedule, draft, options)
    problem = schedule_problem(schedule, zone)
    if problem is not None:
        return skipped(where, problem)
    pod = _pod(spec)
    target = _target(pod, draft)
    if target is None:
        return skipped(where, "its container has no command (it runs the image's entrypoint): no argv to run")
    draft.job = {
        "description": f"Kubernetes {where}",
        "schedule": schedule,
        "timezone": zone,
        "target": target,
    }
    _timing(spec, schedule, zone, draft, options)
    _job_spec(spec, draft)
    draft.job["labels"] = {LABEL: "k8s"}
    return draft


def _zone(spec: dict[str, Any], schedule: str, draft: Draft, options: Options) -> tuple[str, str]:
    """The zone (spec.timeZone, a ``CRON_TZ=``/``TZ=`` prefix, else the default) and the
    schedule without a prefix."""
    given = spec.get("timeZone")
    head, _, rest = schedule.strip().partition(" ")
    if head.startswith(("CRON_TZ=", "TZ=")):
        schedule, given = rest.strip(), head.partition("=")[2]
        draft.note(NoteKind.TIMEZONE, f"the schedule's {head} prefix became timezone")
    if given is None:
        draft.note(
            NoteKind.TIMEZONE,
            f"no timeZone: Kubernetes used kube-controller-manager's zone; imported as {options.zone}",
        )
        return options.zone, schedule
    zone = known_zone(given)
    if zone is None:
        draft.note(NoteKind.TIMEZONE, f"timeZone {given!r} is not a known zone; imported as {options.zone}")
        return options.zone, schedule
    return zone, schedule


def _timing(spec: dict[str, Any], schedule: str, zone: str, draft: Draft, options: Options) -> None:
    fold = folded_fires(schedule, zone, options.now)
    if fold is not None:
        draft.note(
            NoteKind.DST,
            f"{fold} happens twice in {zone}: Kubernetes may run the job on both passes, cronwheel runs "
            "it once (first pass); set dst_fold: both for both",
        )
    deadline = spec.get("startingDeadlineSeconds")
    if isinstance(deadline, int) and not isinstance(deadline, bool):
        grace = float(min(deadline, MAX_GRACE_S))
        draft.job["misfire"] = {"policy": "skip", "grace_s": grace}
        draft.note(
            NoteKind.MISFIRE,
            f"startingDeadlineSeconds {deadline}: missed slots fire within {grace:g} s of their time "
            "(misfire skip)"
            + (
                "; Kubernetes starts only the latest of them, cronwheel each"
                if fires_within(schedule, zone, grace, options.now)
                else ""
            )
            + ("; capped at 7 days, the API's most" if deadline > MAX_GRACE_S else ""),
        )
    else:
        draft.job["misfire"] = {"policy": "run_once"}
        draft.note(
            NoteKind.MISFIRE,
            "no startingDeadlineSeconds: the latest missed slot fires once (misfire run_once); "
            "Kubernetes also gives up after 100 missed slots, cronwheel does not",
        )
    policy = str(spec.get("concurrencyPolicy", "Allow"))
    draft.job["overlap"] = _OVERLAP.get(policy, "allow")
    if policy not in _OVERLAP:
        draft.note(NoteKind.OVERLAP, f"concurrencyPolicy {policy!r} is unknown: overlap allow")
    if spec.get("suspend") is True:
        draft.job["paused"] = True  # apply leaves pausing alone, and says so where this differs
        draft.note(NoteKind.PAUSED, PAUSE_AFTER_APPLY, "cronwheel jobs pause {job}")


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    template = _mapping(_mapping(_mapping(spec.get("jobTemplate")).get("spec")).get("template"))
    return _mapping(template.get("spec"))


def _target(pod: dict[str, Any], draft: Draft) -> dict[str, Any] | None:
    containers = [c for c in _list(pod.get("containers")) if isinstance(c, dict)]
    if not containers or not isinstance(containers[0].get("command"), list):
        return None
    container = containers[0]
    argv = [str(part) for part in container["command"] + _list(container.get("args"))]
    target: dict[str, Any] = {"type": "command", "argv": argv}
    env = _env(container, draft)
    if env:
        target["env"] = env
    if isinstance(container.get("workingDir"), str):
        target["cwd"] = container["workingDir"]
    draft.note(
        NoteKind.TARGET,
        f"the container's command runs on a cronwheel worker, not in image {container.get('image')!r}: "
        "the program must exist there (resources, volumes and security context are not applied)",
    )
    for other in containers[1:]:
        draft.note(NoteKind.DROPPED, f"container {other.get('name')!r}: only the first container is run")
    for key in _IGNORED_POD:
        if pod.get(key):
            draft.note(NoteKind.DROPPED, f"pod {key}: no cronwheel equivalent")
    return target


def _env(container: dict[str, Any], draft: Draft) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in _list(container.get("env")):
        if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" in item:
            env[item["name"]] = str(item["value"])
        elif isinstance(item, dict):
            draft.note(
                NoteKind.DROPPED,
                f"env {item.get('name')!r} comes from valueFrom (a Secret or ConfigMap): store it with "
                "cronwheel secrets set and refer to it as {secret: NAME} in target.env",
            )
    if container.get("envFrom"):
        draft.note(NoteKind.DROPPED, "envFrom: the variables of whole Secrets/ConfigMaps are not imported")
    return env


def _job_spec(spec: dict[str, Any], draft: Draft) -> None:
    job = _mapping(_mapping(spec.get("jobTemplate")).get("spec"))
    deadline = job.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and 0 < deadline <= NO_LIMIT_S:
        draft.job["timeout_s"] = float(deadline)
    else:
        draft.job["timeout_s"] = NO_LIMIT_S
        draft.note(
            NoteKind.TIMEOUT, f"no activeDeadlineSeconds (or above the most): timeout_s {NO_LIMIT_S:g}"
        )
    backoff = job.get("backoffLimit", 6)
    if isinstance(backoff, int) and backoff > 0:
        attempts = min(backoff + 1, 100)
        draft.job["retry"] = {"max_attempts": attempts, **_POD_BACKOFF}
        draft.note(
            NoteKind.RETRY,
            f"backoffLimit {backoff}: up to {attempts} attempts, 10 s apart doubling to 6 min as pods "
            "are retried; a failed attempt is a non-zero exit, not a failed pod",
        )
    for key in ("completions", "parallelism", "ttlSecondsAfterFinished"):
        if key in job:
            draft.note(NoteKind.DROPPED, f"jobTemplate.spec.{key}: no cronwheel equivalent")
    for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        if key in spec:
            draft.note(NoteKind.DROPPED, f"{key}: run history is kept by the job's retention instead")


def _mapping(value: Any) -> dict[str, Any]:
    """A manifest's mapping, or an empty one where the manifest has something else."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
