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
