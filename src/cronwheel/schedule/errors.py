"""The one exception type of the schedule engine."""

from __future__ import annotations

from cronwheel.errors import InvalidInputError


class ScheduleError(InvalidInputError):
    """A schedule expression, time zone or option that cronwheel refuses.

    Every refusal of :func:`cronwheel.schedule.parse_schedule` is this type (a ``ValueError``), and its
    message names the field, the position and the reason, for example::

        invalid schedule '61 * * * *': minute field (field 1, column 1): 61 is out of range 0-59

    Attributes:
        expression: the text that was refused.
        field: the field's name (``"minute"``, ``"day-of-week"``, ``"timezone"`` ...), or ``None``
            when the expression as a whole is wrong (empty, wrong field count, can never fire).
        field_index: 1-based position of the field among the expression's fields, or ``None``.
        column: 1-based character column in ``expression`` where the problem starts, or ``None``.
        reason: the reason alone, without the position.
    """

    def __init__(
        self,
        expression: str,
        reason: str,
        *,
        field: str | None = None,
        field_index: int | None = None,
        column: int | None = None,
    ) -> None:
        self.expression = expression
        self.reason = reason
        self.field = field
        self.field_index = field_index
        self.column = column
        super().__init__(self._message())

    def _message(self) -> str:
        shown = self.expression if len(self.expression) <= 80 else self.expression[:77] + "..."
        where: list[str] = []
        if self.field_index is not None:
            where.append(f"field {self.field_index}")
        if self.column is not None:
            where.append(f"column {self.column}")
        if self.field is None:
            place = ""
        elif where:
            place = f"{self.field} field ({', '.join(where)}): "
        else:
            place = f"{self.field}: "
        return f"invalid schedule {shown!r}: {place}{self.reason}"
