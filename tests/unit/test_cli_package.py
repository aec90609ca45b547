"""The `fedspread` group: cheap to start, every command listed, one exit-code rule for the user's mistakes."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from federation import cli
from federation.cli import root

HEAVY = ("kubernetes", "grpc", "ray")


def imported_modules(*args: str) -> set[str]:
    """Every module `python -X importtime -m federation.cli ARGS` imports."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "federation.cli", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    lines = [line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if "import time:" in line]
    return {name for name in lines if name and name != "package"}


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_top_level_help_imports_no_kubernetes_grpc_or_ray() -> None:
    modules = imported_modules("--help")
    assert "federation.cli.root" in modules, "importtime output not understood"
    assert heavy(modules) == []


@pytest.mark.parametrize("command", ["simulate", "get", "coordinator", "agent", "certs", "crds", "rebalance"])
def test_command_help_imports_no_kubernetes_grpc_or_ray(command: str) -> None:
    assert heavy(imported_modules(command, "--help")) == []


def test_every_command_is_listed_with_its_own_first_line() -> None:
    context = click.Context(cli.main)
    for name, lazy in root.COMMANDS.items():
        command = cli.main.get_command(context, name)
        assert command is not None and command.help is not None
        assert command.help.strip().splitlines()[0] == lazy.short_help, name
    listing = CliRunner().invoke(cli.main, ["--help"]).output
    assert all(name in listing for name in root.COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli.main, ["nonsense"])
    assert result.exit_code == 2 and "No such command" in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["coordinator", "--insecure", "--listen", "nowhere"], "--listen 'nowhere' is not HOST:PORT"),
    (["coordinator", "--insecure", "--no-ray", "--ray-address", "ray://x:1"], "contradict each other"),
    (["coordinator", "--insecure", "--no-ray", "--local-ray"], "--no-ray and --local-ray contradict"),
    (["coordinator", "--insecure", "--local-ray", "--ray-address", "ray://x:1"], "contradict each other"),
    (["coordinator", "--insecure", "--ray-address", "ray://head"], "is not HOST:PORT or ray://HOST:PORT"),
    (["agent", "--insecure", "--cluster", "dc1", "--coordinator", "nowhere"], "is not HOST:PORT"),
    (["agent", "--insecure", "--cluster", "dc1", "--coordinator", "x:1", "--webhook-service", "svc"],
     "is not NAMESPACE/NAME"),
    (["agent", "--insecure", "--cluster", "dc1", "--coordinator", "x:1", "--label", "novalue"],
     "is not key=value"),
])
def test_bad_flag_values_exit_2_in_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_certs_ca_help_names_the_files_it_writes() -> None:
    text = " ".join(CliRunner().invoke(cli.main, ["certs", "ca", "--help"]).output.split())
    assert "ca.crt and ca.key" in text and "tls.crt" not in text


@pytest.mark.parametrize(("flags", "ray", "address"), [
    ([], False, None), (["--no-ray"], False, None), (["--local-ray"], True, None),
    (["--ray-address", "ray://head:10001"], True, "ray://head:10001")])
def test_the_coordinator_places_in_its_own_process_unless_given_ray(
        flags: list[str], ray: bool, address: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default follows the placement benchmark (in-process was faster on one machine at every
    size measured): Ray only when asked for, a cluster to join or a local one."""
    from federation.coordinator import process as coordinator_main

    seen = []

    def refuse(settings: coordinator_main.CoordinatorConfig) -> None:
        seen.append(settings)
        raise coordinator_main.CoordinatorError("stopped here by the test")

    monkeypatch.setattr(coordinator_main, "CoordinatorProcess", refuse)
    result = CliRunner().invoke(cli.main, ["coordinator", "--insecure", *flags])
    assert result.exit_code == 1 and "stopped here by the test" in result.output, result.output
    assert [(s.use_ray, s.ray_address) for s in seen] == [(ray, address)]
