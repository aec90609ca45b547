"""How PlacementService says "the hub could not tell whether you may": one trailer, both ends.

Why a trailer: UNAVAILABLE alone reads, at the SDK, as "the coordinator is unreachable" and gets
TLS hints; when the coordinator answered but could not ask the hub (its SubjectAccessReview
failed), the caller should read exactly that. The coordinator sets `TRAILER: UNAVAILABLE_VALUE`
on such an UNAVAILABLE; the SDK reads it.
"""

from __future__ import annotations

TRAILER = "fedspread-access"
UNAVAILABLE_VALUE = "hub-unavailable"
