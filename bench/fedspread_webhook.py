"""`python -m bench.fedspread_webhook`: the real member agent, each admission's handler time recorded.

Why not simply run `fedspread agent`: its admission latency is exported as a Prometheus histogram,
whose buckets cannot give a p99 below a millisecond. This process builds the very same
`agents.main.Agent` from the same settings the command builds (cache, controller loops, link to the
coordinator, webhook registered by URL with its own certificate), attaches a
`webhook_samples.Recorder` to its admission handler, runs until SIGTERM like the command, and
writes the observations to `--samples` on the way out. It runs in its own process, as the agent does in a
cluster, so the benchmark's client threads never share its interpreter lock.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from agents import main as agent_main
from bench import webhook_samples
from federation import logs
from federation.cli import agent as agent_cli


def main(argv: list[str] | None = None) -> int:
    """Run the agent until SIGTERM, then write the recorded samples."""
    parser = argparse.ArgumentParser(prog="python -m bench.fedspread_webhook", description=__doc__)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--kubeconfig", required=True, type=pathlib.Path)
    parser.add_argument("--coordinator", required=True, help="HOST:PORT of the (stand-in) coordinator")
    parser.add_argument("--webhook-name", required=True)
    parser.add_argument("--namespace-label", required=True, help="KEY=VALUE: only these namespaces")
    parser.add_argument("--samples", required=True, type=pathlib.Path)
    parser.add_argument("--switch-interval", type=float, metavar="SECONDS",
                        help="set the interpreter's thread switch interval (CPython's default: 0.005) before "
                             "the agent starts: a candidate change the admission benchmark measures")
    options = parser.parse_args(argv)
    logs.configure("warning")
    settings = agent_main.AgentConfig(
        agent_main.LinkSettings(options.coordinator, options.cluster), kubeconfig=options.kubeconfig,
        webhook=agent_main.WebhookSettings(
            port=0, name=options.webhook_name,
            namespace_selector=agent_cli.label_pairs((options.namespace_label,)), deregister_on_exit=True),
        metrics=agent_main.MetricsSettings(port=0))
    if options.switch_interval is not None:
        sys.setswitchinterval(options.switch_interval)
    recorder = webhook_samples.Recorder()
    try:
        agent = agent_main.Agent(settings)
    except agent_main.AgentError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    recorder.attach(agent.webhook.admission)
    try:
        agent.start()
    except agent_main.AgentError as error:
        agent.stop()
        print(f"error: {error}", file=sys.stderr)
        return 1
    agent.run()
    recorder.write(options.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
