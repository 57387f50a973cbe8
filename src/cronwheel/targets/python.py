"""Which Python functions a job may call: one rule, for the API when a job is written and for the
worker before every call.

A python target names ``package.module:function``; the operator allows some with fnmatch patterns
on that whole string (``--allow-python 'mypkg.jobs:*'``). Matching the string alone let a job call
anything the allowed module could reach: a function it had imported (``mypkg.jobs:rmtree``, from
``shutil``, deleted a directory), an attribute path through it (``mypkg.jobs:os.system``), and with
the pattern ``*`` any function of the standard library (``pty:spawn`` ran a command). So:

1. **Syntax** (:func:`cronwheel.targets.checks.check_python`): one function name after the colon, not a
   dotted path, and no ``__dunder__`` name.
2. **Patterns** (:func:`check_patterns`, when the server starts and whenever settings are made):
   each names its top-level package literally (``mypkg.*:run`` is fine, ``*``, ``*:run`` and
   ``my*:run`` are refused), and never one of :data:`RESERVED`: the standard library and
   cronwheel itself, whose functions (``subprocess:run``, ``shutil:rmtree``) are plain functions
   defined in their modules, which rule 3 alone would let through.
3. **Defined there** (:func:`function_in`, on the worker after the import): the name must be a
   plain ``def`` or ``async def`` of the module's own namespace whose ``__module__`` is that
   module. A name the module imported, a builtin, a class, a ``functools.partial`` or a callable
   object is refused, and so is anything a module-level ``__getattr__`` would make up.

The API never imports the module (that would run its code on the API node); rule 3 is the
worker's, at every attempt, so a job written for a function that later becomes an import ends in
an ``error`` outcome that says so.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterable, Sequence
from fnmatch import fnmatchcase
from types import ModuleType
from typing import Any

from cronwheel.errors import InvalidInputError
from cronwheel.targets.kinds import PythonTarget
from cronwheel.targets.kinds.python import check_python

RESERVED = frozenset(sys.stdlib_module_names) | {"__main__", "cronwheel"}
"""Top-level packages no pattern may open: the standard library, the worker's main module and
cronwheel itself. Python targets run the operator's code, not the platform's."""

_WILDCARDS = frozenset("*?[]")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be an ``--allow-python`` pattern, or None."""
    top = pattern.partition(":")[0].split(".", 1)[0]
    if not top or _WILDCARDS & set(top) or not top.isidentifier():
        return "it must name its top-level package (mypkg.jobs:*, mypkg.*:run), not match any"
    if top in RESERVED:
        return f"{top} is {_reserved(top)}"
    return None


def _reserved(top: str) -> str:
    if top == "cronwheel":
        return "the scheduler's own package"
    return "the worker's main module" if top == "__main__" else "in the standard library"


def check_patterns(patterns: Iterable[str]) -> None:
    """Refuse (InvalidInputError) the first pattern that breaks rule 2 of the module docstring."""
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise InvalidInputError(f"--allow-python {pattern!r} is refused: {problem}")


def refusal(function: str, patterns: Sequence[str]) -> str | None:
    """Why a job may not call ``function`` under ``patterns`` (rules 1 and 2), or None. The
    message is the same on the API and on the worker."""
    try:
        check_python(PythonTarget(function))
    except InvalidInputError as error:
        return str(error)
    top = function.split(".", 1)[0].partition(":")[0]
    if top in RESERVED:
        return f"python target {function!r} is not allowed: {top} is {_reserved(top)}, never a target"
    if not allowed(function, patterns):
        return f"python target {function!r} is not allowed by this server's --allow-python"
    return None


def allowed(function: str, patterns: Sequence[str]) -> bool:
    """Whether a pattern matches ``function`` (fnmatch on the whole string, case-sensitive)."""
    return any(fnmatchcase(function, pattern) for pattern in patterns)


def function_in(module: ModuleType, name: str) -> Callable[..., Any] | str:
    """The function ``name`` defined in ``module`` (rule 3), or why there is none."""
    reference = f"{module.__name__}:{name}"
    value = vars(module).get(name)  # its own namespace: no module __getattr__, no submodule import
    if value is None:
        return f"{reference}: {module.__name__} has no function {name}"
    if not inspect.isfunction(value):
        return f"{reference} is not a function defined there (its type is {type(value).__name__})"
    if value.__module__ != module.__name__:
        return (
            f"{reference} is {value.__module__}.{value.__qualname__}, imported there: only "
            f"functions defined in {module.__name__} may run"
        )
    function: Callable[..., Any] = value
    return function
