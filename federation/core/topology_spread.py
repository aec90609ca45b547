"""Skew across cluster topology domains: KEP-895's Pod Topology Spread lifted from nodes to clusters.

Why a module of its own: the admission test, the global minimum and the scale-down test are the
whole contract of `spec.topologySpread`, and `fedspread simulate`, the coordinator and
the tests must read them from one place. The definitions are the KEP's, with a node read as a
member cluster and a node label as a MemberCluster label:

- a **domain** is a value of `topologyKey` among the clusters the spread can select; the key
  `fedspread.io/cluster` makes each cluster its own domain; a cluster without the key is in none;
- a domain is **eligible** when at least one of its clusters is usable for the spread (the caller
  says which: ready, not cordoned for it and, under Adaptive, with room for one more pod);
- the **global minimum** is the smallest count among eligible domains, or 0 when fewer domains
  are eligible than `minDomains` (or none is);
- one more replica in domain d is admitted when `count(d) + 1 - globalMinimum <= maxSkew`.

Unlike the Kubernetes scheduler, the rule is also applied when replicas are removed
(`removal_keeps`): a removal keeps a constraint when the skew after it is within `maxSkew`, or
no worse than before (a skew already above `maxSkew` is never repaired by moving running pods).
Everything here is pure: counts in, answers out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Literal

CLUSTER_KEY = "fedspread.io/cluster"
"""The topology key that makes every cluster its own domain (no label needed)."""

WhenUnsatisfiable = Literal["DoNotSchedule", "ScheduleAnyway"]


@dataclasses.dataclass(frozen=True)
class Constraint:
    """One `spec.topologySpread` entry, as the rules read it."""

    topology_key: str
    max_skew: int
    when_unsatisfiable: WhenUnsatisfiable = "DoNotSchedule"
    min_domains: int | None = None

    @property
    def hard(self) -> bool:
        """DoNotSchedule: a replica that breaks it is not placed."""
        return self.when_unsatisfiable == "DoNotSchedule"

    def describe(self) -> str:
        """How reasons name it: "topologySpread <key> maxSkew N"."""
        return f"topologySpread {self.topology_key} maxSkew {self.max_skew}"


def domain_of(cluster: str, labels: Mapping[str, str], key: str) -> str | None:
    """The cluster's domain for `key`: its label's value, itself for `fedspread.io/cluster`, or None."""
    if key == CLUSTER_KEY:
        return cluster
    return labels.get(key)


def domains_by_cluster(labels: Mapping[str, Mapping[str, str]], key: str) -> dict[str, str | None]:
    """Every cluster's domain for `key` (None: the cluster has no such label)."""
    return {name: domain_of(name, cluster_labels, key) for name, cluster_labels in labels.items()}


def domain_counts(counts: Mapping[str, int], domains: Mapping[str, str | None]) -> dict[str, int]:
    """Replicas per domain: every domain of `domains` (zero when empty); clusters in none are left out."""
    totals: dict[str, int] = {}
    for name, domain in domains.items():
        if domain is not None:
            totals[domain] = totals.get(domain, 0) + counts.get(name, 0)
    return totals


def eligible_domains(domains: Mapping[str, str | None], usable: Iterable[str]) -> set[str]:
    """Domains with at least one usable cluster."""
    return {domain for name in usable if (domain := domains.get(name)) is not None}


def global_minimum(per_domain: Mapping[str, int], eligible: Iterable[str], *, min_domains: int | None) -> int:
    """The smallest count among eligible domains; 0 when fewer than `minDomains` (or none) are eligible."""
    counts = [per_domain.get(domain, 0) for domain in set(eligible)]
    if not counts or len(counts) < (min_domains or 1):
        return 0
    return min(counts)


@dataclasses.dataclass(frozen=True)
class Topology:
    """What every test of one constraint needs: each cluster's domain and which domains are eligible."""

    constraint: Constraint
    domains: Mapping[str, str | None]
    eligible: frozenset[str]

    @classmethod
    def of(cls, constraint: Constraint, *, labels: Mapping[str, Mapping[str, str]],
           usable: Iterable[str]) -> Topology:
        domains = domains_by_cluster(labels, constraint.topology_key)
        eligible = frozenset(eligible_domains(domains, usable))
        return cls(constraint=constraint, domains=domains, eligible=eligible)

    def minimum(self, per_domain: Mapping[str, int]) -> int:
        return global_minimum(per_domain, self.eligible, min_domains=self.constraint.min_domains)

    def skew(self, counts: Mapping[str, int]) -> int:
        """The largest count of any domain minus the global minimum (0 without domains)."""
        per_domain = domain_counts(counts, self.domains)
        if not per_domain:
            return 0
        return max(per_domain.values()) - self.minimum(per_domain)

    def admits(self, cluster: str, counts: Mapping[str, int]) -> bool:
        """One more replica in `cluster` passes the filter (ScheduleAnyway always passes)."""
        if not self.constraint.hard:
            return True
        domain = self.domains.get(cluster)
        if domain is None:
            return False
        per_domain = domain_counts(counts, self.domains)
        return per_domain.get(domain, 0) + 1 - self.minimum(per_domain) <= self.constraint.max_skew

    def skew_if_added(self, cluster: str, counts: Mapping[str, int]) -> int:
        """The skew after one more replica in `cluster` (ScheduleAnyway's preference: smallest first)."""
        if self.domains.get(cluster) is None:
            return self.skew(counts)
        return self.skew({**counts, cluster: counts.get(cluster, 0) + 1})

    def removal_keeps(self, cluster: str, counts: Mapping[str, int]) -> bool:
        """Taking one replica from `cluster` keeps the constraint: the skew after is within `maxSkew`
        or no worse than before. ScheduleAnyway constraints are always kept."""
        if not self.constraint.hard or self.domains.get(cluster) is None:
            return True
        after = self.skew({**counts, cluster: counts.get(cluster, 0) - 1})
        return after <= self.constraint.max_skew or after <= self.skew(counts)

    def domain_count(self, cluster: str, counts: Mapping[str, int]) -> int:
        """The count of the cluster's domain (-1 for a cluster in none: it gives last on removal)."""
        domain = self.domains.get(cluster)
        if domain is None:
            return -1
        return domain_counts(counts, self.domains).get(domain, 0)


def blocking(topologies: Iterable[Topology], cluster: str, counts: Mapping[str, int]) -> Topology | None:
    """The first DoNotSchedule constraint that refuses one more replica in `cluster`, or None."""
    for topology in topologies:
        if not topology.admits(cluster, counts):
            return topology
    return None


def soft_skew(topologies: Iterable[Topology], cluster: str, counts: Mapping[str, int]) -> int:
    """The summed skew of the ScheduleAnyway constraints after one more replica in `cluster`."""
    return sum(t.skew_if_added(cluster, counts) for t in topologies if not t.constraint.hard)
