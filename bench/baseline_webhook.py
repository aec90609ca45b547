"""Kruise's WorkloadSpread admission design, as the admission benchmark's baseline: one process per part.

Why a faithful copy and not a straw man: the benchmark claims that deciding from a local quota
table beats keeping the quota in an API object, so the baseline must be the design as Kruise's
WorkloadSpread ships it, in our language and on our server stack. Only the decision differs from
fedspread's webhook: the same `WebhookServer`, the same `AdmissionHandler` (parse, name generation,
`mutate_pod`, JSONPatch, encode, and the same latency measurement), with a `Bookkeeping` whose
`admit` keeps the quota in the spread object's status instead of in memory. Its parts:

* `baseline_resource`: the spread as a small custom resource in the member, and the informer that
  keeps watch-fed copies of it and of its pods.
* `baseline_admission`: the webhook's decision — a mutex and a cache per spread, an
  optimistic-lock status update per pod, 409s retried as client-go's `RetryOnConflict` does.
* `baseline_controller`: Kruise's `syncWorkloadSpread` — deletion costs, then the status recounted
  from the pods and written.
* This module: the processes. Kruise runs its webhook replicas and its controller as Go processes,
  which share no interpreter lock; here too every part is a process of its own (`--role`): each
  webhook replica (`webhook`, one informer, mutex and cache each) and the controller
  (`controller`). The sandbox has no Service routing, so the replicas bind one port with
  SO_REUSEPORT and the kernel spreads the apiserver's connections over them, as kube-proxy spreads
  connections over pods. kruise-manager's Deployment runs 2 replicas by default and Kruise's own
  manifest ships 1: the benchmark runs both (`admission_webhooks`).

What one process no longer shares with another: in kruise-manager the leader replica's controller
and webhook take the same per-spread mutex; here the controller's process has its own, so their
writes are ordered by the optimistic lock alone (a conflict more, counted, retried). Not modelled:
Kruise's Deployment-revision handling (the benchmark's pods come from one client, not a rolling
update). `python -m bench.baseline_webhook` runs one part until SIGTERM and writes its handler
samples and counters (`webhook_samples`).
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import sys
import threading

from agents import metrics
from agents.webhook import server
from bench import baseline_admission, baseline_controller, baseline_resource, rawkube, webhook_samples
from federation import logs

ROLES = ("webhook", "controller")


def main(argv: list[str] | None = None) -> int:
    """Run one part of the baseline for one namespace until SIGTERM; write its samples at exit."""
    parser = argparse.ArgumentParser(prog="python -m bench.baseline_webhook", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--role", choices=ROLES, default="webhook")
    parser.add_argument("--cert", type=pathlib.Path, help="serving certificate (webhook)")
    parser.add_argument("--key", type=pathlib.Path, help="its key (webhook)")
    parser.add_argument("--port", type=int, default=0, help="port to serve (webhook; 0: any free one)")
    parser.add_argument("--samples", required=True, type=pathlib.Path)
    parser.add_argument("--ready", required=True, type=pathlib.Path,
                        help="a file to write the port to once serving (the controller: 0 once running)")
    options = parser.parse_args(argv)
    if options.role == "webhook" and (options.cert is None or options.key is None):
        parser.error("--role webhook needs --cert and --key")
    logs.configure("warning")
    api_client = rawkube.api_client(options.kubeconfig, pool_size=64)
    api = rawkube.RawApi(api_client)
    recorder = webhook_samples.Recorder()
    informer = baseline_resource.Informer(api_client, options.namespace)
    informer.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    replica = baseline_admission.WebhookReplica(api, informer, recorder)
    if options.role == "controller":
        controller = baseline_controller.StatusController(api, informer, replica, recorder)
        options.ready.write_text("0")
        controller.run(stop)
        recorder.count("controller_writes", controller.writes)
        recorder.count("controller_cost_patches", controller.cost_patches)
    else:
        book = baseline_admission.SeedBook(informer, [replica])
        admission = baseline_admission.SeedHandler(book, metrics.AgentMetrics(cluster="baseline"), recorder)
        recorder.attach(admission)
        webhook = server.WebhookServer(admission, host="127.0.0.1", port=options.port, cert_file=options.cert,
                                       key_file=options.key, reuse_port=True)
        webhook.start()
        options.ready.write_text(str(webhook.port))
        stop.wait()
        webhook.stop()
    informer.stop()
    recorder.write(options.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
