"""The AdmissionReview parser, under the name the agent's webhook has always used.

Why a second name: the parser is shared with the coordinator's validating webhook, so it lives in
`federation.kube.admission_review`; the agent's handler (and the admission benchmarks) read it as
`agents.webhook.review`. Nothing is defined here.
"""

from __future__ import annotations

from federation.kube.admission_review import (
    API_VERSION,
    KIND,
    MAX_BODY,
    OPERATIONS,
    GroupVersionKind,
    GroupVersionResource,
    Json,
    Review,
    ReviewError,
    UserInfo,
    allow,
    encode,
    field,
    parse,
    refuse,
    string_map,
)

__all__ = [
    "API_VERSION", "KIND", "MAX_BODY", "OPERATIONS", "GroupVersionKind", "GroupVersionResource", "Json",
    "Review", "ReviewError", "UserInfo", "allow", "encode", "field", "parse", "refuse", "string_map",
]
