"""A job's retry, misfire and retention policies as the API takes and gives them."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    BeforeValidator,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from cronwheel.api.schemas.base import Integer, MisfireChoice, StrictModel, integral
from cronwheel.model import (
    MisfireMode,
    MisfirePolicy,
    RetentionPolicy,
    RetryPolicy,
)

# -- policies ----------------------------------------------------------------------------------


class RetrySpec(StrictModel):
    """Attempts of one run, with exponential backoff and full jitter between them."""

    max_attempts: Integer = Field(default=1, ge=1, le=100, description="1: no retries.")
    initial_delay_s: float = Field(default=1.0, gt=0, le=86_400)
    multiplier: float = Field(default=2.0, ge=1, le=100)
    max_delay_s: float = Field(
        default=300.0, gt=0, le=86_400, validate_default=True, description="At least initial_delay_s."
    )
    jitter: bool = Field(default=True, description="Full jitter: each delay uniform in [0, ceiling).")

    @field_validator("max_delay_s")
    @classmethod
    def _delays(cls, value: float, info: ValidationInfo) -> float:
        initial = info.data.get("initial_delay_s")
        if initial is not None and value < initial:
            raise PydanticCustomError("field_order", "max_delay_s must be at least initial_delay_s")
        return value

    def to_record(self) -> RetryPolicy:
        return RetryPolicy(**self.model_dump())


class MisfireSpec(StrictModel):
    """What to do with slots that passed while nothing could fire them."""

    policy: MisfireChoice = MisfireMode.SKIP
    grace_s: float = Field(default=60.0, ge=0, le=7 * 86_400, description="Used by `skip` only.")
    max_catch_up: Integer = Field(default=10, ge=1, le=1000, description="Used by `catch_up` only.")

    def to_record(self) -> MisfirePolicy:
        return MisfirePolicy(mode=self.policy, grace_s=self.grace_s, max_catch_up=self.max_catch_up)


class RetentionSpec(StrictModel):
    """How much of the job's run history to keep (docs/operations.md, Retention): a run goes
    when it is older than ``keep_days`` or beyond the newest ``keep_runs``; runs not finished and
    the latest run of each state always stay. Both null (``{}``): the whole history is kept,
    whatever the server's default."""

    keep_days: Annotated[int, Field(ge=1, le=36_500), BeforeValidator(integral)] | None = Field(
        default=None, description="Runs whose slot is older than this many days go; null: no age limit."
    )
    keep_runs: Annotated[int, Field(ge=1, le=10_000_000), BeforeValidator(integral)] | None = Field(
        default=None, description="Runs beyond the job's newest this many go; null: no count limit."
    )

    def to_record(self) -> RetentionPolicy:
        return RetentionPolicy(keep_days=self.keep_days, keep_runs=self.keep_runs)
