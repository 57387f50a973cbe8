"""What an import says besides the jobs: one :class:`Note` per change of meaning, per entry left
out and per thing the user must do, so that nothing of the source is dropped without a word."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class NoteKind(enum.StrEnum):
    """What a note is about (docs/importing.md describes each)."""

    RENAMED = "renamed"  # the job's name is not the source's (derived, made valid or unique)
    SKIPPED = "skipped"  # the entry was not imported: it has no cronwheel equivalent
    SCHEDULE = "schedule"  # the schedule was rewritten, or fires at other times than the source's
    TIMEZONE = "timezone"  # the zone was taken from elsewhere or assumed
    DST = "dst"  # local times a DST change repeats or skips are treated otherwise
    MISFIRE = "misfire"  # missed slots are handled otherwise
    OVERLAP = "overlap"  # a slot that comes while a run is active is handled otherwise
    PAUSED = "paused"  # the source's job is suspended: pause it after applying
    SHELL = "shell"  # a command line needs a shell: wrapped in ``sh -c``
    STDIN = "stdin"  # cron's ``%`` input, fed through the shell
    NOTIFICATION = "notification"  # mail the source sent: a notification rule to set
    TARGET = "target"  # what the job calls differs from, or lacks part of, the source's
    TIMEOUT = "timeout"  # the per-attempt time limit
    RETRY = "retry"  # attempts of one run
    DROPPED = "dropped"  # a setting with no cronwheel equivalent, left out


class UnreadableInputError(ValueError):
    """The input is not what the importer reads (bad YAML, not a CronJob list ...): nothing
    was imported. The message says where and why."""


class NoEquivalentError(ValueError):
    """One entry has no cronwheel equivalent: it is left out, with this message as the reason."""


@dataclass(frozen=True, slots=True)
class Note:
    """One report entry. ``source`` says where in the input (``line 7``, ``CronJob ops/backup``);
    ``job`` is the imported job's name (None: the file as a whole, or an entry left out);
    ``action`` is what the user must run, if anything."""

    source: str
    kind: NoteKind
    message: str
    job: str | None = None
    action: str | None = None

    def text(self) -> str:
        where = self.source if self.job is None else f"{self.source} -> {self.job}"
        line = f"{where}: [{self.kind.value}] {self.message}"
        return line if self.action is None else f"{line}\n    run: {self.action}"

    def data(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "job": self.job,
            "kind": self.kind.value,
            "message": self.message,
            "action": self.action,
        }


@dataclass
class ImportResult:
    """An importer's answer: the jobs (apply-file mappings without ``team``) and the notes."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)

    def apply_file(self, team: str) -> dict[str, Any]:
        """The ``cronwheel apply -f`` document: ``{team: ..., jobs: [...]}``."""
        return {"team": team, "jobs": self.jobs}
