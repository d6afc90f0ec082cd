"""Just-in-time GPU nodes (`gpuPool.justInTime`, on by default): the GPU nodes Ready, with the NeMo-RL image, when
Managed Lustre is expected to be ready, not minutes after it (every GPU pool scales from 0 and the Ray workers ask for
nodes only once the RayCluster exists, which needs Lustre's claim).

How: the `gpuPool.warmMinutes` placeholder Job (infra/image_prepull.py: one whole GPU node per pod, priority -10, the
lowest that still makes cluster-autoscaler scale up: `--expendable-pods-priority-cutoff` default -10, "pods with
priority below cutoff will be expendable ... they don't cause scale up", kubernetes/autoscaler cluster-autoscaler
main.go) is created suspended (`spec.suspend`, GA in Kubernetes 1.24, KEP-2232: a suspended Job creates no pods;
resuming it creates them; suspending deletes its active pods). A CPU timer Job on the system pool (workloads/
jit_timer.py) starts it `delay_minutes` after the timer's own creation, and stops it again when the RayCluster appears
(after Lustre and its claim; the weights are staged off this path, infra/weight_staging.py; the Ray workers take
the nodes) or `lead +
gpuPool.justInTimeMaxWaitMinutes` after the start (Lustre is late: the nodes go back after the autoscaler's
scale-down delay and the workers ask for them again once the RayCluster exists). The
placeholders' `activeDeadlineSeconds` is the backstop should the timer die ("If a Job is suspended ..., this timer
will effectively be stopped and reset when the Job is resumed again": Kubernetes JobSpec.activeDeadlineSeconds).

The delay: the timer can only know its own start, so the program bakes in the deploy-time model's figures
(tools/deploy_time.py and tools/gpu_arrival.py read them from here, one source): Lustre's typical creation, counted
from its start, plus its claim, less the model's minutes from Lustre's start to the timer's
creation, less the lead (node boot and driver, then the image left after the driver: pulled, streamed or from the
image cache).
tests/test_jit_gpu_nodes.py checks the baked delay against the model's own critical path on every Standard stack.
The real times are known only on the cloud: `pulumi up` shows each resource's duration, and the timer's log says
when it started and stopped the placeholders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import GPU_WARMUP, MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from workloads import jit_timer
from workloads.recipes import NemoRLImage

# --------------------------------------------------------------------------------------------- the model's figures
LUSTRE_CREATE_MINUTES = 60.0
"""Managed Lustre's typical creation (tools/deploy_time.py `CREATION_MINUTES`, sourced there: P99 40-80 minutes)."""
LUSTRE_SLOW_CREATE_MINUTES = 80.0
"""The slow case the plan shows: the top of the maintainers' P99 band (tools/gpu_arrival.py LUSTRE_P99)."""
GPU_BOOT_MINUTES = 2.0
"""A new node boots in ~80-120 s (GKE 'Provision extra compute capacity for rapid Pod scaling')."""
GPU_DRIVER_MINUTES = 4.0
"""GKE installs the GPU driver (and sets up the extra NICs) before the node offers `nvidia.com/gpu` (assumed)."""
IMAGE_COMPRESSED_GB = 20.0
PULL_RATE_MB_PER_S = 30.0
IMAGE_PULL_MINUTES = round(IMAGE_COMPRESSED_GB * 1000 / PULL_RATE_MB_PER_S / 60, 1)
"""The NeMo-RL image pulled from nvcr.io (both figures assumed: tools/gpu_arrival.py IMAGE_PULL)."""
IMAGE_NEAR_MINUTES = 1.0
"""The image from the node's image cache disk or streamed from Artifact Registry: the pod start only (assumed)."""
CLAIM_MINUTES = 0.25
"""Lustre's PersistentVolume and claim after the instance (tools/deploy_time.py: 0.05 + 0.2)."""
TIMER_AFTER_LUSTRE_START_MINUTES = 10.5
"""The model's minutes from Lustre's creation start (after the PSA peering) to the timer Job's creation (after the
cluster, the node pools and the namespace): on every Standard stack of this repository the cluster side's 8 + 4 + 0.3
less the peering's 0.25 + 2 less rounding (tests/test_jit_gpu_nodes.py pins it to the model within a minute)."""

PULL, STREAM, CACHE = "pull", "stream", "cache"


def image_after_driver(pull: str, prepull: bool = True) -> float:
    """Minutes of the image left once the node offers its GPUs: a pull is begun by the pre-pull DaemonSet during the
    driver install (its pod asks for no GPU); the cache and streaming start the pod only."""
    if pull != PULL:
        return IMAGE_NEAR_MINUTES
    return round(max(0.0, IMAGE_PULL_MINUTES - (GPU_DRIVER_MINUTES if prepull else 0.0)), 1)


def lead_minutes(pull: str, prepull: bool = True) -> float:
    """From the placeholders' start to GPU nodes Ready with the image: boot, driver, the image left."""
    return round(GPU_BOOT_MINUTES + GPU_DRIVER_MINUTES + image_after_driver(pull, prepull), 1)


@dataclass(frozen=True)
class JitTiming:
    """When the timer starts the placeholders and how long they may wait for Lustre."""

    lead_minutes: float
    max_wait_minutes: int
    lustre_minutes: float = LUSTRE_CREATE_MINUTES
    timer_after_lustre_start: float = TIMER_AFTER_LUSTRE_START_MINUTES

    @property
    def delay_minutes(self) -> float:
        """From the timer Job's creation to the placeholders' start: the Ray release expected (Lustre ready, its
        claim), less the lead."""
        ready = self.lustre_minutes + CLAIM_MINUTES
        # Down to the tenth of a minute: up to 6 s early, never late.
        return max(0.0, math.floor(round(ready - self.timer_after_lustre_start - self.lead_minutes, 6) * 10) / 10)

    @property
    def hold_minutes(self) -> float:
        """How long the started placeholders may hold nodes: the lead, then the late-Lustre bound."""
        return round(self.lead_minutes + self.max_wait_minutes, 1)

    @property
    def delay_seconds(self) -> int:
        return int(round(self.delay_minutes * 60))

    @property
    def hold_seconds(self) -> int:
        return int(math.ceil(self.hold_minutes * 60))

    @property
    def backstop_seconds(self) -> int:
        """The placeholders' `activeDeadlineSeconds`, counted from their start: the timer stops them at
        `hold_seconds`; this ends them should the timer not (two polls later)."""
        return self.hold_seconds + 2 * int(jit_timer.POLL_SECONDS)


def pull_kind(image_streaming: bool, image_cache: bool) -> str:
    return CACHE if image_cache else STREAM if image_streaming else PULL


def jit_timing(cfg: Any) -> Optional[JitTiming]:
    """None unless the stack wants just-in-time nodes: `gpuPool.justInTime` and no `gpuPool.warmMinutes` (warm
    replaces it). Autopilot has no placeholder (the program makes no pre-pull there)."""
    pool = cfg.gpu_pool
    if not pool.just_in_time or pool.warm_minutes is not None:
        return None
    kind = pull_kind(cfg.cluster.image_streaming, bool(pool.image_cache_disk_image))
    return JitTiming(lead_minutes(kind), pool.just_in_time_max_wait_minutes)


# --------------------------------------------------------------------------------------------- the timer
TIMER = "gpu-jit-timer"
"""The timer's Job, ServiceAccount, Role and RoleBinding, and `app.kubernetes.io/component` (the model finds it)."""
DELAY_ANNOTATION = "nemo-rl-gke/jit-delay-seconds"
HOLD_ANNOTATION = "nemo-rl-gke/jit-hold-seconds"
TIMER_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}
TIMER_SOURCE = Path(jit_timer.__file__).read_text()


def timer_rules(ray_cluster: str) -> list[dict[str, Any]]:
    """Exactly the timer's calls (workloads/jit_timer.py): its own Job's creation time, the stack's RayCluster, and
    the placeholder Job's `spec.suspend`."""
    return [
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [TIMER], "verbs": ["get"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "resourceNames": [GPU_WARMUP], "verbs": ["get", "patch"]},
        {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "resourceNames": [ray_cluster], "verbs": ["get"]},
    ]


def timer_job(
    image: NemoRLImage, namespace: str, ray_cluster: str, timing: JitTiming, system_pool: Optional[str]
) -> dict[str, Any]:
    """The timer's Job (a camelCase object). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": TIMER, "app.kubernetes.io/component": TIMER}
    args = [TIMER, GPU_WARMUP, ray_cluster, str(timing.delay_seconds), str(timing.hold_seconds)]
    return {
        "metadata": {
            "name": TIMER,
            "namespace": namespace,
            "labels": {**labels, **MANAGED_LABELS},
            "annotations": {
                # It sleeps until the lead time: `pulumi up` must not wait for it.
                "pulumi.com/skipAwait": "true",
                DELAY_ANNOTATION: str(timing.delay_seconds),
                HOLD_ANNOTATION: str(timing.hold_seconds),
            },
        },
        "spec": {
            "backoffLimit": 3,  # an API hiccup: the delay counts from the Job's creation, so a retry keeps the time
            "activeDeadlineSeconds": timing.delay_seconds + timing.hold_seconds + 600,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "serviceAccountName": TIMER,
                    "restartPolicy": "OnFailure",
                    "nodeSelector": {NODE_POOL_LABEL: system_pool} if system_pool else {},
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "timer",
                            # On the system node already (the pre-pull); standard library only.
                            "image": image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python", "-S", "-c", TIMER_SOURCE, *args],
                            "resources": TIMER_RESOURCES,
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                },
            },
        },
    }


@dataclass(frozen=True)
class JitTimerArgs:
    image: NemoRLImage
    namespace: str
    ray_cluster: str  # the RayCluster the Ray release makes (infra/ray_cluster.py `ray_target_for`)
    timing: JitTiming
    system_pool: Optional[str]


def build_jit_timer(
    parent: pulumi.Resource, name: str, args: JitTimerArgs, opts: Optional[pulumi.ResourceOptions], placeholders: Any
) -> list[pulumi.CustomResource]:
    """The timer's ServiceAccount, Role, RoleBinding and Job, children of `parent` (the pre-pull component), after
    the placeholder Job (`placeholders`) it starts."""
    meta = {"name": TIMER, "namespace": args.namespace, "labels": {"app.kubernetes.io/name": TIMER, **MANAGED_LABELS}}
    account = k8s.core.v1.ServiceAccount(f"{name}-jit-timer-account", metadata=meta, opts=child_options(parent, opts))
    role = k8s.rbac.v1.Role(
        f"{name}-jit-timer-role", metadata=meta, rules=timer_rules(args.ray_cluster), opts=child_options(parent, opts)
    )
    binding = k8s.rbac.v1.RoleBinding(
        f"{name}-jit-timer-binding",
        metadata=meta,
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": TIMER},
        subjects=[{"kind": "ServiceAccount", "name": TIMER, "namespace": args.namespace}],
        opts=child_options(parent, opts, depends_on=[role, account]),
    )
    job = timer_job(args.image, args.namespace, args.ray_cluster, args.timing, args.system_pool)
    timer = k8s.batch.v1.Job(
        f"{name}-jit-timer-job",
        metadata=job["metadata"],
        spec=job["spec"],
        opts=child_options(parent, opts, depends_on=[binding, placeholders]),
    )
    return [account, role, binding, timer]
