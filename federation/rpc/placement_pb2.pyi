import datetime

from federation.rpc import common_pb2 as _common_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetPlacementRequest(_message.Message):
    __slots__ = ("spread",)
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    spread: str
    def __init__(self, spread: _Optional[str] = ...) -> None: ...

class ListPlacementsRequest(_message.Message):
    __slots__ = ("namespace", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPlacementsResponse(_message.Message):
    __slots__ = ("placements", "next_page_token")
    PLACEMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    placements: _containers.RepeatedCompositeFieldContainer[Placement]
    next_page_token: str
    def __init__(self, placements: _Optional[_Iterable[_Union[Placement, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchPlacementRequest(_message.Message):
    __slots__ = ("spread", "namespace")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    spread: str
    namespace: str
    def __init__(self, spread: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class PlacementEvent(_message.Message):
    __slots__ = ("type", "spread", "placement", "observed_at")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNSPECIFIED: _ClassVar[PlacementEvent.Type]
        TYPE_INITIAL: _ClassVar[PlacementEvent.Type]
        TYPE_ADDED: _ClassVar[PlacementEvent.Type]
        TYPE_MODIFIED: _ClassVar[PlacementEvent.Type]
        TYPE_DELETED: _ClassVar[PlacementEvent.Type]
    TYPE_UNSPECIFIED: PlacementEvent.Type
    TYPE_INITIAL: PlacementEvent.Type
    TYPE_ADDED: PlacementEvent.Type
    TYPE_MODIFIED: PlacementEvent.Type
    TYPE_DELETED: PlacementEvent.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    type: PlacementEvent.Type
    spread: str
    placement: Placement
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, type: _Optional[_Union[PlacementEvent.Type, str]] = ..., spread: _Optional[str] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListClustersRequest(_message.Message):
    __slots__ = ("include_node_pools",)
    INCLUDE_NODE_POOLS_FIELD_NUMBER: _ClassVar[int]
    include_node_pools: bool
    def __init__(self, include_node_pools: _Optional[bool] = ...) -> None: ...

class ListClustersResponse(_message.Message):
    __slots__ = ("clusters",)
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterInfo]
    def __init__(self, clusters: _Optional[_Iterable[_Union[ClusterInfo, _Mapping]]] = ...) -> None: ...

class SimulateRequest(_message.Message):
    __slots__ = ("spread_yaml", "replicas", "template_json", "clusters_json")
    SPREAD_YAML_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_JSON_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_JSON_FIELD_NUMBER: _ClassVar[int]
    spread_yaml: str
    replicas: int
    template_json: str
    clusters_json: str
    def __init__(self, spread_yaml: _Optional[str] = ..., replicas: _Optional[int] = ..., template_json: _Optional[str] = ..., clusters_json: _Optional[str] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("spread", "dry_run", "max_surge")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_SURGE_FIELD_NUMBER: _ClassVar[int]
    spread: str
    dry_run: bool
    max_surge: int
    def __init__(self, spread: _Optional[str] = ..., dry_run: _Optional[bool] = ..., max_surge: _Optional[int] = ...) -> None: ...

class RebalancePlan(_message.Message):
    __slots__ = ("spread", "policy", "steps", "started")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    spread: str
    policy: str
    steps: _containers.RepeatedCompositeFieldContainer[RebalanceStep]
    started: bool
    def __init__(self, spread: _Optional[str] = ..., policy: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[RebalanceStep, _Mapping]]] = ..., started: _Optional[bool] = ...) -> None: ...

class RebalanceStep(_message.Message):
    __slots__ = ("moves",)
    MOVES_FIELD_NUMBER: _ClassVar[int]
    moves: _containers.RepeatedCompositeFieldContainer[RebalanceMove]
    def __init__(self, moves: _Optional[_Iterable[_Union[RebalanceMove, _Mapping]]] = ...) -> None: ...

class RebalanceMove(_message.Message):
    __slots__ = ("from_subset", "from_cluster", "to_subset", "to_cluster", "replicas")
    FROM_SUBSET_FIELD_NUMBER: _ClassVar[int]
    FROM_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    TO_SUBSET_FIELD_NUMBER: _ClassVar[int]
    TO_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    from_subset: str
    from_cluster: str
    to_subset: str
    to_cluster: str
    replicas: int
    def __init__(self, from_subset: _Optional[str] = ..., from_cluster: _Optional[str] = ..., to_subset: _Optional[str] = ..., to_cluster: _Optional[str] = ..., replicas: _Optional[int] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("spread", "simulation")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    SIMULATION_FIELD_NUMBER: _ClassVar[int]
    spread: str
    simulation: SimulateRequest
    def __init__(self, spread: _Optional[str] = ..., simulation: _Optional[_Union[SimulateRequest, _Mapping]] = ...) -> None: ...

class Placement(_message.Message):
    __slots__ = ("spread", "replicas", "unplaced", "capacity_exhausted", "clusters", "ready", "subsets", "conditions", "observed_generation", "computed_at", "rebalance", "usage")
    class ClustersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class ReadyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNPLACED_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    SUBSETS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    COMPUTED_AT_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    spread: str
    replicas: int
    unplaced: int
    capacity_exhausted: int
    clusters: _containers.ScalarMap[str, int]
    ready: _containers.ScalarMap[str, int]
    subsets: _containers.RepeatedCompositeFieldContainer[SubsetPlacement]
    conditions: _containers.RepeatedCompositeFieldContainer[_common_pb2.Condition]
    observed_generation: int
    computed_at: _timestamp_pb2.Timestamp
    rebalance: RebalancePlan
    usage: FederationUsage
    def __init__(self, spread: _Optional[str] = ..., replicas: _Optional[int] = ..., unplaced: _Optional[int] = ..., capacity_exhausted: _Optional[int] = ..., clusters: _Optional[_Mapping[str, int]] = ..., ready: _Optional[_Mapping[str, int]] = ..., subsets: _Optional[_Iterable[_Union[SubsetPlacement, _Mapping]]] = ..., conditions: _Optional[_Iterable[_Union[_common_pb2.Condition, _Mapping]]] = ..., observed_generation: _Optional[int] = ..., computed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., rebalance: _Optional[_Union[RebalancePlan, _Mapping]] = ..., usage: _Optional[_Union[FederationUsage, _Mapping]] = ...) -> None: ...

class FederationUsage(_message.Message):
    __slots__ = ("metrics", "ready_pods", "unmeasured_pods", "without_metrics", "stale")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METRICS_FIELD_NUMBER: _ClassVar[int]
    READY_PODS_FIELD_NUMBER: _ClassVar[int]
    UNMEASURED_PODS_FIELD_NUMBER: _ClassVar[int]
    WITHOUT_METRICS_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    metrics: _containers.ScalarMap[str, str]
    ready_pods: int
    unmeasured_pods: int
    without_metrics: _containers.RepeatedScalarFieldContainer[str]
    stale: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, metrics: _Optional[_Mapping[str, str]] = ..., ready_pods: _Optional[int] = ..., unmeasured_pods: _Optional[int] = ..., without_metrics: _Optional[_Iterable[str]] = ..., stale: _Optional[_Iterable[str]] = ...) -> None: ...

class SubsetPlacement(_message.Message):
    __slots__ = ("name", "replicas", "clusters", "cap", "waiting", "reasons", "revisions")
    class RevisionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    replicas: int
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterReplicas]
    cap: str
    waiting: int
    reasons: _containers.RepeatedScalarFieldContainer[str]
    revisions: _containers.ScalarMap[str, int]
    def __init__(self, name: _Optional[str] = ..., replicas: _Optional[int] = ..., clusters: _Optional[_Iterable[_Union[ClusterReplicas, _Mapping]]] = ..., cap: _Optional[str] = ..., waiting: _Optional[int] = ..., reasons: _Optional[_Iterable[str]] = ..., revisions: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ClusterReplicas(_message.Message):
    __slots__ = ("cluster", "replicas", "ready_replicas")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    replicas: int
    ready_replicas: int
    def __init__(self, cluster: _Optional[str] = ..., replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ...) -> None: ...

class ClusterInfo(_message.Message):
    __slots__ = ("name", "labels", "ready", "cordoned", "taints", "last_heartbeat", "agent_version", "node_count", "allocatable", "requested", "conditions", "node_pools")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RequestedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    NODE_POOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    ready: bool
    cordoned: bool
    taints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Taint]
    last_heartbeat: _timestamp_pb2.Timestamp
    agent_version: str
    node_count: int
    allocatable: _containers.ScalarMap[str, str]
    requested: _containers.ScalarMap[str, str]
    conditions: _containers.RepeatedCompositeFieldContainer[_common_pb2.Condition]
    node_pools: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodePool]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., ready: _Optional[bool] = ..., cordoned: _Optional[bool] = ..., taints: _Optional[_Iterable[_Union[_common_pb2.Taint, _Mapping]]] = ..., last_heartbeat: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent_version: _Optional[str] = ..., node_count: _Optional[int] = ..., allocatable: _Optional[_Mapping[str, str]] = ..., requested: _Optional[_Mapping[str, str]] = ..., conditions: _Optional[_Iterable[_Union[_common_pb2.Condition, _Mapping]]] = ..., node_pools: _Optional[_Iterable[_Union[_common_pb2.NodePool, _Mapping]]] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("spread", "placement", "subsets", "reasons")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    SUBSETS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    spread: str
    placement: Placement
    subsets: _containers.RepeatedCompositeFieldContainer[SubsetExplanation]
    reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, spread: _Optional[str] = ..., placement: _Optional[_Union[Placement, _Mapping]] = ..., subsets: _Optional[_Iterable[_Union[SubsetExplanation, _Mapping]]] = ..., reasons: _Optional[_Iterable[str]] = ...) -> None: ...

class SubsetExplanation(_message.Message):
    __slots__ = ("name", "cap", "capacity", "replicas", "reasons", "clusters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CAP_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    cap: str
    capacity: int
    replicas: int
    reasons: _containers.RepeatedScalarFieldContainer[str]
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterExplanation]
    def __init__(self, name: _Optional[str] = ..., cap: _Optional[str] = ..., capacity: _Optional[int] = ..., replicas: _Optional[int] = ..., reasons: _Optional[_Iterable[str]] = ..., clusters: _Optional[_Iterable[_Union[ClusterExplanation, _Mapping]]] = ...) -> None: ...

class ClusterExplanation(_message.Message):
    __slots__ = ("cluster", "ready", "cordoned", "unschedulable", "unschedulable_until", "free_capacity", "replicas", "reasons")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    CORDONED_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    FREE_CAPACITY_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    ready: bool
    cordoned: bool
    unschedulable: bool
    unschedulable_until: _timestamp_pb2.Timestamp
    free_capacity: int
    replicas: int
    reasons: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cluster: _Optional[str] = ..., ready: _Optional[bool] = ..., cordoned: _Optional[bool] = ..., unschedulable: _Optional[bool] = ..., unschedulable_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., free_capacity: _Optional[int] = ..., replicas: _Optional[int] = ..., reasons: _Optional[_Iterable[str]] = ...) -> None: ...
