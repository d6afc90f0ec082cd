"""How a Standard cluster's GPU nodes arrive on a first `pulumi up`, and what each way costs before the job: cold
(the pending Ray workers ask for them), warm (`gpuPool.warmMinutes`' placeholders while Lustre is created) or just in
time (`gpuPool.justInTime`: the timer starts the same placeholders at the lead time before Lustre's expected
readiness). It holds the figures of that arrival (the scale-up, the image pull, cached or streamed, NeMo-RL's
start-up), the plan resources that say which way applies (`gpu_arrival`), and the three-way comparison at Lustre's
typical and slow creation (`scenarios`, the plan's `deployTime.gpuArrival`).

The critical path those minutes sit on is tools/deploy_time.py's, which imports this module (never the reverse: no
cycles); `Typical`, the figure with its basis and source both modules use, is defined here for that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from infra import jit_gpu_nodes as jit
from infra.image_prepull import COMPONENT_LABEL as PREPULL_COMPONENT
from infra.naming import GPU_WARMUP
from workloads.goodput import SCALE_DOWN_S

NODE_POOL = "gcp:container/nodePool:NodePool"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
MIRROR = "gcp:artifactregistry/repository:Repository"  # infra/image_mirror.py

ASSUMED = "assumed: no published figure; `pulumi up` shows each resource's duration, which replaces it"
LUSTRE_P99 = (
    "GoogleCloudPlatform/magic-modules PR #14878 (2025-08): the Managed Lustre maintainers put the create "
    "P99 at 40-80 minutes; PR #16046 (2025-12) set google_lustre_instance's create timeout to 120 minutes"
)

# The NeMo-RL image pull, a step of its own (infra/image_prepull.py). Both figures are assumptions,
# stated so they can be checked: the image size is the sum of its compressed layers (`crane manifest
# nvcr.io/nvidia/nemo-rl:<tag>`), the rate is what one node achieves from nvcr.io through Cloud NAT while
# containerd downloads and unpacks one huge layer (`kubectl describe pod`: the Pulled event gives the time).
# The figures the program needs too (the just-in-time lead) live in infra/jit_gpu_nodes.py: one source.
IMAGE_COMPRESSED_GB = jit.IMAGE_COMPRESSED_GB
PULL_RATE_MB_PER_S = jit.PULL_RATE_MB_PER_S


@dataclass(frozen=True)
class Typical:
    minutes: float
    basis: str
    source: str = ASSUMED
    """Where the figure comes from: a published reference, or ASSUMED."""


# The pre-pull DaemonSet's rollout: every node pulls the image in parallel, so one node's pull.
IMAGE_PULL = Typical(
    jit.IMAGE_PULL_MINUTES,
    f"every node pulls the NeMo-RL image in parallel: ~{IMAGE_COMPRESSED_GB:g} GB compressed at "
    f"~{PULL_RATE_MB_PER_S:g} MB/s (download and unpack of one huge layer)",
    f"{ASSUMED}; image size and pull rate are stated assumptions (IMAGE_COMPRESSED_GB, PULL_RATE_MB_PER_S)",
)
IMAGE_CACHE_PULL = Typical(
    jit.IMAGE_NEAR_MINUTES,
    "the NeMo-RL image is on the node's secondary boot disk (gpuPool.imageCacheDiskImage), created in parallel "
    "with the node (GKE 'Use secondary boot disks to preload data or container images'); only the pod start",
    f"{ASSUMED}; GKE publishes no figure for a cached start",
)
STREAM_DOC = "GKE 'Use Image streaming to pull container images' (kubernetes-engine/docs/how-to/image-streaming)"
IMAGE_STREAM_PULL = Typical(
    jit.IMAGE_NEAR_MINUTES,
    "streamed from Artifact Registry (cluster.imageStreaming): GKE starts the container from a remote filesystem "
    "without downloading the whole image, and caches it on the node in the background; the system node's pull "
    "during Lustre's creation was the image's first, so this one is not",
    f"{ASSUMED}; {STREAM_DOC} publishes no start time",
)
STREAM_READ_MINUTES = 3.0
"""Extra start-up on a node whose image streams: NeMo-RL's first imports (torch, the CUDA libraries, vLLM, Megatron)
read many of the image's files remotely; the doc: "If your workloads read many files in an image during
initialization, you might notice increased initialization times because of the latency added by the remote file
reads" (assumed; the pre-pull starts the background download at the node's boot, which may hide part of it). Counted
after the submission: the acceptance gate before it imports torch too, and whether its reads lengthen the gate (each
minute there costs the whole gang before the job) is known only on a real cluster."""
GPU_DRIVER_MINUTES = jit.GPU_DRIVER_MINUTES
"""Of GPU_SCALE_UP, what follows the node's boot: GKE installs the GPU driver (and sets up the extra NICs)
before the node offers `nvidia.com/gpu` to a Ray worker (assumed)."""
GPU_SCALE_UP = Typical(
    jit.GPU_BOOT_MINUTES + GPU_DRIVER_MINUTES,
    "the autoscaler adds the GPU nodes for pending pods: a new node boots in ~80-120 s (GKE 'Provision extra "
    "compute capacity for rapid Pod scaling'), then GKE installs the GPU driver and attaches the extra NICs "
    f"(assumed ~{GPU_DRIVER_MINUTES:g} min); spot capacity can take far longer",
    "GKE capacity-provisioning page (boot); the driver and NIC share assumed",
)
NEMO_RL_STARTUP = Typical(
    10.0,
    "NeMo-RL from the job's start to its first step: Ray actors, vLLM and the policy workers start, the model "
    "loads from the Hugging Face cache on Lustre (a checkpoint on a resume)",
)


def is_image_prepull(resource: Any) -> bool:
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return resource.type == DAEMONSET and labels.get("app.kubernetes.io/component") == PREPULL_COMPONENT


WARMUP_JOB = "kubernetes:batch/v1:Job"


def is_gpu_warmup(resource: Any) -> bool:
    """The `gpuPool.warmMinutes` placeholder Job (infra/image_prepull.py)."""
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return resource.type == WARMUP_JOB and labels.get("app.kubernetes.io/component") == GPU_WARMUP


def is_jit_timer(resource: Any) -> bool:
    """The just-in-time timer Job (`gpuPool.justInTime`, infra/jit_gpu_nodes.py)."""
    labels = (resource.inputs.get("metadata") or {}).get("labels") or {}
    return resource.type == WARMUP_JOB and labels.get("app.kubernetes.io/component") == jit.TIMER


@dataclass(frozen=True)
class JitPlan:
    """The program's just-in-time timing as the plan holds it (the timer Job's annotations, in seconds)."""

    delay_minutes: float
    hold_minutes: float

    @classmethod
    def from_timer(cls, resource: Any) -> "JitPlan":
        notes = (resource.inputs.get("metadata") or {}).get("annotations") or {}
        return cls(round(int(notes[jit.DELAY_ANNOTATION]) / 60, 2), round(int(notes[jit.HOLD_ANNOTATION]) / 60, 2))


def gpu_pools(plan: Any) -> list[Any]:
    return [
        r for r in plan.resources if r.type == NODE_POOL and (r.inputs.get("nodeConfig") or {}).get("guestAccelerators")
    ]


@dataclass(frozen=True)
class GpuArrival:
    """How a Standard cluster's GPU nodes come (every GPU pool autoscales from 0): cold, for the pending Ray
    workers; warm (`gpuPool.warmMinutes`), for the placeholders while Lustre is created; or just in time
    (`gpuPool.justInTime`), for the same placeholders started by the timer at the lead time before Lustre."""

    warm: bool
    pull: Typical
    prepull: bool = False
    """The image pre-pull DaemonSet runs on the GPU nodes (infra/image_prepull.py): its pod asks for no GPU, so it
    pulls from the node's boot on, during the driver install a Ray worker must wait for."""
    jit: Optional[JitPlan] = None

    @property
    def mode(self) -> str:
        """`warm`, `justInTime` or `cold`: the plan's `gpuNodes`."""
        return "warm" if self.warm else "justInTime" if self.jit is not None else "cold"

    @property
    def streamed(self) -> bool:
        return self.pull is IMAGE_STREAM_PULL

    @property
    def startup_minutes(self) -> float:
        """NeMo-RL's start-up on these nodes: `NEMO_RL_STARTUP`, plus the remote reads when the image streams."""
        return NEMO_RL_STARTUP.minutes + (STREAM_READ_MINUTES if self.streamed else 0.0)

    @property
    def overlapped(self) -> bool:
        """The pre-pull pulls the image (not the cache's start) on the new node during its driver install."""
        return self.prepull and self.pull is IMAGE_PULL

    @property
    def image_after_driver(self) -> float:
        """Minutes of the image left once the node offers its GPUs: the pull less what the pre-pull did meanwhile."""
        return round(max(0.0, self.pull.minutes - (GPU_DRIVER_MINUTES if self.overlapped else 0.0)), 1)

    @property
    def minutes(self) -> float:
        return GPU_SCALE_UP.minutes + self.image_after_driver


def gpu_arrival(plan: Any) -> Optional[GpuArrival]:
    """None without a GPU pool (Autopilot has its own model: `AUTOPILOT_RAY_RELEASE`); the image is pulled, started
    from the cache of an image-cache pool, or streamed (the mirror in the plan and Image streaming on the pools)."""
    pools = gpu_pools(plan)
    if not pools:
        return None
    configs = [p.inputs.get("nodeConfig") or {} for p in pools]
    streams = plan.by_type(MIRROR) and all((c.get("gcfsConfig") or {}).get("enabled") for c in configs)
    pull = IMAGE_STREAM_PULL if streams else IMAGE_PULL
    timers = [r for r in plan.resources if is_jit_timer(r)]
    return GpuArrival(
        any(is_gpu_warmup(r) and not (r.inputs.get("spec") or {}).get("suspend") for r in plan.resources),
        IMAGE_CACHE_PULL if any(c.get("secondaryBootDisks") for c in configs) else pull,
        prepull=any(is_image_prepull(r) for r in plan.resources),
        jit=JitPlan.from_timer(timers[0]) if timers else None,
    )


def pull_name(pull: Typical) -> str:
    """The model's name of a pull, as the plan's sources and JSON give it."""
    names = {"IMAGE_CACHE_PULL": IMAGE_CACHE_PULL, "IMAGE_STREAM_PULL": IMAGE_STREAM_PULL}
    return next((name for name, known in names.items() if known is pull), "IMAGE_PULL")


SCALE_DOWN_MINUTES = SCALE_DOWN_S / 60
"""Empty nodes stay this long before the autoscaler removes them (--scale-down-unneeded-time, workloads/goodput.py)."""
LUSTRE_SLOW = Typical(
    jit.LUSTRE_SLOW_CREATE_MINUTES, "Managed Lustre at the top of its P99 creation band (slow case)", LUSTRE_P99
)
MODES = ("cold", "justInTime", "warm")


@dataclass(frozen=True)
class ArrivalTiming:
    """The minutes the three ways of GPU arrival compare on, from the plan's own model (typical Lustre)."""

    lustre_ready: float  # Lustre's instance ready
    claim_ready: float  # its claim and the staged weights: the Ray release starts, the timer hands over
    tail: float  # the release's end to the submission: the gate and the submission
    pools_ready: float  # node pools and namespace: the warm placeholders start, the timer is created soon after
    timer_at: float  # the timer Job's creation (the plan's, or where it would be)
    delay: float  # the program's delay from the timer's creation to the placeholders' start
    hold: float  # how long started placeholders may wait for Lustre (the lead, then gpuPool.justInTimeMaxWaitMinutes)
    lead: float  # boot, driver and the image left: `GpuArrival.minutes`
    startup: float  # the submission to the first step
    install: float  # the Ray release's own install, before its workers ask for nodes (tools/deploy_time.py)

    @property
    def ideal_delay(self) -> float:
        """The delay that makes the nodes ready the minute the Ray release starts, by this plan's model."""
        return round(self.claim_ready - self.lead - self.timer_at, 1)

    @property
    def jit_start(self) -> float:
        return self.timer_at + self.delay


@dataclass(frozen=True)
class Scenario:
    mode: str
    lustre_minutes: float
    lustre_ready: float
    submit: float
    first_step: float
    gpu_from: float
    gpu_minutes: float  # the gang's paid minutes before the job
    note: str


def scenario(t: ArrivalTiming, mode: str, lustre_minutes: float) -> Scenario:
    """One way of GPU arrival at one Lustre creation time; everything after Lustre shifts with it."""
    shift = lustre_minutes - jit.LUSTRE_CREATE_MINUTES
    lustre, claim = t.lustre_ready + shift, t.claim_ready + shift
    cold_from = claim + t.install  # the release's pending workers ask for the nodes
    wasted, note = 0.0, ""
    if mode == "warm":
        gpu_from, release_end = t.pools_ready, max(claim, t.pools_ready + t.lead) + t.install
        note = "placeholders as soon as the pools are up (gpuPool.warmMinutes long enough)"
    elif mode == "justInTime" and claim > t.jit_start:
        start, given_back = t.jit_start, t.jit_start + t.hold
        if claim <= given_back:
            gpu_from, release_end = start, max(claim, start + t.lead) + t.install
            note = "nodes ready as the Ray release starts, handed to its workers"
        elif cold_from <= given_back + SCALE_DOWN_MINUTES:
            # Given back, but the empty nodes are still there when the workers come.
            gpu_from, release_end = start, cold_from
            note = f"Lustre late: given back at {given_back:.1f}, still there for the workers"
        else:
            wasted = t.hold + SCALE_DOWN_MINUTES
            gpu_from, release_end = cold_from, cold_from + t.lead
            note = f"Lustre late: {wasted:g} min of nodes given back, then cold"
    else:
        gpu_from, release_end = cold_from, cold_from + t.lead
        note = "the pending Ray workers ask for the nodes" if mode == "cold" else "Lustre before the lead time: cold"
    submit = release_end + t.tail
    return Scenario(
        mode,
        lustre_minutes,
        round(lustre, 1),
        round(submit, 1),
        round(submit + t.startup, 1),
        round(gpu_from, 1),
        round(submit - gpu_from + wasted, 1),
        note,
    )


def scenarios(t: ArrivalTiming) -> list[Scenario]:
    """Cold, just in time and warm, each at Lustre's typical and slow creation time."""
    # Typical Lustre is the one figure, infra/jit_gpu_nodes.py, that CREATION_MINUTES takes too.
    lustres = (jit.LUSTRE_CREATE_MINUTES, LUSTRE_SLOW.minutes)
    return [scenario(t, mode, minutes) for minutes in lustres for mode in MODES]


def timing_json(t: ArrivalTiming) -> dict[str, Any]:
    """The plan's `deployTime.gpuArrival`: the just-in-time timing and the three-way comparison (minutes)."""
    return {
        "leadMinutes": t.lead,
        "timerCreatedAtMinute": round(t.timer_at, 1),
        "delayMinutes": t.delay,
        "modelDelayMinutes": t.ideal_delay,
        "holdMinutes": t.hold,
        "scaleDownMinutes": SCALE_DOWN_MINUTES,
        "scenarios": [
            {
                "mode": s.mode,
                "lustreCreateMinutes": s.lustre_minutes,
                "lustreReadyMinute": s.lustre_ready,
                "submitMinute": s.submit,
                "firstStepMinute": s.first_step,
                "gpuFromMinute": s.gpu_from,
                "gpuMinutesBeforeJob": s.gpu_minutes,
                "note": s.note,
            }
            for s in scenarios(t)
        ],
        "basis": "the plan's own model (typical times); the just-in-time delay is the program's "
        "(infra/jit_gpu_nodes.py), checked against modelDelayMinutes; real times are known only on the cloud",
    }
