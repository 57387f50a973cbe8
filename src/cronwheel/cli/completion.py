"""``cronwheel completion bash|zsh|fish``: the shell's completion script (click's), and the
completion of JOB arguments with the names of the server's jobs.

A JOB is completed as ``TEAM/NAME`` from the server the command line names (``--url``,
``--token``, ``--context`` typed so far, else the environment and the config file, as any
command finds it). Completion runs at each Tab: an unreachable or refusing server completes
nothing, silently, within :data:`TIMEOUT_S`.
"""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem, get_completion_class

from cronwheel.cli.output import connect_given
from cronwheel.client.errors import ClientError

SHELLS = ("bash", "zsh", "fish")
PROGRAM = "cronwheel"
COMPLETE_VAR = "_CRONWHEEL_COMPLETE"  # what click's scripts set (from the program's name)
TIMEOUT_S = 1.0  # a Tab that waits longer than this is worse than one that completes nothing
MOST = 1000  # jobs read for one completion: one page, the API's largest


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script of SHELL (commands, options, and job names from the server).

    \b
    bash:  eval "$(cronwheel completion bash)"     (in ~/.bashrc)
    zsh:   eval "$(cronwheel completion zsh)"      (in ~/.zshrc)
    fish:  cronwheel completion fish > ~/.config/fish/completions/cronwheel.fish
    """
    script = get_completion_class(shell)
    assert script is not None  # every one of SHELLS is click's
    root = click.get_current_context().find_root().command
    click.echo(script(root, {}, PROGRAM, COMPLETE_VAR).source())


def job_names(ctx: click.Context, incomplete: str) -> list[str]:
    """The ``TEAM/NAME`` of the server's jobs that start with ``incomplete``."""
    team = incomplete.partition("/")[0] if "/" in incomplete else None  # typed: one team's
    with connect_given(ctx, timeout=TIMEOUT_S) as client:
        page = client.list_jobs(team=team, limit=MOST)
    return sorted(
        name for job in page.items if (name := f"{job['team']}/{job['name']}").startswith(incomplete)
    )


def complete_job(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of a JOB argument or ``--job`` option; nothing when the server cannot
    answer (no message: it would land in the middle of the command line)."""
    try:
        return [CompletionItem(name) for name in job_names(ctx, incomplete)]
    except (click.ClickException, ClientError, OSError):
        return []


def job_argument(func: Any) -> Any:
    """The ``JOB`` argument (an id or ``TEAM/NAME``), completed with the server's job names."""
    return click.argument("job", shell_complete=complete_job)(func)
