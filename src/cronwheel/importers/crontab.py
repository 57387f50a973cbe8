"""crontab(5) files: a user's crontab, or the system format (``/etc/crontab``, ``/etc/cron.d``)
whose sixth field names the user a line runs as.

Environment lines apply to the entries after them: ``CRON_TZ`` is the zone of their schedules,
``SHELL`` the shell that runs a line needing one, ``MAILTO`` where their output was mailed (an
email rule to set), and every other variable goes into their command's environment. A command
runs without a shell unless its line uses shell syntax; ``%`` (cron's standard input) is fed
through the shell. ``@reboot`` has no equivalent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from cronwheel.importers.commands import command, with_input
from cronwheel.importers.draft import Draft, finish, skipped
from cronwheel.importers.notify import addresses, email_rule_command
from cronwheel.importers.options import LABEL, Options
from cronwheel.importers.report import ImportResult, Note, NoteKind
from cronwheel.importers.timing import NO_LIMIT_S, known_zone, schedule_problem

_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_FIELDS = re.compile(r"^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$")
_MACRO = re.compile(r"^(@\w+)\s+(.*)$")
_PERCENT = re.compile(r"(?<!\\)%")
_SEGMENTS = re.compile(r"&&|\|\||[;|()]")
_PREAMBLE = {"cd", "test", "[", "true", ":", "exec", "nice", "ionice", "env", "sudo"}
_RUNNERS = {"manage", "python", "python3", "php", "node", "ruby", "perl", "bash", "sh", "run-parts"}
_SCRIPT_EXTENSIONS = {"sh", "py", "php", "pl", "rb", "js"}
_IGNORED_ENV = {"MAILFROM": "the sender of cron's mail", "RANDOM_DELAY": "cronie's random start delay"}


@dataclass(frozen=True)
class _Env:
    """What the environment lines above an entry set."""

    zone: str | None = None
    shell: str = "/bin/sh"
    mailto: str | None = None  # None: unset (cron mails the owner); "": no mail
    variables: dict[str, str] = field(default_factory=dict)


def convert(text: str, options: Options, *, system: bool = False) -> ImportResult:
    """The jobs of a crontab; ``system``: lines carry a user field after the schedule."""
    entries: list[Draft | Note] = []
    env = _Env()
    unmailed = 0  # entries imported while MAILTO was unset
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"line {number}"
        setting = _ENV.match(line)
        if setting:
            env = _set(env, setting.group(1), _unquote(setting.group(2)), where, options, entries)
            continue
        entry = _entry(line, env, where, options, system=system)
        unmailed += isinstance(entry, Draft) and env.mailto is None
        entries.append(entry)
    drafts = [entry for entry in entries if isinstance(entry, Draft)]
    return finish(_file_notes(drafts, options, unmailed) + entries, options.team)


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _set(env: _Env, name: str, value: str, where: str, options: Options, entries: list[Draft | Note]) -> _Env:
    if name == "CRON_TZ":
        zone = known_zone(value)
        if zone is None:
            entries.append(
                Note(
                    where,
                    NoteKind.TIMEZONE,
                    f"CRON_TZ={value!r} is not a known zone: entries below use {options.zone}",
                )
            )
        return replace(env, zone=zone)
    if name == "SHELL":
        return replace(env, shell=value)
    if name == "MAILTO":
        return replace(env, mailto=value)
    if name in _IGNORED_ENV:
        entries.append(
            Note(where, NoteKind.DROPPED, f"{name} ({_IGNORED_ENV[name]}) has no cronwheel equivalent")
        )
        return env
    return replace(env, variables={**env.variables, name: value})


def _entry(line: str, env: _Env, where: str, options: Options, *, system: bool) -> Draft | Note:
    macro = _MACRO.match(line)
    if macro:
        schedule, rest = macro.group(1), macro.group(2)
        if schedule == "@reboot":
            return skipped(where, "@reboot runs at the cron daemon's start; cronwheel has no such time")
    else:
        fields = _FIELDS.match(line)
        if fields is None:
            return skipped(where, "not an environment setting and not five time fields and a command")
        schedule, rest = " ".join(fields.groups()[:5]), fields.group(6)
    user = None
    if system:
        user, rest = [*rest.split(None, 1), ""][:2]
    if not rest:
        return skipped(where, "the entry has no command")
    zone = env.zone or options.zone
    problem = schedule_problem(schedule, zone)
    if problem is not None:
        return skipped(where, problem)
    return _draft(line, schedule, zone, rest, user, env, where)


def _draft(line: str, schedule: str, zone: str, rest: str, user: str | None, env: _Env, where: str) -> Draft:
    parts = [part.replace("\\%", "%") for part in _PERCENT.split(rest)]
    line_text, stdin = parts[0].rstrip(), parts[1:]
    draft = Draft(where, _program(line_text), named=False)
    if stdin:
        line_text = with_input(line_text, stdin)
        draft.note(NoteKind.STDIN, f"'%' fed {len(stdin)} line(s) to standard input: given through the shell")
    run = command(line_text, env.shell)
    if run.wrapped and not stdin:
        draft.note(NoteKind.SHELL, f"the line uses shell syntax: run as [{env.shell!r}, '-c', line]")
    target: dict[str, object] = {"type": "command", "argv": run.argv}
    if env.variables:
        target["env"] = dict(env.variables)
    draft.job = {
        "description": f"crontab {where}: {line}"[:2000],
        "schedule": schedule,
        "timezone": zone,
        "target": target,
        "timeout_s": NO_LIMIT_S,
        "labels": {LABEL: "crontab"},
    }
    if user is not None:
        draft.note(NoteKind.DROPPED, f"ran as user {user!r}; cronwheel runs commands as its command user")
    _mail(draft, env)
    return draft


def _program(line: str) -> str:
    """A name for an entry: the file name of the program it runs (past ``cd DIR &&``, ``test``
    and the like), with the script an interpreter or ``run-parts`` runs."""
    for segment in _SEGMENTS.split(line):
        words = [word.strip("'\"") for word in segment.split()]
        if not words or words[0] in _PREAMBLE:
            continue
        name = _stem(words[0])
        script = next((word for word in words[1:] if not word.startswith("-")), None)
        return f"{name}-{_stem(script)}" if name in _RUNNERS and script else name
    return "command"


def _stem(path: str) -> str:
    base = path.rstrip("/").rsplit("/", 1)[-1]
    stem, dot, extension = base.rpartition(".")
    return stem if dot and stem and extension in _SCRIPT_EXTENSIONS else base


def _mail(draft: Draft, env: _Env) -> None:
    if not env.mailto:
        return
    found, others = addresses(env.mailto)
    if others:
        draft.note(
            NoteKind.NOTIFICATION,
            f"MAILTO {', '.join(others)}: not an email address (a local user?); no rule for it",
        )
    if found:
        draft.note(
            NoteKind.NOTIFICATION,
            f"cron mailed the output of every run to {', '.join(found)}; cronwheel keeps the output "
            "with the run and can email when a run fails",
            email_rule_command(found),
        )


def _file_notes(drafts: list[Draft], options: Options, unmailed: int) -> list[Draft | Note]:
    if not drafts:
        return []
    notes: list[Draft | Note] = [
        Note(
            "file",
            NoteKind.TARGET,
            "cron ran these commands on its own host, as the crontab's owner; cronwheel runs them "
            "on its workers (started with --allow-commands), as the command user: each program must "
            "exist there",
        ),
        Note(
            "file",
            NoteKind.TIMEOUT,
            f"cron sets no time limit: every job has timeout_s {NO_LIMIT_S:g}, the most",
        ),
    ]
    if options.timezone is None and any(draft.job["timezone"] == "UTC" for draft in drafts):
        notes.append(
            Note(
                "file",
                NoteKind.TIMEZONE,
                "cron used the host's zone where no CRON_TZ is set: assumed UTC (--timezone)",
            )
        )
    if unmailed:
        notes.append(
            Note(
                "file",
                NoteKind.NOTIFICATION,
                f"{unmailed} job(s) have no MAILTO above them: cron mailed their output to the "
                "crontab's owner; no rule made",
            )
        )
    return notes
