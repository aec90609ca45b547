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

class AgentMessage(_message.Message):
    __slots__ = ("hello", "inventory", "pod_counts", "unschedulable", "heartbeat", "ack", "usage", "acks")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    POD_COUNTS_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    inventory: InventoryReport
    pod_counts: PodCountsReport
    unschedulable: UnschedulableReport
    heartbeat: Heartbeat
    ack: Ack
    usage: UsageReport
    acks: AckBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., inventory: _Optional[_Union[InventoryReport, _Mapping]] = ..., pod_counts: _Optional[_Union[PodCountsReport, _Mapping]] = ..., unschedulable: _Optional[_Union[UnschedulableReport, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., usage: _Optional[_Union[UsageReport, _Mapping]] = ..., acks: _Optional[_Union[AckBatch, _Mapping]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("cluster_name", "agent_version", "topology_labels", "resume_token", "applied", "capabilities", "started_at")
    class TopologyLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_LABELS_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    agent_version: str
    topology_labels: _containers.ScalarMap[str, str]
    resume_token: str
    applied: _containers.RepeatedCompositeFieldContainer[AppliedSpread]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    started_at: _timestamp_pb2.Timestamp
    def __init__(self, cluster_name: _Optional[str] = ..., agent_version: _Optional[str] = ..., topology_labels: _Optional[_Mapping[str, str]] = ..., resume_token: _Optional[str] = ..., applied: _Optional[_Iterable[_Union[AppliedSpread, _Mapping]]] = ..., capabilities: _Optional[_Iterable[str]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AppliedSpread(_message.Message):
    __slots__ = ("spread", "generation", "template_revision", "spread_uid", "subset_pods")
    class SubsetPodsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    SPREAD_UID_FIELD_NUMBER: _ClassVar[int]
    SUBSET_PODS_FIELD_NUMBER: _ClassVar[int]
    spread: str
    generation: int
    template_revision: str
    spread_uid: str
    subset_pods: _containers.ScalarMap[str, int]
    def __init__(self, spread: _Optional[str] = ..., generation: _Optional[int] = ..., template_revision: _Optional[str] = ..., spread_uid: _Optional[str] = ..., subset_pods: _Optional[_Mapping[str, int]] = ...) -> None: ...

class InventoryReport(_message.Message):
    __slots__ = ("full", "sequence", "base_sequence", "node_pools", "removed_pools", "observed_at")
    FULL_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    BASE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NODE_POOLS_FIELD_NUMBER: _ClassVar[int]
    REMOVED_POOLS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    full: bool
    sequence: int
    base_sequence: int
    node_pools: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodePool]
    removed_pools: _containers.RepeatedScalarFieldContainer[str]
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, full: _Optional[bool] = ..., sequence: _Optional[int] = ..., base_sequence: _Optional[int] = ..., node_pools: _Optional[_Iterable[_Union[_common_pb2.NodePool, _Mapping]]] = ..., removed_pools: _Optional[_Iterable[str]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PodCountsReport(_message.Message):
    __slots__ = ("full", "sequence", "spreads", "observed_at", "lists_assigned", "assigned", "first_after_start")
    FULL_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SPREADS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    LISTS_ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    FIRST_AFTER_START_FIELD_NUMBER: _ClassVar[int]
    full: bool
    sequence: int
    spreads: _containers.RepeatedCompositeFieldContainer[SpreadPodCounts]
    observed_at: _timestamp_pb2.Timestamp
    lists_assigned: bool
    assigned: _containers.RepeatedScalarFieldContainer[str]
    first_after_start: bool
    def __init__(self, full: _Optional[bool] = ..., sequence: _Optional[int] = ..., spreads: _Optional[_Iterable[_Union[SpreadPodCounts, _Mapping]]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lists_assigned: _Optional[bool] = ..., assigned: _Optional[_Iterable[str]] = ..., first_after_start: _Optional[bool] = ...) -> None: ...

class SpreadPodCounts(_message.Message):
    __slots__ = ("spread", "generation", "template_revision", "subsets", "unassigned", "workload", "conflict", "dependency_conflicts", "misplaced", "autoscalers")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    SUBSETS_FIELD_NUMBER: _ClassVar[int]
    UNASSIGNED_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_CONFLICTS_FIELD_NUMBER: _ClassVar[int]
    MISPLACED_FIELD_NUMBER: _ClassVar[int]
    AUTOSCALERS_FIELD_NUMBER: _ClassVar[int]
    spread: str
    generation: int
    template_revision: str
    subsets: _containers.RepeatedCompositeFieldContainer[SubsetPodCounts]
    unassigned: PodCounts
    workload: WorkloadStatus
    conflict: str
    dependency_conflicts: _containers.RepeatedScalarFieldContainer[str]
    misplaced: str
    autoscalers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, spread: _Optional[str] = ..., generation: _Optional[int] = ..., template_revision: _Optional[str] = ..., subsets: _Optional[_Iterable[_Union[SubsetPodCounts, _Mapping]]] = ..., unassigned: _Optional[_Union[PodCounts, _Mapping]] = ..., workload: _Optional[_Union[WorkloadStatus, _Mapping]] = ..., conflict: _Optional[str] = ..., dependency_conflicts: _Optional[_Iterable[str]] = ..., misplaced: _Optional[str] = ..., autoscalers: _Optional[_Iterable[str]] = ...) -> None: ...

class SubsetPodCounts(_message.Message):
    __slots__ = ("subset", "counts", "revisions")
    SUBSET_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    subset: str
    counts: PodCounts
    revisions: _containers.RepeatedCompositeFieldContainer[RevisionPodCount]
    def __init__(self, subset: _Optional[str] = ..., counts: _Optional[_Union[PodCounts, _Mapping]] = ..., revisions: _Optional[_Iterable[_Union[RevisionPodCount, _Mapping]]] = ...) -> None: ...

class RevisionPodCount(_message.Message):
    __slots__ = ("revision", "pods")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    revision: str
    pods: int
    def __init__(self, revision: _Optional[str] = ..., pods: _Optional[int] = ...) -> None: ...

class PodCounts(_message.Message):
    __slots__ = ("running", "ready", "pending", "unschedulable", "creating", "deleting")
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    CREATING_FIELD_NUMBER: _ClassVar[int]
    DELETING_FIELD_NUMBER: _ClassVar[int]
    running: int
    ready: int
    pending: int
    unschedulable: int
    creating: int
    deleting: int
    def __init__(self, running: _Optional[int] = ..., ready: _Optional[int] = ..., pending: _Optional[int] = ..., unschedulable: _Optional[int] = ..., creating: _Optional[int] = ..., deleting: _Optional[int] = ...) -> None: ...

class WorkloadStatus(_message.Message):
    __slots__ = ("observed_generation", "replicas", "ready_replicas", "updated_replicas", "available_replicas", "unavailable_replicas", "job", "observed_template_revision")
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TEMPLATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    observed_generation: int
    replicas: int
    ready_replicas: int
    updated_replicas: int
    available_replicas: int
    unavailable_replicas: int
    job: JobStatus
    observed_template_revision: str
    def __init__(self, observed_generation: _Optional[int] = ..., replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., updated_replicas: _Optional[int] = ..., available_replicas: _Optional[int] = ..., unavailable_replicas: _Optional[int] = ..., job: _Optional[_Union[JobStatus, _Mapping]] = ..., observed_template_revision: _Optional[str] = ...) -> None: ...

class JobStatus(_message.Message):
    __slots__ = ("active", "succeeded", "failed", "start_time", "completion_time", "complete", "failed_condition", "failed_time", "failed_reason", "has_completions", "completions")
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TIME_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAILED_CONDITION_FIELD_NUMBER: _ClassVar[int]
    FAILED_TIME_FIELD_NUMBER: _ClassVar[int]
    FAILED_REASON_FIELD_NUMBER: _ClassVar[int]
    HAS_COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    active: int
    succeeded: int
    failed: int
    start_time: _timestamp_pb2.Timestamp
    completion_time: _timestamp_pb2.Timestamp
    complete: bool
    failed_condition: bool
    failed_time: _timestamp_pb2.Timestamp
    failed_reason: str
    has_completions: bool
    completions: int
    def __init__(self, active: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completion_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., complete: _Optional[bool] = ..., failed_condition: _Optional[bool] = ..., failed_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., failed_reason: _Optional[str] = ..., has_completions: _Optional[bool] = ..., completions: _Optional[int] = ...) -> None: ...

class UnschedulableReport(_message.Message):
    __slots__ = ("spread", "subset", "since", "pod_count", "reason", "generation")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    SUBSET_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    POD_COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    spread: str
    subset: str
    since: _timestamp_pb2.Timestamp
    pod_count: int
    reason: str
    generation: int
    def __init__(self, spread: _Optional[str] = ..., subset: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pod_count: _Optional[int] = ..., reason: _Optional[str] = ..., generation: _Optional[int] = ...) -> None: ...

class UsageReport(_message.Message):
    __slots__ = ("interval_seconds", "metrics_unavailable_reason", "metrics_unavailable_message", "spreads", "observed_at")
    INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    METRICS_UNAVAILABLE_REASON_FIELD_NUMBER: _ClassVar[int]
    METRICS_UNAVAILABLE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SPREADS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    interval_seconds: int
    metrics_unavailable_reason: str
    metrics_unavailable_message: str
    spreads: _containers.RepeatedCompositeFieldContainer[SpreadUsage]
    observed_at: _timestamp_pb2.Timestamp
    def __init__(self, interval_seconds: _Optional[int] = ..., metrics_unavailable_reason: _Optional[str] = ..., metrics_unavailable_message: _Optional[str] = ..., spreads: _Optional[_Iterable[_Union[SpreadUsage, _Mapping]]] = ..., observed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SpreadUsage(_message.Message):
    __slots__ = ("spread", "ready_pods", "measured_pods", "cpu_requested_pods", "memory_requested_pods", "cpu_usage_milli", "memory_usage_milli", "cpu_utilization_milli", "memory_utilization_milli", "sampled_at", "window_milliseconds")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    READY_PODS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_PODS_FIELD_NUMBER: _ClassVar[int]
    CPU_REQUESTED_PODS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_REQUESTED_PODS_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGE_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USAGE_MILLI_FIELD_NUMBER: _ClassVar[int]
    CPU_UTILIZATION_MILLI_FIELD_NUMBER: _ClassVar[int]
    MEMORY_UTILIZATION_MILLI_FIELD_NUMBER: _ClassVar[int]
    SAMPLED_AT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    spread: str
    ready_pods: int
    measured_pods: int
    cpu_requested_pods: int
    memory_requested_pods: int
    cpu_usage_milli: int
    memory_usage_milli: int
    cpu_utilization_milli: int
    memory_utilization_milli: int
    sampled_at: _timestamp_pb2.Timestamp
    window_milliseconds: int
    def __init__(self, spread: _Optional[str] = ..., ready_pods: _Optional[int] = ..., measured_pods: _Optional[int] = ..., cpu_requested_pods: _Optional[int] = ..., memory_requested_pods: _Optional[int] = ..., cpu_usage_milli: _Optional[int] = ..., memory_usage_milli: _Optional[int] = ..., cpu_utilization_milli: _Optional[int] = ..., memory_utilization_milli: _Optional[int] = ..., sampled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window_milliseconds: _Optional[int] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("sent_at", "sequence", "ping_nonce")
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PING_NONCE_FIELD_NUMBER: _ClassVar[int]
    sent_at: _timestamp_pb2.Timestamp
    sequence: int
    ping_nonce: int
    def __init__(self, sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sequence: _Optional[int] = ..., ping_nonce: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("spread", "generation", "error")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    spread: str
    generation: int
    error: str
    def __init__(self, spread: _Optional[str] = ..., generation: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class AckBatch(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[Ack]
    def __init__(self, acks: _Optional[_Iterable[_Union[Ack, _Mapping]]] = ...) -> None: ...

class CoordinatorMessage(_message.Message):
    __slots__ = ("welcome", "assignment", "removal", "ping", "notice", "resync", "batch")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    REMOVAL_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    RESYNC_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    assignment: SpreadAssignment
    removal: SpreadRemoval
    ping: Ping
    notice: Notice
    resync: ResyncRequest
    batch: CoordinatorBatch
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., assignment: _Optional[_Union[SpreadAssignment, _Mapping]] = ..., removal: _Optional[_Union[SpreadRemoval, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ..., notice: _Optional[_Union[Notice, _Mapping]] = ..., resync: _Optional[_Union[ResyncRequest, _Mapping]] = ..., batch: _Optional[_Union[CoordinatorBatch, _Mapping]] = ...) -> None: ...

class CoordinatorBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[CoordinatorMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[CoordinatorMessage, _Mapping]]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("cluster_name", "coordinator_id", "heartbeat_interval_seconds", "full_resync", "resume_token", "capabilities", "server_time", "federation_id")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FULL_RESYNC_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    SERVER_TIME_FIELD_NUMBER: _ClassVar[int]
    FEDERATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    coordinator_id: str
    heartbeat_interval_seconds: int
    full_resync: bool
    resume_token: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    server_time: _timestamp_pb2.Timestamp
    federation_id: str
    def __init__(self, cluster_name: _Optional[str] = ..., coordinator_id: _Optional[str] = ..., heartbeat_interval_seconds: _Optional[int] = ..., full_resync: _Optional[bool] = ..., resume_token: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., server_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., federation_id: _Optional[str] = ...) -> None: ...

class SpreadAssignment(_message.Message):
    __slots__ = ("spread", "generation", "template_json", "template_revision", "replicas", "subsets", "subset_count", "strategy", "target", "issued_at", "spread_uid", "propagate_dependencies", "dependencies", "job_completions")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_JSON_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_REVISION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SUBSETS_FIELD_NUMBER: _ClassVar[int]
    SUBSET_COUNT_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    SPREAD_UID_FIELD_NUMBER: _ClassVar[int]
    PROPAGATE_DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    JOB_COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    spread: str
    generation: int
    template_json: str
    template_revision: str
    replicas: int
    subsets: _containers.RepeatedCompositeFieldContainer[SubsetRule]
    subset_count: int
    strategy: StrategySettings
    target: WorkloadRef
    issued_at: _timestamp_pb2.Timestamp
    spread_uid: str
    propagate_dependencies: bool
    dependencies: _containers.RepeatedCompositeFieldContainer[Dependency]
    job_completions: int
    def __init__(self, spread: _Optional[str] = ..., generation: _Optional[int] = ..., template_json: _Optional[str] = ..., template_revision: _Optional[str] = ..., replicas: _Optional[int] = ..., subsets: _Optional[_Iterable[_Union[SubsetRule, _Mapping]]] = ..., subset_count: _Optional[int] = ..., strategy: _Optional[_Union[StrategySettings, _Mapping]] = ..., target: _Optional[_Union[WorkloadRef, _Mapping]] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., spread_uid: _Optional[str] = ..., propagate_dependencies: _Optional[bool] = ..., dependencies: _Optional[_Iterable[_Union[Dependency, _Mapping]]] = ..., job_completions: _Optional[int] = ...) -> None: ...

class Dependency(_message.Message):
    __slots__ = ("api_version", "kind", "name", "object_json")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OBJECT_JSON_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    name: str
    object_json: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., object_json: _Optional[str] = ...) -> None: ...

class WorkloadRef(_message.Message):
    __slots__ = ("api_version", "kind", "namespace", "name")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    namespace: str
    name: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SubsetRule(_message.Message):
    __slots__ = ("name", "index", "required_node_selector_term_json", "preferred_node_selector_terms_json", "tolerations_json", "patch_json", "quota", "unschedulable_until", "leaving", "kept")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_NODE_SELECTOR_TERM_JSON_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_NODE_SELECTOR_TERMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    index: int
    required_node_selector_term_json: str
    preferred_node_selector_terms_json: str
    tolerations_json: str
    patch_json: str
    quota: int
    unschedulable_until: _timestamp_pb2.Timestamp
    leaving: int
    kept: int
    def __init__(self, name: _Optional[str] = ..., index: _Optional[int] = ..., required_node_selector_term_json: _Optional[str] = ..., preferred_node_selector_terms_json: _Optional[str] = ..., tolerations_json: _Optional[str] = ..., patch_json: _Optional[str] = ..., quota: _Optional[int] = ..., unschedulable_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., leaving: _Optional[int] = ..., kept: _Optional[int] = ...) -> None: ...

class StrategySettings(_message.Message):
    __slots__ = ("type", "reschedule_critical_seconds", "unschedulable_seconds", "disable_simulation_schedule")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    RESCHEDULE_CRITICAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_SIMULATION_SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    type: str
    reschedule_critical_seconds: int
    unschedulable_seconds: int
    disable_simulation_schedule: bool
    def __init__(self, type: _Optional[str] = ..., reschedule_critical_seconds: _Optional[int] = ..., unschedulable_seconds: _Optional[int] = ..., disable_simulation_schedule: _Optional[bool] = ...) -> None: ...

class SpreadRemoval(_message.Message):
    __slots__ = ("spread", "generation", "orphan", "reason")
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    spread: str
    generation: int
    orphan: bool
    reason: str
    def __init__(self, spread: _Optional[str] = ..., generation: _Optional[int] = ..., orphan: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("sent_at", "nonce")
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    sent_at: _timestamp_pb2.Timestamp
    nonce: int
    def __init__(self, sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., nonce: _Optional[int] = ...) -> None: ...

class Notice(_message.Message):
    __slots__ = ("severity", "code", "message", "spread")
    class Severity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SEVERITY_UNSPECIFIED: _ClassVar[Notice.Severity]
        SEVERITY_INFO: _ClassVar[Notice.Severity]
        SEVERITY_WARNING: _ClassVar[Notice.Severity]
        SEVERITY_ERROR: _ClassVar[Notice.Severity]
    SEVERITY_UNSPECIFIED: Notice.Severity
    SEVERITY_INFO: Notice.Severity
    SEVERITY_WARNING: Notice.Severity
    SEVERITY_ERROR: Notice.Severity
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    severity: Notice.Severity
    code: str
    message: str
    spread: str
    def __init__(self, severity: _Optional[_Union[Notice.Severity, str]] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., spread: _Optional[str] = ...) -> None: ...

class ResyncRequest(_message.Message):
    __slots__ = ("inventory", "pod_counts", "reason")
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    POD_COUNTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    inventory: bool
    pod_counts: bool
    reason: str
    def __init__(self, inventory: _Optional[bool] = ..., pod_counts: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...
