"""The GKE Standard cluster and its two node pools (`cluster.mode: standard`, the default; Autopilot is
infra/autopilot_cluster.py; what both build the same way is infra/gke_common.py).

Every node is in one zone (that of the RoCE VPC and of Lustre), because the GPU nodes' RDMA NICs can
only attach to subnets of a RoCE network pinned to that zone
(https://cloud.google.com/vpc/docs/rdma-network-profiles). The control
plane is regional by default, as in both seeds and Google's A4/A3 Ultra blueprints (cluster-toolkit
modules/scheduler/gke-cluster: `cluster_availability_type` REGIONAL, the GPU pool's `zones: [zone]`):
replicas in several zones keep the API up during control-plane upgrades, when the preemption watcher,
`pulumi` and `python -m jobctl` need it. `cluster.controlPlaneLocation: zonal` keeps one control
plane in the zone (docs/deploy.md, "Regional or zonal control plane"). The cluster runs
Dataplane V2 with multi-networking so pods can take the nodes' extra NICs, the GKE Ray operator addon
(so no KubeRay operator is installed by us:
https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/how-to/enable-ray-on-gke), and the Lustre CSI driver.

Two pools:
- `system`: CPU nodes for the Ray head and cluster add-ons, so they never hold a GPU node;
- `gpu`: the flavour's GPU machines with the gVNIC and RDMA subnets as additional node networks.
  The additional networks cannot change after creation
  (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods), so the pool is
  replaced when
  the network layout changes.

The cluster does not wait for Lustre nor Lustre for the cluster: they share only the VPC, and
creating them in parallel saves the longer of the two (tens of minutes each).

Security posture:
- private nodes (no external IPs; outbound through the Cloud NAT of `Networking`);
- the control plane reached through its DNS endpoint only (`cluster.controlPlaneAccess: dns`, the
  default): Google IAM checks `container.clusters.connect` before a request reaches the API server,
  and the IP endpoints are off, so there is no address to scan and no allow-list to keep current
  (CIS GKE benchmark 2.0, 5.6.4, prefers this). With `ip`, the public endpoint is limited to
  `cluster.masterAuthorizedNetworks`, or deliberately open with `cluster.allowPublicControlPlane`
  (config validation refuses an empty list otherwise);
- Shielded GKE nodes with Secure Boot and integrity monitoring on every pool;
- a dedicated node service account holding only the roles nodes need (`NODE_SERVICE_ACCOUNT_ROLES`)
  instead of the Compute Engine default account (Editor on the project in many projects). No key is
  ever created for it; pods do not use it (Workload Identity gives them their KSA's principal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig, GpuPoolConfig, Provisioning, Rung
from infra.flavours import Flavour
from infra.gke_common import (
    CLOUD_PLATFORM_SCOPE,
    CLUSTER_TIMEOUTS,
    ClusterNetwork,
    addons_config,
    client_endpoint,
    control_plane_settings,
    credentials_command,
    handed_on_outputs,
    ip_allocation_policy,
    maintenance_policy,
    node_service_account,
    workload_pool_of,
)
from infra.naming import COMPUTE_CLASS_LABEL, Limit
from infra.options import child_options
from infra.placement import rung_pool_role
from infra.stack_context import GpuPoolFacts, StackContext

COMPONENT = "gke"

MONITORING_COMPONENTS = (
    "SYSTEM_COMPONENTS",
    "POD",
    "DAEMONSET",
    "DEPLOYMENT",
    "STATEFULSET",
    "STORAGE",
    "HPA",
    "CADVISOR",
    "KUBELET",
    "DCGM",
)
"""GKE metric packages, as Google's A4/A3 Ultra blueprints turn them on (cluster-toolkit
modules/scheduler/gke-cluster `monitoring_components` + DCGM with `enable_dcgm_monitoring`, with
Managed Service for Prometheus). DCGM makes GKE run DCGM-Exporter on the GPU nodes and scrape it into
Managed Prometheus (`prometheus.googleapis.com/DCGM_FI_*`, the dashboard's GPU charts; GKE "Collect
and view DCGM metrics"). JOBSET, in the blueprints' list too, is left out: nothing here runs JobSets and
GKE accepts it only from 1.32.1-gke.1357001, above the H200 flavour's minimum version."""

SHIELDED_INSTANCE_CONFIG = {"enable_secure_boot": True, "enable_integrity_monitoring": True}
"""Secure Boot (only signed boot components and kernel modules: the GKE-installed NVIDIA drivers on COS
are signed) and integrity monitoring of the boot sequence. Also on the CPU system pool, which mounts
Lustre for the Ray head: the managed Lustre CSI add-on supports that from node version
1.33.2-gke.1111000, which the config enforces (infra/lustre_catalogue.py LUSTRE_CSI_MIN_GKE)."""

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
SYSTEM_DISK_TYPE = "pd-balanced"

# Node pool operations queue behind each other on one cluster, and a GPU pool waits for capacity:
# an hour-plus create is normal for A4/A3 Ultra (an estimate, known only on the real cloud).
NODE_POOL_TIMEOUTS = pulumi.CustomTimeouts(create="120m", update="120m", delete="60m")


def cluster_location(ctx: StackContext, cfg: ClusterConfig) -> str:
    """Where the control plane lives (`cluster.controlPlaneLocation`): the region, or the zone."""
    return ctx.region if cfg.control_plane_location == "regional" else ctx.zone


def provisioning_settings(pool_cfg: GpuPoolConfig, rung: Optional[Rung] = None) -> dict[str, Any]:
    """Node pool arguments (snake_case) that follow from how GPU capacity is obtained: of `rung` (a pool of
    the capacity ladder), or of the one pool `provisioning` names.

    Every GPU pool autoscales from 0 to `nodeCount` (`autoscaled`): GKE's cluster autoscaler adds nodes only
    for pending pods (the Ray workers, which come after Lustre and the Ray release; or the warm-up
    placeholders of `gpuPool.warmMinutes`, infra/image_prepull.py) and removes a node no pod uses after its
    scale-down delay, so no GPU is billed while nothing trains (docs/capacity.md, "GPU nodes only while a run
    needs them").

    - spot: `nodeConfig.spot`; preemptible and cheapest, the codelab's and tutorial's choice.
    - reservation: consume exactly the named reservation (SPECIFIC_RESERVATION with the
      reservation-name key), so the pool never silently falls back to on-demand capacity. GKE's autoscaler
      scales such a pool like any other and `location_policy: ANY` makes it prefer unused reservations
      (provider schema text of `autoscaling.location_policy`, terraform-provider-google-beta
      resource_container_node_pool.go at 93c65b2d); the reserved VMs stay reserved (and billed) whether or
      not a node uses them: releasing the nodes saves nothing on a reservation but frees them for others.
    - flexStart: flex-start VMs WITHOUT queued provisioning ("About flex-start provisioning mode",
      https://cloud.google.com/kubernetes-engine/docs/concepts/dws: a flex-start pool of a Standard
      cluster is scaled up by the cluster autoscaler for pending pods, each node for at most seven
      days; GKE 1.32.2-gke.1652000 or later). So the Ray workers' own pending pods bring the nodes and
      the job runs as on any pool; no ProvisioningRequest is needed. The pool's flags are those the
      queued-provisioning guide used here before, less `--enable-queued-provisioning`: `--flex-start
      --enable-autoscaling --num-nodes=0 --total-min-nodes=0 --total-max-nodes N --location-policy=ANY
      --reservation-affinity=none --no-enable-autorepair` (the flex-start VMs how-to page itself was not
      readable from here: that it asks for exactly these is to be confirmed on the page / a real cluster).
      Unlike queued provisioning the nodes may come one by one; the run owner waits for the whole
      gang (workloads/gang_wait.py). Only on the real cloud: how long a scale-up of this pool waits.
    - onDemand: nothing special; GKE may use a matching automatic reservation.

    `initial_node_count`: 0 for the ladder's and flex-start pools (created so from the start), UNSET for a
    one-rung spot, reservation or onDemand pool. It is ForceNew and Computed upstream
    (terraform-provider-google-beta google-beta/services/container/resource_container_node_pool.go at
    93c65b2d: `"initial_node_count": {Optional, ForceNew, Computed}`), and a live pool created with
    `node_count: N` holds `initial_node_count: N` in its state: writing 0 would replace the pool (every GPU
    node and the running job). Unset, the provider creates a new pool with 0 nodes (`expandNodePool`: neither
    count set gives InitialNodeCount 0) and leaves a live one as it is; `node_count` (Optional, Computed) left
    out is no diff either, and `autoscaling` is updated in place (`resourceContainerNodePoolUpdate` sends
    `DesiredNodePoolAutoscaling`). So upgrading a live stack changes its pool in place; the autoscaler then
    removes the nodes no pod uses.
    """
    node_config: dict[str, Any] = {}
    pool: dict[str, Any] = {"management": {"auto_repair": True, "auto_upgrade": True}}
    mode = rung.provisioning if rung is not None else pool_cfg.provisioning
    reservation_name = rung.reservation_name if rung is not None else pool_cfg.reservation_name
    pool["autoscaling"] = autoscaled(pool_cfg.node_count)
    if rung is not None:
        # A ladder pool starts empty and grows only when the class's priorities reach it.
        pool["initial_node_count"] = 0
    if mode is Provisioning.SPOT:
        node_config["spot"] = True
        # Spot VMs never come out of a reservation; saying so keeps GKE from matching (and holding) an
        # automatic reservation for a pool that cannot use it. Cluster Toolkit refuses spot with any
        # other type (GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool/main.tf at
        # 10470803, the precondition "Spot consumption option only works with reservation_affinity
        # consume_reservation_type NO_RESERVATION"). ForceNew upstream: a live spot pool is replaced
        # once when this lands (deleted first, `POOL_REPLACEMENT`).
        node_config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
    elif mode is Provisioning.RESERVATION:
        node_config["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [reservation_name],
        }
    elif mode is Provisioning.FLEX_START:
        node_config["flex_start"] = True
        node_config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        pool["initial_node_count"] = 0
        # --no-enable-autorepair: a repaired flex-start node would be a new VM with a new seven-day clock,
        # outside what the autoscaler asked for.
        pool["management"] = {"auto_repair": False, "auto_upgrade": True}
    if rung is None or mode is Provisioning.FLEX_START:
        # One pool in one zone: ANY costs nothing there and prefers unused reservations / lowers spot
        # preemption risk (the provider's `location_policy` text); flex-start asks for it. The ladder's other
        # pools keep GKE's default.
        pool["autoscaling"]["location_policy"] = "ANY"
    return {"node_config": node_config, "pool": pool}


def autoscaled(node_count: int) -> dict[str, Any]:
    """The GPU pool's `autoscaling` block: from 0 to `nodeCount` nodes in all (total limits, not per zone)."""
    return {"total_min_node_count": 0, "total_max_node_count": node_count}


@dataclass(frozen=True)
class GkeClusterArgs:
    """What `GkeCluster` needs. `gpu_pool` and `system_pool_name` are the plan-time facts of
    `infra.placement`: the pools are created under those names, and workloads read the same values."""

    ctx: StackContext
    cluster: ClusterConfig
    gpu_pool_config: GpuPoolConfig
    flavour: Flavour
    network: ClusterNetwork
    legacy_lustre_port: bool
    """`lustre.legacyPort` as the Lustre CSI driver needs it (`StackConfig.lustre_needs_legacy_port`)."""
    gpu_pool: GpuPoolFacts
    system_pool_name: str


class GkeCluster(pulumi.ComponentResource):
    """A GKE Standard cluster (regional control plane by default) with a CPU system pool and a multi-NIC
    GPU pool, both in the stack's zone. Hands on what `infra.gke_common.ClusterComponent` lists."""

    cluster: gcp.container.Cluster
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    ca_certificate: Optional[pulumi.Output[str]]
    """The cluster CA (`masterAuth.clusterCaCertificate`) for the IP endpoint, as a kubeconfig wants it;
    None for the DNS endpoint, whose certificate is publicly trusted (clients use the system roots)."""
    control_plane_access: str
    location: str
    """The region (`cluster.controlPlaneLocation: regional`) or the zone."""
    project: str
    node_service_account: gcp.serviceaccount.Account
    node_service_account_grants: list[gcp.projects.IAMMember]
    system_pool: gcp.container.NodePool
    gpu_pool: gcp.container.NodePool
    """The GPU pool (the ladder's first rung when there is a ladder)."""
    gpu_pools: list[gcp.container.NodePool]
    """Every GPU pool: one, or one per rung of the capacity ladder (`gpu_pool_facts.rung_pools` order)."""
    node_pools: list[gcp.container.NodePool]
    node_pool_names: tuple[str, ...]
    gpu_pool_facts: GpuPoolFacts
    credentials_command: pulumi.Output[str]
    node_name_prefix = "gke"
    """GKE names this cluster's node VMs `gke-<cluster>-<pool>-...`."""
    workload_pool: pulumi.Output[str]

    def __init__(self, name: str, args: GkeClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:GkeCluster", name, None, opts)
        self._opts = opts
        ctx = args.ctx
        self.location = cluster_location(ctx, args.cluster)
        self.project = ctx.project
        self.gpu_pool_facts = args.gpu_pool
        labels = ctx.labels(COMPONENT)

        node_identity = self._node_identity(name, ctx)
        self._cluster(name, args, node_identity, labels)
        self._system_pool(name, ctx, args.cluster, args.system_pool_name, node_identity, labels)
        self._gpu_pool(name, args, node_identity, labels)
        self.node_pools = [self.system_pool, *self.gpu_pools]
        self.node_pool_names = (args.system_pool_name, *args.gpu_pool.pool_names)
        self._endpoints(ctx, args.cluster)
        self.register_outputs(
            {**handed_on_outputs(self), "systemPool": self.system_pool.name, "gpuPool": self.gpu_pool.name}
        )

    # ------------------------------------------------------------------ node identity

    def _node_identity(self, name: str, ctx: StackContext) -> dict[str, Any]:
        """The node VMs' service account and its grants; returns the node config every pool shares."""
        # The caller's depends_on (the APIs these resources call) holds for each child.
        self.node_service_account, self.node_service_account_grants = node_service_account(
            self, name, ctx, child_options(self, self._opts)
        )
        return {
            "service_account": self.node_service_account.email,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
            "shielded_instance_config": dict(SHIELDED_INSTANCE_CONFIG),
        }

    # ------------------------------------------------------------------ the cluster

    def _cluster(self, name: str, args: GkeClusterArgs, node_identity: dict[str, Any], labels: dict[str, str]) -> None:
        ctx, cfg, networking = args.ctx, args.cluster, args.network
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=ctx.name("gke", Limit.GKE_CLUSTER),
            project=ctx.project,
            location=self.location,
            # A regional cluster would spread its (removed) default pool over three zones; every node of
            # this cluster belongs in `zone`, next to the RoCE VPC and Lustre. A zonal cluster's own zone
            # must not be listed (it is implied).
            node_locations=[ctx.zone] if self.location != ctx.zone else None,
            description="nemo-rl-gke: GRPO training with NeMo-RL on Ray",
            network=networking.primary_network,
            subnetwork=networking.primary_subnet,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=ip_allocation_policy(networking),
            # Multi-networking (the extra NICs in pods) requires Dataplane V2
            # (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods).
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=True,
            workload_identity_config={"workload_pool": f"{ctx.project}.svc.id.goog"},
            addons_config=addons_config(args.legacy_lustre_port),
            monitoring_config={
                "enable_components": list(MONITORING_COMPONENTS),
                "managed_prometheus": {"enabled": True},
            },
            release_channel={"channel": cfg.release_channel},
            # Unset: the channel's default version, which GKE keeps available; a pinned minimum is refused
            # once it leaves the channel.
            min_master_version=cfg.min_master_version,
            maintenance_policy=maintenance_policy(cfg),
            **control_plane_settings(cfg),
            enable_shielded_nodes=True,
            deletion_protection=cfg.deletion_protection,
            resource_labels=labels,
            # The default pool cannot have the GPU pool's settings; the API needs one node to create
            # the cluster, and the provider deletes that pool right after. Even that node runs as the
            # dedicated account (projects whose policy disables the default account need this).
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=dict(node_identity),
            opts=child_options(
                self,
                self._opts,
                depends_on=self.node_service_account_grants,
                custom_timeouts=CLUSTER_TIMEOUTS,
                # GKE's deletionProtection only refuses the cluster's own delete, which `pulumi destroy`
                # reaches last: Lustre (exported), the node pools and every in-cluster object would go
                # first. Pulumi's `protect` refuses in the preview instead: DeleteStep.Apply checks it
                # before its dry-run branch, so the preview of `pulumi destroy` fails ("cannot be deleted
                # because it is protected") and nothing is executed (pulumi/pulumi
                # pkg/resource/deploy/step.go, pkg/backend/apply.go PreviewThenPromptThenExecute). Only a
                # destroy that skips the preview (`--skip-preview`, the Automation API) still deletes the
                # rest first; docs/deploy.md says so. Both flags follow `cluster.deletionProtection`.
                protect=cfg.deletion_protection,
                # `nodeConfig` only shapes the removed default pool; once it is gone the API may report
                # another pool's config there, and a diff on it would replace the whole cluster.
                ignore_changes=["nodeConfig"],
            ),
        )
        self.name = self.cluster.name
        self.workload_pool = self.cluster.workload_identity_config.apply(workload_pool_of)

    def _pool_opts(self) -> pulumi.ResourceOptions:
        # The grants first: a node that cannot write logs or pull images comes up broken.
        return child_options(
            self,
            self._opts,
            depends_on=[self.cluster, *self.node_service_account_grants],
            custom_timeouts=NODE_POOL_TIMEOUTS,
            # Both pools have fixed names, which workloads select by (`cloud.google.com/gke-nodepool`,
            # known at plan time), and the bridge gives `google_container_node_pool` neither
            # auto-naming nor delete-before-replace: by default the engine creates the replacement
            # first and GKE answers 409 "already exists" (pulumi/pulumi issue 1620). Creating first
            # would also need a second pool's worth of GPUs (spot or a reservation seldom has them).
            # So a ForceNew edit (tools/pool_replacement.py lists them) deletes the pool first: the
            # engine first deletes what is replaced with it (the job submission, `replaceWith`,
            # stopped cleanly), then the pool, then creates both again (pulumi/pulumi
            # pkg/resource/deploy/step_generator.go, the delete-before-replace branch with
            # calculateDependentReplacements and findDependentCascadeReplacements). The in-cluster
            # objects only `dependsOn` the pools and stay; their pods wait Pending for the new nodes.
            delete_before_replace=True,
        )

    # ------------------------------------------------------------------ node pools

    def _system_pool(
        self,
        name: str,
        ctx: StackContext,
        cfg: ClusterConfig,
        pool_name: str,
        node_identity: dict[str, Any],
        labels: dict[str, str],
    ) -> None:
        system = cfg.system_pool
        self.system_pool = gcp.container.NodePool(
            f"{name}-system-pool",
            name=pool_name,
            project=ctx.project,
            cluster=self.cluster.name,
            location=self.location,
            # In the GPU pool's zone: the Ray head talks to the workers and to Lustre without crossing zones.
            node_locations=[ctx.zone],
            node_count=system.node_count,
            node_config={
                "machine_type": system.machine_type,
                "disk_type": SYSTEM_DISK_TYPE,
                "disk_size_gb": system.disk_size_gb,
                "image_type": "COS_CONTAINERD",
                **node_identity,
                # Pods authenticate as their Kubernetes service account (Workload Identity).
                "workload_metadata_config": {"mode": "GKE_METADATA"},
                "resource_labels": labels,
            },
            management={"auto_repair": True, "auto_upgrade": True},
            opts=self._pool_opts(),
        )

    def _gpu_pool(self, name: str, args: GkeClusterArgs, node_identity: dict[str, Any], labels: dict[str, str]) -> None:
        facts = self.gpu_pool_facts
        if not facts.rung_pools:
            self.gpu_pools = [
                self._one_gpu_pool(f"{name}-gpu-pool", facts.pool_name, None, args, node_identity, labels)
            ]
        else:
            # One pool per rung, all alike but for how the nodes are obtained (infra/compute_class.py).
            rungs = dict(zip((p.name for p in facts.rung_pools), args.gpu_pool_config.ladder, strict=True))
            self.gpu_pools = [
                self._one_gpu_pool(f"{name}-{rung_pool_role(rung)}-pool", pool, rung, args, node_identity, labels)
                for pool, rung in rungs.items()
            ]
        self.gpu_pool = self.gpu_pools[0]

    def _one_gpu_pool(
        self,
        resource_name: str,
        pool_name: str,
        rung: Optional[Rung],
        args: GkeClusterArgs,
        node_identity: dict[str, Any],
        labels: dict[str, str],
    ) -> gcp.container.NodePool:
        ctx, pool_cfg = args.ctx, args.gpu_pool_config
        provisioning = provisioning_settings(pool_cfg, rung)
        node_config = gpu_node_config(pool_cfg, args.flavour, node_identity, labels, rung)
        if self.gpu_pool_facts.compute_class:
            # What GKE requires of a manually created pool a custom ComputeClass names (naming.COMPUTE_CLASS_LABEL).
            node_config["labels"] = {COMPUTE_CLASS_LABEL: self.gpu_pool_facts.compute_class}
            node_config["taints"] = [
                *node_config["taints"],
                {"key": COMPUTE_CLASS_LABEL, "value": self.gpu_pool_facts.compute_class, "effect": "NO_SCHEDULE"},
            ]
        gpu_args: dict[str, Any] = {
            "node_config": node_config,
            # eth1 = gVNIC, eth2.. = rdma-0..; GKE numbers interfaces in this order, and the pods'
            # interface annotation and the GKE Network objects (from `nics`) assume the same order.
            "network_config": {
                "additional_node_network_configs": [
                    {"network": network, "subnetwork": subnet} for network, subnet in args.network.node_networks
                ]
            },
            # No spare GPU capacity to surge into: upgrade one node at a time in place.
            "upgrade_settings": {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1},
            **provisioning["pool"],
        }
        if pool_cfg.compact_placement:
            # Nodes on nearby hosts: lower latency for the RDMA all-reduce.
            gpu_args["placement_policy"] = {"type": "COMPACT"}
        return gcp.container.NodePool(
            resource_name,
            name=pool_name,
            project=ctx.project,
            cluster=self.cluster.name,
            location=self.location,
            # The RoCE subnets exist only for this zone.
            node_locations=[ctx.zone],
            opts=self._pool_opts(),
            **gpu_args,
        )

    # ------------------------------------------------------------------ how clients connect

    def _endpoints(self, ctx: StackContext, cfg: ClusterConfig) -> None:
        self.control_plane_access = cfg.control_plane_access
        self.endpoint, self.ca_certificate = client_endpoint(self.cluster, cfg)
        self.credentials_command = credentials_command(
            self.cluster.name, self.location, ctx.project, dns=cfg.control_plane_access == "dns"
        )


def gpu_node_config(
    pool_cfg: GpuPoolConfig,
    flavour: Flavour,
    node_identity: dict[str, Any],
    labels: dict[str, str],
    rung: Optional[Rung] = None,
) -> dict[str, Any]:
    """The GPU pool's `nodeConfig` (snake_case): the flavour's machine, GPUs, disks and taint, the node
    identity, and what the capacity type (of `rung`, or the one pool's) adds (`provisioning_settings`)."""
    provisioning = provisioning_settings(pool_cfg, rung)
    return {
        "machine_type": flavour.machine_type,
        "guest_accelerators": [
            {
                "type": flavour.accelerator_type,
                "count": flavour.gpus_per_node,
                "gpu_driver_installation_config": {"gpu_driver_version": pool_cfg.gpu_driver_version},
            }
        ],
        "image_type": flavour.image_type,
        # A3 Ultra and A4 boot only from Hyperdisk
        # (https://cloud.google.com/compute/docs/accelerator-optimized-machines); the flavour names the type.
        "disk_type": flavour.boot_disk_type,
        "disk_size_gb": flavour.boot_disk_size_gb,
        # The bundled NVMe local SSDs back ephemeral storage (image layers, emptyDirs, Ray spill)
        # instead of the boot disk, and declaring them keeps the pool from diffing against what GKE
        # reports (terraform-provider-google#17068: replaced on every update otherwise).
        **(
            {"ephemeral_storage_local_ssd_config": {"local_ssd_count": flavour.local_ssd_count}}
            if flavour.local_ssd_count
            else {}
        ),
        # The second NIC (eth1) is a gVNIC; GKE only attaches it when gVNIC is enabled.
        "gvnic": {"enabled": True},
        # Keeps CPU-only pods (add-ons, the Ray head) off the GPU nodes.
        "taints": [dict(flavour.gpu_taint)],
        **node_identity,
        "workload_metadata_config": {"mode": "GKE_METADATA"},
        "resource_labels": labels,
        **provisioning["node_config"],
        **image_cache_settings(pool_cfg),
    }


SECONDARY_BOOT_DISK_MIN_GKE = "1.28.3-gke.1067000"
"""Secondary boot disks on Standard clusters ("Use secondary boot disks to preload data or container images",
https://cloud.google.com/kubernetes-engine/docs/how-to/data-container-image-preloading, Overview). Below the
Lustre CSI driver's floor the config already enforces (infra/lustre_catalogue.py LUSTRE_CSI_MIN_GKE), so no
accepted `cluster.minMasterVersion` is too old for it (tests/test_cluster.py holds that order)."""


def image_cache_settings(pool_cfg: GpuPoolConfig) -> dict[str, Any]:
    """`gpuPool.imageCacheDiskImage`: the disk image as a secondary boot disk in CONTAINER_IMAGE_CACHE mode, and
    image streaming (`gcfs_config`), which that mode needs (the same GKE page; the provider's
    `secondary_boot_disks` text: "`gcfs_config` must be `enabled=true` for this feature to work"). Each node gets
    its own disk from the image, of the boot disk's type (hyperdisk-balanced on A4/A3 Ultra: that GKE accepts
    it there is known only on a real cluster). `secondaryBootDisks` is ForceNew (tools/pool_replacement.py):
    setting, changing or removing the image replaces the pool. Empty when unset."""
    if not pool_cfg.image_cache_disk_image:
        return {}
    return {
        "secondary_boot_disks": [{"disk_image": pool_cfg.image_cache_disk_image, "mode": "CONTAINER_IMAGE_CACHE"}],
        "gcfs_config": {"enabled": True},
    }
