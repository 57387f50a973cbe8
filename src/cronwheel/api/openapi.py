"""The OpenAPI document's errors: every error response is a ``Problem`` (RFC 9457,
``application/problem+json``), as :mod:`cronwheel.api.problems` answers them.

Routes declare the statuses they answer with :data:`PROBLEM_DOC`, whose schema is the
``Problem`` component that :func:`install` adds to the document. FastAPI documents a 422 of its
own (``HTTPValidationError``, ``application/json``) on every route with parameters that does not
declare one; cronwheel never answers that shape, so :func:`install` puts the problem in its place
and drops the component. It also documents the statuses any route may answer
(:data:`ANY_ROUTE`): a schema-driven client or fuzzer (``tests/fuzz``) then meets no status and
no content type that the document does not name.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field

from cronwheel.api.problems import PROBLEM_JSON

PROBLEM_REF = "#/components/schemas/Problem"
PROBLEM_DOC: dict[str, Any] = {"content": {PROBLEM_JSON: {"schema": {"$ref": PROBLEM_REF}}}}


class ProblemEntry(BaseModel):
    """One refused input: where (``location``, ``field``, ``pointer`` for body fields) and why
    (``message``, and ``code``, stable: ``string_too_long``, ``invalid_schedule`` ...)."""

    model_config = ConfigDict(extra="allow")  # facts of a check: cron_field, column ...

    location: str = Field(description="body, query, path or header.")
    field: str = Field(description="Dotted path of the field (empty: the whole body).")
    message: str
    code: str | None = None
    pointer: str | None = Field(default=None, description="JSON Pointer into the body.")


class Problem(BaseModel):
    """RFC 9457 problem details."""

    model_config = ConfigDict(extra="allow")  # extension members: checks (readyz) ...

    type: str = Field(description="urn:cronwheel:problem:<kind>, or about:blank.")
    title: str
    status: int
    detail: str
    instance: str | None = None
    errors: list[ProblemEntry] | None = Field(default=None, description="Every refused input at once.")


RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait.", "schema": {"type": "integer"}}}
ANY_ROUTE: dict[str, dict[str, Any]] = {
    "503": {"description": "A backend is unavailable; try again", "headers": RETRY_AFTER, **PROBLEM_DOC},
}
_FASTAPI_422 = "#/components/schemas/HTTPValidationError"
_INVALID = {"description": "Invalid input; nothing was written", **PROBLEM_DOC}


def install(app: FastAPI) -> None:
    """Make ``app``'s document (built once, on first use) state its errors as problems."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = problems_documented(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _never_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without ``null``: a path, query or header parameter is absent or a
    string, never null (FastAPI documents ``X | None = None`` as ``anyOf: [X, null]``, and a
    client that believed it sent ``If-Match: null``)."""
    choices = [choice for choice in schema.get("anyOf", []) if choice != {"type": "null"}]
    if not choices or len(choices) == len(schema["anyOf"]):
        return schema
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**choices[0], **rest} if len(choices) == 1 else {**rest, "anyOf": choices}


def problems_documented(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the ``Problem`` schema, FastAPI's 422 replaced by it,
    :data:`ANY_ROUTE` on every operation under ``/v1``, and parameters that are never null."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(problem.pop("$defs", {}))
    schemas["Problem"] = problem
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for path, item in document.get("paths", {}).items():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                parameter["schema"] = _never_null(parameter["schema"])
            responses = operation.setdefault("responses", {})
            if _FASTAPI_422 in str(responses.get("422", "")):
                responses["422"] = _INVALID
            if path.startswith("/v1/"):
                for status, response in ANY_ROUTE.items():
                    responses.setdefault(status, response)
    return document
