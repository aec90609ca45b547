"""Capabilities an agent announces in its Hello, and the Notice codes that go with them.

Why here: the agent sends these strings and the coordinator (and the test stand-in coordinator)
matches them; they are wire constants like the protobuf fields, so they live beside the protos
and each side imports them rather than spelling them.
"""

from __future__ import annotations

RESYNC_COMPLETE_CAPABILITY = "resync-complete"
"""Hello capability: the agent understands the end-of-resync Notice.

Sent by the agent's link; read by the coordinator, which then sends `RESYNC_COMPLETE_CODE`.
"""

RESYNC_COMPLETE_CODE = "ResyncComplete"
"""Notice code: the coordinator has sent every assignment of a resync.

Sent by the coordinator, after the removals it has reasons for; after it the agent's set of
assignments is complete (the agent's `synced`). It is no licence to delete: an agent deletes or
releases a member Deployment only on an explicit SpreadRemoval, never because a spread is absent.
"""

MESSAGE_BATCHES_CAPABILITY = "message-batches"
"""Hello and Welcome capability: this side reads batched messages.

In a Hello (the agent's link, and the benchmark's stand-in agents): send me `CoordinatorBatch`
messages. In a Welcome (the coordinator): send me `AckBatch` messages. Each side batches only
towards a peer that announced it, so either side may be older. A batch is read exactly as its
entries one after another; it changes what travels per gRPC message, never what is said.
"""

BATCH_MAX_MESSAGES = 256
"""A batch holds at most this many entries, so one batch's work never holds the peer's lock long."""

BATCH_MAX_BYTES = 1 << 20
"""A batch's entries add up to at most this many serialized bytes (an entry that would pass it waits
for the next batch; one above it on its own travels alone): far below gRPC's default 4 MiB receive
limit, so batching never makes a message too large for an agent that took each entry alone."""
