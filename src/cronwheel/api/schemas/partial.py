"""Partial models: a PATCH body derived from the full definition's model instead of written again.

:func:`partial_model` copies every field of a model with the same type, constraints and
description, but optional and without a default (an omitted field is simply not in
``model_fields_set``). Nested models are made partial too, so that a patch of a policy can name
one of its fields; unions (a target) are taken whole. A field the full model does not let be
null refuses an explicit null here as well, with a message that says what to do instead. The
full model's validators are not copied: cross-field rules (``max_delay_s`` at least
``initial_delay_s``) can only be judged once the patch is merged into the stored definition.
"""

from __future__ import annotations

import types
from typing import Annotated, Any, TypeVar, Union, cast, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, Field, create_model
from pydantic.fields import FieldInfo

M = TypeVar("M", bound=BaseModel)


def partial_model(model: type[BaseModel], name: str, base: type[M], doc: str) -> type[M]:
    """``model``'s fields, each optional, on ``base`` (which brings the config and methods)."""
    fields: dict[str, Any] = {}
    for field_name, info in model.model_fields.items():
        annotation = _annotation(info)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            nested = info.annotation  # on its own base: its config, not its validators or methods
            nested_base = cast("type[BaseModel]", nested.__base__)
            annotation = partial_model(
                nested, nested.__name__.removesuffix("Spec") + "Patch", nested_base, ""
            )
        if not nullable(info):
            annotation = Annotated[annotation, BeforeValidator(_refuse_null)]
        fields[field_name] = (
            annotation,
            Field(
                default=None,
                description=info.description,
                examples=info.examples,
                json_schema_extra=_no_default,
            ),
        )
    return create_model(
        name, __base__=base, __doc__=doc or model.__doc__, __module__=base.__module__, **fields
    )


def nullable(info: FieldInfo) -> bool:
    """Whether the field accepts null (``X | None``, or any JSON value)."""
    annotation = info.annotation
    if annotation is Any:
        return True
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _annotation(info: FieldInfo) -> Any:
    """The field's type with its constraints (and its union's discriminator) attached again."""
    annotation = info.rebuild_annotation()
    if info.discriminator is not None:
        annotation = Annotated[annotation, Field(discriminator=info.discriminator)]
    return annotation


def _refuse_null(value: object) -> object:
    if value is None:  # validators see given values only: this is an explicit null
        raise ValueError("cannot be null (omit the field to keep its value)")
    return value


def _no_default(schema: dict[str, Any]) -> None:
    """An omitted field keeps the stored value: the schema shows no default."""
    schema.pop("default", None)
