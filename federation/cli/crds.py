"""`fedspread crds`: write (or check) the CRDs and the API reference generated from the models.

Why a command: the pydantic models in federation.api are the one source of truth for the CRDs in
crds/ and the reference in docs/api.md; regenerating them must be one command, and CI must be
able to ask "are they up to date?" (`--check`, exit 1 when not, like `diff`).
"""

from __future__ import annotations

import pathlib
import sys

import click

from federation.api import crd, reference
from federation.cli.options import EXIT_RUNTIME


@click.command("crds")
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
            sys.exit(EXIT_RUNTIME)  # like `diff`: a difference is not a usage error
        click.echo(f"{output_dir}: up to date")
        return
    for path in crd.write_crds(output_dir):
        click.echo(f"wrote {path}")
    reference.write(reference_file)
    click.echo(f"wrote {reference_file}")

