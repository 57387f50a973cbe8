"""What a target's header, environment and credential fields hold: plain text, or a reference to
a secret of the job's team (:class:`SecretRef`), which the worker resolves at attempt time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SecretRef:
    """A reference to a secret of the job's own team, in place of a header or environment value
    (``{"secret": "billing-api-key"}`` in the API and jobs.yaml). A job definition holds the name,
    never the value: the worker resolves it at attempt time (guarantee 9)."""

    name: str


Value = str | SecretRef  # a header or environment value: plain text, or a reference to a secret
