"""The node commands' options, derived from the settings fields (:mod:`cronwheel.settings`), and
the settings built back from what was given.

Each command takes the options of its roles only (``cronwheel scheduler`` has no ``--port``:
given, click refuses it), ``cronwheel server`` every one. The options are derived when a node
command is first parsed or helped (:class:`NodeCommand`): reading the settings imports the
server, which the other commands need not load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import click

from cronwheel.cli.env_option import EnvOption
from cronwheel.settings import DEFAULT_DATABASE_URL, Option, Setting, build, settings

if TYPE_CHECKING:
    from cronwheel.node.server import ServerSettings


def setting_list() -> list[Setting]:
    """Every option of a node, in the order of the settings fields."""
    from cronwheel.node.server import ServerSettings  # noqa: PLC0415 - the server, only for a node command

    return list(settings(ServerSettings))


def node_options(roles: Iterable[str]) -> list[click.Option]:
    """The options of a node running ``roles``: those of the fields that apply to one of them."""
    wanted = set(roles)
    return [click_option(setting) for setting in setting_list() if setting.option.roles & wanted]


def database_url_option(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--database-url`` of a command that opens the store itself: a node's default and variable."""
    flag = "--database-url"
    return click.option(
        flag,
        cls=EnvOption,
        default=DEFAULT_DATABASE_URL,
        show_default=True,
        envvar=Option(flag).envvar,
        help=help,
    )


def click_option(setting: Setting) -> click.Option:
    """The click option of one settings field: its flag, help, type, default and variable."""
    face = setting.option
    default = cli_default(setting)
    return EnvOption(
        [face.flag, setting.name],
        default=default,
        show_default=default not in (None, "", ()) and not isinstance(default, bool),
        envvar=face.envvar,
        type=_type(setting),
        multiple=face.multiple,
        is_flag=face.is_flag,
        metavar=face.metavar,
        help=face.help,
    )


def cli_default(setting: Setting) -> Any:
    """The field's default as the option gives it: a list option's as a tuple, a list given as
    one comma-separated text as that text; none when the field computes it at start."""
    default = setting.default
    if setting.option.multiple:
        return tuple(default or ())
    if isinstance(default, tuple):
        return ",".join(default)
    return default


def _type(setting: Setting) -> click.ParamType[Any] | None:
    face = setting.option
    if face.choices:
        return click.Choice(face.choices)
    if setting.kind is int:
        low, high = (None if bound is None else int(bound) for bound in (face.low, face.high))
        return click.IntRange(low, high) if face.bounded else click.INT
    if setting.kind is float:
        return click.FloatRange(face.low, face.high) if face.bounded else click.FLOAT
    return None


def _proxies(text: str) -> tuple[str, ...]:
    from cronwheel.node.server import trusted_proxies  # noqa: PLC0415

    return trusted_proxies(text)


def _command_limits(items: tuple[str, ...]) -> Any:
    from cronwheel.worker.executors.isolation import CommandLimits  # noqa: PLC0415

    return CommandLimits.parse(items)


def _node(name: str | None) -> str:
    from cronwheel.node.server import default_node  # noqa: PLC0415

    return name or default_node()


CONVERTERS: Mapping[tuple[str, ...], Callable[[Any], Any]] = {
    ("forwarded_allow_ips",): _proxies,  # comma-separated text -> checked addresses and networks
    ("command_isolation", "limits"): _command_limits,  # NAME=VALUE items -> CommandLimits
    ("node",): _node,  # unset: host-pid
}
"""The options whose value is not the field's as given."""


def settings_from(given: Mapping[str, Any], **fixed: Any) -> ServerSettings:
    """The settings of the options ``given`` (by parameter name), plus ``fixed`` fields. An option
    not given to this command leaves its field's default; an empty text is an unset value."""
    from cronwheel.node.server import ServerSettings  # noqa: PLC0415

    values: dict[tuple[str, ...], Any] = {}
    for setting in setting_list():
        if setting.name not in given:
            continue
        value = given[setting.name]
        if value == "" and setting.default is None:
            value = None
        convert = CONVERTERS.get(setting.path)
        values[setting.path] = value if convert is None else convert(value)
    return ServerSettings(**build(ServerSettings, values), **fixed)


class NodeCommand(click.Command):
    """A node command: runs ``roles`` with the options that apply to them, derived on first use."""

    def __init__(self, name: str, roles: tuple[str, ...], callback: Callable[..., Any], help: str) -> None:
        super().__init__(name, callback=callback, help=help)
        self.roles = roles
        self._derived = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._derived:
            self.params[:0] = node_options(self.roles)
            self._derived = True
        return super().get_params(ctx)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            raise self.refusal(error) from None

    def refusal(self, error: click.NoSuchOption) -> click.NoSuchOption:
        """Why an option of a role this command does not run is refused (another: as click says)."""
        setting = next((each for each in setting_list() if each.option.flag == error.option_name), None)
        if setting is None:
            return error
        roles = sorted(setting.option.roles)
        commands = ", ".join(f"cronwheel {name}" for name in [*roles, "server"])
        return click.NoSuchOption(
            error.option_name,
            f"{error.option_name} is not an option of cronwheel {self.name}: it sets the "
            f"{' and '.join(roles)} role{'s' if len(roles) > 1 else ''} ({commands}), which this "
            "command does not run",
            ctx=error.ctx,
        )
