"""GPU flavour catalogue: adding a flavour is one `Flavour` entry; nothing else names a machine type, accelerator,
tuner file or NIC count (https://cloud.google.com/compute/docs/accelerator-optimized-machines)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AutopilotPodLimits:
    """A whole-node GPU pod on Autopilot is billed for the node, so it asks as much as is safely allowed."""

    cpu: int
    memory_gib: int
    ephemeral_storage_gib: int  # without a request Autopilot gives 1 GiB; Ray's logs and spilling need more


# The sizes GKE's own samples ask of these machines (kubernetes-engine-samples
# ai-ml/nemo-rl-on-gke/nemoRL/gemma3-27b-it/values.yaml and ai-ml/llm-serving-llama/vllm @2b503651).
_AUTOPILOT_WHOLE_NODE = AutopilotPodLimits(cpu=206, memory_gib=2400, ephemeral_storage_gib=500)


@dataclass(frozen=True)
class Flavour:
    name: str
    machine_type: str
    accelerator_type: str
    gpus_per_node: int
    vcpus: int
    memory_gib: int
    rdma_nics: int
    nccl_tuner_config: str
    min_gke_version: str
    boot_disk_type: str
    boot_disk_size_gb: int
    gpu_quota_metric: str  # on-demand; spot and flex-start count against `PREEMPTIBLE_<metric>`
    # Google's NeMo-RL sample sizes (GoogleCloudPlatform/kubernetes-engine-samples ai-ml/nemo-rl-on-gke/nemoRL/
    # values.yaml), known to schedule on A4 and A3 Ultra.
    worker_cpu: int = 206
    worker_memory_gib: int = 2400
    # Bundled local SSDs must be declared on the pool: GKE reports them back, and omitting them replaces the pool.
    local_ssd_count: int = 0
    image_type: str = "COS_CONTAINERD"
    autopilot_pod: "AutopilotPodLimits | None" = None  # None: not offered on Autopilot

    @property
    def gpu_taint(self) -> dict[str, str]:
        return {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


# A4 and A3 Ultra: 8 GPUs, 1 extra gVNIC + 8 MRDMA NICs, hyperdisk-balanced boot disks and 32 x 375 GiB bundled
# local SSD (https://cloud.google.com/compute/docs/accelerator-optimized-machines; Cluster Toolkit gke-node-pool
# disk_definitions for a3-ultragpu-8g).
_A_SERIES = dict(
    gpus_per_node=8,
    vcpus=224,
    rdma_nics=8,
    boot_disk_type="hyperdisk-balanced",
    boot_disk_size_gb=500,
    local_ssd_count=32,
    autopilot_pod=_AUTOPILOT_WHOLE_NODE,
)
FLAVOURS: dict[str, Flavour] = {
    "b200": Flavour(
        name="b200",
        machine_type="a4-highgpu-8g",
        accelerator_type="nvidia-b200",
        memory_gib=3968,
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a4.txtpb",
        min_gke_version="1.32.2-gke.1475000",
        gpu_quota_metric="NVIDIA_B200_GPUS",
        **_A_SERIES,
    ),
    "h200": Flavour(
        name="h200",
        machine_type="a3-ultragpu-8g",
        accelerator_type="nvidia-h200-141gb",
        memory_gib=2952,
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        min_gke_version="1.31.4-gke.1183000",
        gpu_quota_metric="NVIDIA_H200_GPUS",
        **_A_SERIES,
    ),
}


def parse_gke_version(version: str) -> tuple[int, ...]:
    """'1.32.2-gke.1475000' as a comparable tuple; a prefix compares as its lowest patch ('1.33' < '1.33.2-...')."""
    base, _, gke = version.partition("-gke.")
    parts = [int(p) for p in base.split(".")]
    parts += [0] * (3 - len(parts))
    return (*parts, int(gke) if gke else 0)
