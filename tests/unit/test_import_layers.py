"""Every module sits in a layer of the import contracts, so import-linter checks what it imports.

Why a test: import-linter's `layers` contract checks only the modules it names. A module added
beside them (`federation/coordinator/ray_join.py`, `agents/ownership.py` were) is in no layer, and
nothing stops it from importing a layer above it or being imported from below: the map in
`docs/architecture.md` ("Layers") and the contracts in `pyproject.toml` silently stop covering it.
So each package whose modules are laid out in layers (`federation`, the coordinator's rooms and its
model's parts, the agent's parts) must name every module and subpackage it holds in one of its layers.
"""

from __future__ import annotations

import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def layered(contract_name_start: str) -> tuple[str, set[str]]:
    """(container, the names its layers list) of the `layers` contract whose name starts so."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers" and contract["name"].startswith(contract_name_start):
            containers = contract.get("containers", [""])
            names = {name.strip() for layer in contract["layers"] for name in layer.split("|")}
            return containers[0], names
    raise AssertionError(f"no layers contract named {contract_name_start!r}...")


def held(package: str) -> set[str]:
    """The modules and subpackages a package holds, by dotted name (`federation.kube`)."""
    folder = ROOT / package.replace(".", "/")
    modules = {child.stem for child in folder.glob("*.py") if child.name != "__init__.py"}
    packages = {child.name for child in folder.iterdir() if (child / "__init__.py").is_file()}
    return {f"{package}.{name}" for name in modules | packages}


@pytest.mark.parametrize(("contract", "package"), [
    ("Layers of the system", "federation"),
    ("Rooms of the coordinator", "federation.coordinator"),
    ("Parts of the coordinator's model", "federation.coordinator.model"),
    ("Parts of the agent", "agents"),
])
def test_every_module_of_a_layered_package_is_in_one_of_its_layers(contract: str, package: str) -> None:
    assert f"{package}.__init__" not in held(package) and len(held(package)) > 5, held(package)
    container, names = layered(contract)
    listed = {f"{container}.{name}" if container else name for name in names}
    outside = sorted(held(package) - listed)
    assert not outside, f"in no layer of {contract!r} in pyproject.toml: {outside}"
