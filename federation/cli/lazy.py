"""A click group whose commands are imported only when one of them runs.

Why: the commands need Kubernetes, gRPC and Ray, which take about a second to import; nobody
should wait for that to read `fedspread --help` or to mistype a command. The group knows each
command by `module:attribute` and its one-line help, so it can list every command without
importing any of them.

The same laziness lets `pip install fedspread` (the SDK and the client commands) leave out Ray
and the Kubernetes client: a command that needs a package of an extra the user did not install
ends with one line naming the extra, not an ImportError's traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import click

from federation.cli import options

OPTIONAL = frozenset({"kubernetes", "ray", "prometheus_client"})
"""Top-level packages that come with an extra (`fedspread[agent]`, `fedspread[coordinator]`)."""


@dataclasses.dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (`package.module:attribute`) and its one-line help for the listing."""

    target: str
    short_help: str
    extra: str = ""
    """The pip extra whose packages the command needs (`agent`, `coordinator`), if any."""


class LazyGroup(click.Group):
    """A click.Group that imports a command's module the first time the command is looked up."""

    def __init__(self, *args: object, lazy_commands: dict[str, LazyCommand], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command listing of `--help`, from the table: nothing is imported.

        Shortened exactly as click.Group does it for loaded commands, so the listing looks the same.
        """
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            shown = self.commands.get(name) or click.Command(name, help=self.lazy_commands[name].short_help)
            rows.append((name, shown.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a package of a missing extra ends with one line that names the extra."""
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as missing:
            package = (missing.name or "").partition(".")[0]
            if package not in OPTIONAL:
                raise
            name = ctx.invoked_subcommand or ""
            extra = self.lazy_commands[name].extra if name in self.lazy_commands else ""
            install = f"pip install 'fedspread[{extra}]'" if extra else "install it"
            options.fail(f"`fedspread {name}` needs the {package} package, which this installation "
                         f"lacks: {install}")

    def _load(self, name: str) -> click.Command:
        module_name, _, attribute = self.lazy_commands[name].target.partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_commands[name].target} is not a click command")
        return command
