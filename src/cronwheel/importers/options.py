"""What every importer is given besides the text: the team, the zone for entries that name
none, and the instant "now" (DST checks look at the year after it), so that an import is a pure
function of its inputs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Options:
    team: str
    now: datetime  # aware
    timezone: str | None = None  # None: UTC, and the importer says it assumed it

    @property
    def zone(self) -> str:
        return self.timezone or "UTC"


LABEL = "imported-from"  # the label every imported job carries: the source format
