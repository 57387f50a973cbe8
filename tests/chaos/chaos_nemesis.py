"""The nemesis: faults injected into a running :class:`~chaos_cluster.ChaosCluster`, chosen and
timed by one seeded random generator, so that a failing history replays with the same seed.

Each fault records a :class:`FaultRecord` (what, on which node, from when to when, and the
lateness bound the guarantees promise while it lasts) and may add *findings*: guarantees checked
on the spot rather than from the history (no orphaned command process after a worker is killed;
the clock-jumped scheduler really saw the fake time).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from chaos_cluster import ARMING, ChaosCluster, Node
from chaos_witness import (
    Behaviour,
    CommandLine,
    Error,
    Ok,
    Slow,
    Throttle,
    WitnessProcess,
    read_command_lines,
)
from chaos_workload import JobRecord, Workload

HERD_RATE = 80.0  # deliveries per second the two workers sustain on top of the steady load


@dataclass
class FaultRecord:
    kind: str
    target: str
    start: float
    end: float = 0.0
    bound_s: float | None = 0.0  # extra lateness allowed from start to end + bound; None: unbounded
    detail: str = ""


@dataclass
class Nemesis:
    cluster: ChaosCluster
    witness: WitnessProcess
    append_file: Path
    rng: random.Random
    faults: list[FaultRecord] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # violations seen on the spot
    workload: Workload | None = None
    herd_size: int = 400
    round_herd_size: int = 25
    log: Callable[[str], None] = print

    @property
    def ttl(self) -> float:
        return self.cluster.ttl_s

    def scheduler_bound(self) -> float:
        """Lateness a scheduler fault may cause: the lease TTL, one tick, one sweep, and a reload."""
        return self.ttl + 3.0

    def worker_bound(self) -> float:
        """A trigger the dead worker had read but not yet claimed waits for the queue's visibility
        timeout (two leases); one it had claimed, for its lease and the next sweep."""
        return 2 * self.cluster.lease_s + 2.0

    def _begin(self, kind: str, target: str, bound_s: float | None, detail: str = "") -> FaultRecord:
        record = FaultRecord(kind, target, time.time(), bound_s=bound_s, detail=detail)
        self.faults.append(record)
        self.log(f"nemesis: {kind} {target} {detail}".rstrip())
        return record

    def _end(self, record: FaultRecord) -> None:
        record.end = time.time()

    def revive(self) -> None:
        """Between faults every node must be alive: a process that died on its own (a fault it
        could not ride out) is a finding; it is restarted so that the run goes on."""
        for node in list(self.cluster.nodes.values()):
            if not node.alive():
                code = node.process.returncode
                self.findings.append(f"{node.name} died on its own (exit {code}); see {node.log}")
                self.log(f"nemesis: {node.name} had died (exit {code}): restarting it")
                self.cluster.restart(node.name)

    def _scheduler(self, *, faketime: bool | None = None) -> Node:
        nodes = [n for n in self.cluster.of_role("scheduler") if n.alive()]
        if faketime is not None:
            nodes = [n for n in nodes if (n.faketime_file is not None) == faketime]
        return self.rng.choice(sorted(nodes, key=lambda n: n.name))

    def _worker(self) -> Node:
        nodes = [n for n in self.cluster.of_role("worker") if n.alive()]
        return self.rng.choice(sorted(nodes, key=lambda n: n.name))

    # -- scheduler faults ------------------------------------------------------------------------

    def kill_scheduler(self) -> None:
        node = self._scheduler()
        record = self._begin("kill -9 scheduler", node.name, self.scheduler_bound())
        time.sleep(self.rng.uniform(0, 1))
        node.kill()
        time.sleep(self.rng.uniform(2, 4))
        self.cluster.restart(node.name)
        self._end(record)

    def kill_scheduler_between_commit_and_publish(self) -> None:
        """Between the store commit and the queue publish. For a scheduler that arms ahead, one
        of the two instants between arm and release, drawn by the seed: the commit of an arm,
        before its runs are held (``scheduler.after_arm``), or armed runs due, their triggers
        not queued (``scheduler.before_release``). The shards' next owner must release them."""
        place = self.rng.choice(["after_arm", "before_release"]) if ARMING else "after_commit"
        node = self._scheduler(faketime=False)
        hits = self.rng.randint(2, 6)
        kind = "kill -9 scheduler after commit"
        record = self._begin(kind, node.name, self.scheduler_bound(), f"failpoint {place} pass {hits}")
        node.kill()
        crashing = self.cluster.start_scheduler(node.name, failpoints=f"scheduler.{place}=kill@{hits}")
        deadline = time.monotonic() + 60
        while crashing.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if crashing.alive():
            self.findings.append(f"{node.name}: failpoint {place}@{hits} never fired")
        elif "failpoint" not in crashing.text():
            self.findings.append(f"{node.name} died without reaching its failpoint")
        record.detail += f"; died {time.time() - record.start:.1f} s after start"
        time.sleep(self.rng.uniform(1, 3))
        self.cluster.start_scheduler(node.name)
        self._end(record)

    def move_shard_in_window(self) -> None:
        """A herd armed, then its scheduler stopped (SIGTERM) half a second before the slot: the
        shards move to the others, which must load the armed runs and release them; the node
        rejoins after the slot and the shards move again."""
        due = self._aim_herd()
        node = self._scheduler()
        record = self._begin("shard moved between arm and release", node.name, self.scheduler_bound())
        time.sleep(max(0.0, due - 0.5 - time.time()))
        node.signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while node.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        record.detail = f"stopped {due - time.time():.2f} s before the herd's slot"
        time.sleep(max(0.0, due + self.rng.uniform(1, 2) - time.time()))
        self.cluster.restart(node.name)
        self._end(record)

    def edit_in_arming_window(self) -> None:
        """Pause one editable job, reschedule another and delete a third, each once its next
        slot is armed and before it is released (the job's runs list shows it PENDING, never
        queued, its slot ahead). Whatever was armed must go with the change."""
        assert self.workload is not None
        record = self._begin("pause, edit, delete in the arming window", "workload", 0.0)
        landed = []
        for action in ("pause", "reschedule", "delete"):
            landed.append(f"{action} {self._edit_armed(action)}")
        record.detail = "; ".join(landed)
        self._end(record)

    def _edit_armed(self, action: str) -> str:
        assert self.workload is not None
        jobs = self.workload.active_editable()
        if len(jobs) <= (3 if action == "delete" else 0):
            return "skipped: too few editable jobs"
        job = self.rng.choice(jobs)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            slot = self.workload.armed_slot(job, ahead_s=0.25)
            if slot is not None:
                getattr(self.workload, action)(*self._edit_arguments(action, job))
                inside = "inside" if time.time() < slot else "after the slot (too slow)"
                return f"{job.name} {inside} the window of {datetime.fromtimestamp(slot, UTC):%H:%M:%S}"
            time.sleep(0.05)
        return f"{job.name}: no armed run seen"

    def _edit_arguments(self, action: str, job: JobRecord) -> tuple[object, ...]:
        if action == "reschedule":
            return (job, self.rng.choice(["*/3 * * * * *", "1/2 * * * * *", "*/5 * * * * *"]))
        return (job,)

    def pause_scheduler(self) -> None:
        """SIGSTOP past the lease, then SIGCONT: the woken node must not fire stale shards."""
        node = self._scheduler()
        record = self._begin("SIGSTOP scheduler past lease", node.name, self.scheduler_bound())
        node.signal(signal.SIGSTOP)
        time.sleep(self.ttl * 2 + self.rng.uniform(1, 3))
        node.signal(signal.SIGCONT)
        self._end(record)

    def blackhole_scheduler_etcd(self) -> None:
        node = self._scheduler()
        assert node.links is not None
        record = self._begin("black-hole scheduler->etcd", node.name, self.scheduler_bound())
        for proxy in node.links.etcd:
            proxy.blackhole()
        time.sleep(self.ttl * 3 + self.rng.uniform(0, 2))
        for proxy in node.links.etcd:
            proxy.heal()
        self._end(record)

    def blackhole_scheduler_postgres(self) -> None:
        node = self._scheduler()
        assert node.links is not None
        # detection takes one TTL (the store has not answered: step down), then the handover
        record = self._begin("black-hole scheduler->postgres", node.name, self.ttl + self.scheduler_bound())
        node.links.postgres.blackhole()
        time.sleep(self.ttl * 3 + self.rng.uniform(0, 2))
        node.links.postgres.heal()
        self._end(record)

    def latency(self) -> None:
        node = self._scheduler()
        assert node.links is not None
        delay = self.rng.choice([50, 150, 300])
        # A link slow enough that a tick's round trips add up to a TTL stalls the node: it steps
        # aside (and sits out), as when its store is black-holed; a milder one slows its ticks.
        bound = self.ttl + self.scheduler_bound()
        record = self._begin("latency on scheduler links", node.name, bound, f"{delay} ms +-50%")
        for proxy in node.links.all():
            proxy.delay(delay, jitter_ms=delay / 2)
        time.sleep(self.rng.uniform(6, 10))
        for proxy in node.links.all():
            proxy.heal()
        self._end(record)

    def clock_jump(self) -> None:
        """Step one scheduler's wall clock forward, then back past the truth, then home."""
        node = self._scheduler(faketime=True)
        jump = self.rng.choice([30, 90, 600])
        record = self._begin("clock jump on scheduler", node.name, 0.0, f"+{jump} s, then -{jump} s")
        before = node.text().count("action=clock")
        node.step_clock(jump)
        time.sleep(self.rng.uniform(6, 8))
        node.step_clock(-jump)
        time.sleep(self.rng.uniform(6, 8))
        node.step_clock(0)
        self._end(record)
        seen = [int(v) for v in re.findall(r"action=clock.*?skew_ms=(-?\d+)", node.text())]
        if node.text().count("action=clock") <= before or not any(abs(v - jump * 1000) < 2000 for v in seen):
            self.findings.append(
                f"{node.name} never reported the +{jump} s wall clock: the fault did not bite"
            )

    # -- worker faults ---------------------------------------------------------------------------

    def kill_worker_mid_http(self) -> None:
        node = self._worker()
        record = self._begin("kill -9 worker mid-HTTP", node.name, self.worker_bound())
        self.witness.behave("/slow", Slow(3.0))
        deadline = time.monotonic() + 15
        start = self._slow_requests()
        while self._slow_requests() == start and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # requests in flight now
        node.kill()
        time.sleep(1)
        self.cluster.restart(node.name)
        self.witness.behave("/slow", Slow(1.0))
        self._end(record)

    def _slow_requests(self) -> int:
        return self.witness.count("/slow")

    def kill_worker_mid_command(self) -> None:
        """Kill the worker running a long command: the command and its child must die with it."""
        record = self._begin("kill -9 worker mid-command", "", self.worker_bound())
        line = self._fresh_long_command()
        if line is None:
            self.findings.append("no long command started within 20 s: nothing to kill mid-command")
            self._end(record)
            return
        owner = self._owner_of(line.pid)
        if owner is None:
            self.findings.append(f"command pid {line.pid} has no worker ancestor")
            self._end(record)
            return
        record.target = owner.name
        owner.kill()
        survivors = _still_alive([pid for pid in (line.pid, line.child_pid) if pid], within_s=3.0)
        if survivors:
            self.findings.append(f"orphans after kill -9 of {owner.name}: pids {survivors} still run")
            for pid in survivors:
                _kill_quietly(pid)
        time.sleep(0.5)
        self.cluster.restart(owner.name)
        self._end(record)

    def _fresh_long_command(self) -> CommandLine | None:
        started_after = time.time()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            lines = read_command_lines(self.append_file)
            done = {(line.execution_id, line.attempt) for line in lines if line.kind == "done"}
            for line in reversed(lines):
                if (
                    line.kind == "start"
                    and line.child_pid
                    and line.at >= started_after - 5
                    and (line.execution_id, line.attempt) not in done
                    and _alive(line.pid)
                ):
                    return line
            time.sleep(0.2)
        return None

    def _owner_of(self, pid: int) -> Node | None:
        ancestors = _ancestors(pid)
        for node in self.cluster.of_role("worker"):
            if node.process.pid in ancestors:
                return node
        return None

    def kill_worker_before_herd(self) -> None:
        """kill -9 a worker a moment before a herd's slot: whatever it holds of the herd (a
        worker that takes triggers ahead of their slot holds them then) is handed to the other."""
        due = self._aim_herd()
        node = self._worker()
        record = self._begin("kill -9 worker before a herd's slot", node.name, self.worker_bound())
        time.sleep(max(0.0, due - self.rng.uniform(0.1, 0.5) - time.time()))
        node.kill()
        time.sleep(1)
        self.cluster.restart(node.name)
        self._end(record)

    def pause_worker(self) -> None:
        """SIGSTOP a worker past its lease: its attempts are handed to another worker."""
        node = self._worker()
        record = self._begin("SIGSTOP worker past lease", node.name, self.worker_bound())
        node.signal(signal.SIGSTOP)
        time.sleep(self.cluster.lease_s * 2 + self.rng.uniform(1, 2))
        node.signal(signal.SIGCONT)
        self._end(record)

    # -- backend faults --------------------------------------------------------------------------

    def restart_postgres(self) -> None:
        hold = self.rng.uniform(2, 5)
        record = self._begin("restart PostgreSQL (crash)", "postgres", None, f"down {hold:.1f} s")
        self.cluster.postgres.kill()
        time.sleep(hold)
        self.cluster.postgres.start()
        self._end(record)
        record.bound_s = (record.end - record.start) + 10.0

    def restart_redis(self) -> None:
        hold = self.rng.uniform(1, 3)
        record = self._begin("restart Redis, data lost", "redis", None, f"down {hold:.1f} s")
        self.cluster.redis.kill()
        time.sleep(hold)
        self.cluster.redis.start()
        self._end(record)
        record.bound_s = (record.end - record.start) + 40.0  # lost triggers: the sweep requeues

    def kill_etcd_member(self) -> None:
        member = self.rng.choice(self.cluster.etcd.members)
        record = self._begin("kill -9 one etcd member", member.name, self.scheduler_bound())
        self.cluster.etcd.kill_member(member)
        time.sleep(self.rng.uniform(3, 6))
        self.cluster.etcd.start_member(member)
        self._end(record)

    def lose_etcd_quorum(self) -> None:
        """Two of three members down: no lease can be renewed, so nothing may fire (rather than
        fire twice); every slot of the outage is made good by its misfire policy afterwards."""
        members = self.rng.sample(self.cluster.etcd.members, 2)
        names = "+".join(m.name for m in members)
        record = self._begin("etcd quorum lost", names, None)
        for member in members:
            self.cluster.etcd.kill_member(member)
        time.sleep(self.rng.uniform(5, 8))
        for member in members:
            self.cluster.etcd.start_member(member, wait=False)
        self.cluster.etcd.wait_quorum()
        self._end(record)

    # -- load ----------------------------------------------------------------------------------

    def herd(self) -> None:
        """Thousands of jobs created at once (eight API clients) and all due in one second. The
        fault lasts from the first create to the herd's delivery; allowed lateness: two seconds
        plus the time the workers need to deliver them at their calm pace (``HERD_RATE``/s)."""
        assert self.workload is not None
        count = self.herd_size
        created = time.time()
        due = datetime.fromtimestamp(int(created) + 10 + count // 15, UTC)  # the API creates ~20/s here
        bound = 2.0 + count / HERD_RATE
        record = self._begin("thundering herd", "workload", bound, f"{count} jobs due at {due:%H:%M:%S}")
        self.workload.create_herd(count, due)
        if time.time() > due.timestamp() - 2:
            self.findings.append(f"herd: creating {count} jobs took too long to aim at {due:%H:%M:%S}")
        time.sleep(max(0.0, due.timestamp() - time.time()) + bound)
        self._end(record)

    def _aim_herd(self) -> float:
        """Create a round's herd now and return its slot (time.time())."""
        assert self.workload is not None
        count = self.round_herd_size
        due = datetime.fromtimestamp(int(time.time()) + 4 + count // 10, UTC)
        bound = 2.0 + count / HERD_RATE
        record = self._begin("round herd", "workload", bound, f"{count} jobs due at {due:%H:%M:%S}")
        self.workload.create_herd(count, due, threads=4)
        record.end = due.timestamp()
        return due.timestamp()

    def round_herd(self) -> threading.Thread:
        """A round's herd created beside the next fault, due while it lasts."""

        def aim() -> None:
            try:
                self._aim_herd()
            except Exception as error:  # a finding, not a silent end of the thread
                self.findings.append(f"round herd not created: {error!r}")

        thread = threading.Thread(target=aim, name="round-herd", daemon=True)
        thread.start()
        return thread

    # -- target faults ---------------------------------------------------------------------------

    def target_faults(self) -> None:
        choices: list[Behaviour] = [Throttle(1.0), Error(503)]
        behaviour = self.rng.choice(choices)
        record = self._begin("target faults on /flaky", "witness", 2.0, type(behaviour).__name__)
        self.witness.behave("/flaky", behaviour)
        time.sleep(self.rng.uniform(3, 5))
        self.witness.behave("/flaky", Ok())
        self._end(record)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _still_alive(pids: list[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    alive = [pid for pid in pids if _alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if _alive(pid)]
    return alive


def _kill_quietly(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _ancestors(pid: int) -> set[int]:
    found: set[int] = set()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found.add(pid)
    return found
