"""The `fedspread` command line: one entry point, one small module per command group.

Why a thin module: every command parses flags, calls into `federation.api`/`federation.core` (or a
client), and prints. Errors a user can cause (a bad file, an invalid spread) are printed as a list of
problems with field paths and exit code 2 — never a traceback.
"""

from __future__ import annotations

import pathlib
import sys

import click

from agents import cli as agent_cli
from federation import cli_get, cli_simulate
from federation.api import crd, reference
from federation.certs import cli as certs_cli
from federation.coordinator import cli as coordinator_cli
from federation.demo import cli as demo_cli
from federation.sandbox import cli as sandbox_cli


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="fedspread")
def main() -> None:
    """fedspread: spread one Kubernetes workload's replicas across many clusters.

    A FederatedSpread lists ordered subsets (a cluster, a region or a node pool), each with an
    optional cap; replicas fill them in order and, with the Adaptive strategy, overflow to the
    next subset when one has no room.
    """


main.add_command(cli_simulate.simulate_command)
main.add_command(sandbox_cli.sandbox_group)
main.add_command(agent_cli.agent_command)
main.add_command(cli_get.get_group)
main.add_command(coordinator_cli.coordinator_command)
main.add_command(demo_cli.demo_command)
main.add_command(certs_cli.certs_group)


@main.command("crds")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=pathlib.Path),
    default=pathlib.Path("crds"),
    show_default=True,
    help="Directory to write the CustomResourceDefinition YAML files into.",
)
@click.option(
    "--reference", "reference_file",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    default=pathlib.Path("docs/api.md"),
    show_default=True,
    help="The API reference (Markdown) generated from the same models.",
)
@click.option(
    "--check",
    is_flag=True,
    help="Write nothing; exit 1 if the files in --output-dir or the reference differ from the models.",
)
def crds_command(output_dir: pathlib.Path, reference_file: pathlib.Path, check: bool) -> None:
    """Generate the FederatedSpread and MemberCluster CRDs, and the API reference, from the models.

    The pydantic models in federation.api are the one source of truth; run this after changing
    them and commit the result (tests fail when crds/ or docs/api.md drift).
    """
    if check:
        stale = [str(output_dir / name) for name in crd.stale_files(output_dir)]
        if not reference_file.is_file() or reference_file.read_text() != reference.render():
            stale.append(str(reference_file))
        if stale:
            for name in stale:
                click.echo(f"out of date: {name}", err=True)
            click.echo("run `fedspread crds` to regenerate", err=True)
            sys.exit(1)
        click.echo(f"{output_dir}: up to date")
        return
    for path in crd.write_crds(output_dir):
        click.echo(f"wrote {path}")
    reference.write(reference_file)
    click.echo(f"wrote {reference_file}")


if __name__ == "__main__":  # pragma: no cover
    main()
