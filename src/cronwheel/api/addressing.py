"""How the API addresses a job: by its id, ``/v1/jobs/{job_id}``, or by its team and name,
``/v1/teams/{team}/jobs/{name}``, the way the CLI names jobs (``team/name``).

Every job route is written once, taking ``job_id``, and registered at both addresses by
:func:`job_route`. The second registration is the same endpoint with ``job_id`` turned into a
dependency that resolves the path's team and name to the id of the team's live job of that name
(404 when there is none); a deleted job is reached by its id only. ``team/name`` inside
``/v1/jobs/...`` cannot work: the ``/`` (even as ``%2F``, which servers decode first) splits the
path, and ``/v1/jobs/{team}/runs`` would mean two things.

A team the caller is not of has no jobs for it: its names answer the same 404 as a name no job
has, before the store is asked.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Path

from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.schemas.base import NAME_PATTERN
from cronwheel.api.services import ApiServices, get_services
from cronwheel.errors import HiddenError, NotFoundError

Endpoint = TypeVar("Endpoint", bound=Callable[..., Coroutine[Any, Any, Any]])

BY_ID = "/jobs/{job_id}"
BY_NAME = "/teams/{team}/jobs/{name}"


async def job_id_by_name(
    team: Annotated[str, Path(pattern=NAME_PATTERN, description="The job's team.")],
    name: Annotated[str, Path(pattern=NAME_PATTERN, description="The job's name in its team.")],
    services: Annotated[ApiServices, Depends(get_services)],
    caller: CallerDep,
) -> str:
    """The id of ``team``'s live job named ``name`` (the route checks the caller's scope)."""
    if not caller.sees(team):
        raise HiddenError(f"team {team!r} has no job named {name!r}")
    job = await services.store.find_job(team, name)
    if job is None:
        raise NotFoundError(f"team {team!r} has no job named {name!r}")
    return job.id


def job_route(
    router: APIRouter, method: str, suffix: str = "", **options: Any
) -> Callable[[Endpoint], Endpoint]:
    """Register the decorated endpoint at ``BY_ID + suffix`` and at ``BY_NAME + suffix``."""

    def register(endpoint: Endpoint) -> Endpoint:
        router.add_api_route(BY_ID + suffix, endpoint, methods=[method], **options)
        router.add_api_route(
            BY_NAME + suffix,
            by_name(endpoint),
            methods=[method],
            name=f"{endpoint.__name__}_by_name",
            **options,
        )
        return endpoint

    return register


def by_name(endpoint: Endpoint) -> Endpoint:
    """``endpoint`` with its ``job_id`` parameter resolved from the path's team and name.
    FastAPI reads the signature: the copy's declares the dependency in place of the path
    parameter (annotations resolved, since the routes' module defers them)."""
    hints = typing.get_type_hints(endpoint, include_extras=True)
    signature = inspect.signature(endpoint)
    parameters = [
        parameter.replace(annotation=Annotated[str, Depends(job_id_by_name)])
        if name == "job_id"
        else parameter.replace(annotation=hints.get(name, parameter.annotation))
        for name, parameter in signature.parameters.items()
    ]

    @functools.wraps(endpoint)
    async def addressed_by_name(**arguments: Any) -> Any:
        return await endpoint(**arguments)

    addressed_by_name.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=hints.get("return", signature.return_annotation)
    )
    return typing.cast(Endpoint, addressed_by_name)
