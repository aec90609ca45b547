"""What `fedspread demo --keep` prints: how to look at the federation it leaves running.

Why a module: the instructions name real things — the hub's kubeconfig, the coordinator's address
and metrics URL, the certificate files of the demo's SDK user, the Events the coordinator records
on the spread — and a test runs what they say against a running federation (the metrics URL
answers, the Events command lists an Event regarding the demo's spread). So the pieces a test
needs are fields (`Instructions`), and the text is rendered from them.
"""

from __future__ import annotations

import dataclasses

from federation.api import spread
from federation.demo import environment, story


@dataclasses.dataclass(frozen=True)
class Instructions:
    """The commands and addresses `--keep` prints."""

    hub_kubeconfig: str
    coordinator: str
    metrics_url: str
    ca: str
    cert: str
    key: str
    members: tuple[tuple[str, str], ...]
    """(member name, kubeconfig) of every member cluster."""
    logs: str

    @property
    def events_command(self) -> list[str]:
        """`kubectl get events` (after `export KUBECONFIG=<hub>`) for the Events regarding the spread."""
        return ["kubectl", "get", "events", "-n", story.NAMESPACE, "--field-selector",
                f"involvedObject.kind={spread.KIND},involvedObject.name={story.NAME}"]

    def lines(self) -> list[str]:
        """The text, one line each."""
        return [
            "The federation keeps running. Try, in another terminal:",
            f"  export KUBECONFIG={self.hub_kubeconfig}",
            f"  kubectl get federatedspreads,deployments -n {story.NAMESPACE}",
            f"  kubectl scale deployment/{story.NAME} -n {story.NAMESPACE} --replicas=9",
            "Events (what the coordinator did to the spread and why):",
            f"  kubectl describe federatedspread {story.NAME} -n {story.NAMESPACE}   # conditions and Events",
            f"  {' '.join(self.events_command)}",
            "The coordinator's Prometheus metrics:",
            f"  curl -s {self.metrics_url} | grep ^fedspread_coordinator_",
            "Placements over the coordinator's API (mTLS, as the demo's SDK user):",
            f"  export FEDSPREAD_COORDINATOR={self.coordinator} FEDSPREAD_CA={self.ca} "
            f"FEDSPREAD_CERT={self.cert} FEDSPREAD_KEY={self.key}",
            f"  fedspread get placement {story.KEY}",
            "  fedspread get clusters",
            "  python - <<'EOF'",
            "  from federation.sdk import PlacementClient",
            f"  with PlacementClient.with_tls(\"{self.coordinator}\", ca=\"{self.ca}\",",
            f"                                cert=\"{self.cert}\", key=\"{self.key}\") as client:",
            f"      print(client.placement(\"{story.KEY}\").clusters)",
            "  EOF",
            "Pods in the member clusters:",
            *(f"  KUBECONFIG={kubeconfig} kubectl get pods -n {story.NAMESPACE}   # {name}"
              for name, kubeconfig in self.members),
            f"Logs: {self.logs}. Press Ctrl-C to tear everything down.",
        ]

    def text(self) -> str:
        """The text as printed."""
        return "\n".join(self.lines())


def instructions(federation: environment.Federation) -> Instructions:
    """The instructions for a started `federation`."""
    mine = federation.tls(environment.CLIENT)  # the demo's SDK client certificate (mTLS)
    return Instructions(
        hub_kubeconfig=federation.kubeconfig("hub"), coordinator=federation.coordinator_address,
        metrics_url=federation.metrics_url, ca=str(mine.ca), cert=str(mine.cert), key=str(mine.key),
        members=tuple((m.name, federation.kubeconfig(m.name)) for m in federation.members),
        logs=str(federation.logs))
