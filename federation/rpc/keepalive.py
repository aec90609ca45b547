"""HTTP/2 keepalive for the agent stream, both ways, in one place so the two ends agree.

Why: an agent stream lives for days. Through a NAT or a load balancer an idle-looking connection
is dropped silently, and a peer that vanished (power cut, partition) leaves a half-open TCP
connection that nothing notices until a write times out — minutes later. The application's own
Pings and heartbeats find a dead agent at the coordinator, but neither end's *transport* learns of
it; HTTP/2 PINGs do, within `TIME_MS + TIMEOUT_MS`, and the gRPC library then fails the call,
so the agent reconnects and the coordinator frees the stream.

Why the numbers agree: a gRPC server counts a client's PING sent sooner than its
`grpc.http2.min_ping_interval_without_data_ms` after the last as a strike, and after
`grpc.http2.max_ping_strikes` (2) answers GOAWAY "too_many_pings" — the agent would be cut off
for being careful. So the server allows pings every `MIN_PING_INTERVAL_MS`, a third of the
agent's `TIME_MS`, and permits them without calls (the moments between two streams). Both ends
keep pinging without data (`max_pings_without_data` 0): the stream may carry nothing but PINGs
for a while.
"""

from __future__ import annotations

TIME_MS = 30_000
"""Each end PINGs the other after this long without one."""
TIMEOUT_MS = 10_000
"""A PING unanswered this long closes the connection (the call fails with UNAVAILABLE)."""
MIN_PING_INTERVAL_MS = 10_000
"""The server accepts client PINGs this often (must stay below the agent's TIME_MS)."""

_BOTH = (
    ("grpc.keepalive_time_ms", TIME_MS),
    ("grpc.keepalive_timeout_ms", TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)

CHANNEL_OPTIONS: tuple[tuple[str, int], ...] = _BOTH
"""For the agent's channel to the coordinator."""

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    *_BOTH,
    ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
)
"""For the coordinator's server (with its own options, `wire.inbound.SERVER_OPTIONS`)."""
