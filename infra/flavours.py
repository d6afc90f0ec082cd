"""GPU flavour catalogue: everything that differs between the GPU machine families.

Adding a flavour is adding one `Flavour` entry to `FLAVOURS`; nothing else in the program
names a machine type, accelerator, tuner file or NIC count. (Its stacks are refused until a row of
data/version_matrix.yaml covers it, or they set `allowUntestedVersions: true`: docs/version-matrix.md.)

Sources: Compute Engine accelerator-optimized machine docs
(https://cloud.google.com/compute/docs/accelerator-optimized-machines) and the GKE AI Hypercompute
docs for A4 and A3 Ultra.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AutopilotPodLimits:
    """The requests a whole-node GPU pod makes on Autopilot (`cluster.mode: autopilot`).

    Autopilot rejects a pod whose requests exceed the maximum for its accelerator and raises requests
    below the minimum; a GPU pod is billed for the whole node whatever it requests, so the worker asks
    for as much as is safely below that maximum.
    """

    cpu: int
    memory_gib: int
    ephemeral_storage_gib: int
    """Autopilot gives a container without an ephemeral-storage request 1 GiB, and evicts it beyond that;
    Ray's logs and object spilling under /tmp/ray need far more."""


# The published per-accelerator maxima (GKE "Resource requests in Autopilot", accelerator table) could
# not be read back here. These sizes are ones GKE's own NeMo-RL sample asks of these machines (206 CPU /
# 2400 GiB for 8 x B200, kubernetes-engine-samples ai-ml/nemo-rl-on-gke/nemoRL/gemma3-27b-it/values.yaml
# @2b503651) and its H200 vLLM sample's ephemeral storage (850Gi, ai-ml/llm-serving-llama/vllm
# @2b503651): all well inside both machines after GKE's node reservations (infra/machines.py).
# Only on the real cloud: that Autopilot admits them (`kubectl describe pod` shows a rejection at once).
_AUTOPILOT_WHOLE_NODE = AutopilotPodLimits(cpu=206, memory_gib=2400, ephemeral_storage_gib=500)


@dataclass(frozen=True)
class Flavour:
    """One GPU machine family as GKE sees it."""

    name: str
    machine_type: str
    accelerator_type: str
    gpus_per_node: int
    vcpus: int
    memory_gib: int
    rdma_nics: int
    """MRDMA NICs on the machine; each gets its own RDMA subnet, in NIC order."""
    gvnic_extra_nics: int
    """gVNIC NICs besides the primary one (eth0), attached to the gVNIC VPC."""
    nccl_tuner_config: str
    min_gke_version: str
    boot_disk_type: str
    boot_disk_size_gb: int
    gpu_quota_metric: str
    """Compute Engine's regional quota metric of the GPU, on-demand; spot and flex-start VMs count against
    `PREEMPTIBLE_<metric>` (`gcloud compute regions describe`). Read by the preflight doctor."""
    worker_cpu: int = 206
    worker_memory_gib: int = 2400
    """Default request (= limit) of the one Ray worker per node: the values of Google's NeMo-RL on GKE
    sample, known to schedule on A4 and A3 Ultra nodes (GoogleCloudPlatform/kubernetes-engine-samples
    ai-ml/nemo-rl-on-gke/nemoRL/values.yaml: 206 CPU, 2400Gi). They leave room for GKE's DaemonSets,
    whose real share can only be read on a node; `ray.workerCpu` / `ray.workerMemoryGib` change them."""
    local_ssd_count: int = 0
    """Local SSDs bundled with the machine type. They must be declared on the node pool (as ephemeral
    storage): GKE reports them back, and a pool that omits them diffs and is replaced on every update."""
    image_type: str = "COS_CONTAINERD"
    autopilot_pod: "AutopilotPodLimits | None" = None
    """What one GPU pod may request on this machine in a GKE Autopilot cluster (None: not offered there)."""

    @property
    def gpu_taint(self) -> dict[str, str]:
        """The taint GKE puts on every GPU node; workers must tolerate it."""
        return {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


FLAVOURS: dict[str, Flavour] = {
    # A4: 8 x B200, 2 gVNIC + 8 MRDMA NICs (https://cloud.google.com/compute/docs/accelerator-optimized-machines).
    "b200": Flavour(
        name="b200",
        machine_type="a4-highgpu-8g",
        accelerator_type="nvidia-b200",
        gpus_per_node=8,
        vcpus=224,
        memory_gib=3968,
        rdma_nics=8,
        gvnic_extra_nics=1,
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a4.txtpb",
        min_gke_version="1.32.2-gke.1475000",
        boot_disk_type="hyperdisk-balanced",
        boot_disk_size_gb=500,
        gpu_quota_metric="NVIDIA_B200_GPUS",
        # 12,000 GiB of bundled local SSD = 32 x 375 GiB (Compute Engine A4 machine table).
        # Only on the real cloud: `gcloud compute machine-types describe a4-highgpu-8g` confirms the count.
        local_ssd_count=32,
        autopilot_pod=_AUTOPILOT_WHOLE_NODE,
    ),
    # A3 Ultra: 8 x H200 141 GB; the docs ask for a hyperdisk-balanced boot disk.
    "h200": Flavour(
        name="h200",
        machine_type="a3-ultragpu-8g",
        accelerator_type="nvidia-h200-141gb",
        gpus_per_node=8,
        vcpus=224,
        memory_gib=2952,
        rdma_nics=8,
        gvnic_extra_nics=1,
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        min_gke_version="1.31.4-gke.1183000",
        boot_disk_type="hyperdisk-balanced",
        boot_disk_size_gb=500,
        gpu_quota_metric="NVIDIA_H200_GPUS",
        # 32 x 375 GiB bundled local SSD (Cluster Toolkit gke-node-pool disk_definitions for a3-ultragpu-8g).
        local_ssd_count=32,
        autopilot_pod=_AUTOPILOT_WHOLE_NODE,
    ),
}


def parse_gke_version(version: str) -> tuple[int, ...]:
    """Turn '1.32.2-gke.1475000' (or a prefix such as '1.33') into a comparable tuple.

    A prefix compares as its lowest patch, so '1.33' < '1.33.2-gke.4780000'.
    """
    base, _, gke = version.partition("-gke.")
    parts = [int(p) for p in base.split(".")]
    parts += [0] * (3 - len(parts))
    return (*parts, int(gke) if gke else 0)
