"""`ray`: the in-cluster objects (namespace, KubeRay chart, NCCL installer, Lustre mount) and the Ray
pods' sizes; and the checks that the head and the workers fit their nodes (run by `StackConfig`)."""

from __future__ import annotations

import math
import posixpath
from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError
from infra.config.patterns import ABSOLUTE_PATH, CHART_VERSION, LOWER_NAME
from infra.flavours import Flavour
from infra.machines import NodeFit, gpu_node_allocatable, gpu_node_room, system_node_room
from workloads.recipes import RECIPES

_SYSTEM_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")
_SYSTEM_DIRS = tuple(f"/{d}" for d in "bin boot dev etc lib lib32 lib64 proc root run sbin sys usr var".split())
# Directories the Ray containers need: the images' NeMo-RL checkouts, and Ray's session directory
# (ray.init's default temp dir /tmp/ray). Mounting at or above one of them hides it.
_CONTAINER_DIRS = tuple(sorted({r.image.workdir for r in RECIPES.values()} | {"/tmp/ray"}))


def check_namespace(v: str) -> str:
    """Not Kubernetes' or GKE's own namespace: the stack would put its objects among the cluster's, and `pulumi
    destroy` would delete a namespace it never owned."""
    if v == "default" or v.startswith(_SYSTEM_NAMESPACE_PREFIXES):
        raise ValueError(
            f"{v!r} is a system namespace; allowed: a namespace of its own, not default or "
            f"{', '.join(p + '*' for p in _SYSTEM_NAMESPACE_PREFIXES)}"
        )
    return v


def check_service_account(v: str) -> str:
    """Not the namespace's `default`, which every pod without its own account runs as: the bucket's Workload
    Identity grant would go to all of them."""
    if v == "default":
        raise ValueError(
            "'default' is the account of every pod in the namespace; allowed: a dedicated name such as ray"
        )
    return v


def check_mount_path(v: str) -> str:
    """The Lustre mount path is normalized and hides neither a system directory nor one the containers need."""
    if posixpath.normpath(v) != v or "/." in v:
        raise ValueError(
            f"{v!r} is not allowed; allowed: a normalized absolute path (no '.', '..', '//' or trailing '/')"
        )
    for system in _SYSTEM_DIRS:
        if v == system or v.startswith(system + "/"):
            raise ValueError(
                f"{v!r} would mount Lustre over the system directory {system}; allowed: a path such as /lustre"
            )
    for needed in _CONTAINER_DIRS:
        if needed == v or needed.startswith(v.rstrip("/") + "/"):
            raise ValueError(f"{v!r} would hide {needed} in the Ray containers; allowed: a path such as /lustre")
    return v


class RayConfig(Model):
    """In-cluster objects: namespace, KubeRay chart, NCCL installer, Lustre mount."""

    namespace: Annotated[str, AfterValidator(check_namespace)] = Field("nemo-rl", pattern=LOWER_NAME, max_length=63)
    """Namespace of the Ray cluster and its secrets."""
    service_account: Annotated[str, AfterValidator(check_service_account)] = Field(
        "ray", pattern=LOWER_NAME, max_length=63
    )
    """Kubernetes service account of the Ray pods (Workload Identity)."""
    chart_version: str = Field("1.7.0", pattern=CHART_VERSION)
    """Version of the upstream KubeRay `ray-cluster` Helm chart."""
    nccl_installer_image: str = Field(
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1",
        pattern=r"^[a-z0-9.\-/]+:[A-Za-z0-9._\-]+$",
    )
    """NCCL gIB RDMA plugin installer image, pinned to a tag (upstream `master` moves)."""
    mount_path: Annotated[str, AfterValidator(check_mount_path)] = Field("/lustre", pattern=ABSOLUTE_PATH)
    """Where Lustre is mounted in the Ray head and workers."""
    head_cpu: int = Field(8, ge=1, le=64)
    """CPUs requested by the Ray head."""
    head_memory_gib: int = Field(64, ge=4, le=512)
    """Memory requested by the Ray head (GiB); the NeMo-RL driver runs there. The default is the request of Google's
    codelab for the 72B recipe (8 CPU / 64 GiB)."""
    worker_cpu: Optional[int] = Field(None, ge=1)
    """CPUs requested (and limited to) by each Ray worker, one per GPU node. Default: the flavour's reference (206 on A4
    and A3 Ultra, from Google's NeMo-RL on GKE sample); at most what GKE leaves for pods on the node minus 2 CPUs for
    its DaemonSets."""
    worker_memory_gib: Optional[int] = Field(None, ge=1)
    """Memory (GiB) requested (and limited to) by each Ray worker. Default: the flavour's reference (2400 on A4 and A3
    Ultra); at most the node's allocatable memory minus 16 GiB for its DaemonSets."""
    worker_shm_gib: int = Field(240, ge=1)
    """Size limit of each worker's memory-backed /dev/shm (GiB; NCCL and the Ray object store use it); counts against
    the worker's memory. Default from Google's NeMo-RL on GKE sample."""


def worker_fit(ray: RayConfig, flavour: Flavour) -> NodeFit:
    """The Ray worker's requests on one GPU node (config or the flavour's reference) and the node's room."""
    cpu, memory = gpu_node_allocatable(flavour.vcpus, flavour.memory_gib)
    return NodeFit(
        machine_type=flavour.machine_type,
        cpu=ray.worker_cpu or flavour.worker_cpu,
        memory_gib=ray.worker_memory_gib or flavour.worker_memory_gib,
        shm_gib=ray.worker_shm_gib,
        allocatable_cpu=cpu,
        allocatable_memory_gib=memory,
    )


def check_head_fits(ray: RayConfig, machine: str) -> None:
    """The Ray head fits a system node of type `machine` (Standard clusters): else it stays Pending, and the
    deploy waits on it for an hour."""
    room = system_node_room(machine)
    if room is None:  # a machine type whose shape infra/machines.py does not know: not checked
        return
    for key, asked, free, unit in (
        ("ray.headCpu", ray.head_cpu, math.floor(room[0]), ""),
        ("ray.headMemoryGib", ray.head_memory_gib, math.floor(room[1]), " GiB"),
    ):
        if asked > free:
            raise KeyedValueError(
                key,
                f"{asked} does not fit a {machine} system node (room for {free}{unit} after GKE's reservations and "
                f"system pods); allowed: at most {free}, or a larger cluster.systemPool.machineType",
            )


def check_worker_fits(ray: RayConfig, flavour: Flavour) -> None:
    """A Ray worker fits one GPU node of the flavour (else it stays Pending, and the deploy waits on it for an
    hour), its /dev/shm inside its memory."""
    fit = worker_fit(ray, flavour)
    room_cpu, room_memory = gpu_node_room(flavour.vcpus, flavour.memory_gib)
    for key, asked, free, unit in (
        ("ray.workerCpu", fit.cpu, room_cpu, ""),
        ("ray.workerMemoryGib", fit.memory_gib, room_memory, " GiB"),
    ):
        if asked > free:
            raise KeyedValueError(
                key,
                f"{asked} does not fit a {flavour.machine_type} node (room for {free}{unit} after GKE's reservations "
                f"and its DaemonSets); allowed: 1 to {free}",
            )
    if fit.shm_gib >= fit.memory_gib:
        raise KeyedValueError(
            "ray.workerShmGib",
            f"{fit.shm_gib} leaves nothing of the worker's {fit.memory_gib} GiB (/dev/shm counts against it); "
            f"allowed: 1 to {fit.memory_gib - 1}",
        )
