"""Command lines as cronwheel command targets, which run ``argv`` directly, never through a shell.

A line without shell syntax is split with the shell's quoting rules into the same ``argv`` the
shell would have run. A line that needs a shell (pipes, redirections, ``&&``, variables, globs,
``~``, subshells ...) is run by one explicitly: ``[shell, "-c", line]``, and the importer says so.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Characters that mean something to sh beyond quoting words: any of them outside nothing but
# plain words needs the shell itself (a conservative test: a quoted '|' is wrapped too).
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\*?\[\]{}~!#\n]|^\s*\w+=")


@dataclass(frozen=True, slots=True)
class Command:
    argv: list[str]
    wrapped: bool  # argv is [shell, "-c", line]


def needs_shell(line: str) -> bool:
    return bool(_SHELL_SYNTAX.search(line))


def command(line: str, shell: str = "/bin/sh") -> Command:
    """The argv that runs ``line`` as ``shell`` would."""
    if not needs_shell(line):
        try:
            argv = shlex.split(line)
        except ValueError:  # an unclosed quote: the shell will say what it makes of it
            argv = []
        if argv:
            return Command(argv, wrapped=False)
    return Command([shell, "-c", line], wrapped=True)


def with_input(line: str, lines: list[str]) -> str:
    """``line`` fed ``lines`` on its standard input (cron's ``%``), as a shell line (the whole
    of ``line`` reads it, however it is built: it runs in a subshell of its own lines)."""
    quoted = " ".join(shlex.quote(text) for text in lines)
    return f"printf '%s\\n' {quoted} | (\n{line}\n)"
