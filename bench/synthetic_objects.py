"""The objects of the synthesized member cluster (`bench.synthetic_cluster`), built one at a time
from its plan: a Node, a Pod or a Deployment as the apiserver lists it, managed fields and image
lists included.

Why apart from the plan: the plan decides what the cluster holds (a few small numbers per object,
bound where pods fit); these builders only say how each object looks on the wire, and a fake
server calls them page by page, so the whole cluster is never held as JSON.
"""

from __future__ import annotations

from bench.synthetic_cluster import (
    GPU_TAINT,
    IMAGES,
    NODE_KINDS,
    SPOT_TAINT,
    UNSCHEDULABLE_TAINT,
    ZONES,
    Json,
    Plan,
)
from federation.api import names


def node_json(item: Plan, index: int) -> Json:
    """Node `index` as the apiserver lists it (managed fields and image list included)."""
    kind_index, zone, spot, ready, cordoned = item.nodes[index]
    kind = NODE_KINDS[kind_index]
    name = item.node_name(index)
    group = f"ng-{kind.instance_type.replace('.', '-')}-{'spot' if spot else 'od'}"
    labels = {
        "beta.kubernetes.io/arch": kind.arch, "beta.kubernetes.io/instance-type": kind.instance_type,
        "beta.kubernetes.io/os": "linux", "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": group, "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": ZONES[zone], "kubernetes.io/arch": kind.arch,
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": kind.instance_type, "topology.kubernetes.io/region": "eu-west-1",
        "topology.kubernetes.io/zone": ZONES[zone],
    }
    taints = [t for t, on in ((GPU_TAINT, kind.gpus), (SPOT_TAINT, spot), (UNSCHEDULABLE_TAINT, cordoned))
              if on]
    capacity = {"cpu": kind.cpu, "memory": kind.memory, "pods": kind.pods, "ephemeral-storage": "104845292Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    allocatable = {**capacity, "cpu": kind.allocatable_cpu, "memory": kind.allocatable_memory,
                   "ephemeral-storage": "95551679124"}
    if kind.gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(kind.gpus)
    stamp = "2025-01-01T10:00:00Z"
    address = f"10.0.{index // 256 % 256}.{index % 256}"
    conditions = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": f"kubelet has {r.lower()}",
         "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
        for t, r in (("MemoryPressure", "SufficientMemory"), ("DiskPressure", "NoDiskPressure"),
                     ("PIDPressure", "SufficientPID"))
    ]
    conditions.append({"type": "Ready", "status": "True" if ready else "Unknown",
                       "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                       "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting",
                       "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})
    spec: Json = {"providerID": f"aws:///{ZONES[zone]}/i-{index:017x}", "podCIDR": f"10.{index % 250}.0.0/24"}
    if taints:
        spec["taints"] = taints
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {
            "name": name, "uid": f"{index:08x}-0000-4000-8000-{index:012x}",
            "resourceVersion": str(10_000 + index), "creationTimestamp": stamp, "labels": labels,
            "annotations": {"alpha.kubernetes.io/provided-node-ip": address,
                            "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": stamp,
                               "fieldsType": "FieldsV1", "subresource": "status",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:images": {}}}}],
        },
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable, "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": address},
                          {"type": "Hostname", "address": name}, {"type": "InternalDNS", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": f"{index:032x}", "systemUUID": f"ec2{index:029x}",
                         "bootID": f"{index:032x}", "kernelVersion": "6.1.94-99.176.amzn2023.x86_64",
                         "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://1.7.11",
                         "kubeletVersion": "v1.30.2-eks", "kubeProxyVersion": "v1.30.2-eks",
                         "operatingSystem": "linux", "architecture": kind.arch},
            "images": [{"names": [f"{image}@sha256:{i:064x}", image], "sizeBytes": 50_000_000 + i * 1_000_003}
                       for i, image in enumerate(IMAGES[(index % 8):(index % 8) + 16])],
        },
    }


def pod_json(item: Plan, index: int) -> Json:
    """Pod `index` as the apiserver lists it."""
    workload_index, ordinal, node, phase = item.pods[index]
    workload = item.workloads[workload_index]
    stamp = "2025-01-01T11:00:00Z"
    template_hash = f"{workload_index * 7919 % 10**10:010d}"[:10]
    name = (f"{workload.name}-{ordinal:05x}" if workload.daemon
            else f"{workload.name}-{template_hash[:9]}-{ordinal:05x}")
    labels = {"app.kubernetes.io/name": workload.name, "app.kubernetes.io/part-of": workload.namespace}
    annotations = {"kubectl.kubernetes.io/default-container": workload.containers[0]["name"]}
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet" if workload.daemon else "ReplicaSet",
             "name": workload.name if workload.daemon else f"{workload.name}-{template_hash[:9]}",
             "uid": f"{workload_index:08x}-1111-4000-8000-{workload_index:012x}", "controller": True,
             "blockOwnerDeletion": True}
    if not workload.daemon:
        labels["pod-template-hash"] = template_hash[:9]
    if workload.spread:
        labels[names.SPREAD_LABEL] = workload.spread
        annotations[names.SUBSET_ANNOTATION] = ("onprem", "cloud")[ordinal % 2]
        annotations[names.DELETION_COST_ANNOTATION] = str(100 - ordinal % 100)
    spec: Json = {
        "containers": list(workload.containers), "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
        "terminationGracePeriodSeconds": 30, "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "securityContext": {}, "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}],
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
    }
    if workload.init_containers:
        spec["initContainers"] = list(workload.init_containers)
    if workload.gpu:
        spec["tolerations"].append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "g5.2xlarge"}
    status: Json = {"phase": phase, "qosClass": "Burstable"}
    if node >= 0:
        spec["nodeName"] = item.node_name(node)
        running = phase == "Running"
        status.update({
            "hostIP": f"10.0.{node // 256 % 256}.{node % 256}",
            "podIP": f"10.1.{index // 256 % 256}.{index % 256}", "startTime": stamp,
            "conditions": [{"type": t, "status": "True" if running or t == "PodScheduled" else "False",
                            "lastProbeTime": None, "lastTransitionTime": stamp}
                           for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
            "containerStatuses": [
                {"name": c["name"], "image": c["image"], "imageID": f"{c['image']}@sha256:{index:064x}",
                 "containerID": f"containerd://{index:064x}", "ready": running, "restartCount": index % 3,
                 "started": running, "state": {"running": {"startedAt": stamp}} if running else
                 {"waiting": {"reason": "ContainerCreating"}}}
                for c in workload.containers],
        })
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/5000 nodes are available: insufficient cpu.",
                                 "lastProbeTime": None, "lastTransitionTime": stamp}]
    return {
        "metadata": {
            "name": name, "generateName": name[:-5], "namespace": workload.namespace,
            "uid": f"{index:08x}-2222-4000-8000-{index:012x}", "resourceVersion": str(100_000 + index),
            "creationTimestamp": stamp, "labels": labels, "annotations": annotations,
            "ownerReferences": [owner],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": stamp, "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {}, "f:ownerReferences": {}}}},
                              {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": stamp,
                               "fieldsType": "FieldsV1", "subresource": "status",
                               "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {}}}}],
        },
        "spec": spec,
        "status": status,
    }


def deployment_json(item: Plan, index: int) -> Json:
    """Workload `index` (a spread's member Deployment) as the apiserver lists it."""
    workload = item.workloads[index]
    replicas = 20 + index % 30
    return {
        "metadata": {"name": workload.name, "namespace": workload.namespace,
                     "uid": f"{index:08x}-3333-4000-8000-{index:012x}",
                     "resourceVersion": str(500_000 + index), "generation": 3,
                     "labels": {names.SPREAD_LABEL: workload.spread},
                     "annotations": {names.GENERATION_ANNOTATION: "3", "fedspread.io/template-hash": "abc123",
                                     "deployment.kubernetes.io/revision": "2"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": list(workload.containers)}}},
        "status": {"observedGeneration": 3, "replicas": replicas, "readyReplicas": replicas,
                   "updatedReplicas": replicas, "availableReplicas": replicas},
    }
