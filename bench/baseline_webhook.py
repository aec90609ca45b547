"""Kruise's WorkloadSpread admission design, as the admission benchmark's baseline.

Why a faithful copy and not a straw man: the benchmark claims that deciding from a local quota
table beats keeping the quota in an API object, so the baseline must be the design as Kruise's
WorkloadSpread ships it, in our language and on our server stack. Only the decision differs from
fedspread's webhook: the same `WebhookServer`, the same `AdmissionHandler` (parse, name generation,
`mutate_pod`, JSONPatch, encode, and the same latency measurement), with a `Bookkeeping` whose
`admit` keeps the quota in the spread object's status instead of in memory. Its parts:

* `baseline_resource`: the spread as a small custom resource in the member, and the informer that
  keeps watch-fed copies of it and of its pods.
* `baseline_admission`: the webhook's decision — per replica a mutex and a cache per spread, an
  optimistic-lock status update per pod, 409s retried as client-go's `RetryOnConflict` does.
* `baseline_controller`: Kruise's `syncWorkloadSpread` — deletion costs, then the status recounted
  from the pods and written under the leader replica's mutex.
* This module: the process. kruise-manager runs 2 replicas by default and every replica serves
  the webhook behind a Service; the sandbox has no Service routing, so one process holds
  `--replicas` independent replica states and gives each apiserver connection (a server thread) to
  one of them, round-robin, as kube-proxy spreads connections over pods.

Not modelled: Kruise's Deployment-revision handling (the benchmark's pods come from one client,
not a rolling update). `python -m bench.baseline_webhook` serves it until SIGTERM and writes the
handler samples and 409 counts (`webhook_samples`).
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

REPLICAS = 2
"""kruise-manager's default replica count; each replica serves the webhook."""


def main(argv: list[str] | None = None) -> int:
    """Serve the baseline webhook for one namespace until SIGTERM; write its samples at exit."""
    parser = argparse.ArgumentParser(prog="python -m bench.baseline_webhook", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cert", required=True, type=pathlib.Path)
    parser.add_argument("--key", required=True, type=pathlib.Path)
    parser.add_argument("--replicas", type=int, default=REPLICAS)
    parser.add_argument("--samples", required=True, type=pathlib.Path)
    parser.add_argument("--ready", required=True, type=pathlib.Path,
                        help="a file to write the port to once serving")
    options = parser.parse_args(argv)
    logs.configure("warning")
    api_client = rawkube.api_client(options.kubeconfig, pool_size=64)
    api = rawkube.RawApi(api_client)
    recorder = webhook_samples.Recorder()
    informer = baseline_resource.Informer(api_client, options.namespace)
    informer.start()
    replicas = [baseline_admission.WebhookReplica(api, informer, recorder)
                for _ in range(max(1, options.replicas))]
    admission = baseline_admission.SeedHandler(
        baseline_admission.SeedBook(informer, replicas), metrics.AgentMetrics(cluster="baseline"), recorder)
    recorder.attach(admission)
    webhook = server.WebhookServer(admission, host="127.0.0.1", port=0, cert_file=options.cert,
                                   key_file=options.key)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    controller = baseline_controller.StatusController(api, informer, replicas[0], recorder)
    thread = threading.Thread(target=controller.run, args=(stop,), name="controller", daemon=True)
    thread.start()
    webhook.start()
    options.ready.write_text(str(webhook.port))
    stop.wait()
    webhook.stop()
    thread.join(timeout=10)
    informer.stop()
    recorder.count("controller_writes", controller.writes)
    recorder.count("controller_cost_patches", controller.cost_patches)
    recorder.write(options.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
