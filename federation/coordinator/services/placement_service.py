"""PlacementService: placement questions over gRPC, for the SDK and `fedspread get`; and Rebalance.

Why a `PlacementSource` protocol: the servicer must not care whether placements come from the live
world model (sharded, fed by the hub watcher and agents) or from a plain dictionary in a test. It
validates requests, asks the source, converts with `federation.coordinator.wire.convert`, and maps
every failure to a status code a client can act on — NOT_FOUND, INVALID_ARGUMENT (with every
problem's field path, one per line, and as JSON in the `fedspread-problems` trailer),
FAILED_PRECONDITION — and never UNKNOWN: anything unexpected is logged and answered INTERNAL. The
input checks and that mapping are `placement_requests`'s.

Watching polls a version counter rather than keeping per-watcher queues: a watcher that falls
behind simply sees the latest placements (latest wins, like a Kubernetes watch after a relist),
and a vanished client leaves nothing behind to clean up.

The handlers are coroutines on the coordinator's `grpc.aio` server (`aio_server`): the source's
calls take the coordinator's lock, so they run on an executor, and a watcher between two polls is
a sleeping coroutine, not a held thread.

Every call is authorised first (`authorization`): an agent's certificate is refused, and with an
authorizer (the coordinator over mTLS: the hub's RBAC) each handler requires what it reads —
PERMISSION_DENIED naming the permission, UNAVAILABLE when the hub cannot answer. Rebalance is the one
call that changes something (a failback on demand, `fedspread rebalance`): it requires `patch` on
the spread, as editing it would, and a dry run only its `get`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import datetime
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Protocol, TypeVar

import grpc

from federation.api import cluster, problems, spread
from federation.coordinator import backends
from federation.coordinator.services import authorization
from federation.coordinator.services.placement_requests import (
    ServiceError,
    abort,
    check_key,
    check_template,
    invalid_argument,
    load_json,
    parse_spread,
)
from federation.coordinator.wire import access, convert
from federation.core import failback_round, placement, workload_kinds
from federation.rpc import placement_pb2, placement_pb2_grpc

LOG = logging.getLogger(__name__)
WATCH_POLL_SECONDS = 0.25

T = TypeVar("T")


class PlacementSource(Protocol):
    """Where the servicer reads placements and clusters; every method must be thread-safe."""

    def get(self, key: str) -> convert.PlacementRecord | None:
        """The live placement of `namespace/name`, or None when the spread is unknown."""

    def rebalance(self, key: str, *, dry_run: bool, max_surge: int | None) -> failback_round.Plan | None:
        """Spread `key`'s whole failback, started unless `dry_run`; None: unknown or not placed."""

    def explained(self, key: str) -> convert.PlacementRecord | None:
        """`get` for Explain: with each subset's simulated capacity as of now."""

    def placements(self, namespace: str | None) -> list[convert.PlacementRecord]:
        """Every live placement (of one namespace when given), in any order."""

    def clusters(self) -> list[convert.ClusterRecord]:
        """Every member cluster."""

    def simulate(
        self, spec: spread.FederatedSpreadSpec, *, replicas: int | None,
        template: Mapping[str, Any] | None, snapshot: cluster.CapacitySnapshot | None,
    ) -> placement.Placement:
        """What-if placement; `snapshot` None means the live capacity. Raises InvalidInput."""

    def free_capacity(
        self, record: convert.PlacementRecord, *, snapshot: cluster.CapacitySnapshot | None
    ) -> dict[tuple[str, str], int | None]:
        """More pods of the record's template that fit per (subset, cluster) it uses; `snapshot`
        None means the live capacity."""

    @property
    def version(self) -> int:
        """A counter that grows whenever any placement changes."""


def _handled(
    method: Callable[[PlacementServicer, Any, authorization.Caller], T],
) -> Callable[[PlacementServicer, Any, grpc.aio.ServicerContext], Coroutine[Any, Any, T]]:
    """Authorise and answer on the executor; map ServiceError and AccessRefused to their status,
    anything unexpected to INTERNAL (logged), never UNKNOWN."""

    @functools.wraps(method)
    async def wrapper(self: PlacementServicer, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            caller = authorization.caller_of(context.auth_context(), self._authorizer)
            return await self._blocking(method, self, request, caller)
        except (ServiceError, authorization.AccessRefused) as error:
            await abort(context, error)
        except Exception:
            LOG.exception("PlacementService.%s failed", method.__name__)
            await context.abort(grpc.StatusCode.INTERNAL,
                                f"{method.__name__} failed inside the coordinator; see its log")
        raise AssertionError("unreachable: context.abort raises")  # pragma: no cover

    return wrapper


class PlacementServicer(placement_pb2_grpc.PlacementServiceServicer):
    """Every PlacementService RPC over a PlacementSource, as coroutines (`aio_server`)."""

    def __init__(
        self, source: PlacementSource, *, watch_poll_seconds: float = WATCH_POLL_SECONDS,
        executor: concurrent.futures.Executor | None = None, authorizer: access.Authorizer | None = None,
    ) -> None:
        """`executor` runs the source's (blocking, locking) calls; None: the loop's default executor.
        `authorizer` answers each call's access questions; None: every user may read everything."""
        self._source = source
        self._authorizer = authorizer
        self._poll = watch_poll_seconds
        self._executor = executor

    async def _blocking(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    def _record(self, key: str, caller: authorization.Caller, *, explained: bool = False,
                ) -> convert.PlacementRecord:
        checked = check_key(key)
        namespace, _, name = checked.partition("/")
        caller.require(access.read_spread(namespace, name))
        record = self._source.explained(checked) if explained else self._source.get(checked)
        if record is None:
            raise ServiceError(grpc.StatusCode.NOT_FOUND, f"no spread {key}")
        return record

    @_handled
    def GetPlacement(
        self, request: placement_pb2.GetPlacementRequest, caller: authorization.Caller,
    ) -> placement_pb2.Placement:
        return convert.placement_to_pb(self._record(request.spread, caller))

    @_handled
    def ListPlacements(
        self, request: placement_pb2.ListPlacementsRequest, caller: authorization.Caller,
    ) -> placement_pb2.ListPlacementsResponse:
        if request.page_size < 0:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "page_size must not be negative")
        records = sorted(self._readable(request.namespace, caller), key=lambda r: r.key)
        records = [r for r in records if r.key > request.page_token]
        token = ""
        if request.page_size and len(records) > request.page_size:
            records = records[:request.page_size]
            token = records[-1].key
        return placement_pb2.ListPlacementsResponse(
            placements=[convert.placement_to_pb(r) for r in records], next_page_token=token)

    def _readable(self, namespace: str, caller: authorization.Caller) -> list[convert.PlacementRecord]:
        """The placements of `namespace` ("" every one) the caller may list; PERMISSION_DENIED when
        a namespace was named and may not be listed."""
        if namespace:
            caller.require(access.list_spreads(namespace))
            return self._source.placements(namespace)
        return caller.visible(self._source.placements(None),
                              namespace_of=lambda r: authorization.namespace_of_key(r.key))

    @_handled
    def ListClusters(
        self, request: placement_pb2.ListClustersRequest, caller: authorization.Caller,
    ) -> placement_pb2.ListClustersResponse:
        caller.require(access.list_clusters())
        found = sorted(self._source.clusters(), key=lambda c: c.name)
        return placement_pb2.ListClustersResponse(clusters=[
            convert.cluster_info_to_pb(c, include_node_pools=request.include_node_pools) for c in found])

    def _simulate(
        self, request: placement_pb2.SimulateRequest
    ) -> tuple[convert.PlacementRecord, cluster.CapacitySnapshot | None]:
        """The what-if's record, and the snapshot it was given (None: live capacity)."""
        try:
            spec = parse_spread(request.spread_yaml)
            template = load_json(request.template_json, field="templateJson") \
                if request.template_json else None
            check_template(spec, template)
            snapshot = problems.validate(
                cluster.CapacitySnapshot, load_json(request.clusters_json, field="clustersJson"),
                what="clusters snapshot") if request.clusters_json else None
            replicas = request.replicas if request.HasField("replicas") else workload_kinds.template_quantity(
                workload_kinds.policy_for(spec.target_ref.api_version, spec.target_ref.kind), template)
            if replicas is not None and replicas < 0:
                raise problems.InvalidInput("simulation", [problems.Problem(
                    "replicas", f"must not be negative, got {replicas}")])
            result = self._source.simulate(spec, replicas=replicas, template=template, snapshot=snapshot)
        except (backends.PlaceTimeout, backends.ShardUnavailable) as error:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, f"the placement shards could not answer: {error}",
                               ) from None
        except problems.InvalidInput as error:
            raise invalid_argument(error) from None
        except ValueError as error:  # e.g. an unparseable quantity in the template
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"simulation is invalid: {error}") from None
        return convert.PlacementRecord(key="", placement=result, spec=spec, template=template), snapshot

    @_handled
    def Simulate(
        self, request: placement_pb2.SimulateRequest, caller: authorization.Caller,
    ) -> placement_pb2.Placement:
        caller.require(access.list_clusters())
        return convert.placement_to_pb(self._simulate(request)[0])

    @_handled
    def Explain(
        self, request: placement_pb2.ExplainRequest, caller: authorization.Caller,
    ) -> placement_pb2.Explanation:
        target = request.WhichOneof("target")
        if target in ("spread", "simulation"):
            if target == "spread":
                record, snapshot = self._record(request.spread, caller, explained=True), None
            caller.require(access.list_clusters())  # an explanation shows every cluster's capacity
            if target == "simulation":
                record, snapshot = self._simulate(request.simulation)
            try:
                free = self._source.free_capacity(record, snapshot=snapshot)
            except (backends.PlaceTimeout, backends.ShardUnavailable) as error:
                raise ServiceError(grpc.StatusCode.UNAVAILABLE,
                                   f"the capacity shards could not answer: {error}") from None
            return convert.explanation_to_pb(dataclasses.replace(record, free_capacity=free),
                                             clusters=self._source.clusters())
        raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                           "give a spread key \"namespace/name\" or a simulation to explain")

    @_handled
    def Rebalance(
        self, request: placement_pb2.RebalanceRequest, caller: authorization.Caller,
    ) -> placement_pb2.RebalancePlan:
        checked = check_key(request.spread)
        namespace, _, name = checked.partition("/")
        caller.require(access.read_spread(namespace, name))
        if not request.dry_run:
            caller.require(access.patch_spread(namespace, name))  # it moves the spread's replicas
        max_surge = request.max_surge if request.HasField("max_surge") else None
        if max_surge is not None and max_surge < 1:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"max_surge must be at least 1, got "
                               f"{max_surge}: a step starts its new pods first")
        try:
            found = self._source.rebalance(checked, dry_run=request.dry_run, max_surge=max_surge)
        except (backends.PlaceTimeout, backends.ShardUnavailable) as error:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, f"the placement shards could not answer: {error}",
                               ) from None
        if found is None:
            raise ServiceError(grpc.StatusCode.NOT_FOUND, f"no placed spread {checked}")
        return convert.rebalance_plan_to_pb(found, started=not request.dry_run and bool(found.steps))

    async def WatchPlacement(
        self, request: placement_pb2.WatchPlacementRequest, context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[placement_pb2.PlacementEvent]:
        try:
            caller = authorization.caller_of(context.auth_context(), self._authorizer)
            if request.spread:  # NOT_FOUND / INVALID_ARGUMENT / PERMISSION_DENIED first
                await self._blocking(self._record, request.spread, caller)
            elif request.namespace:
                await self._blocking(caller.require, access.list_spreads(request.namespace))
        except (ServiceError, authorization.AccessRefused) as error:
            await abort(context, error)
        try:
            async for event in self._watch(request, caller):
                yield event
        except grpc.aio.AbortError:
            raise
        except authorization.AccessRefused as error:  # the hub went away during the watch
            await abort(context, error)
        except Exception:
            LOG.exception("PlacementService.WatchPlacement failed")
            await context.abort(grpc.StatusCode.INTERNAL,
                                "WatchPlacement failed inside the coordinator; see its log")

    def _snapshot(
        self, request: placement_pb2.WatchPlacementRequest, caller: authorization.Caller,
    ) -> dict[str, placement_pb2.Placement]:
        """The watched placements now; PERMISSION_DENIED once the caller may no longer read them (a
        revoked binding ends a watch at the next change, within the authorizer's cache time)."""
        if request.spread:
            namespace, _, name = request.spread.partition("/")
            caller.require(access.read_spread(namespace, name))
            record = self._source.get(request.spread)
            records = [] if record is None else [record]
        elif request.namespace:
            caller.require(access.list_spreads(request.namespace))
            records = self._source.placements(request.namespace)
        else:
            records = self._readable("", caller)
        return {r.key: convert.placement_to_pb(r) for r in records}

    async def _watch(
        self, request: placement_pb2.WatchPlacementRequest, caller: authorization.Caller,
    ) -> AsyncIterator[placement_pb2.PlacementEvent]:
        """The snapshot, then what changed, polling the source's version every poll interval (a
        watcher holds no thread between polls; the call's cancellation ends it)."""
        kind = placement_pb2.PlacementEvent
        version = await self._blocking(_version_of, self._source)
        seen = await self._blocking(self._snapshot, request, caller)
        for key in sorted(seen):
            yield _event(kind.TYPE_INITIAL, key, seen[key])
        while True:
            await asyncio.sleep(self._poll)
            latest = await self._blocking(_version_of, self._source)
            if latest == version:
                continue
            version = latest
            now = await self._blocking(self._snapshot, request, caller)
            for key in sorted(set(seen) | set(now)):
                if key not in now:
                    yield _event(kind.TYPE_DELETED, key, seen[key])
                elif key not in seen:
                    yield _event(kind.TYPE_ADDED, key, now[key])
                elif now[key] != seen[key]:
                    yield _event(kind.TYPE_MODIFIED, key, now[key])
            seen = now
            if request.spread and request.spread not in now:
                return


def _version_of(source: PlacementSource) -> int:
    return source.version


def _event(
    kind: placement_pb2.PlacementEvent.Type, key: str, message: placement_pb2.Placement
) -> placement_pb2.PlacementEvent:
    return placement_pb2.PlacementEvent(
        type=kind, spread=key, placement=message,
        observed_at=convert.timestamp(datetime.datetime.now(datetime.UTC)))


def add_to_server(
    server: grpc.aio.Server, source: PlacementSource, *, executor: concurrent.futures.Executor | None = None,
    authorizer: access.Authorizer | None = None,
) -> PlacementServicer:
    """Register a PlacementServicer over `source` on an aio `server` (`aio_server.AioServer.server`),
    answering only what `authorizer` allows (None: everything); returns the servicer."""
    servicer = PlacementServicer(source, executor=executor, authorizer=authorizer)
    placement_pb2_grpc.add_PlacementServiceServicer_to_server(servicer, server)
    return servicer
