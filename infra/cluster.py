"""The GKE Standard cluster and its two node pools (`cluster.mode: standard`, the default; Autopilot is
infra/autopilot_cluster.py, which shares the helpers here).

Every node is in one zone (that of the RoCE VPC and of Lustre), because the GPU nodes' RDMA NICs can
only attach to subnets of a RoCE network pinned to that zone
(https://cloud.google.com/vpc/docs/rdma-network-profiles). The control
plane is regional by default, as in both seeds and Google's A4/A3 Ultra blueprints (cluster-toolkit
modules/scheduler/gke-cluster: `cluster_availability_type` REGIONAL, the GPU pool's `zones: [zone]`):
replicas in several zones keep the API up during control-plane upgrades, when the preemption watcher,
`pulumi` and `python -m workloads` need it. `cluster.controlPlaneLocation: zonal` keeps one control
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

from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig, GpuPoolConfig, Provisioning, StackConfig
from infra.stack_context import GpuPoolFacts, StackContext
from infra.flavours import Flavour
from infra.naming import Limit
from infra.autopilot_pods import gpu_node_labels
from infra.network import Networking, nic_attachments
from infra.options import child_options

COMPONENT = "gke"

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""Node VM scope: access is governed by IAM on the node service account, not by legacy scopes."""

NODE_SERVICE_ACCOUNT_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
)
"""What the node VMs need: GKE's least-privilege role for node service accounts (logs, metrics,
resource metadata, autoscaling metrics) and image pulls from Artifact Registry (GKE "Configure GKE node
service accounts", docs.cloud.google.com/kubernetes-engine/security/configure-node-service-accounts;
CIS GKE Benchmark 2.0 5.2.1). Replaces the older list of logWriter, metricWriter, monitoring.viewer
and resourceMetadata.writer that the role bundles."""

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
1.33.2-gke.1111000, which the config enforces (infra/config.py LUSTRE_CSI_MIN_GKE)."""

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
UPGRADE_EXCLUSION_START = "2026-01-01T00:00:00Z"
SYSTEM_DISK_TYPE = "pd-balanced"

# GKE spells taint effects as the API enum, Kubernetes as the core/v1 string.
_K8S_TAINT_EFFECT = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}

# Node pool operations queue behind each other on one cluster, and a GPU pool waits for capacity:
# an hour-plus create is normal for A4/A3 Ultra (an estimate, known only on the real cloud).
NODE_POOL_TIMEOUTS = pulumi.CustomTimeouts(create="120m", update="120m", delete="60m")
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="90m", delete="60m")


def kubernetes_taint(gke_taint: dict[str, str]) -> dict[str, str]:
    """A GKE node pool taint ({key, value, effect: NO_SCHEDULE}) in the form pods tolerate."""
    return {"key": gke_taint["key"], "value": gke_taint["value"], "effect": _K8S_TAINT_EFFECT[gke_taint["effect"]]}


def maintenance_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """The daily window, and (by default) an exclusion that keeps GKE from upgrading nodes mid-run.

    Node upgrades recreate GPU nodes and kill the Ray workers of a running job; the exclusion blocks
    minor and node upgrades until the version's end of support while control-plane patches continue
    (the scope Google's A4 and Managed Lustre Cluster Toolkit blueprints use). Upgrade the pools by
    hand between runs. The start time is fixed, not "now", so the cluster does not diff on every run;
    a start in the past is accepted (those blueprints use one).
    """
    policy: dict[str, Any] = {"daily_maintenance_window": {"start_time": cfg.maintenance_start_time}}
    if cfg.block_node_upgrades:
        policy["maintenance_exclusions"] = [
            {
                "exclusion_name": "no-minor-or-node-upgrades",
                "start_time": UPGRADE_EXCLUSION_START,
                "exclusion_options": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "end_time_behavior": "UNTIL_END_OF_SUPPORT"},
            }
        ]
    return policy


def cluster_location(ctx: StackContext, cfg: ClusterConfig) -> str:
    """Where the control plane lives (`cluster.controlPlaneLocation`): the region, or the zone."""
    return ctx.region if cfg.control_plane_location == "regional" else ctx.zone


def credentials_command(
    cluster_name: pulumi.Input[str], location: str, project: str, *, dns: bool, location_flag: str = "--location"
) -> pulumi.Output[str]:
    """The gcloud command that writes a kubeconfig entry for the cluster (at its DNS endpoint when `dns`);
    `--location` takes a region or a zone."""
    return pulumi.Output.concat(
        "gcloud container clusters get-credentials ",
        cluster_name,
        f" {location_flag} ",
        location,
        " --project ",
        project,
        " --dns-endpoint" if dns else "",
    )


def control_plane_settings(cfg: ClusterConfig) -> dict[str, Any]:
    """Cluster arguments (snake_case) for how clients reach the control plane (`cluster.controlPlaneAccess`).

    Nodes get internal IPs only either way. Without `masterIpv4CidrBlock` GKE (1.29+) connects them to
    the control plane over Private Service Connect, which does not use the endpoints set here.

    Both endpoint blocks are always spelled out: the provider fills an omitted block from the cloud
    (optional + computed), so leaving one out on a switch between `dns` and `ip` would change nothing.
    """
    if cfg.control_plane_access == "dns":
        return {
            # With the IP endpoints off the provider reads `enablePrivateEndpoint` back as true
            # (terraform-provider-google's flattening of ipEndpointsConfig); saying so avoids a diff on
            # every preview. Only on the real cloud: that the read-back matches.
            "private_cluster_config": {"enable_private_nodes": True, "enable_private_endpoint": True},
            # Only on the real cloud: that turning the IP endpoints off at creation leaves nothing
            # (add-ons, the Lustre CSI driver, the Ray operator) needing them; GKE documents the DNS
            # endpoint as serving every Kubernetes API request, service proxy included.
            "control_plane_endpoints_config": {
                "dns_endpoint_config": {"allow_external_traffic": True},
                "ip_endpoints_config": {"enabled": False},
            },
        }
    return {
        # The public endpoint stays for `pulumi up` and kubectl, restricted by the authorized networks;
        # the DNS endpoint is closed to user traffic so the allow-list is the only way in.
        "private_cluster_config": {"enable_private_nodes": True, "enable_private_endpoint": False},
        "control_plane_endpoints_config": {
            "dns_endpoint_config": {"allow_external_traffic": False},
            "ip_endpoints_config": {"enabled": True},
        },
        "master_authorized_networks_config": _authorized_networks(cfg),
    }


def provisioning_settings(pool_cfg: GpuPoolConfig) -> dict[str, Any]:
    """Node pool arguments (snake_case) that follow from how GPU capacity is obtained.

    - spot: `nodeConfig.spot`; preemptible and cheapest, the codelab's and tutorial's choice.
    - reservation: consume exactly the named reservation (SPECIFIC_RESERVATION with the
      reservation-name key), so the pool never silently falls back to on-demand capacity.
    - flexStart: Dynamic Workload Scheduler with queued provisioning, as the GKE guide "flex-start
      with queued provisioning" configures it: `--flex-start --enable-queued-provisioning
      --enable-autoscaling --num-nodes=0 --total-max-nodes N --location-policy=ANY
      --reservation-affinity=none --no-enable-autorepair`. The pool starts empty; nodes come only
      through a ProvisioningRequest (or Kueue), all at once, for at most seven days. Whoever
      deploys the Ray workers must create that request, or the workers stay Pending.
    - onDemand: nothing special; GKE may use a matching automatic reservation.
    """
    node_config: dict[str, Any] = {}
    pool: dict[str, Any] = {"management": {"auto_repair": True, "auto_upgrade": True}}
    mode = pool_cfg.provisioning
    if mode is Provisioning.SPOT:
        node_config["spot"] = True
        # Spot VMs never come out of a reservation; saying so keeps GKE from matching (and holding) an
        # automatic reservation for a pool that cannot use it. Cluster Toolkit refuses spot with any
        # other type (GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool/main.tf at
        # 10470803, the precondition "Spot consumption option only works with reservation_affinity
        # consume_reservation_type NO_RESERVATION"). ForceNew upstream: a live spot pool is replaced
        # once when this lands (deleted first, `POOL_REPLACEMENT`).
        node_config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        pool["node_count"] = pool_cfg.node_count
    elif mode is Provisioning.RESERVATION:
        node_config["reservation_affinity"] = {
            "consume_reservation_type": "SPECIFIC_RESERVATION",
            "key": RESERVATION_KEY,
            "values": [pool_cfg.reservation_name],
        }
        pool["node_count"] = pool_cfg.node_count
    elif mode is Provisioning.FLEX_START:
        node_config["flex_start"] = True
        node_config["reservation_affinity"] = {"consume_reservation_type": "NO_RESERVATION"}
        pool["queued_provisioning"] = {"enabled": True}
        pool["initial_node_count"] = 0
        pool["autoscaling"] = {
            "total_min_node_count": 0,
            "total_max_node_count": pool_cfg.node_count,
            "location_policy": "ANY",
        }
        # Queued-provisioning nodes are not repaired (the guide's --no-enable-autorepair): a repair
        # would recreate a node outside the request that obtained it.
        pool["management"] = {"auto_repair": False, "auto_upgrade": True}
    else:
        pool["node_count"] = pool_cfg.node_count
    return {"node_config": node_config, "pool": pool}


class GkeCluster(pulumi.ComponentResource):
    """A GKE Standard cluster (regional control plane by default) with a CPU system pool and a multi-NIC
    GPU pool, both in the stack's zone."""

    cluster: gcp.container.Cluster
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    """Where API clients connect: the DNS endpoint's host name (`controlPlaneAccess: dns`) or the IP."""
    ca_certificate: Optional[pulumi.Output[str]]
    """Base64 PEM of the CA that signs `endpoint`'s certificate, as a kubeconfig wants it: the cluster CA
    (`masterAuth.clusterCaCertificate`) for the IP endpoint; None for the DNS endpoint, whose
    certificate is publicly trusted (clients use the system roots)."""
    control_plane_access: str
    location: str
    """The location of the control plane: the region (`cluster.controlPlaneLocation: regional`) or the zone.
    Every node is in the stack's zone either way."""
    project: str
    node_service_account: gcp.serviceaccount.Account
    """The identity of every node VM (not of the pods)."""
    node_service_account_grants: list[gcp.projects.IAMMember]
    system_pool: gcp.container.NodePool
    gpu_pool: gcp.container.NodePool
    node_pools: list[gcp.container.NodePool]
    """Every node pool; Kubernetes objects that need nodes should depend on these."""
    gpu_pool_facts: GpuPoolFacts
    """What workloads need to target and configure the GPU nodes (plan-time data)."""
    credentials_command: pulumi.Output[str]
    node_name_prefix = "gke"
    """How GKE starts the names of this cluster's node VMs (`gke-<cluster>-<pool>-...`)."""
    workload_pool: pulumi.Output[str]
    """The Workload Identity pool as the cluster reports it: grants to Kubernetes service accounts take it
    from here, so they wait for the cluster that creates the pool."""

    def __init__(
        self,
        name: str,
        ctx: StackContext,
        cfg: ClusterConfig,
        pool_cfg: GpuPoolConfig,
        flavour: Flavour,
        networking: Networking,
        legacy_lustre_port: bool,
        *,
        gpu_pool: GpuPoolFacts,
        system_pool_name: str,
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        """`gpu_pool` and `system_pool_name` are the plan-time facts of `gpu_pool_facts` and
        `system_pool_name`: the pools are created under those names, and workloads read the same values."""
        super().__init__("nemo-rl-gke:infra:GkeCluster", name, None, opts)
        self._opts = opts
        self.location = cluster_location(ctx, cfg)
        self.project = ctx.project
        self.gpu_pool_facts = gpu_pool
        labels = ctx.labels(COMPONENT)

        node_identity = self._node_identity(name, ctx)
        self._cluster(name, ctx, cfg, networking, legacy_lustre_port, node_identity, labels)
        self._system_pool(name, ctx, cfg, system_pool_name, node_identity, labels)
        self._gpu_pool(name, ctx, pool_cfg, flavour, networking, node_identity, labels)
        self.node_pools = [self.system_pool, self.gpu_pool]
        self._endpoints(ctx, cfg)
        self.register_outputs(
            {
                "name": self.name,
                "endpoint": self.endpoint,
                "controlPlaneAccess": self.control_plane_access,
                "location": self.location,
                "credentialsCommand": self.credentials_command,
                "workloadPool": self.workload_pool,
                "systemPool": self.system_pool.name,
                "nodeServiceAccount": self.node_service_account.email,
                "gpuPool": self.gpu_pool.name,
                "gpuPoolFacts": {
                    "poolName": gpu_pool.pool_name,
                    "nodeCount": gpu_pool.node_count,
                    "gpusPerNode": gpu_pool.gpus_per_node,
                    "acceleratorType": gpu_pool.accelerator_type,
                    "taints": list(gpu_pool.taints),
                    "nics": [n.interface for n in gpu_pool.nics],
                },
            }
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

    def _cluster(
        self,
        name: str,
        ctx: StackContext,
        cfg: ClusterConfig,
        networking: Networking,
        legacy_lustre_port: bool,
        node_identity: dict[str, Any],
        labels: dict[str, str],
    ) -> None:
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
            addons_config=addons_config(legacy_lustre_port),
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

    def _gpu_pool(
        self,
        name: str,
        ctx: StackContext,
        pool_cfg: GpuPoolConfig,
        flavour: Flavour,
        networking: Networking,
        node_identity: dict[str, Any],
        labels: dict[str, str],
    ) -> None:
        provisioning = provisioning_settings(pool_cfg)
        gpu_node_config: dict[str, Any] = {
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
        }
        gpu_args: dict[str, Any] = {
            "node_config": gpu_node_config,
            # eth1 = gVNIC, eth2.. = rdma-0..; GKE numbers interfaces in this order, and the pods'
            # interface annotation and the GKE Network objects (from `nics`) assume the same order.
            "network_config": {
                "additional_node_network_configs": [
                    {"network": networking.gvnic_network_name, "subnetwork": networking.gvnic_subnet_name},
                    *(
                        {"network": networking.rdma_network_name, "subnetwork": subnet}
                        for subnet in networking.rdma_subnet_names
                    ),
                ]
            },
            # No spare GPU capacity to surge into: upgrade one node at a time in place.
            "upgrade_settings": {"strategy": "SURGE", "max_surge": 0, "max_unavailable": 1},
            **provisioning["pool"],
        }
        if pool_cfg.compact_placement:
            # Nodes on nearby hosts: lower latency for the RDMA all-reduce.
            gpu_args["placement_policy"] = {"type": "COMPACT"}
        self.gpu_pool = gcp.container.NodePool(
            f"{name}-gpu-pool",
            name=self.gpu_pool_facts.pool_name,
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


def node_service_account(
    parent: pulumi.Resource, name: str, ctx: StackContext, child: Optional[pulumi.ResourceOptions] = None
) -> tuple[gcp.serviceaccount.Account, list[gcp.projects.IAMMember]]:
    """The node VMs' dedicated service account (no keys) and its grants of `NODE_SERVICE_ACCOUNT_ROLES`;
    `child`: their resource options (default: children of `parent`)."""
    child = child or pulumi.ResourceOptions(parent=parent)
    account = gcp.serviceaccount.Account(
        f"{name}-node-sa",
        account_id=ctx.name("nodes", Limit.SERVICE_ACCOUNT_ID),
        project=ctx.project,
        display_name=f"nemo-rl-gke nodes ({ctx.stack})",
        description="Identity of the GKE node VMs: logs, metrics, image pulls. No keys.",
        opts=child,
    )
    grants = [
        gcp.projects.IAMMember(
            f"{name}-node-sa-{role.removeprefix('roles/').replace('.', '-')}",
            project=ctx.project,
            role=role,
            member=account.member,
            opts=child,
        )
        for role in NODE_SERVICE_ACCOUNT_ROLES
    ]
    return account, grants


def client_endpoint(
    cluster: gcp.container.Cluster, cfg: ClusterConfig
) -> tuple[pulumi.Output[str], Optional[pulumi.Output[str]]]:
    """Where API clients connect and the CA to verify it with (None for the publicly trusted DNS endpoint)."""
    if cfg.control_plane_access == "dns":
        return cluster.control_plane_endpoints_config.apply(_dns_endpoint), None
    return cluster.endpoint, cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)


def system_pool_name(ctx: StackContext, cfg: StackConfig) -> Optional[str]:
    """The CPU pool's name: the Ray head and the watcher select it by this (plan-time) value. None on
    Autopilot, which has no pools: they run on its default general-purpose compute class."""
    if cfg.cluster.mode == "autopilot":
        return None
    return ctx.name("system", Limit.GKE_NODE_POOL)


def gpu_pool_facts(ctx: StackContext, cfg: StackConfig) -> GpuPoolFacts:
    """What workloads need to know about the GPU pool, decided before any resource exists.

    The program and `python -m workloads` both take the pool from here, so they build the same job.
    """
    flavour = cfg.flavour_spec
    if cfg.cluster.mode == "autopilot":
        # No pool: the workers select the GPU nodes GKE makes for them by label (infra/autopilot_pods.py).
        pool_name = f"autopilot-{flavour.accelerator_type}"
        node_labels = gpu_node_labels(
            zone=ctx.zone,
            accelerator_type=flavour.accelerator_type,
            gpus_per_node=flavour.gpus_per_node,
            provisioning=cfg.gpu_pool.provisioning,
            reservation_name=cfg.gpu_pool.reservation_name,
        )
    else:
        pool_name, node_labels = ctx.name("gpu", Limit.GKE_NODE_POOL), ()
    return GpuPoolFacts(
        pool_name=pool_name,
        node_count=cfg.gpu_pool.node_count,
        gpus_per_node=flavour.gpus_per_node,
        accelerator_type=flavour.accelerator_type,
        machine_type=flavour.machine_type,
        vcpus=flavour.vcpus,
        memory_gib=flavour.memory_gib,
        nccl_tuner_config=flavour.nccl_tuner_config,
        taints=(kubernetes_taint(flavour.gpu_taint),),
        nics=nic_attachments(ctx, flavour),
        node_labels=node_labels,
    )


def addons_config(legacy_lustre_port: bool) -> dict[str, Any]:
    """The cluster add-ons (snake_case): Ray operator, Lustre CSI, GCS FUSE CSI."""
    return {
        "ray_operator_configs": [
            {
                "enabled": True,
                "ray_cluster_logging_config": {"enabled": True},
                "ray_cluster_monitoring_config": {"enabled": True},
            }
        ],
        "lustre_csi_driver_config": {
            "enabled": True,
            "enable_legacy_lustre_port": legacy_lustre_port,
            # From GKE 1.35.2-gke.1842000 the driver spreads Lustre TCP over every standard NIC,
            # which the Lustre docs allow only when all of them are on one VPC. The GPU nodes'
            # eth1 is on the gVNIC VPC, which has no peering to Lustre: keep Lustre on eth0.
            # Only on the real cloud: whether the driver would have skipped eth1 by itself.
            "disable_multi_nic": True,
        },
        # Lets pods mount the artifact bucket as a volume; free when unused.
        "gcs_fuse_csi_driver_config": {"enabled": True},
    }


def workload_pool_of(config: Any) -> str:
    """`workloadIdentityConfig.workloadPool` as the cluster reports it (`<project>.svc.id.goog`)."""
    pool = getattr(config, "workload_pool", None) if config is not None else None
    if not pool:
        raise ValueError("the cluster reports no workloadIdentityConfig.workloadPool; Workload Identity is off")
    return pool


def _dns_endpoint(config: Any) -> str:
    """The host name of the DNS endpoint (`controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint`)."""
    dns = getattr(config, "dns_endpoint_config", None) if config is not None else None
    endpoint = getattr(dns, "endpoint", None) if dns is not None else None
    if not endpoint:
        # GKE documents the field as always present; a provider that did not read it back would
        # otherwise leave the Kubernetes provider with an empty server address.
        raise ValueError("the cluster reports no controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint; "
                         "set cluster.controlPlaneAccess: ip to use the IP endpoint")
    return endpoint


def ip_allocation_policy(networking: Networking) -> dict[str, Any]:
    """Pods and services from the subnet's named ranges, or GKE-made ranges on the default network."""
    if networking.pods_range_name and networking.services_range_name:
        return {
            "cluster_secondary_range_name": networking.pods_range_name,
            "services_secondary_range_name": networking.services_range_name,
        }
    # The default subnet is not ours to add ranges to: GKE creates them from these CIDRs.
    return {
        "cluster_ipv4_cidr_block": networking.pods_cidr,
        "services_ipv4_cidr_block": networking.services_cidr,
    }


def _authorized_networks(cfg: ClusterConfig) -> Optional[dict[str, Any]]:
    """The configured CIDRs, and nothing else (not even Google Cloud's public ranges).

    None only when the user opened the control plane on purpose (`cluster.allowPublicControlPlane`;
    config validation refuses an empty list otherwise): an empty block would lock everyone out,
    `pulumi up` included.
    """
    if not cfg.master_authorized_networks:
        if not cfg.allow_public_control_plane:
            raise ValueError("cluster.masterAuthorizedNetworks is empty and cluster.allowPublicControlPlane is false")
        return None
    return {
        "cidr_blocks": [
            {"cidr_block": n.cidr_block, "display_name": n.display_name or n.cidr_block}
            for n in cfg.master_authorized_networks
        ],
        "gcp_public_cidrs_access_enabled": False,
    }
