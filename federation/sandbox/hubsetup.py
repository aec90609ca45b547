"""Prepare the sandbox hub: install fedspread's CRDs and wait until the apiserver serves them.

Why separate: the hub is a bare apiserver (like Karmada's); everything fedspread-specific it holds
comes from the generated files in `crds/`, applied exactly as a user would apply them.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Sequence

import yaml

ESTABLISH_TIMEOUT = 30.0


def install_crds(kubeconfig: str, files: Sequence[pathlib.Path]) -> list[str]:
    """Create (or replace) every CRD in `files` and wait until each is Established."""
    from kubernetes import client

    from federation.kube import clients, deadlines, errors

    api = client.ApiextensionsV1Api(clients.api_client(pathlib.Path(kubeconfig)))
    names = []
    for path in files:
        for document in yaml.safe_load_all(path.read_text()):
            if not document:
                continue
            name = document["metadata"]["name"]
            try:
                with errors.translated(f"create CRD {name}"):
                    api.create_custom_resource_definition(document, _request_timeout=deadlines.CALL)
            except errors.Conflict:  # it exists: replace it
                current = api.read_custom_resource_definition(name, _request_timeout=deadlines.CALL)
                version = current.metadata.resource_version if current.metadata else None
                document["metadata"]["resourceVersion"] = version
                api.replace_custom_resource_definition(name, document, _request_timeout=deadlines.CALL)
            names.append(name)
    deadline = time.monotonic() + ESTABLISH_TIMEOUT
    for name in names:
        while True:
            crd = api.read_custom_resource_definition(name, _request_timeout=deadlines.CALL)
            conditions = crd.status.conditions or [] if crd.status else []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established after {ESTABLISH_TIMEOUT:.0f} s")
            time.sleep(0.2)
    return names


def bundled_crds() -> list[pathlib.Path]:
    """The CRD files shipped in the repository's crds/ directory."""
    root = pathlib.Path(__file__).resolve().parents[2] / "crds"
    return sorted(root.glob("*.yaml"))
