"""The fedspread Python SDK: ask the coordinator where replicas are and would go.

This package re-exports its public names (the one package in fedspread that does) so that users
write `from federation.sdk import PlacementClient, SpreadNotFound` (or `AsyncPlacementClient`, the
asyncio twin).
"""

from federation.sdk.aio import AsyncPlacementClient
from federation.sdk.client import PlacementClient
from federation.sdk.types import (
    CertificateError,
    ClusterExplanation,
    ClusterInfo,
    Condition,
    CoordinatorUnavailable,
    Explanation,
    FedspreadError,
    InvalidRequest,
    PermissionDenied,
    Problem,
    RebalanceMove,
    RebalancePlan,
    SpreadNotFound,
    SpreadPlacement,
    SpreadUsage,
    SubsetExplanation,
    SubsetPlacement,
)

__all__ = [
    "AsyncPlacementClient",
    "CertificateError",
    "ClusterExplanation",
    "ClusterInfo",
    "Condition",
    "CoordinatorUnavailable",
    "Explanation",
    "FedspreadError",
    "InvalidRequest",
    "PermissionDenied",
    "PlacementClient",
    "Problem",
    "RebalanceMove",
    "RebalancePlan",
    "SpreadNotFound",
    "SpreadPlacement",
    "SpreadUsage",
    "SubsetExplanation",
    "SubsetPlacement",
]
