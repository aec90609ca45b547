"""What the link to the coordinator is told: one frozen settings object, defaults in one place.

Why an object: the link has more knobs than its callers should repeat (where the coordinator is,
who this cluster is, its credentials, the heartbeat, and the backoffs and timeouts of the
reconnect loop). The agent builds one from its command line (`agents.main.AgentConfig`); a test or
a benchmark builds one with the few fields it changes (`dataclasses.replace` for variants), as
kopf's `OperatorSettings` groups an operator's. What the link works with (the bookkeeping, the
outbox, callbacks, the cache) is not a setting: those stay `Link`'s keyword arguments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TypeAlias

import grpc

Credentials: TypeAlias = "grpc.ChannelCredentials | Callable[[], grpc.ChannelCredentials]"


@dataclasses.dataclass(frozen=True)
class LinkSettings:
    """The link's settings (`agents.link.client.Link`)."""

    target: str
    """The coordinator's AgentService, HOST:PORT (`--coordinator`)."""
    cluster: str
    """This member cluster's name, sent in every Hello (`--cluster`)."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Topology labels reported in every Hello (`--label`)."""
    credentials: Credentials | None = None
    """mTLS to the coordinator; a function is called for every stream (renewed certificate files
    count from the next reconnect); None: plaintext (`--insecure`)."""
    heartbeat_seconds: float = 10.0
    """How often heartbeats and unchanged reports go out (`--heartbeat-seconds`); the coordinator's
    Welcome may ask for less."""
    cache_wait_seconds: float = 20.0
    """Before the first Hello, how long to wait for the cache to list the member's Deployments."""
    backoff_initial_seconds: float = 0.2
    """The first reconnect wait (jittered, exponential from here)."""
    backoff_cap_seconds: float = 5.0
    """The longest reconnect wait after a failure that needs no person."""
    misconfigured_backoff_seconds: float = 15.0
    """After a refusal that needs a person (a wrong certificate): wait between this and twice it."""
    welcome_timeout_seconds: float = 30.0
    """A coordinator that accepts the stream but sends no Welcome within this is given up."""
