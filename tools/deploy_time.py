"""How long a first `pulumi up` takes until the job is submitted: typical creation times per resource type, and
the critical path through the plan's waits (`dependencies` and the provider; a dependency on a component means
every custom resource under it; components take no time). Pulumi's parallelism is unbounded, so the expected
duration is the longest chain. Node pools of one cluster are created concurrently: GKE "Add and manage node
pools" (one pool can be created while another is), and terraform-provider-google-beta
resource_container_node_pool.go locks the cluster for read and only the pool's own name for write.

Every figure says where it comes from (`Typical.source`): a published one, or `ASSUMED`; values for a quiet
project with quota in place, not guarantees. How the GPU nodes arrive (cold, warm, just in time), their figures and
the three-way comparison are tools/gpu_arrival.py's; this module puts them on the path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from infra import jit_gpu_nodes as jit
from infra import weight_staging
from tools.gpu_arrival import (
    ASSUMED,
    DAEMONSET,
    GPU_SCALE_UP,
    IMAGE_CACHE_PULL,
    IMAGE_COMPRESSED_GB,
    IMAGE_PULL,
    LUSTRE_P99,
    MIRROR,
    NODE_POOL,
    PULL_RATE_MB_PER_S,
    STREAM_READ_MINUTES,
    WARMUP_JOB,
    ArrivalTiming,
    GpuArrival,
    Typical,
    gpu_arrival,
    is_gpu_warmup,
    is_image_prepull,
    is_jit_timer,
    pull_name,
    timing_json,
)
from workloads.gate import GatePlan, estimated_seconds
from workloads.run_owner import GateSetup

MILESTONE_TYPES = (NODE_POOL, "gcp:container/cluster:Cluster", "gcp:lustre/instance:Instance")


# Typical creation time per resource type, and why.
CREATION_MINUTES: dict[str, Typical] = {
    "gcp:projects/service:Service": Typical(
        1.0, "enabling an API is a Service Usage operation of seconds to a minute or two (instant when already on)"
    ),
    "gcp:compute/network:Network": Typical(0.5, "VPC insert is a global operation of ~20-40 s"),
    "gcp:compute/subnetwork:Subnetwork": Typical(0.5, "regional subnet insert, ~20-30 s"),
    "gcp:compute/firewall:Firewall": Typical(0.25, "firewall rule insert, ~10-15 s"),
    "gcp:compute/globalAddress:GlobalAddress": Typical(0.25, "reserving the PSA range, ~10 s"),
    "gcp:servicenetworking/connection:Connection": Typical(
        2.0, "private services access peering: the servicenetworking operation takes 1-3 minutes"
    ),
    "gcp:lustre/instance:Instance": Typical(
        jit.LUSTRE_CREATE_MINUTES,
        "Managed Lustre create: P99 40-80 minutes per the provider's maintainers; 60 is that band's middle "
        "(no median is published). The program allows 120 (infra/storage.py LUSTRE_TIMEOUTS)",
        LUSTRE_P99,
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
        0.0,
        "no API call unless lustre.importFrom is set (then as long as the import: infra/lustre_guard.py)",
        "infra/lustre_guard.py (no call without lustre.importFrom)",
    ),
    "pulumi:providers:kubernetes": Typical(
        0.0, "a provider is configured, not created", "Pulumi: providers create nothing"
    ),
    "kubernetes:core/v1:Namespace": Typical(0.1, "API call"),
    "kubernetes:core/v1:ServiceAccount": Typical(0.05, "API call"),
    "kubernetes:core/v1:Secret": Typical(0.05, "API call"),
    "kubernetes:core/v1:PersistentVolume": Typical(0.05, "API call (static PV)"),
    "kubernetes:core/v1:PersistentVolumeClaim": Typical(0.2, "Pulumi waits for the claim to bind to the static PV"),
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": Typical(0.1, "API call; GKE reconciles it in seconds"),
    "kubernetes:networking.gke.io/v1:Network": Typical(0.1, "API call; GKE reconciles it in seconds"),
    "kubernetes:cloud.google.com/v1:ComputeClass": Typical(
        0.1, "API call; the autoscaler reads the class when pods ask for it"
    ),
    DAEMONSET: Typical(2.0, "Pulumi waits for the rollout: the gIB plugin image pull and copy on every GPU node"),
    "gcp:logging/metric:Metric": Typical(0.1, "log-based metric create, seconds (infra/observability.py)"),
    "gcp:monitoring/dashboard:Dashboard": Typical(0.1, "dashboard create, seconds"),
    MIRROR: Typical(0.2, "Artifact Registry repository create, seconds (the image is cached on its first pull)"),
    "kubernetes:core/v1:ConfigMap": Typical(0.05, "API call"),
    # The watcher's gang-wait grants (infra/watcher_deployment.py): plain API objects, nothing to wait for.
    "kubernetes:rbac.authorization.k8s.io/v1:Role": Typical(0.05, "API call"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": Typical(0.05, "API call"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": Typical(0.05, "API call"),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": Typical(0.05, "API call"),
    "kubernetes:scheduling.k8s.io/v1:PriorityClass": Typical(0.05, "API call (the placeholders' priority)"),
    "kubernetes:apps/v1:Deployment": Typical(
        0.25,
        "Pulumi waits for the rollout: the preemption watcher starts in seconds, on the Ray head's node whose "
        "image it shares (infra/watcher_deployment.py)",
    ),
    "kubernetes:helm.sh/v3:Release": Typical(
        1.5,
        "Helm installs one RayCluster; the head and worker pods start warm from the pre-pulled image "
        "(infra/image_prepull.py), run `ray start` and register (if Helm does not wait on the custom "
        "resource, the same wait moves to the job submission, still on the path)",
    ),
}
GPU_POOL_EMPTY = Typical(
    3.0, "an autoscaled GPU pool is created empty (0 nodes, infra/cluster.py): the node pool operation only"
)
GPU_NODE_POOL = Typical(
    15.0,
    "A4/A3 Ultra nodes boot COS, install the GPU driver and attach 9 extra NICs: ~10-15 min when "
    "capacity is there; waiting for spot capacity can take far longer (the program allows 120 min)",
)
CPU_NODE_POOL = Typical(4.0, "a small CPU node pool: 3-5 minutes")
DYNAMIC_RESOURCE = Typical(1.0, "the job submission: one Ray Job API call once the head answers")
UNKNOWN = Typical(0.5, "type not in the table: assumed")
COMPONENT = Typical(0.0, "a component creates nothing", "Pulumi: components create nothing")


def is_weight_staging(resource: Any) -> bool:
    """The Job that fetches the recipe's model into the bucket while Lustre is created (infra/weight_staging.py)."""
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return resource.type == WARMUP_JOB and labels.get("app.kubernetes.io/component") == weight_staging.NAME


def staging_typical(resource: Any) -> Typical:
    """The first download of the model (a later one finds the marker: seconds)."""
    notes = (resource.inputs.get("metadata") or {}).get("annotations") or {}
    nbytes = int(notes[weight_staging.BYTES_ANNOTATION])
    return Typical(
        weight_staging.download_minutes(nbytes),
        "the weights fetched once, on CPU, into the bucket while Lustre is created: "
        f"{notes[weight_staging.MODEL_ANNOTATION]} ~{nbytes / 1e9:,.0f} GB (bf16) at "
        f"~{weight_staging.HF_DOWNLOAD_MB_PER_S:g} MB/s; no attempt downloads them",
        f"{ASSUMED}; the rate is weight_staging.HF_DOWNLOAD_MB_PER_S",
    )


WEIGHTS_IMPORT = "pulumi-python:dynamic/nemo-rl-gke:WeightsImport"


def import_typical(resource: Any) -> Typical:
    """Lustre's import of the staged model into the HF cache: before the submission, beside the Ray release."""
    nbytes, rate = float(resource.inputs["model_bytes"]), float(resource.inputs["lustre_mb_per_s"])
    return Typical(
        weight_staging.import_minutes(nbytes, rate),
        f"Managed Lustre imports the staged ~{nbytes / 1e9:,.0f} GB from the bucket at up to "
        f"{min(rate, weight_staging.IMPORT_MAX_MB_PER_S):,.0f} MB/s (the instance's throughput, 100 GB/s at most), "
        f"plus {weight_staging.IMPORT_START_MINUTES:g} min for the operation",
        "https://cloud.google.com/managed-lustre/docs/transfer-data (Performance); the operation's minute assumed",
    )


PLACEHOLDER_JOB = Typical(0.05, "API call; its nodes' time is the GPU arrival's (`GpuArrival`)")
JIT_TIMER = Typical(0.05, "API call: `pulumi up` does not wait for the timer (skipAwait)")
RAY_RELEASE = "kubernetes:helm.sh/v3:Release"
AUTOPILOT_RAY_RELEASE = Typical(
    CREATION_MINUTES[RAY_RELEASE].minutes + GPU_NODE_POOL.minutes + IMAGE_PULL.minutes,
    "on Autopilot no node exists beforehand: GKE creates the GPU nodes only once the Ray worker pods ask for "
    f"them ({GPU_NODE_POOL.basis}), the pods then pull the image ({IMAGE_PULL.basis}; no pre-pull: there "
    "are no nodes to pull onto before the pods) and start",
    f"{ASSUMED}; the pull as IMAGE_PULL",
)


JOB_SUBMISSION = "pulumi-python:dynamic/nemo-rl-gke:JobSubmission"
GATE_STEP = "acceptance-gate"
GATE_TYPE = "nemo-rl-gke:workloads:AcceptanceGate"
GATE_BASIS = "GPUs, fabric busbw and Lustre throughput on every worker node (workloads/gate/)"
GATE_SOURCE = (
    "workloads/gate/checklist.estimated_seconds: 60 s to start the job, actors and per-GPU processes "
    f"({ASSUMED}), plus the collective and the Lustre write and read moved at the rates of data/acceptance_gate.yaml"
)


def gate_minutes(resource: Any) -> float:
    """Minutes of the acceptance gate the job submission runs first (`workloads.gate.estimated_seconds`); 0 when
    none runs, by the hook's one "gate off" rule (`GateSetup.of`), so a gate is counted exactly when it runs."""
    plan = resource.inputs.get("gate_plan") if resource.type == JOB_SUBMISSION else None
    gate = GateSetup.of(resource.inputs.get("gate_policy"), GatePlan.from_dict(plan) if plan else None)
    return round(estimated_seconds(gate.plan) / 60, 1) if gate.plan is not None else 0.0  # no plan when off


def typical(resource: Any, autopilot: bool = False, arrival: Optional[GpuArrival] = None) -> Typical:
    """The typical creation time of a plan resource; `autopilot`: the plan's cluster is Autopilot; `arrival`:
    how a Standard cluster's GPU nodes come (`gpu_arrival`)."""
    if not resource.custom:
        return COMPONENT
    if autopilot and resource.type == RAY_RELEASE:
        return AUTOPILOT_RAY_RELEASE
    if arrival is not None and resource.type == RAY_RELEASE and arrival.mode == "cold":
        return Typical(
            CREATION_MINUTES[RAY_RELEASE].minutes + arrival.minutes,
            "the GPU pool starts empty: its nodes come for the pending Ray workers "
            f"({GPU_SCALE_UP.basis}), then pull the image ({arrival.pull.basis}"
            + (", begun by the pre-pull during the driver install" if arrival.overlapped else "")
            + "), then the pods start",
            f"{ASSUMED}; the scale-up as GPU_SCALE_UP, the image as {pull_name(arrival.pull)}",
        )
    if arrival is not None and arrival.jit is not None and is_gpu_warmup(resource):
        return Typical(
            round(arrival.jit.delay_minutes + arrival.minutes, 2),
            f"gpuPool.justInTime: the timer starts the placeholders {arrival.jit.delay_minutes:g} min after its "
            f"creation (Lustre expected ready less the lead, infra/jit_gpu_nodes.py); they bring the GPU nodes "
            f"({GPU_SCALE_UP.basis}) and the image ({arrival.pull.basis}) for when the Ray release starts",
            f"{ASSUMED}; the lead as GPU_SCALE_UP and {pull_name(arrival.pull)}",
        )
    if is_jit_timer(resource):
        return JIT_TIMER
    if is_weight_staging(resource):
        return staging_typical(resource)
    if resource.type == WEIGHTS_IMPORT:
        return import_typical(resource)
    if arrival is None and is_gpu_warmup(resource):
        return PLACEHOLDER_JOB
    if arrival is not None and is_gpu_warmup(resource):
        return Typical(
            arrival.minutes,
            f"gpuPool.warmMinutes: the placeholders bring the GPU nodes ({GPU_SCALE_UP.basis}) and pull the image "
            f"({arrival.pull.basis}) while Lustre is created",
        )
    if resource.type == NODE_POOL:
        accelerators = (resource.inputs.get("nodeConfig") or {}).get("guestAccelerators") or []
        return GPU_POOL_EMPTY if accelerators else CPU_NODE_POOL
    if is_image_prepull(resource):
        return IMAGE_PULL
    if resource.type.startswith("pulumi-python:dynamic") and resource.type not in CREATION_MINUTES:
        gate = gate_minutes(resource)
        if gate:
            return Typical(
                DYNAMIC_RESOURCE.minutes + gate,
                f"the acceptance gate (~{gate:g} min), then {DYNAMIC_RESOURCE.basis}",
                GATE_SOURCE,
            )
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
    source: str


@dataclass
class DeployEstimate:
    total_minutes: float
    critical_path: list[Step]
    finish_by_name: dict[str, float] = field(default_factory=dict)
    unknown_types: list[str] = field(default_factory=list)
    milestones: dict[str, float] = field(default_factory=dict)  # minute the cluster, pools, Lustre are ready
    gpu_nodes_from: Optional[float] = None  # minute the GPU nodes are created (billed from); None on Autopilot
    arrival: Optional[GpuArrival] = None
    timing: Optional["ArrivalTiming"] = None  # what the three ways of GPU arrival compare on; None on Autopilot

    @property
    def gate_minutes(self) -> Optional[float]:
        """The acceptance gate's minutes on the critical path; None without a gate."""
        return next((s.minutes for s in self.critical_path if s.name == GATE_STEP), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "expectedMinutes": round(self.total_minutes, 1),
            "criticalPath": [
                {
                    "name": s.name,
                    "type": s.type,
                    "minutes": s.minutes,
                    "startMinute": round(s.start, 2),
                    "finishMinute": round(s.finish, 2),
                    "basis": s.basis,
                    "source": s.source,
                }
                for s in self.critical_path
            ],
            "milestones": {k: round(v, 1) for k, v in self.milestones.items()},
            "unknownTypes": list(self.unknown_types),
            "gpuNodes": None
            if self.arrival is None
            else {
                "from": self.arrival.mode,
                "createdAtMinute": None if self.gpu_nodes_from is None else round(self.gpu_nodes_from, 1),
                "scaleUpMinutes": GPU_SCALE_UP.minutes,
                "imageMinutes": self.arrival.pull.minutes,
                "imageMinutesAfterDriver": self.arrival.image_after_driver,
                "imageCache": self.arrival.pull is IMAGE_CACHE_PULL,
                "pull": pull_name(self.arrival.pull),
                "imageStreamed": self.arrival.streamed,
                "startupMinutes": self.arrival.startup_minutes,
            },
            **({} if self.timing is None else {"gpuArrival": timing_json(self.timing)}),
            "imagePull": {
                "minutes": IMAGE_PULL.minutes,
                "imageCompressedGb": IMAGE_COMPRESSED_GB,
                "pullRateMbPerS": PULL_RATE_MB_PER_S,
                "basis": IMAGE_PULL.basis,
            },
            "assumptions": "typical creation times (tools/deploy_time.py, each with its source), unbounded "
            "parallelism, node pools created concurrently, capacity and quota available",
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


def _critical_path(
    last: str,
    came_from: dict[str, Optional[str]],
    finish: dict[str, float],
    urns: dict[str, Any],
    autopilot: bool,
    arrival: Any,
) -> list[Step]:
    """The steps from the first resource to `last` along `came_from`; the gate is a step of its own at the
    start of the submission's time."""
    path: list[Step] = []
    cur: Optional[str] = last
    while cur is not None:
        r = urns[cur]
        t = typical(r, autopilot, arrival)
        gate = gate_minutes(r)
        if gate:
            start = finish[cur] - t.minutes
            d = DYNAMIC_RESOURCE
            path.append(Step(r.name, r.type, d.minutes, start + gate, finish[cur], d.basis, d.source))
            path.append(Step(GATE_STEP, GATE_TYPE, gate, start, start + gate, GATE_BASIS, GATE_SOURCE))
        else:
            path.append(Step(r.name, r.type, t.minutes, finish[cur] - t.minutes, finish[cur], t.basis, t.source))
        cur = came_from[cur]
    path.reverse()
    return path


def _gpu_billed_from(
    arrival: Optional[GpuArrival], warmups: list[str], finish: dict[str, float], urns: dict[str, Any]
) -> Optional[float]:
    """The minute the GPU nodes are created: with the warm setting the placeholders'; cold, when the Ray
    release's pending workers bring them; None where the model has no GPU arrival (Autopilot)."""
    if arrival is None:
        return None
    if arrival.mode != "cold" and warmups:
        return min(finish[u] - arrival.minutes for u in warmups)
    install = CREATION_MINUTES[RAY_RELEASE].minutes  # the release's own part, before its workers ask for nodes
    starts = [finish[u] - typical(urns[u], False, arrival).minutes for u in finish if urns[u].type == RAY_RELEASE]
    return min((start + install for start in starts), default=None)


def estimate(plan: Any) -> DeployEstimate:
    from tools.autopilot_plan import is_autopilot

    autopilot = is_autopilot(plan)
    arrival = None if autopilot else gpu_arrival(plan)
    urns = plan.by_urn()
    graph = waits(plan)
    warmups = [u for u in graph if is_gpu_warmup(urns[u])]
    timers = [u for u in graph if is_jit_timer(urns[u])]
    if arrival is not None and arrival.jit is not None:
        # The placeholders start when the timer says (their Typical counts the delay from the timer's creation); the
        # timer's own wait for their creation is an API call, left out so the two do not wait for each other.
        for u in timers:
            graph[u] = graph[u] - set(warmups)
        for u in warmups:
            graph[u] = graph[u] | set(timers)
    if arrival is not None and arrival.mode != "cold":
        # In the model only: the Ray workers start once the warm nodes are there (they take the placeholders' nodes).
        for urn in graph:
            if urns[urn].type == RAY_RELEASE:
                graph[urn] = graph[urn] | set(warmups)
    finish: dict[str, float] = {}
    came_from: dict[str, Optional[str]] = {}

    def visit(urn: str) -> float:  # a resource waits only for those registered before it: no cycles
        if urn in finish:
            return finish[urn]
        start, prev = 0.0, None
        for dep in sorted(graph.get(urn, ())):
            f = visit(dep)
            if f > start:
                start, prev = f, dep
        finish[urn] = start + typical(urns[urn], autopilot, arrival).minutes
        came_from[urn] = prev
        return finish[urn]

    for urn in graph:
        visit(urn)
    if not finish:
        return DeployEstimate(0.0, [])
    last = max(finish, key=lambda u: (finish[u], u))
    path = _critical_path(last, came_from, finish, urns, autopilot, arrival)
    unknown = sorted({urns[u].type for u in graph if typical(urns[u], autopilot, arrival) is UNKNOWN})
    milestones = {
        urns[u].name: f
        for u, f in finish.items()
        if urns[u].type in (*MILESTONE_TYPES, WEIGHTS_IMPORT) or is_image_prepull(urns[u]) or is_weight_staging(urns[u])
    }
    gpu_from = _gpu_billed_from(arrival, warmups, finish, urns)
    if arrival is not None:
        for u in warmups:
            milestones[urns[u].name] = finish[u]
    timing = None if arrival is None else _arrival_timing(plan, arrival, finish, urns, timers, warmups, graph)
    return DeployEstimate(
        finish[last], path, {urns[u].name: f for u, f in finish.items()}, unknown, milestones, gpu_from, arrival, timing
    )


LUSTRE = "gcp:lustre/instance:Instance"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _arrival_timing(
    plan: Any,
    arrival: GpuArrival,
    finish: dict[str, float],
    urns: dict[str, Any],
    timers: list[str],
    warmups: list[str],
    graph: dict[str, set[str]],
) -> Optional[ArrivalTiming]:
    """None where the plan lacks what the comparison reads (no Lustre, claim, release or pre-pull)."""
    from infra.config.gpu_pool import GpuPoolConfig

    def latest(match: Any) -> Optional[float]:
        found = [f for u, f in finish.items() if match(urns[u])]
        return max(found) if found else None

    lustre = latest(lambda r: r.type == LUSTRE)
    claim = latest(lambda r: r.type == PVC)
    release, prepull = latest(lambda r: r.type == RAY_RELEASE), latest(is_image_prepull)
    if None in (lustre, claim, release, prepull):
        return None
    total = max(finish.values())
    pools = prepull - IMAGE_PULL.minutes  # the pre-pull waits for the node pools and the namespace, as they do
    if warmups and arrival.warm:
        pools = min(finish[u] for u in warmups) - arrival.minutes
    if arrival.jit is not None and timers:
        timer_at, delay, hold = min(finish[u] for u in timers), arrival.jit.delay_minutes, arrival.jit.hold_minutes
    else:
        # Where the program would put them: its account, Role, binding, then the Job (three API calls).
        wait = GpuPoolConfig.model_fields["just_in_time_max_wait_minutes"].default
        timing = jit.JitTiming(arrival.minutes, wait)
        timer_at, delay, hold = pools + 3 * JIT_TIMER.minutes, timing.delay_minutes, timing.hold_minutes
    return ArrivalTiming(
        lustre_ready=lustre,
        claim_ready=claim,
        tail=total - release,
        pools_ready=pools,
        timer_at=timer_at,
        delay=delay,
        hold=hold,
        lead=arrival.minutes,
        startup=arrival.startup_minutes,
        install=CREATION_MINUTES[RAY_RELEASE].minutes,
    )


def render(est: DeployEstimate) -> list[str]:
    lines = [
        f"Deploy time (first `pulumi up` to the job's submission, typical times): ~{est.total_minutes:.0f} min along "
        "the critical path"
    ]
    for step in est.critical_path:
        if step.minutes == 0:
            continue
        source = "assumed" if step.source == ASSUMED else step.source.split(" (")[0]
        lines.append(
            f"  {step.finish:6.1f} min  {step.name:<28} {'+' + format(step.minutes, 'g'):>6} min  "
            f"{step.type.rsplit(':', 1)[-1]:<22} [{source}]"
        )
    off_path = {name: t for name, t in est.milestones.items() if name not in {s.name for s in est.critical_path}}
    if off_path:
        lines.append(
            "  off the path, ready at: "
            + ", ".join(f"{name} {t:.1f} min" for name, t in sorted(off_path.items(), key=lambda kv: kv[1]))
        )
    lines.append(f"  image pull: +{IMAGE_PULL.minutes:g} min on every node at once, {IMAGE_PULL.basis} (assumptions)")
    if est.arrival is not None and est.gpu_nodes_from is not None:
        how = {
            "warm": "warm (gpuPool.warmMinutes): the placeholders bring them while Lustre is created",
            "justInTime": "just in time (gpuPool.justInTime): the timer starts the placeholders at the lead time "
            "before Lustre's expected readiness",
            "cold": "cold (gpuPool.justInTime false): they come for the pending Ray workers, after Lustre and the Ray "
            "release",
        }[est.arrival.mode]
        lines.append(
            f"  GPU nodes from minute {est.gpu_nodes_from:.1f}, {how}: +{GPU_SCALE_UP.minutes:g} min scale-up, "
            f"+{est.arrival.image_after_driver:g} min image"
            + (" (from the image cache)" if est.arrival.pull is IMAGE_CACHE_PULL else "")
            + (
                f" (streamed from Artifact Registry; +{STREAM_READ_MINUTES:g} min of NeMo-RL start-up for remote reads)"
                if est.arrival.streamed
                else ""
            )
            + (
                f" (the {est.arrival.pull.minutes:g} min pull begun by the pre-pull during the driver install)"
                if est.arrival.overlapped
                else ""
            )
        )
    if est.unknown_types:
        lines.append(
            f"  assumed {UNKNOWN.minutes:g} min each for types not in the table: {', '.join(est.unknown_types)}"
        )
    lines.append(
        "  [assumed]: no published figure; a spot GPU pool can wait far longer for capacity (the program allows "
        "120 min)"
    )
    return lines
