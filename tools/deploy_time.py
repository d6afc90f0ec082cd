"""How long a first `pulumi up` of a stack takes: typical creation times per resource type, and the
critical path through the plan's dependency graph.

A resource starts when everything it waits for is created: its `dependencies` (explicit
`depends_on` and those implied by inputs) and the provider it is created through (the Kubernetes
provider needs the cluster endpoint). A dependency on a component means all custom resources
under it. Components themselves create nothing: parenthood is not a wait, and a component costs
no time. With Pulumi's default unbounded parallelism the expected `pulumi up` duration is the
longest chain of creation times, the critical path.

The times are typical values for a quiet project with quota in place, not guarantees. A spot GPU
pool can wait for capacity far longer (the program allows 120 minutes, FACTS.md); the first image
pull dominates the Ray pods.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

NODE_POOL = "gcp:container/nodePool:NodePool"
MILESTONE_TYPES = (NODE_POOL, "gcp:container/cluster:Cluster", "gcp:lustre/instance:Instance")


@dataclass(frozen=True)
class Typical:
    minutes: float
    basis: str


# Typical creation time per resource type, and why.
CREATION_MINUTES: dict[str, Typical] = {
    "gcp:compute/network:Network": Typical(0.5, "VPC insert is a global operation of ~20-40 s"),
    "gcp:compute/subnetwork:Subnetwork": Typical(0.5, "regional subnet insert, ~20-30 s"),
    "gcp:compute/firewall:Firewall": Typical(0.25, "firewall rule insert, ~10-15 s"),
    "gcp:compute/globalAddress:GlobalAddress": Typical(0.25, "reserving the PSA range, ~10 s"),
    "gcp:servicenetworking/connection:Connection": Typical(
        2.0, "private services access peering: the servicenetworking operation takes 1-3 minutes"
    ),
    "gcp:lustre/instance:Instance": Typical(
        25.0, "Managed Lustre create is a long-running operation of tens of minutes (the program allows 90)"
    ),
    "gcp:container/cluster:Cluster": Typical(
        8.0, "GKE Standard control plane with the default pool removed: typically 6-10 minutes"
    ),
    "gcp:storage/bucket:Bucket": Typical(0.1, "bucket insert, seconds"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": Typical(0.5, "IAM policy read-modify-write plus propagation"),
    "gcp:compute/router:Router": Typical(0.25, "Cloud Router insert, ~10-20 s"),
    "gcp:compute/routerNat:RouterNat": Typical(0.5, "Cloud NAT is a patch of the router, ~20-40 s"),
    "gcp:serviceaccount/account:Account": Typical(0.1, "service account insert, seconds"),
    "gcp:projects/iAMMember:IAMMember": Typical(0.5, "project IAM policy read-modify-write plus propagation"),
    "gcp:projects/serviceIdentity:ServiceIdentity": Typical(0.1, "generateServiceIdentity returns the existing agent"),
    "pulumi-python:dynamic/nemo-rl-gke:LustreGuard": Typical(
        0.0, "no API call unless lustre.importFrom is set (then as long as the import: infra/lustre_guard.py)"
    ),
    "pulumi:providers:kubernetes": Typical(0.0, "a provider is configured, not created"),
    "kubernetes:core/v1:Namespace": Typical(0.1, "API call"),
    "kubernetes:core/v1:ServiceAccount": Typical(0.05, "API call"),
    "kubernetes:core/v1:Secret": Typical(0.05, "API call"),
    "kubernetes:core/v1:PersistentVolume": Typical(0.05, "API call (static PV)"),
    "kubernetes:core/v1:PersistentVolumeClaim": Typical(0.2, "Pulumi waits for the claim to bind to the static PV"),
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": Typical(0.1, "API call; GKE reconciles it in seconds"),
    "kubernetes:networking.gke.io/v1:Network": Typical(0.1, "API call; GKE reconciles it in seconds"),
    "kubernetes:apps/v1:DaemonSet": Typical(
        2.0, "Pulumi waits for the rollout: the gIB plugin image pull and copy on every GPU node"
    ),
    "gcp:logging/metric:Metric": Typical(0.1, "log-based metric create, seconds (infra/observability.py)"),
    "gcp:monitoring/dashboard:Dashboard": Typical(0.1, "dashboard create, seconds"),
    "kubernetes:core/v1:ConfigMap": Typical(0.05, "API call"),
    "kubernetes:apps/v1:Deployment": Typical(
        0.25,
        "Pulumi waits for the rollout: the preemption watcher starts in seconds, on the Ray head's node whose "
        "image it shares (infra/watcher_deployment.py)",
    ),
    "kubernetes:helm.sh/v3:Release": Typical(
        12.0,
        "Ray head and worker pods pull the ~20 GB NeMo-RL image (~5-10 min at 50-100 MB/s incl. "
        "extraction) and start; if Helm does not wait on the RayCluster CR (infra/ray_cluster.py), "
        "the same wait moves to the job submission, still on the path",
    ),
}
GPU_NODE_POOL = Typical(
    15.0,
    "A4/A3 Ultra nodes boot COS, install the GPU driver and attach 9 extra NICs: ~10-15 min when "
    "capacity is there; waiting for spot capacity can take far longer (the program allows 120 min)",
)
CPU_NODE_POOL = Typical(4.0, "a small CPU node pool: 3-5 minutes")
DYNAMIC_RESOURCE = Typical(1.0, "the job submission: one Ray Job API call once the head answers")
UNKNOWN = Typical(0.5, "type not in the table: assumed")
COMPONENT = Typical(0.0, "a component creates nothing")


RAY_RELEASE = "kubernetes:helm.sh/v3:Release"
AUTOPILOT_RAY_RELEASE = Typical(
    CREATION_MINUTES[RAY_RELEASE].minutes + GPU_NODE_POOL.minutes,
    "on Autopilot no node pool exists beforehand: GKE creates the GPU nodes only once the Ray worker pods "
    f"ask for them ({GPU_NODE_POOL.basis}), then the pods pull the image ({CREATION_MINUTES[RAY_RELEASE].basis})",
)


def typical(resource: Any, autopilot: bool = False) -> Typical:
    """The typical creation time of a plan resource; `autopilot`: the plan's cluster is Autopilot."""
    if not resource.custom:
        return COMPONENT
    if autopilot and resource.type == RAY_RELEASE:
        return AUTOPILOT_RAY_RELEASE
    if resource.type == NODE_POOL:
        accelerators = (resource.inputs.get("nodeConfig") or {}).get("guestAccelerators") or []
        return GPU_NODE_POOL if accelerators else CPU_NODE_POOL
    if resource.type.startswith("pulumi-python:dynamic") and resource.type not in CREATION_MINUTES:
        return DYNAMIC_RESOURCE
    return CREATION_MINUTES.get(resource.type, UNKNOWN)


@dataclass(frozen=True)
class Step:
    name: str
    type: str
    minutes: float
    start: float
    finish: float
    basis: str


@dataclass
class DeployEstimate:
    total_minutes: float
    critical_path: list[Step]
    finish_by_name: dict[str, float] = field(default_factory=dict)
    unknown_types: list[str] = field(default_factory=list)
    milestones: dict[str, float] = field(default_factory=dict)
    """When the long-running resources (cluster, node pools, Lustre) are ready, in minutes."""

    def to_json(self) -> dict[str, Any]:
        return {
            "expectedMinutes": round(self.total_minutes, 1),
            "criticalPath": [
                {"name": s.name, "type": s.type, "minutes": s.minutes, "startMinute": round(s.start, 2), "finishMinute": round(s.finish, 2)}
                for s in self.critical_path
            ],
            "milestones": {k: round(v, 1) for k, v in self.milestones.items()},
            "unknownTypes": list(self.unknown_types),
            "assumptions": "typical creation times (tools/deploy_time.py), unbounded parallelism, capacity and quota available",
        }


def waits(plan: Any) -> dict[str, set[str]]:
    """URN -> URNs of the custom resources it waits for (dependencies + provider; components expanded)."""
    urns = plan.by_urn()
    children: dict[str, list[str]] = {}
    for r in plan.resources:
        children.setdefault(r.parent, []).append(r.urn)

    def custom_under(urn: str) -> set[str]:
        out: set[str] = set()
        stack = [urn]
        while stack:
            for child in children.get(stack.pop(), []):
                if urns[child].custom:
                    out.add(child)
                stack.append(child)
        return out

    result: dict[str, set[str]] = {}
    for r in plan.resources:
        if not r.custom:
            continue
        deps: set[str] = set()
        for dep in [*r.dependencies, r.provider]:
            target = urns.get(dep)
            if target is None or dep == r.urn:
                continue
            deps |= {dep} if target.custom else custom_under(dep)
        deps.discard(r.urn)
        result[r.urn] = deps
    return result


def estimate(plan: Any) -> DeployEstimate:
    from tools.autopilot_plan import is_autopilot

    autopilot = is_autopilot(plan)
    urns = plan.by_urn()
    graph = waits(plan)
    finish: dict[str, float] = {}
    came_from: dict[str, Optional[str]] = {}
    visiting: set[str] = set()

    def visit(urn: str) -> float:
        if urn in finish:
            return finish[urn]
        if urn in visiting:  # a cycle cannot happen in a valid plan; do not recurse forever
            return 0.0
        visiting.add(urn)
        start, prev = 0.0, None
        for dep in sorted(graph.get(urn, ())):
            f = visit(dep)
            if f > start:
                start, prev = f, dep
        visiting.discard(urn)
        finish[urn] = start + typical(urns[urn], autopilot).minutes
        came_from[urn] = prev
        return finish[urn]

    for urn in graph:
        visit(urn)
    if not finish:
        return DeployEstimate(0.0, [])
    last = max(finish, key=lambda u: (finish[u], u))
    path: list[Step] = []
    cur: Optional[str] = last
    while cur is not None:
        r = urns[cur]
        t = typical(r, autopilot)
        path.append(Step(r.name, r.type, t.minutes, finish[cur] - t.minutes, finish[cur], t.basis))
        cur = came_from[cur]
    path.reverse()
    unknown = sorted({urns[u].type for u in graph if typical(urns[u], autopilot) is UNKNOWN})
    milestones = {urns[u].name: f for u, f in finish.items() if urns[u].type in MILESTONE_TYPES}
    return DeployEstimate(finish[last], path, {urns[u].name: f for u, f in finish.items()}, unknown, milestones)


def render(est: DeployEstimate) -> list[str]:
    lines = [f"Deploy time (first `pulumi up`, typical creation times): ~{est.total_minutes:.0f} min along the critical path"]
    for step in est.critical_path:
        if step.minutes == 0:
            continue
        lines.append(f"  {step.finish:6.1f} min  {step.name:<28} {'+' + format(step.minutes, 'g'):>6} min  {step.type.rsplit(':', 1)[-1]}")
    off_path = {name: t for name, t in est.milestones.items() if name not in {s.name for s in est.critical_path}}
    if off_path:
        lines.append("  off the path, ready at: " + ", ".join(f"{name} {t:.1f} min" for name, t in sorted(off_path.items(), key=lambda kv: kv[1])))
    if est.unknown_types:
        lines.append(f"  assumed {UNKNOWN.minutes:g} min each for types not in the table: {', '.join(est.unknown_types)}")
    lines.append("  a spot GPU pool can wait far longer for capacity; the program allows 120 min")
    return lines
