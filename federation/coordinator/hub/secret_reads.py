"""Reading single Secrets from the hub, for spreads that come to reference them.

Why: the coordinator keeps a Secret's data only while a spread's template references it
(`model/hub_objects.py`): the hub watch reports every Secret, and holding all of them in memory for
the federation's life would keep credentials no member needs. A Secret no spread used is known to
exist, without its data; when a spread (or an edit of its workload's template) comes to reference
it, the coordinator reads that one Secret here — before the event is applied, so the first
assignment already carries its copy and the member creates it before the workload.

Each read has the call deadline, and is retried (tenacity: a few attempts, jittered) on 429, 5xx
and connection errors only. A Secret that is not there (404) is answered as absent: the watch says
the same, and the spread's `DependencyMissing` names it. A read that still fails is handed back
as failed; the caller asks again at its next event (`HubObjects.want_again`), and meanwhile the
assignment carries no copy of it, which an agent reads as "create nothing, keep what you made".
Nothing here logs a Secret's data.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tenacity
import urllib3
from kubernetes import client
from kubernetes.client import exceptions

from federation.coordinator.hub import watcher
from federation.coordinator.model import world as world_model
from federation.core import dependencies
from federation.kube import deadlines

LOG = logging.getLogger(__name__)
ATTEMPTS = 3

SecretKey = tuple[str, str]
"""(namespace, name)."""


def _retriable(error: BaseException) -> bool:
    if isinstance(error, exceptions.ApiException):
        return isinstance(error.status, int) and (error.status == 429 or error.status >= 500)
    return isinstance(error, (urllib3.exceptions.HTTPError, OSError))


class SecretReader:
    """Reads Secrets from the hub by name, as raw JSON (`read`)."""

    def __init__(self, api_client: client.ApiClient, *, attempts: int = ATTEMPTS,
                 max_wait: float = 1.0) -> None:
        self._core = client.CoreV1Api(api_client)
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retriable), stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_random_exponential(multiplier=0.05, max=max_wait), reraise=True)
        self.reads = 0
        self.failures = 0

    def _one(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response: Any = self._core.read_namespaced_secret(name, namespace, _preload_content=False,
                                                              _request_timeout=deadlines.CALL)
        except exceptions.ApiException as error:
            if error.status == 404:
                return None
            raise
        found: dict[str, Any] = json.loads(response.data)
        found.setdefault("apiVersion", "v1")
        found.setdefault("kind", "Secret")
        return found

    def read(self, secrets: Sequence[SecretKey],
             ) -> tuple[dict[SecretKey, dict[str, Any] | None], list[SecretKey]]:
        """Each Secret's object (None: not on the hub), and the Secrets whose read failed."""
        found: dict[SecretKey, dict[str, Any] | None] = {}
        failed: list[SecretKey] = []
        for namespace, name in secrets:
            self.reads += 1
            try:
                found[(namespace, name)] = self._retrying(self._one, namespace, name)
            except (exceptions.ApiException, urllib3.exceptions.HTTPError, OSError) as error:
                self.failures += 1
                failed.append((namespace, name))
                LOG.warning("could not read a Secret a spread references; its copy waits for the next "
                            "hub event", extra={"secret": f"{namespace}/{name}",
                                                "status": getattr(error, "status", None),
                                                "error": type(error).__name__})
        return found, failed


class SecretKeeper:
    """Reads the Secrets a hub event makes a spread reference before the event is applied
    (`read_for`, then `hold` and `settle` around `apply_to_world`, under the facade's lock), and
    any other Secret a spread came to reference without its data (`read_wanted`)."""

    def __init__(self, reader: SecretReader, world: world_model.World, lock: threading.RLock) -> None:
        self.reader, self.world, self.lock = reader, world, lock

    def _template_of(self, event: watcher.HubEvent) -> tuple[str, Mapping[str, Any] | None]:
        """The namespace and workload template `event` makes a spread follow (None: none)."""
        if event.type == "DELETED":
            return "", None
        if event.kind == "spread" and event.target is not None:
            return event.key.partition("/")[0], event.target.template
        info = event.workload
        if event.kind in watcher.WORKLOAD_STREAMS and info is not None:
            targeted = self.world.spreads_targeting(info.namespace, info.kind, info.name)
            return info.namespace, info.template if targeted else None
        return "", None

    def read_for(self, event: watcher.HubEvent) -> dict[SecretKey, dict[str, Any] | None]:
        """The Secrets `event`'s workload template references whose data is not kept, read from the
        hub (outside the lock); a failed read is left to `read_wanted`."""
        with self.lock:
            namespace, template = self._template_of(event)
            unheld = self.world.hub_objects.unheld_secrets(namespace, template) if template else []
        if not unheld:
            return {}
        found, _failed = self.reader.read([(namespace, name) for name in unheld])
        return found

    def hold(self, found: Mapping[SecretKey, dict[str, Any] | None]) -> None:
        """Keep what `read_for` read until the event is applied (under the lock)."""
        for (namespace, name), obj in found.items():
            self.world.hub_objects.put(namespace, dependencies.SECRET, name, obj, hold=True)

    def settle(self, found: Mapping[SecretKey, dict[str, Any] | None]) -> None:
        """After the event: drop the data of what `read_for` read that no spread references (under
        the lock)."""
        self.world.hub_objects.settle(found)

    def read_wanted(self, publish: Callable[[set[str]], object]) -> None:
        """Read every Secret a spread references whose data is not kept, and `publish` the spreads
        whose copies it changes; a failed read is asked again after the next event."""
        with self.lock:
            wanted = self.world.hub_objects.take_wanted()
        if not wanted:
            return
        found, failed = self.reader.read(wanted)
        with self.lock:
            changed: set[str] = set()
            for (namespace, name), obj in found.items():
                changed |= self.world.hub_object(dependencies.SECRET, f"{namespace}/{name}", obj)
            self.world.hub_objects.want_again(failed)
            publish(changed)
