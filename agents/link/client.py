"""The agent's one bidirectional gRPC stream to the coordinator (AgentService.Connect).

Why it looks like this:

- **Fail static.** The webhook decides from the local quota table, so losing the coordinator must
  not lose the table: a broken stream never clears the bookkeeping, it only flips the link metrics
  and logs one WARNING per outage. Enforcement continues with the last quotas received.
- **Reconnect forever.** An agent is long-running; giving up would leave a cluster unmanaged. The
  loop is a tenacity `Retrying` with no stop condition, but every wait is jittered and capped
  (`wait_random_exponential`, cap ~5 s) so a restarted coordinator is not stampeded. Refusals that
  need a human (PERMISSION_DENIED, INVALID_ARGUMENT, UNAUTHENTICATED, a TLS handshake our CA
  rejects, ...: `agents.link.refusals`) are logged as ERROR with the coordinator's reason and
  retried slowly, so fixing the coordinator side heals the link.
- **Keepalive.** The channel PINGs the coordinator every 30 s (`federation.rpc.keepalive`, which
  the coordinator's server options match), so a half-open connection fails the call and the link
  reconnects, instead of waiting on a socket nobody answers.
- **Credentials per connect.** `credentials` may be a function that builds them (from the
  `--link-*` files): called for every stream, so renewed certificate files are used from the next
  reconnect on, without a restart.
- **Full resync on every connect.** Hello lists the spreads applied (`agents.link.hello`: the
  assignments held and the Deployments marked as ours); after Welcome the latest full inventory
  and pod counts go out before anything else, since a restarted coordinator holds nothing.
- **One writer per stream** (agents.link.stream): reports, events, acks, ping answers and
  heartbeats go through one queue, numbered per stream as agent.proto asks.
- **End of resync, and whose.** Hello advertises `resync-complete`; a coordinator that understands
  it sends a Notice `ResyncComplete` after re-sending assignments, and the link sets `synced`.
  Welcome names the coordinator's federation; the link records it (`federation`,
  `agents.ownership`) and stamps it on each assignment; a removal acts only on Deployments of the
  federation of the stream it came on. Nothing is deleted for being absent from the resync.
  Once it is complete, the local unschedulable marks no assignment echoes are reported again
  (`Bookkeeping.unechoed_marks`): a restarted coordinator lost them, and each was reported once.
- **Stale generations, per stream.** Generations are the hub FederatedSpread's
  metadata.generation, which starts again at 1 when a spread is deleted and re-created under the
  same name (and a restarted coordinator may number removals afresh). So an assignment or removal
  is refused as stale only against what arrived earlier on the *same* stream (a coordinator that
  reorders its own messages); after Welcome's full resync the coordinator is authoritative, and
  comparing with the generation applied on an earlier stream would wedge the spread forever.
  Applying them, and acking each, is `agents.link.applying`'s.
- **Batches, both ways.** Hello also advertises `message-batches`
  (`capabilities.MESSAGE_BATCHES_CAPABILITY`): a coordinator that reads it may send what it has
  queued as one `CoordinatorBatch`, which the link reads as its entries one after another (a
  Welcome or a batch inside one is ignored); to a coordinator whose Welcome lists it, the acks
  queued together go as one `AckBatch` (agents.link.stream). After a full round of 10,000 spreads,
  a stream carries a gRPC message per batch instead of one per spread each way.

- **One loop among the agent's.** The link is an `agents.runnable.Runnable` (`run(stop, beat)`;
  `interrupt` cancels the stream in progress so a stop is seen at once): the agent starts it last
  of its loops. `start`/`stop` run it on a thread of its own without a watchdog (tests, benchmarks).
  What it is told is one `agents.link.settings.LinkSettings`.

Callbacks run on the link thread and should be quick (enqueue work, do not call the apiserver).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any, Protocol

import grpc
import tenacity

from agents import bookkeeping as bookkeeping_mod
from agents import outbox as outbox_mod
from agents import ownership, runnable
from agents.link import applying, refusals
from agents.link import hello as hello_mod
from agents.link import settings as settings_mod
from agents.link import stream as stream_mod
from federation import clock as clock_mod
from federation.rpc import agent_pb2, agent_pb2_grpc, capabilities, keepalive
from federation.rpc import assignment as assignment_mod

log = logging.getLogger(__name__)

FAIL_STATIC_MESSAGE = refusals.FAIL_STATIC_MESSAGE
REPORTED_AGAIN = "reported again after the coordinator's resync: this subset is still kept out of here"
Credentials = settings_mod.Credentials
LinkSettings = settings_mod.LinkSettings


class LinkMetrics(Protocol):
    """What the link needs of agents.metrics.AgentMetrics (link-connected and fail-static gauges)."""

    def set_link(self, *, connected: bool) -> None:
        """Record whether the coordinator stream is up (and so whether the agent is fail static)."""


class Link:
    """Keeps one AgentService.Connect stream up, applies what arrives, sends what the agent reports."""

    name = "link"  # an `agents.runnable.Runnable`; not critical: the agent survives its coordinator's
    critical = False  # absence (fail static), so a stalled link does not make it unready

    def __init__(
        self, settings: settings_mod.LinkSettings, *, bookkeeping: bookkeeping_mod.Bookkeeping,
        outbox: outbox_mod.ReportOutbox, metrics: LinkMetrics | None = None,
        on_assignment: Callable[[assignment_mod.Assignment], None] | None = None,
        on_removal: Callable[[str, bool], None] | None = None, synced: threading.Event | None = None,
        federation: ownership.FederationState | None = None,
        cache: hello_mod.DeploymentCache | None = None, clock: clock_mod.Clock = clock_mod.utcnow,
    ) -> None:
        self.settings = settings
        self.target = settings.target
        self.cluster = settings.cluster
        self._bookkeeping = bookkeeping
        self._outbox = outbox
        self._metrics = metrics
        self._cache = cache  # the member's Deployments the Hello lists (None: only the bookkeeping)
        self._cache_wait: float | None = settings.cache_wait_seconds  # None once the first stream waited
        self.synced = synced if synced is not None else threading.Event()
        self.federation = federation if federation is not None else ownership.FederationState()
        self._clock = clock
        self._started_at = clock()
        self._fast_wait = tenacity.wait_random_exponential(multiplier=settings.backoff_initial_seconds,
                                                           max=settings.backoff_cap_seconds)
        self._slow_wait = tenacity.wait_random(settings.misconfigured_backoff_seconds,
                                               2 * settings.misconfigured_backoff_seconds)
        self._beat: runnable.Beat = runnable.no_beat
        """The watchdog's heartbeat (`federation.watchdog`), given to `run`, on the link thread: each
        attempt, each wait, each message from the coordinator (which pings an idle stream every
        heartbeat)."""
        self.period = max(settings.heartbeat_seconds, 2 * settings.misconfigured_backoff_seconds)
        """The longest the link thread waits between two beats when nothing is wrong: a ping
        interval, or the longest wait after a refusal (`misconfigured_backoff_seconds` twice)."""
        self._stop = threading.Event()  # its own (`start`/`stop`), or the one `run` was given
        self._running = threading.Event()
        self._connected = threading.Event()
        self._lock = threading.Lock()
        self._call: Any = None
        self._stream: stream_mod.Outgoing | None = None
        self._thread: threading.Thread | None = None
        self._resume_token = ""
        self._outage = refusals.Outage(log, cluster=settings.cluster, target=settings.target,
                                       secure=settings.credentials is not None)
        self._applier = applying.Applier(bookkeeping, cluster=settings.cluster, federation=self.federation,
                                         on_assignment=on_assignment, on_removal=on_removal)
        """Applies assignments and removals, with this stream's generations (the link thread only)."""
        self.connects = 0  # Welcomes received, for status and tests

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while a stream is up and welcomed."""
        return self._connected.is_set()

    @property
    def running(self) -> bool:
        """True while the link loop runs (between start() and stop(), or inside `run`)."""
        return self._running.is_set() or (self._thread is not None and self._thread.is_alive())

    def wait_connected(self, timeout: float) -> bool:
        """Block until welcomed (or `timeout` seconds); returns `connected`."""
        return self._connected.wait(timeout)

    def start(self) -> None:
        """Run the link in a daemon thread of its own, without a watchdog (`stop` ends it). The
        agent runs it as one of its `agents.runnable` loops instead (`run`)."""
        self._set_connected(False)
        self._thread = threading.Thread(target=self.run, args=(self._stop, runnable.no_beat),
                                        name=f"link-{self.cluster}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the link started with `start()`: cancel the stream and end the thread; the
        bookkeeping is left as it is."""
        self._stop.set()
        self.interrupt()
        if self._thread is not None:
            self._thread.join(timeout)
        self._connected.clear()

    def interrupt(self) -> None:
        """Cancel the stream in progress, so that the loop sees its stop event now (`Interruptible`)."""
        with self._lock:
            call, stream = self._call, self._stream
        if call is not None:
            call.cancel()
        if stream is not None:
            stream.close()

    # --- reconnect loop ------------------------------------------------------------------------

    def run(self, stop: threading.Event, beat: runnable.Beat) -> None:
        """Keep a stream up until `stop` is set (`agents.runnable.Runnable`; `interrupt` cancels the
        stream in progress), calling `beat` on each attempt, wait and message."""
        self._stop, self._beat = stop, beat
        self._running.set()
        self._set_connected(False)
        try:
            while not stop.is_set():
                self._turn()
        finally:
            self._connected.clear()
            self._running.clear()

    def _turn(self) -> None:
        self._beat()
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(self._should_retry), wait=self._wait,
            sleep=self._sleep, before_sleep=self._before_sleep, reraise=True)
        try:
            retrying(self._session)
        except refusals.StreamEnded:
            # A welcomed stream ended (or we are stopping): start a fresh backoff sequence,
            # after a short jittered pause so that many agents do not reconnect in lockstep.
            self._stop.wait(random.uniform(0, self.settings.backoff_initial_seconds))
        except Exception:  # a bug must not end enforcement or the link: log, back off, go on
            log.exception("link loop failed", extra={"cluster": self.cluster})
            self._stop.wait(self.settings.backoff_cap_seconds)

    def _sleep(self, seconds: float) -> None:
        self._beat()
        self._stop.wait(seconds)  # interrupted by stop()
        self._beat()

    def _should_retry(self, error: BaseException) -> bool:
        return isinstance(error, refusals.StreamEnded) and not error.welcomed and not self._stop.is_set()

    def _wait(self, state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        if isinstance(error, refusals.StreamEnded) and error.refused:
            return float(self._slow_wait(state))
        return float(self._fast_wait(state))

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        wait = state.next_action.sleep if state.next_action else 0.0
        log.debug("link retry", extra={"cluster": self.cluster, "attempt": state.attempt_number,
                                       "wait_s": round(wait, 2)})

    def _session(self) -> None:
        """One Connect stream, from Hello to its end; always raises refusals.StreamEnded."""
        if self._stop.is_set():
            raise refusals.StreamEnded(grpc.StatusCode.CANCELLED, "link stopped", welcomed=True)
        self._await_cache()
        stream = stream_mod.Outgoing(self.hello, outbox=self._outbox, clock=self._clock,
                                     heartbeat_seconds=self.settings.heartbeat_seconds, name=self.cluster)
        self._applier.new_stream()
        channel = self._channel()
        watchdog: threading.Timer | None = None
        try:
            stub = agent_pb2_grpc.AgentServiceStub(channel)  # generated stub
            call = stub.Connect(stream.messages())
            with self._lock:
                self._call, self._stream = call, stream
            if self._stop.is_set():
                call.cancel()
            # A coordinator that accepts the stream but never welcomes us must not hang the link.
            watchdog = threading.Timer(self.settings.welcome_timeout_seconds, self._no_welcome,
                                       args=(call, stream))
            watchdog.daemon = True
            watchdog.start()
            try:
                for message in call:
                    self._handle(message, stream)
                error = refusals.StreamEnded(None, "coordinator closed the stream", welcomed=stream.welcomed)
            except grpc.RpcError as failure:
                code, details = failure.code(), failure.details() or ""
                if stream.timed_out:
                    code, details = grpc.StatusCode.DEADLINE_EXCEEDED, (
                        f"no Welcome within {self.settings.welcome_timeout_seconds:g} s")
                error = refusals.StreamEnded(code, details, welcomed=stream.welcomed)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            self._end_stream(stream)
            channel.close()
        self._lost(error)
        raise error

    def _await_cache(self) -> None:
        """Before the first Hello: let the cache list the member's Deployments (with a deadline)."""
        if self._cache is not None and self._cache_wait is not None:
            deadline, self._cache_wait = self._cache_wait, None
            hello_mod.wait_for_cache(self._cache, deadline_seconds=deadline, stopped=self._stop.is_set)

    def _channel(self) -> grpc.Channel:
        """A plaintext channel, or a TLS one with credentials built now (renewed files count)."""
        given = self.settings.credentials
        if given is None:
            return grpc.insecure_channel(self.target, options=keepalive.CHANNEL_OPTIONS)
        try:
            credentials = given if isinstance(given, grpc.ChannelCredentials) else given()
        except Exception as failure:  # unreadable or mismatched files: a refusal until they are fixed
            error = refusals.StreamEnded(grpc.StatusCode.FAILED_PRECONDITION,
                                         f"cannot load the link certificate: {failure}", welcomed=False)
            self._lost(error)
            raise error from None
        return grpc.secure_channel(self.target, credentials, options=keepalive.CHANNEL_OPTIONS)

    def _no_welcome(self, call: Any, stream: stream_mod.Outgoing) -> None:
        if not stream.welcomed and not stream.done.is_set():
            stream.timed_out = True
            call.cancel()

    def _end_stream(self, stream: stream_mod.Outgoing) -> None:
        stream.close()
        with self._lock:
            self._call, self._stream = None, None

    def _lost(self, error: refusals.StreamEnded) -> None:
        self._set_connected(False)
        if not self._stop.is_set():
            self._outage.lost(error)

    def _set_connected(self, connected: bool) -> None:
        if connected:
            self._connected.set()
        else:
            self._connected.clear()
        if self._metrics is not None:
            self._metrics.set_link(connected=connected)

    # --- outgoing ------------------------------------------------------------------------------

    def hello(self) -> agent_pb2.AgentMessage:
        """The Hello that opens every stream: identity plus what is enforced right now."""
        cache = self._cache
        applied = hello_mod.listing(
            self._bookkeeping.assignments(), cache.workloads() if cache is not None else (),
            federation=self.federation.listed,
            pods_of=cache.spread_pods if cache is not None else lambda _: ())
        return hello_mod.build(cluster=self.cluster, labels=dict(self.settings.labels),
                               resume_token=self._resume_token, started_at=self._started_at, applied=applied)

    # --- incoming ------------------------------------------------------------------------------

    def _handle(self, message: agent_pb2.CoordinatorMessage, stream: stream_mod.Outgoing) -> None:
        self._beat()
        kind = message.WhichOneof("body")
        if kind == "welcome":
            self._welcome(message.welcome, stream)
        elif kind == "assignment":
            self._applier.assignment(message.assignment, stream)
        elif kind == "removal":
            self._applier.removal(message.removal, stream)
        elif kind == "ping":
            stream.send(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(ping_nonce=message.ping.nonce)))
        elif kind == "resync":
            stream.resend(inventory=message.resync.inventory, pod_counts=message.resync.pod_counts)
        elif kind == "notice":
            self._notice(message.notice)
        elif kind == "batch":
            self._batch(message.batch, stream)
        else:
            log.debug("unknown coordinator message ignored", extra={"cluster": self.cluster})

    def _batch(self, batch: agent_pb2.CoordinatorBatch, stream: stream_mod.Outgoing) -> None:
        """Each of a CoordinatorBatch's messages as if it came alone, in order; a Welcome or a batch
        inside one is not what a coordinator sends (`capabilities.MESSAGE_BATCHES_CAPABILITY`):
        ignored, so a malformed batch cannot welcome a stream twice or nest without end."""
        for inner in batch.messages:
            if inner.WhichOneof("body") in ("welcome", "batch"):
                log.warning("coordinator batch entry ignored", extra={
                    "cluster": self.cluster, "kind": inner.WhichOneof("body")})
                continue
            self._handle(inner, stream)

    def _welcome(self, welcome: agent_pb2.Welcome, stream: stream_mod.Outgoing) -> None:
        beat = self.settings.heartbeat_seconds
        if welcome.heartbeat_interval_seconds > 0:
            beat = min(beat, welcome.heartbeat_interval_seconds)
        self._resume_token = welcome.resume_token
        self.federation.welcomed(welcome.federation_id)
        stream.welcomed_now(heartbeat_seconds=beat,
                            batches=capabilities.MESSAGE_BATCHES_CAPABILITY in welcome.capabilities)
        self.connects += 1
        outage = self._outage.over()
        log.info("connected to coordinator", extra={
            "cluster": self.cluster, "coordinator": self.target,
            "coordinator_id": welcome.coordinator_id, "federation": welcome.federation_id,
            "outage_s": outage})
        self._set_connected(True)

    def _notice(self, notice: agent_pb2.Notice) -> None:
        if notice.code == capabilities.RESYNC_COMPLETE_CODE:
            if not self.synced.is_set():
                log.info("assignments complete", extra={"cluster": self.cluster,
                                                        "spreads": len(self._bookkeeping.assignments())})
            self.synced.set()
            for value, subset, since in self._bookkeeping.unechoed_marks():  # a restarted coordinator's
                self._outbox.unschedulable(spread=value.spread, subset=subset, since=since, pods=0,
                                           reason=REPORTED_AGAIN, generation=value.generation)
            return
        level = {agent_pb2.Notice.SEVERITY_ERROR: logging.ERROR,
                 agent_pb2.Notice.SEVERITY_WARNING: logging.WARNING}.get(notice.severity, logging.INFO)
        log.log(level, "coordinator notice", extra={"cluster": self.cluster, "code": notice.code,
                                                    "spread": notice.spread, "detail": notice.message})
