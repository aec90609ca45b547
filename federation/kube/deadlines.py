"""Every deadline fedspread gives a Kubernetes or gRPC call, defined once.

Why one module: a call without a deadline is a thread that can wait forever. An apiserver (or a
load balancer, or a NAT table) that stops answering without closing the connection leaves a
client blocked in `recv` for good: the coordinator's status loop, the agent's controller, any
loop that made the call, stops turning and nobody notices. Every call therefore carries a
deadline (`tests/unit/test_deadlines.py` scans `federation/` and `agents/` for Kubernetes calls
without `_request_timeout`), and the values are here, so they are chosen together.

How they were chosen:

* `CONNECT` (10 s) — the TCP connect and the TLS handshake (urllib3 gives both the connect
  timeout). A reachable apiserver accepts in milliseconds; 10 s rides out a SYN retransmit
  (1 s, 3 s) and a busy host, while a blackholed address is noticed within one status period or
  so instead of the kernel's ~2 minutes.
* `READ` (30 s) — the wait for each byte of an ordinary answer (get, patch, create, delete).
  The apiserver itself gives up on a request after 60 s (`--request-timeout`); a healthy one
  answers these calls in milliseconds, a loaded one in seconds. Half the server's own limit
  leaves room for a slow etcd without letting a silent connection hold a loop for a minute.
* `LIST_READ` (120 s) — a page of a paginated list (500 objects) from a large cluster can take
  longer than a single object; it is still far below "forever".
* `WATCH_SECONDS` (300 s) and `WATCH_SLACK` (30 s) — a watch asks the server to end it after
  `timeoutSeconds` (client-go picks 5 to 10 min); the client's read deadline is that plus a slack,
  so a stream that went silent without closing is noticed at most `WATCH_SLACK` after the
  server should have ended it, and the reflector resumes from its last resourceVersion.

gRPC calls have their deadlines where they are made, because the SDK must not import the
Kubernetes client: a unary call of the SDK and the CLI gets `timeout` (10 s by default,
`--timeout`); placements are answered from memory, so that is generous. Streams (the agent's
link, the SDK's `watch`) have no overall deadline by nature; a silent peer is noticed by keepalive
PINGs (`federation.rpc.keepalive`) and the link's Welcome timeout.

Retries are not here: they stay with tenacity in the callers (`agents.retries`,
`coordinator.hub.status_writer`), bounded and jittered, on 429 and 5xx (and 409 where the caller
re-reads). A call that timed out is not repeated in place — its loop's next turn tries again — so
a silent apiserver holds a loop for one deadline, not for one deadline per attempt.
"""

from __future__ import annotations

from urllib3.util import retry as urllib3_retry

CONNECT = 10.0
"""Seconds to connect (TCP and TLS) to an apiserver."""
READ = 30.0
"""Seconds to wait for an ordinary call's answer (between bytes received)."""
LIST_READ = 120.0
"""Seconds to wait for a page of a list."""
WATCH_SECONDS = 300
"""`timeoutSeconds` of a watch: the server ends the stream after this long."""
WATCH_SLACK = 30.0
"""A watch's read deadline is `WATCH_SECONDS` (or the watch's own) plus this."""
PROBE = 10.0
"""The startup probe of an apiserver (GET /version, or one list)."""

URLLIB3_RETRIES = urllib3_retry.Retry(total=3, read=1)
"""urllib3's own retries under every client `federation.kube.clients` builds. Its default (3 of
any kind) repeats an idempotent GET after a read timeout three times, so a silent apiserver held a
GET for 4 times `READ`; here a read error is retried once (a pooled connection the server closed fails
its first read), so a call waits at most twice `READ`. Connection errors keep three retries."""

CALL: tuple[float, float] = (CONNECT, READ)
"""`_request_timeout` of an ordinary Kubernetes call."""
LIST: tuple[float, float] = (CONNECT, LIST_READ)
"""`_request_timeout` of a list (one page)."""


def watch(seconds: float = WATCH_SECONDS) -> tuple[float, float]:
    """`_request_timeout` of a watch asked to end after `seconds` (its `timeout_seconds`)."""
    return (CONNECT, seconds + WATCH_SLACK)

