"""Day fields of sources where a day must match the day of month *and* the day of week (Celery's
crontab, APScheduler's cron trigger), for cron, where a day matching *either* fires when both
are restricted. Only "the n-th weekday of the month" has a cron spelling (``MON#2``)."""

from __future__ import annotations

_WEEKS = {"1-7": 1, "8-14": 2, "15-21": 3, "22-28": 4}


def restricted(text: str) -> bool:
    """Whether a cron day field restricts days (cron: a field starting with ``*`` or ``?`` does not)."""
    return not text.startswith(("*", "?"))


def both_days(dom: str, dow: str) -> tuple[str, str] | None:
    """Cron day fields that fire on the days matching both ``dom`` and ``dow``, or None where
    cron cannot say it."""
    if not (restricted(dom) and restricted(dow)):
        return dom, dow
    week = _WEEKS.get(dom.replace(" ", ""))
    if week is not None and dow.replace(" ", "").isalnum():
        return "*", f"{dow}#{week}"
    return None


def field_text(value: object) -> str:
    """A source's field value (``5``, ``[0, 30]``, ``"*/15"``) as cron text."""
    if isinstance(value, list | tuple | set):
        return ",".join(str(item) for item in value)
    return str(value).strip()
