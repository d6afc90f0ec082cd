"""The stack's resource graph as Mermaid, from the offline plan (`python -m infra.plan --graph [DIR]` writes
DIR/graph.mmd).

- Components are subgraphs; custom resources are nodes inside them.
- An arrow A --> B means B waits for A (its `dependencies`, or A is the provider B is created
  through, drawn dashed); a dependency on a component stands for everything under it.
- Readable, not exhaustive: numbered siblings of one type under one parent collapse into one node
  (`network-rdma-subnet-0..7` -> "network-rdma-subnet ×8", the nine GKENetworkParamSets ->
  "gke-networks-params ×9"), and arrows implied by longer paths are left out (transitive reduction).
- Output is sorted, so the same plan always renders the same text (docs/resources.md embeds the dev one).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.deploy_time import waits

STORAGE_TYPES = {"gcp:lustre/instance:Instance", "gcp:storage/bucket:Bucket"}
_INDEXED = re.compile(r"(-[a-z]+)?-\d+$")


@dataclass
class Node:
    id: str
    label: str
    type: str
    component: str
    """URN of the component the node sits in ('' at top level)."""
    urns: list[str] = field(default_factory=list)


@dataclass
class Cluster:
    id: str
    urn: str
    label: str
    parent: str


@dataclass
class Graph:
    nodes: dict[str, Node]
    clusters: dict[str, Cluster]
    edges: list[tuple[str, str, bool]]
    """(from node id, to node id, dashed = only a provider wait)."""


def _ident(prefix: str, text: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")


def build(plan: Any) -> Graph:
    urns = plan.by_urn()
    clusters: dict[str, Cluster] = {}
    for r in plan.resources:
        if not r.custom:
            clusters[r.urn] = Cluster(
                _ident("c_", r.name),
                r.urn,
                f"{r.name} · {r.type.rsplit(':', 1)[-1]}",
                r.parent if r.parent in urns else "",
            )

    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for r in plan.resources:
        if r.custom:
            parent = r.parent if r.parent in clusters else ""
            groups[(parent, r.type, _INDEXED.sub("", r.name))].append(r)

    nodes: dict[str, Node] = {}
    node_of: dict[str, str] = {}
    for (parent, typ, stem), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        names, many = sorted(m.name for m in members), len(members) > 1
        label = f"{os.path.commonprefix(names).rstrip('-') or stem} ×{len(members)}" if many else names[0]
        node_id = _ident("n_", stem if many else names[0])
        if node_id in nodes:
            node_id = _ident(node_id + "_", typ.rsplit(":", 1)[-1])
        nodes[node_id] = Node(node_id, label, typ, parent, sorted(m.urn for m in members))
        for m in members:
            node_of[m.urn] = node_id

    kinds: dict[tuple[str, str], bool] = {}  # edges between nodes: dashed when only provider waits
    for urn, deps in waits(plan).items():
        for dep in deps:
            a, b = node_of[dep], node_of[urn]
            if a != b:
                kinds[(a, b)] = kinds.get((a, b), True) and dep == urns[urn].provider
    edges = _transitive_reduction(set(kinds))
    used = {c for n in nodes.values() for c in _ancestors(n.component, clusters)}
    clusters = {u: c for u, c in clusters.items() if u in used}
    return Graph(nodes, clusters, sorted((a, b, kinds[(a, b)]) for a, b in edges))


def _ancestors(urn: str, clusters: dict[str, Cluster]) -> list[str]:
    out = []
    while urn:
        out.append(urn)
        urn = clusters[urn].parent if urn in clusters else ""
    return out


def _transitive_reduction(edges: set[tuple[str, str]]) -> set[tuple[str, str]]:
    succ: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        succ[a].add(b)

    def reachable_without(a: str, b: str) -> bool:
        """Is b reachable from a by a path of two or more edges?"""
        seen, stack = set(), [n for n in succ[a] if n != b]
        while stack:
            n = stack.pop()
            if n == b:
                return True
            if n in seen:
                continue
            seen.add(n)
            stack.extend(succ[n])
        return False

    return {(a, b) for a, b in edges if not reachable_without(a, b)}


def mermaid(graph: Graph) -> str:
    sub: dict[str, list[Cluster]] = defaultdict(list)
    for c in sorted(graph.clusters.values(), key=lambda c: c.label):
        sub[c.parent].append(c)
    members: dict[str, list[Node]] = defaultdict(list)
    for n in sorted(graph.nodes.values(), key=lambda n: n.label):
        members[n.component].append(n)
    lines = ["flowchart LR"]

    def walk(parent: str, indent: str) -> None:
        for n in members.get(parent, []):
            text = f"{n.label}<br/>{n.type.rsplit(':', 1)[-1]}".replace('"', "'")
            lines.append(f'{indent}{n.id}[("{text}")]' if n.type in STORAGE_TYPES else f'{indent}{n.id}["{text}"]')
        for c in sub.get(parent, []):
            lines.append(f'{indent}subgraph {c.id}["{c.label}"]')
            walk(c.urn, indent + "  ")
            lines.append(f"{indent}end")

    walk("", "  ")
    for a, b, dashed in graph.edges:
        lines.append(f"  {a} {'-.->' if dashed else '-->'} {b}")
    return "\n".join(lines) + "\n"


def write_graph(plan: Any, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "graph.mmd"
    path.write_text(mermaid(build(plan)))
    return [path]
