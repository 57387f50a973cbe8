"""``cronwheel secrets ...``: a team's secrets over the API, and the local key file.

A secret is named ``TEAM/NAME``. ``set`` reads the value from standard input (``cronwheel secrets
set data/billing-api-key < key.txt``; one trailing newline is dropped) or, on a terminal, from a
prompt that does not echo: never from an argument, which would land in shell history and in
``ps``. Nothing prints a value but ``set --new-signing-secret``, which prints the ``whsec_`` secret
it generated, once, so that the receivers can be given it.

``adopt JOB`` is the migration path for jobs written before secrets existed: each plain header or
environment value of the job becomes a team secret, and the job refers to it instead (one PATCH,
conditional on the version read). ``adopt-notifications`` does the same for the channel URLs of
notification rules that are credentials in clear (Slack URLs, webhook URLs with user info or a
token in their query): each becomes a team secret holding the whole URL (one PUT of the rules).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.completion import complete_job, job_argument
from cronwheel.cli.env_option import EnvOption
from cronwheel.cli.options import database_url_option
from cronwheel.cli.output import Ctx, api_command, table, when
from cronwheel.client import Conflict, NotFound, Problem, collect
from cronwheel.redaction import HIDDEN

if TYPE_CHECKING:
    from cronwheel.client import Client

_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")
_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def _split(ref: str) -> tuple[str, str]:
    team, sep, name = ref.partition("/")
    if not sep or not _NAME.fullmatch(team) or not _NAME.fullmatch(name):
        raise click.BadParameter(f"expected TEAM/NAME (each 1-100 of A-Z a-z 0-9 . _ -), not {ref!r}")
    return team, name


def read_value(what: str) -> str:
    """The value from standard input (one trailing newline dropped), or a hidden prompt."""
    stdin = sys.stdin  # click's test runner replaces it too
    if stdin.isatty():
        value: str = click.prompt(
            f"value of {what}", hide_input=True, confirmation_prompt=True, err=True, prompt_suffix=": "
        )
        return value
    text: str = stdin.read()
    return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")


def _secrets_table(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no secrets"
    return table(
        ["TEAM", "NAME", "KEY ID", "CREATED", "UPDATED"],
        [
            [item["team"], item["name"], item["key_id"], when(item["created_at"]), when(item["updated_at"])]
            for item in items
        ],
    )


@shared.group(*shared.GLOBAL)
def secrets(**_: Any) -> None:
    """Team secrets: set, list and delete them; move a job's plain values into them; rotate keys.

    \b
    Jobs refer to a secret of their team instead of holding the credential:
      target: {type: http, url: ..., headers: {Authorization: {secret: billing-api-key}}}
    """


@secrets.command("set")
@click.argument("ref", metavar="TEAM/NAME")
@click.option(
    "--new-signing-secret",
    is_flag=True,
    help="Generate a new whsec_ webhook signing secret, store it, and print it once (for the receivers).",
)
@api_command
def set_(ctx: Ctx, ref: str, new_signing_secret: bool) -> None:
    """Create or replace a secret. The value is read from standard input, or from a prompt that
    does not echo it.

    \b
    Examples:
      cronwheel secrets set data/billing-api-key < key.txt
      printf %s "$TOKEN" | cronwheel secrets set data/billing-api-key
      cronwheel secrets set data/webhook-signing --new-signing-secret
    """
    team, name = _split(ref)
    if new_signing_secret:
        from cronwheel.secrets.signing import new_signing_secret as generate  # noqa: PLC0415

        value = generate()
    else:
        value = read_value(ref)
    stored = ctx.client.set_secret(team, name, value)
    verb = "created" if stored.created else "replaced"
    ctx.emit(
        stored.secret, lambda data: f"{verb} secret {data['team']}/{data['name']} (key {data['key_id']})"
    )
    if new_signing_secret:
        click.echo(f"{value}\n(shown once: give it to the receivers of the team's webhooks)", err=True)


@secrets.command("list")
@click.argument("team")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@api_command
def list_(ctx: Ctx, team: str, limit: int) -> None:
    """List a team's secrets (names, key ids and times; never a value)."""
    items, cursor = collect(
        lambda size, after: ctx.client.list_secrets(team, limit=size, cursor=after), limit
    )
    ctx.emit({"items": items, "next_cursor": cursor}, lambda data: _secrets_table(data["items"]))


@secrets.command()
@click.argument("ref", metavar="TEAM/NAME")
@api_command
def delete(ctx: Ctx, ref: str) -> None:
    """Delete a secret (jobs that still refer to it fail their attempts, saying so)."""
    team, name = _split(ref)
    ctx.client.delete_secret(team, name)
    ctx.emit({"deleted": f"{team}/{name}"}, lambda data: f"deleted secret {data['deleted']}")


@secrets.command()
@api_command
def reencrypt(ctx: Ctx) -> None:
    """Rewrite every secret under the server's newest key (after adding a key; admin only)."""
    done = ctx.client.reencrypt_secrets()

    def summary(data: Any) -> str:
        lines = [
            f"re-encrypted {data['rewritten']} secret(s) under key {data['key_id']}"
            f" ({data['changed_meanwhile']} set meanwhile, already current)"
        ]
        lines += [f"  cannot open {f['team']}/{f['name']}: {f['error']}" for f in data["failed"]]
        return "\n".join(lines)

    ctx.emit(done, summary)
    if done["failed"]:
        raise click.exceptions.Exit(1)


# -- migration: a job's plain values into secrets --------------------------------------------------


def _adopted_name(job_name: str, field: str) -> str:
    """``nightly.authorization`` for ``target.headers.Authorization`` of job ``nightly``."""
    key = field.split(".", 2)[-1]  # target.headers.KEY, target.env.KEY, target.password
    return _NOT_NAME.sub("-", f"{job_name}.{key}".lower())[:100]


def _exists(client: Client, team: str, name: str) -> bool:
    try:
        client.get_secret(team, name)
    except NotFound:
        return False
    return True


@secrets.command()
@job_argument
@click.option(
    "--field", "fields", multiple=True, metavar="FIELD", help="Only this plain value (repeat), such as "
    "target.headers.Authorization; default: every plain value of the job.",
)  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@api_command
def adopt(ctx: Ctx, job: str, fields: tuple[str, ...], dry_run: bool) -> None:
    """Move a job's plain header, env or metadata values into team secrets (JOB: id or TEAM/NAME).

    Each value becomes the secret JOBNAME.KEY (lower case) of the job's team, and the job refers
    to it; the job is changed only if it is still at the version read. A secret of that name
    that exists already is never overwritten: nothing is changed.
    """
    data = ctx.client.get_job(job)
    chosen = list(fields) or list(data["plain_values"])
    unknown = [field for field in chosen if field not in data["plain_values"]]
    if unknown:
        plain = ", ".join(data["plain_values"]) or "none"
        raise click.BadParameter(
            f"not a plain value of the job: {', '.join(unknown)} (plain: {plain})", param_hint="--field"
        )
    plan = {field: _adopted_name(data["name"], field) for field in chosen}
    taken = [name for name in plan.values() if _exists(ctx.client, data["team"], name)]
    if taken:
        detail = (
            f"team {data['team']!r} already has secret(s) {', '.join(taken)}: nothing was changed "
            "(delete or rename them, or adopt the other fields with --field)"
        )
        raise Conflict(Problem(409, "Conflict", detail=detail))
    target = dict(data["target"])
    if not dry_run:
        for field, name in plan.items():
            holder, key = _place(target, field)
            ctx.client.set_secret(data["team"], name, holder[key])
            holder[key] = {"secret": name}
        ctx.client.update_job(data["id"], {"target": target}, if_version=data["version"])
    report = {"job": f"{data['team']}/{data['name']}", "dry_run": dry_run, "adopted": plan}
    ctx.emit(report, _adopt_text)


def _place(target: dict[str, Any], field: str) -> tuple[dict[str, Any], str]:
    """Where ``field`` (``target.headers.KEY``, ``target.env.KEY`` or ``target.password``) is in
    ``target``: its mapping (copied, so ``target`` alone changes) and key."""
    parts = field.split(".", 2)
    if len(parts) == 2:
        return target, parts[1]
    target[parts[1]] = dict(target[parts[1]])
    return target[parts[1]], parts[2]


def _adopt_text(data: dict[str, Any]) -> str:
    if not data["adopted"]:
        return f"{data['job']} holds no plain values: nothing to adopt"
    team = data["job"].split("/", 1)[0]
    verb = "would move" if data["dry_run"] else "moved"
    return "\n".join(f"{verb} {field} -> secret {team}/{name}" for field, name in data["adopted"].items())


@secrets.command("adopt-notifications")
@click.option("--team", default=None, help="The team's default rules.")
@click.option(
    "--job", default=None, help="A job's own rules (an id or TEAM/NAME).", shell_complete=complete_job
)
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@api_command
def adopt_notifications(ctx: Ctx, team: str | None, job: str | None, dry_run: bool) -> None:
    """Move the plain credential URLs of notification rules into team secrets.

    Each Slack URL, and each webhook URL with user info or a token in its query, of the team's
    default rules (--team) or of a job's own (--job) becomes the secret notify.R.C (JOBNAME.notify.R.C
    for a job's: rule R, channel C) holding the whole URL, and the channel refers to it. A secret
    of that name that exists already is never overwritten: nothing is changed. Needs the write
    scope (a reader is shown these URLs masked).
    """
    from cronwheel.notifications.rules import channel_credentials, rules_from_json  # noqa: PLC0415

    if (team is None) == (job is None):
        raise click.UsageError("give exactly one of --team TEAM or --job JOB (an id or TEAM/NAME)")
    if job is not None:
        found = ctx.client.get_job(job)
        owner, prefix, where = found["team"], f"{found['name']}.", f"{found['team']}/{found['name']}"
        data = ctx.client.get_job_notifications(found["id"])
        rules = data["rules"] if data["source"] == "job" else []  # the team's: adopt them with --team
    else:
        owner, prefix, where = team or "", "", f"team {team}"
        rules = ctx.client.get_team_notifications(owner)["rules"]
    plan: dict[str, str] = {}
    for field, _, url in channel_credentials(rules_from_json(rules)):
        if HIDDEN in url:
            raise click.ClickException(f"{field} was read masked: adopting needs the write scope")
        _, r, _, c, _ = field.split(".")
        plan[field] = _NOT_NAME.sub("-", f"{prefix}notify.{r}.{c}".lower())[:100]
    taken = [name for name in plan.values() if _exists(ctx.client, owner, name)]
    if taken:
        detail = f"team {owner!r} already has secret(s) {', '.join(taken)}: nothing was changed"
        raise Conflict(Problem(409, "Conflict", detail=detail))
    if plan and not dry_run:
        for field, name in plan.items():
            _, r, _, c, _ = field.split(".")
            channel = rules[int(r)]["channels"][int(c)]
            ctx.client.set_secret(owner, name, channel["url"])
            channel["url"] = {"secret": name}
        if job is not None:
            ctx.client.set_job_notifications(found["id"], rules)
        else:
            ctx.client.set_team_notifications(owner, rules)
    report = {"rules": where, "team": owner, "dry_run": dry_run, "adopted": plan}
    ctx.emit(report, _adopt_notifications_text)


def _adopt_notifications_text(data: dict[str, Any]) -> str:
    if not data["adopted"]:
        return f"the rules of {data['rules']} hold no plain credential URLs: nothing to adopt"
    verb = "would move" if data["dry_run"] else "moved"
    return "\n".join(
        f"{verb} {field} -> secret {data['team']}/{name}" for field, name in data["adopted"].items()
    )


# -- keys (local: the file the server reads) -------------------------------------------------------


@secrets.command("add-key")
@click.option(
    "--key-file",
    cls=EnvOption,
    envvar="CRONWHEEL_SECRET_KEY_FILE",
    metavar="PATH",
    help="The key file to add to.",
)
@database_url_option(
    "Without --key-file: the embedded server's SQLite database, whose key file is <database>.keys."
)
@click.option(
    "--stdout",
    "to_stdout",
    is_flag=True,
    help="Print a new ID:BASE64 key instead (for CRONWHEEL_SECRET_KEYS).",
)
def add_key(key_file: str | None, database_url: str, to_stdout: bool) -> None:
    """Add a new key, which seals new values from the next start of each process that reads it.

    \b
    Rotation: add the key; restart the workers and schedulers, then the api processes (or the
    server); run `cronwheel secrets reencrypt`; then remove the old key.
    """
    from cronwheel.errors import CronwheelError  # noqa: PLC0415
    from cronwheel.secrets import keys  # noqa: PLC0415

    if to_stdout:
        click.echo(keys.key_line(keys.generate_key()))
        return
    path = Path(key_file) if key_file else _embedded_key_file(database_url)
    try:
        key = keys.add_key(path)
    except CronwheelError as error:
        raise click.ClickException(str(error)) from None
    click.echo(
        f"added key {key.id} to {path}; restart the workers and schedulers, then the api processes, then run "
        "`cronwheel secrets reencrypt`"
    )


def _embedded_key_file(database_url: str) -> Path:
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if database_url.startswith(prefix):
            return Path(database_url[len(prefix) :].split("?", 1)[0] + ".keys")
    raise click.UsageError("give --key-file (a cluster's keys are where its operator put them)")
