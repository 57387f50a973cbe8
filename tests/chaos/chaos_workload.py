"""The chaos workload: jobs of every kind, created and edited through the real API, and a record
of what was asked and when it was acknowledged (the checker's side of the history).

Every time recorded here is this (the test's) machine wall clock, ``time.time()``: the same clock
the witness stamps arrivals with. cronwheel's own clocks are never consulted by the checker.
"""

from __future__ import annotations

import random
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from chaos_witness import GRPC_METHOD

HERE = Path(__file__).resolve().parent


@dataclass
class VersionRecord:
    expression: str
    zone: str
    requested: float  # the edit (or create) was sent
    acknowledged: float  # ... and answered
    committed: float | None = None  # when the edit took effect: the job's updated_at in the answer


@dataclass
class PauseRecord:
    requested: float
    acknowledged: float
    end_requested: float | None = None
    end_acknowledged: float | None = None
    committed: float | None = None  # when the pause took effect: the job's updated_at in the answer


@dataclass
class ManualRecord:
    job_id: str
    idempotency_key: str
    run_ids: list[str] = field(default_factory=list)


@dataclass
class JobRecord:
    job_id: str
    name: str
    group: str  # steady, slow, command, long-command, failing, flaky, herd, editable, grpc,
    # interval, once, jittered, calendar
    misfire: str
    grace_s: float
    overlap: str
    expect_failure: bool
    versions: list[VersionRecord]
    jitter_s: float = 0.0
    closed_dates: tuple[str, ...] = ()  # the local dates its calendars close
    pauses: list[PauseRecord] = field(default_factory=list)
    deleted: tuple[float, float] | None = None

    @property
    def live(self) -> bool:
        return self.deleted is None


@dataclass(frozen=True)
class Mix:
    """How many jobs of each group (the profile's size)."""

    steady: int = 120
    slow: int = 6
    command: int = 4
    long_command: int = 2
    failing: int = 2
    flaky: int = 6
    herd: int = 400  # jobs due in one and the same second (a nemesis step)
    round_herd: int = 25  # a smaller herd beside every other fault, due while it lasts
    editable: int = 8
    grpc: int = 8  # steady jobs whose target is the gRPC witness (when the workload has one)
    interval: int = 6  # @every jobs: half on the epoch's multiples, half from an anchor of their own
    once: int = 6  # @at jobs, due one after another while the faults run
    jittered: int = 6  # cron jobs with a jitter window, 2 to 3.5 s of their 4 s gap
    calendar: int = 6  # half closed today and tomorrow by a calendar (all SKIPPED), half open


class Workload:
    """Creates the jobs, then performs (and records) API edits while faults run."""

    def __init__(
        self,
        api_url: str,
        witness_url: str,
        append_file: Path,
        rng: random.Random,
        token: str,
        grpc_address: str = "",
    ) -> None:
        self.api = httpx.Client(base_url=api_url, timeout=30, headers={"Authorization": f"Bearer {token}"})
        self.witness_url = witness_url
        self.grpc_address = grpc_address  # the gRPC witness's host:port ("": no gRPC jobs)
        self.append_file = append_file
        self.rng = rng
        self.jobs: dict[str, JobRecord] = {}
        self.manual: list[ManualRecord] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()  # herds are created beside the nemesis, from other threads
        self._herds = 0  # herd jobs named so far

    def close(self) -> None:
        self.api.close()

    # -- creation ------------------------------------------------------------------------------

    def create(self, mix: Mix) -> None:
        for index in range(mix.steady):
            policy = ("catch_up", "run_once", "skip")[index % 3]
            self._job("steady", index, f"{index % 4}/4 * * * * *", self._http("/ok"), misfire=policy)
        for index in range(mix.slow):
            self._job("slow", index, f"{index % 6}/6 * * * * *", self._http("/slow"))
        for index in range(mix.command):
            self._job("command", index, f"{index % 5}/5 * * * * *", self._command("0.2"))
        for index in range(mix.long_command):
            argv = self._command("6", "--spawn-child")
            self._job("long-command", index, f"{index * 5}/10 * * * * *", argv, overlap="allow")
        retry = {"max_attempts": 2, "initial_delay_s": 0.5, "jitter": False}
        for index in range(mix.failing):
            target = self._http("/fail")
            self._job("failing", index, f"{index * 5}/10 * * * * *", target, retry=retry, failing=True)
        flaky_retry = {"max_attempts": 8, "initial_delay_s": 0.5, "max_delay_s": 2, "jitter": False}
        for index in range(mix.flaky):
            self._job("flaky", index, f"{index % 3}/3 * * * * *", self._http("/flaky"), retry=flaky_retry)
        for index in range(mix.editable):
            self._job("editable", index, f"{index % 2}/2 * * * * *", self._http("/edit"))
        self._elapsed(mix)
        self._jittered(mix)
        self._calendar(mix)
        for index in range(mix.grpc if self.grpc_address else 0):
            policy = ("catch_up", "run_once", "skip")[index % 3]
            target = {"type": "grpc", "address": self.grpc_address, "method": GRPC_METHOD}
            payload = {"group": "grpc", "index": index}
            self._job("grpc", index, f"{index % 4}/4 * * * * *", target, misfire=policy, payload=payload)

    def _elapsed(self, mix: Mix) -> None:
        """Interval jobs of 3 to 8 s, and one-time jobs due every 25 s from 20 s after now."""
        now = datetime.fromtimestamp(int(time.time()), UTC)
        for index in range(mix.interval):
            expression = f"@every {3 + index}s"
            if index % 2:
                expression += f" from {(now + timedelta(seconds=5 + index)).isoformat()}"
            self._job(
                "interval",
                index,
                expression,
                self._http("/interval"),
                misfire=("catch_up", "run_once")[index % 2],
            )
        for index in range(mix.once):
            due = now + timedelta(seconds=20 + 25 * index)
            self._job("once", index, f"@at {due.isoformat()}", self._http("/once"), misfire="run_once")

    def _jittered(self, mix: Mix) -> None:
        for index in range(mix.jittered):
            jitter = 2.0 + 0.3 * index
            self._job("jittered", index, f"{index % 4}/4 * * * * *", self._http("/jittered"), jitter_s=jitter)

    def _calendar(self, mix: Mix) -> None:
        """Jobs with a calendar closing today and tomorrow (UTC: a run may cross midnight), whose
        every slot is recorded SKIPPED (calendar); and jobs whose calendar closes other days."""
        today = datetime.now(UTC).date()
        closed = (today.isoformat(), (today + timedelta(days=1)).isoformat())
        far = ((today + timedelta(days=1000)).isoformat(),)
        for name, dates in (("chaos-closed", closed), ("chaos-open", far)):
            response = self.api.post("/v1/teams/chaos/calendars", json={"name": name, "dates": list(dates)})
            assert response.status_code == 201, response.text
        for index in range(mix.calendar):
            name, dates = ("chaos-closed", closed) if index % 2 == 0 else ("chaos-open", far)
            expression = f"{index % 3}/3 * * * * *"
            self._job("calendar", index, expression, self._http("/calendar"), calendars=(name,), closed=dates)

    def _http(self, path: str) -> dict[str, Any]:
        return {"type": "http", "url": f"{self.witness_url}{path}"}

    def _command(self, sleep: str, *extra: str) -> dict[str, Any]:
        argv = [
            sys.executable,
            str(HERE / "chaos_append.py"),
            str(self.append_file),
            "--sleep",
            sleep,
            *extra,
        ]
        return {"type": "command", "argv": argv}

    def _job(
        self,
        group: str,
        index: int,
        expression: str,
        target: dict[str, Any],
        *,
        misfire: str = "catch_up",
        overlap: str = "allow",
        retry: dict[str, Any] | None = None,
        failing: bool = False,
        client: httpx.Client | None = None,
        payload: Any = None,
        jitter_s: float = 0.0,
        calendars: tuple[str, ...] = (),
        closed: tuple[str, ...] = (),
    ) -> JobRecord:
        grace = 300.0
        body: dict[str, Any] = {
            "team": "chaos",
            "name": f"{group}-{index}",
            "schedule": expression,
            "timezone": "UTC",
            "target": target,
            "misfire": {"policy": misfire, "grace_s": grace, "max_catch_up": 1000},
            "overlap": overlap,
            "timeout_s": 30,
        }
        if retry is not None:
            body["retry"] = retry
        if payload is not None:
            body["payload"] = payload
        if jitter_s:
            body["jitter_s"] = jitter_s
        if calendars:
            body["calendars"] = list(calendars)
        requested = time.time()
        response = (client or self.api).post("/v1/jobs", json=body)
        acknowledged = time.time()
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        version = VersionRecord(expression, "UTC", requested, acknowledged)
        record = JobRecord(
            job_id, body["name"], group, misfire, grace, overlap, failing, [version], jitter_s, closed
        )
        if client is None:  # other threads' records are added by the caller
            self.jobs[job_id] = record
        return record

    def create_herd(self, count: int, due: datetime, threads: int = 8) -> None:
        """``count`` jobs all due at ``due`` (and then not for a day): a thundering herd. Created
        over several connections at once, as a deploy pipeline would; safe beside other calls."""
        expression = f"{due.second} {due.minute} {due.hour} * * *"
        with self.lock:
            start, self._herds = self._herds, self._herds + count
        local = threading.local()

        def create(index: int) -> JobRecord:
            if not hasattr(local, "api"):  # one client per thread, made once: clients are costly
                local.api = httpx.Client(base_url=self.api.base_url, headers=self.api.headers, timeout=30)
                clients.append(local.api)
            last = ""
            for _ in range(40):  # beside a fault, the API may be unable to reach its store for a while
                try:
                    return self._job("herd", index, expression, self._http("/herd"), client=local.api)
                except (AssertionError, httpx.HTTPError) as error:
                    last = f"herd job {index}: {error!r}"[:300]
                    self.errors.append(last)
                    time.sleep(0.5)
            raise AssertionError(f"herd job {index} could not be created; the last error: {last}")

        clients: list[httpx.Client] = []
        with ThreadPoolExecutor(max_workers=threads) as pool:
            records = list(pool.map(create, range(start, start + count)))
        for client in clients:
            client.close()
        with self.lock:
            for record in records:
                self.jobs[record.job_id] = record

    # -- edits while faults run ----------------------------------------------------------------

    def editable(self) -> list[JobRecord]:
        with self.lock:
            return [job for job in self.jobs.values() if job.group == "editable" and job.live]

    def active_editable(self) -> list[JobRecord]:
        """Editable jobs neither deleted nor paused."""
        return [
            job for job in self.editable() if not job.pauses or job.pauses[-1].end_acknowledged is not None
        ]

    def armed_slot(self, job: JobRecord, ahead_s: float) -> float | None:
        """The slot of ``job``'s armed run (PENDING, never queued, slot still ahead) if it has one
        at least ``ahead_s`` ahead: the job is inside its arming window."""
        response = self.api.get(f"/v1/jobs/{job.job_id}/runs")
        if response.status_code != 200:
            return None
        now = time.time()
        slots = [
            datetime.fromisoformat(item["slot"]).timestamp()
            for item in response.json()["items"]
            if item["state"] == "PENDING" and item["queued_at"] is None
        ]
        ahead = [slot for slot in slots if slot - now >= ahead_s]
        return min(ahead) if ahead else None

    def random_edit(self) -> str:
        """One seeded edit among pause/resume, schedule change, trigger-now twice, delete."""
        jobs = self.editable()
        if not jobs:
            return "none"
        job = self.rng.choice(jobs)
        paused = bool(job.pauses) and job.pauses[-1].end_acknowledged is None
        choice = self.rng.choice(["pause", "reschedule", "trigger", "trigger", "delete"])
        if paused:
            self.resume(job)
            return f"resume {job.name}"
        if choice == "delete" and len(jobs) > 3:
            self.delete(job)
            return f"delete {job.name}"
        if choice == "pause":
            self.pause(job)
            return f"pause {job.name}"
        if choice == "reschedule":
            expression = self.rng.choice(["*/2 * * * * *", "1/2 * * * * *", "*/3 * * * * *", "*/5 * * * * *"])
            self.reschedule(job, expression)
            return f"reschedule {job.name} {expression}"
        self.trigger_twice(job)
        return f"trigger {job.name}"

    def _call(self, method: str, path: str, **kwargs: Any) -> tuple[float, float, httpx.Response | None]:
        requested = time.time()
        response = None
        for _ in range(20):  # an api node may be unable to reach its backends for a while
            try:
                response = self.api.request(method, path, **kwargs)
            except httpx.HTTPError as error:
                self.errors.append(f"{method} {path}: {error!r}")
            else:
                if response.status_code < 500:
                    break
                self.errors.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
            time.sleep(0.5)
        return requested, time.time(), response

    def pause(self, job: JobRecord) -> None:
        requested, acknowledged, response = self._call("POST", f"/v1/jobs/{job.job_id}/pause", json={})
        committed = _updated_at(_expect(response, 200))
        job.pauses.append(PauseRecord(requested, acknowledged, committed=committed))

    def resume(self, job: JobRecord) -> None:
        requested, acknowledged, response = self._call("POST", f"/v1/jobs/{job.job_id}/resume", json={})
        _expect(response, 200)
        job.pauses[-1].end_requested, job.pauses[-1].end_acknowledged = requested, acknowledged

    def reschedule(self, job: JobRecord, expression: str) -> None:
        requested, acknowledged, response = self._call(
            "PATCH", f"/v1/jobs/{job.job_id}", json={"schedule": expression}
        )
        committed = _updated_at(_expect(response, 200))
        job.versions.append(VersionRecord(expression, "UTC", requested, acknowledged, committed))

    def delete(self, job: JobRecord) -> None:
        requested, acknowledged, response = self._call("DELETE", f"/v1/jobs/{job.job_id}")
        _expect(response, 204)
        job.deleted = (requested, acknowledged)

    def trigger_twice(self, job: JobRecord) -> None:
        """Trigger-now twice with one Idempotency-Key: one run, both answers name it."""
        record = ManualRecord(job.job_id, f"chaos-{uuid.uuid4().hex[:12]}")
        for _ in range(2):
            _, _, response = self._call(
                "POST", f"/v1/jobs/{job.job_id}/trigger", headers={"Idempotency-Key": record.idempotency_key}
            )
            record.run_ids.append(_expect(response, 200, 201).json()["id"])
        self.manual.append(record)


def _expect(response: httpx.Response | None, *statuses: int) -> httpx.Response:
    assert response is not None, "the API never answered"
    assert response.status_code in statuses, response.text
    return response


def _updated_at(response: httpx.Response) -> float | None:
    """When the change took effect: the job's ``updated_at`` in the API's answer."""
    updated = response.json().get("updated_at")
    return None if updated is None else datetime.fromisoformat(updated).timestamp()
