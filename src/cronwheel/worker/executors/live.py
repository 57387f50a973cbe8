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
        self._size: Callable[[], int] | None = None
        self._cached: tuple[int, int, str | None] | None = None  # (size, most, text) last read

    def attach(
        self, read: Callable[[], str], redact: Redact = _kept, size: Callable[[], int] | None = None
    ) -> None:
        """From now on the output so far is ``read()``, as ``redact`` leaves it; ``size()``, when
        given, counts what was written so far (it grows with every write): while it stays the same,
        the output is not read again (a worker of many quiet attempts decodes nothing)."""
        self._read, self._redact, self._size, self._cached = read, redact, size, None

    def detach(self) -> None:
        """The attempt's output is final: nothing more to read here."""
        self._read = None

    def text(self, most: int) -> str | None:
        """The last ``most`` characters of the output so far, redacted; None: none yet."""
        if self._read is None:
            return None
        size = -1 if self._size is None else self._size()
        if self._cached is not None and size >= 0 and self._cached[:2] == (size, most):
            return self._cached[2]
        text = self._redact(self._read())
        kept = (text[-most:] if most > 0 else "") if text else None
        self._cached = (size, most, kept)
        return kept
