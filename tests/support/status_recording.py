"""A stand-in for `status_writer.StatusWriter` that keeps the last status written per spread.

Why: unit tests of the status pass (`hub.statuses.StatusPass`) check what it would write to the
hub; the writer is our own wrapper around the apiserver, and the sandbox tests cover the real one.
"""

from __future__ import annotations

from typing import Any, cast

from federation.api import spread as spread_api
from federation.coordinator.hub import status_writer


class Recording:
    """Keeps the last status written per spread; every other write succeeds and is forgotten."""

    def __init__(self) -> None:
        self.spreads: dict[str, spread_api.FederatedSpreadStatus] = {}

    def write_spread(self, key: str, new: spread_api.FederatedSpreadStatus, **_: Any) -> bool:
        self.spreads[key] = new
        return True

    def write_workload_status(self, *_: Any, **__: Any) -> bool:
        return True

    def clear_workload_status(self, *_: Any) -> bool:
        return True

    def write_member_cluster(self, *_: Any) -> bool:
        return True

    def as_writer(self) -> status_writer.StatusWriter:
        """This recorder where the status pass expects the real writer."""
        return cast(status_writer.StatusWriter, self)
