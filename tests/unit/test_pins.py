"""constraints.txt is the environment the tests run in, and within what pyproject.toml asks.

Why: `make` installs with the pins and the images do too, so a stale file would build images from
versions no test ran — or make a range in pyproject.toml a lie. `python -m federation.pins --check`
compares this environment's versions of everything fedspread[agent,coordinator,dev] pulls in with
the file; the other checks read the file against pyproject.toml and the two installers.
"""

from __future__ import annotations

import pathlib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from federation import pins

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pinned() -> dict[str, str]:
    found = {}
    for line in pins.FILE.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            found[name] = version
    return found


def test_the_file_is_this_environment() -> None:
    assert pins.main(["--check"]) == 0, "constraints.txt is stale: run `python -m federation.pins`"


def test_every_declared_requirement_is_pinned_within_its_range() -> None:
    found = pinned()
    for requirement in pins.declared():
        name = canonicalize_name(requirement.name)
        assert name in found, f"{requirement} is not pinned"
        assert requirement.specifier.contains(found[name], prereleases=True), (requirement, found[name])


def test_a_declared_range_the_pins_leave_is_reported() -> None:
    """The check above relies on `specifier.contains`: a pin outside a range must fail it."""
    assert not Requirement("kubernetes>=99").specifier.contains(pinned()["kubernetes"])


def test_make_and_the_images_install_with_the_pins() -> None:
    makefile, dockerfile = (ROOT / "Makefile").read_text(), (ROOT / "Dockerfile").read_text()
    assert "-c constraints.txt -e '.[agent,coordinator,dev]'" in makefile
    assert "$(STAMP): pyproject.toml constraints.txt" in makefile, "a new pin reinstalls"
    assert dockerfile.count("pip install --no-cache-dir -c /src/constraints.txt") == 2
