"""An attempt's output so far, while it runs: the executor attaches a reader of what it has kept,
the worker reads it (at most once a second, :class:`cronwheel.worker.loop.Worker`) and writes it to
the store, where the run's page and ``cronwheel runs logs --follow`` read it.

What the worker reads is bounded (the last ``most`` characters) and redacted as the final output
is: every resolved secret value of the attempt replaced by its name (the worker then makes it text
every store can keep, :func:`cronwheel.worker.executors.base.storable_text`).
"""

from __future__ import annotations

from collections.abc import Callable

Redact = Callable[[str | None], str | None]


def _kept(text: str | None) -> str | None:
    return text


class OutputSoFar:
    """What an executor has of one attempt's output while it runs (nothing until it attaches)."""

    def __init__(self) -> None:
        self._read: Callable[[], str] | None = None
        self._redact: Redact = _kept

    def attach(self, read: Callable[[], str], redact: Redact = _kept) -> None:
        """From now on the output so far is ``read()``, as ``redact`` leaves it."""
        self._read, self._redact = read, redact

    def detach(self) -> None:
        """The attempt's output is final: nothing more to read here."""
        self._read = None

    def text(self, most: int) -> str | None:
        """The last ``most`` characters of the output so far, redacted; None: none yet."""
        if self._read is None:
            return None
        text = self._redact(self._read())
        if not text:
            return None
        return text[-most:] if most > 0 else ""
