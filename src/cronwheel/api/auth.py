"""Who is calling: the FastAPI dependency every route takes to learn its :class:`Caller`.

Today the API has no authentication: every request is made by
:data:`~cronwheel.identity.TRUSTED` (an admin of every team). Routes already ask the caller
(:meth:`~cronwheel.identity.Caller.require`) before they act, so that authentication (API tokens,
OIDC) only has to replace :func:`current_caller`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from cronwheel.identity import TRUSTED, Caller


async def current_caller(request: Request) -> Caller:
    """The caller of ``request``."""
    return TRUSTED


CallerDep = Annotated[Caller, Depends(current_caller)]
