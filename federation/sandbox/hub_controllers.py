"""The hub's kube-controller-manager: namespace deletion, garbage collection, accounts, and the
HorizontalPodAutoscaler controller, with sandbox periods.

Why these and no more: the hub is an apiserver like Karmada's control plane and runs no workload
controllers (a hub Deployment must never get pods), but without namespace deletion a deleted hub
namespace stays Terminating, and the stock HPA controller is how a spread is autoscaled from the hub
(it scales the hub workload's `spec.replicas`, fed by the aggregated external metrics API).

The two HPA periods are sandbox values, not Kubernetes' defaults (15 s sync, 5 minutes of downscale
stabilization): tests and the benchmark would otherwise wait minutes for a scale-down. They are
defined here once; tests and the benchmark import and state them.
"""

from __future__ import annotations

HPA_SYNC_PERIOD_SECONDS = 5
"""`--horizontal-pod-autoscaler-sync-period` on the sandbox hub (Kubernetes' default: 15 s)."""
HPA_DOWNSCALE_STABILIZATION_SECONDS = 20
"""`--horizontal-pod-autoscaler-downscale-stabilization` on the sandbox hub (default: 5 minutes)."""
HUB_CONTROLLERS = ("namespace", "garbagecollector", "serviceaccount", "serviceaccount-token",
                   "clusterrole-aggregation", "horizontalpodautoscaling")


def controller_flags() -> list[str]:
    """The hub controller-manager's flags naming its controllers and the HPA's periods."""
    return [
        f"--controllers={','.join(HUB_CONTROLLERS)}",
        f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD_SECONDS}s",
        f"--horizontal-pod-autoscaler-downscale-stabilization={HPA_DOWNSCALE_STABILIZATION_SECONDS}s",
    ]
