"""Mail a source scheduler sent (cron's ``MAILTO``): cronwheel's email notification channel,
given as the ``cronwheel notifications set`` line to run once the job exists."""

from __future__ import annotations

import re

_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}")  # the email channel's pattern


def addresses(text: str) -> tuple[list[str], list[str]]:
    """The email addresses of a comma- or space-separated list, and the entries that are not
    (a local user name such as ``root``)."""
    found: list[str] = []
    others: list[str] = []
    for item in re.split(r"[,\s]+", text.strip()):
        if item:
            (found if _ADDRESS.fullmatch(item) else others).append(item)
    return found, others


def email_rule_command(recipients: list[str]) -> str:
    """The shell line that gives ``{job}`` an email rule on failure (``{job}``: filled in when the
    job's name is known)."""
    to = ", ".join(recipients)
    return (
        f"echo '[{{conditions: [failure], channels: [{{type: email, to: [{to}]}}]}}]' "
        "| cronwheel notifications set - --job {job}"
    )
