"""Flags and failure handling shared by every `fedspread` command.

Why one module: the TLS flag families, `--log-level`, `--kubeconfig/--context` and the way a command
fails were copied into each command and drifted (different exit codes for the same kind of
mistake). Here each exists once, and the exit-code rule is written down in one place:

* exit 2 — the user can fix it by changing the command line or an input file (click's own usage
  errors, a bad file, an invalid spread, flags that contradict each other);
* exit 1 — the command line was fine but something at run time failed (an unreachable coordinator
  or apiserver, a process that cannot start).

Either way the user sees one line, never a traceback. This module imports only click and the
standard library (and `federation.api.names`, constants) so that `fedspread --help` stays fast.
"""

from __future__ import annotations

import pathlib
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from federation.api import names  # constants only: no import beyond the standard library

if TYPE_CHECKING:
    from federation.certs import transport

EXIT_RUNTIME = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])

FILE = click.Path(dir_okay=False, path_type=pathlib.Path)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=pathlib.Path)


def fail(message: str, *, code: int = EXIT_RUNTIME) -> NoReturn:
    """Print `error: message` on stderr and exit with `code` (EXIT_RUNTIME or EXIT_USAGE)."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def usage_error(message: str) -> NoReturn:
    """A mistake in the flags or input files, found after click parsed them: one line, exit 2."""
    fail(message, code=EXIT_USAGE)


def compose(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Apply several option decorators as one, in the order they would be written above a function."""
    def apply(function: F) -> F:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function
    return apply


def log_level_option() -> Callable[[F], F]:
    """`--log-level` and `--log-format`, for the long-running commands (coordinator, agent). The
    format is handed to `federation.logs` as it is parsed, so the commands take only the level."""
    def chosen(_: click.Context, __: click.Parameter, value: str) -> str:
        from federation import logs

        logs.use_format(value)
        return value

    return compose(
        click.option(
            "--log-level", default="info", show_default=True,
            type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
            help="Least severe log level printed."),
        click.option(
            "--log-format", default="text", show_default=True, type=click.Choice(["text", "json"]),
            expose_value=False, callback=chosen, envvar="FEDSPREAD_LOG_FORMAT",
            help="text: `time LEVEL logger message key=value` lines; json: one JSON object per line "
                 "(env FEDSPREAD_LOG_FORMAT)."),
    )


def kubeconfig_options(*, flag: str = "--kubeconfig", dest: str = "kubeconfig",
                       help_text: str) -> Callable[[F], F]:
    """A kubeconfig flag (`flag`, passed as `dest`) and `--context` to pick one of its contexts.

    Without the flag the KUBECONFIG environment variable is used, and without that the in-cluster
    service account (`federation.kube.clients`).
    """
    return compose(
        click.option(flag, dest, metavar="FILE", default=None, type=FILE, help=help_text),
        click.option("--context", "context", metavar="NAME", default=None,
                     help="Context of the kubeconfig to use (default: its current-context)."),
    )


def cert_key_ca_options(*, prefix: str, cert_help: str, key_help: str, ca_help: str,
                        must_exist: bool = False, envvar_prefix: str | None = None) -> Callable[[F], F]:
    """Three PEM file flags `--{prefix}cert`, `--{prefix}key`, `--{prefix}ca`.

    The values reach the command as `{prefix}cert` etc. with dashes as underscores (`tls_cert`,
    `link_key`; with an empty prefix `cert_file`, `key_file`, `ca_file`). `envvar_prefix` also
    reads them from `{envvar_prefix}CERT` etc.
    """
    file_type = EXISTING_FILE if must_exist else FILE

    def one(name: str, text: str) -> Callable[[F], F]:
        dest = f"{prefix.replace('-', '_')}{name}" if prefix else f"{name}_file"
        envvar = f"{envvar_prefix}{name.upper()}" if envvar_prefix else None
        return click.option(f"--{prefix}{name}", dest, metavar="FILE", type=file_type, envvar=envvar,
                            help=text)

    if prefix:
        return compose(one("cert", cert_help), one("key", key_help), one("ca", ca_help))
    return compose(one("ca", ca_help), one("cert", cert_help), one("key", key_help))


def insecure_option(*, help_text: str, envvar: str | None = None) -> Callable[[F], F]:
    """`--insecure`: plaintext gRPC instead of mTLS, said out loud."""
    return click.option("--insecure", is_flag=True, envvar=envvar, help=help_text)


def mtls_files(*, flags: tuple[str, str, str], cert: pathlib.Path | None, key: pathlib.Path | None,
               ca: pathlib.Path | None, insecure: bool, advice: str) -> transport.TLSFiles | None:
    """The mTLS files, or None with --insecure; click.UsageError (exit 2) for any other combination.

    Neither mTLS nor --insecure is a usage error, so that nobody speaks plaintext by forgetting a flag.
    """
    from federation.certs import transport  # grpc: only once a command runs

    try:
        return transport.files_from_flags(flags=flags, cert=cert, key=key, ca=ca, insecure=insecure,
                                          advice=advice)
    except ValueError as error:
        raise click.UsageError(str(error)) from None  # the user's flags; the ValueError adds nothing


def host_port(value: str, *, flag: str) -> str:
    """`value` if it is HOST:PORT with a port in 0..65535; otherwise a usage error naming `flag`."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        usage_error(f"{flag} {value!r} is not HOST:PORT")
    return value


def _federation_id(_context: click.Context, _param: click.Parameter, value: str) -> str:
    if not re.match(names.FEDERATION_ID_PATTERN, value):
        raise click.BadParameter(f"{value!r} is not a lowercase label value (a-z, 0-9, '-', '.'; "
                                 "at most 63, starting and ending alphanumeric)")
    return value


def federation_id_option(*, help_text: str) -> Callable[[F], F]:
    """`--federation-id` (env FEDSPREAD_FEDERATION_ID), a lowercase label value; default `default`."""
    return click.option("--federation-id", default=names.DEFAULT_FEDERATION_ID, show_default=True,
                        envvar="FEDSPREAD_FEDERATION_ID", callback=_federation_id, help=help_text)


def webhook_client_options(*, apiserver: str) -> Callable[[F], F]:
    """`--webhook-client-ca FILE` and `--webhook-allowed-cn NAME` (repeatable), reaching the command
    as `webhook_client_ca` and `webhook_allowed_cns`: who may post reviews to its webhook
    (`federation.kube.webhook_clients`). `apiserver` names the one that should ("member", "hub")."""
    return compose(
        click.option(
            "--webhook-client-ca", type=EXISTING_FILE, metavar="FILE",
            help=f"Admit reviews only from callers with a client certificate this CA (PEM) signed: the "
                 f"{apiserver} apiserver's, given to it by its --admission-control-config-file "
                 "(deploy/README.md). Others get 401; health probes stay open; re-read when the file "
                 "changes. Default: anyone (a warning is logged at start)."),
        click.option(
            "--webhook-allowed-cn", "webhook_allowed_cns", multiple=True, metavar="NAME",
            help="With --webhook-client-ca: only client certificates with this common name "
                 "(repeatable; default: any the CA signed). Others get 403."),
    )


def check_webhook_clients(ca: pathlib.Path | None, allowed_cns: tuple[str, ...]) -> None:
    """A usage error for `--webhook-allowed-cn` without `--webhook-client-ca` (it would allow anyone)."""
    if allowed_cns and ca is None:
        usage_error("--webhook-allowed-cn needs --webhook-client-ca")
