"""`cluster`: the GKE cluster, its control plane and its CPU system pool; and the checks of
`cluster.*` that need other sections (run by `StackConfig`, in its order)."""

from __future__ import annotations

import ipaddress
import math
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown
from infra.config.gpu_pool import GpuPoolConfig, Provisioning
from infra.config.patterns import GKE_VERSION, HH_MM
from infra.config.ray import RayConfig
from infra.flavours import FLAVOURS, Flavour, parse_gke_version
from infra.lustre_catalogue import LUSTRE_CSI_MIN_GKE, LUSTRE_PORT_988_MIN_GKE
from infra.machines import (
    AUTOPILOT_GENERAL_PURPOSE_MAX_CPU,
    AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB,
    SYSTEM_POOL_MACHINES,
    is_gpu_machine_type,
    system_node_room,
)


class SystemPoolConfig(Model):
    """The CPU system pool that hosts the Ray head and cluster add-ons."""

    machine_type: str = Field("n2-highmem-16", pattern=r"^[a-z0-9]+-[a-z0-9-]+$")
    """Machine type of the CPU pool (16 vCPU / 128 GiB by default): one of the catalogue of infra/machines.py, the N2
    types the cost estimate can price, that fits the Ray head (`ray.headCpu`, `ray.headMemoryGib`) after GKE's
    reservations; GPU machine types are refused."""
    allow_uncatalogued_machine_type: bool = False
    """Accept a CPU `machineType` outside the catalogue (another series, a custom type): the plan then cannot price the
    pool (it says so), and the Ray head's fit is checked only for N1/N2/N2D/E2 types."""
    node_count: int = Field(1, ge=1, le=10)
    """Nodes in the CPU pool."""
    disk_size_gb: int = Field(200, ge=10, le=65536)
    """Boot disk size of CPU nodes (GB); holds the NeMo-RL image of the Ray head. Default as in Google's A4 and A3 Ultra
    Cluster Toolkit blueprints."""


def canonical_cidr(v: str) -> str:
    """An IPv4 CIDR without host bits, in its canonical spelling."""
    allowed = "allowed: an IPv4 CIDR such as 203.0.113.7/32"
    try:
        ipaddress.IPv6Network(v, strict=False)
    except ValueError:
        pass
    else:  # the README's `curl ifconfig.me` prints an IPv6 address on an IPv6 host
        raise ValueError(
            f"{shown(v)} is an IPv6 address or range (what `curl ifconfig.me` prints on an IPv6 host), which GKE's "
            f"authorized networks do not take; {allowed}: the IPv4 egress address (`curl -4 ifconfig.me`)"
        )
    try:
        network = ipaddress.IPv4Network(v, strict=False)
    except ValueError:
        raise ValueError(f"{shown(v)} is not an IPv4 CIDR; {allowed} (address/prefix length 0-32)") from None
    if str(network.network_address) != v.partition("/")[0]:
        raise ValueError(f"{shown(v)} has host bits set; {allowed}: {network}")
    return str(network)


class AuthorizedNetwork(Model):
    """A CIDR allowed to reach the GKE control plane."""

    cidr_block: Annotated[str, AfterValidator(canonical_cidr)]
    """IPv4 CIDR, e.g. 203.0.113.0/24."""
    display_name: str = Field("", max_length=64)
    """Label shown in the console."""


def check_control_plane_access(cluster: ClusterConfig) -> None:
    """With DNS access no IP-endpoint setting (DNS access turns that endpoint off: an allow-list would protect
    nothing); with IP access an allow-list but not of every address, or else the explicit public opt-in."""
    if cluster.control_plane_access == "dns":
        if cluster.master_authorized_networks:
            raise KeyedValueError(
                "masterAuthorizedNetworks",
                "limits the IP endpoint, which cluster.controlPlaneAccess: dns turns off (IAM guards the DNS "
                "endpoint); allowed: [] with dns, or cluster.controlPlaneAccess: ip",
            )
        if cluster.allow_public_control_plane:
            raise KeyedValueError(
                "allowPublicControlPlane",
                "true opens the IP endpoint, which cluster.controlPlaneAccess: dns turns off; allowed: false "
                "with dns, or cluster.controlPlaneAccess: ip",
            )
        return
    if not cluster.master_authorized_networks and not cluster.allow_public_control_plane:
        raise KeyedValueError(
            "masterAuthorizedNetworks",
            "is empty, which would open the control plane to every address; allowed: the CIDRs `pulumi up` and "
            "kubectl connect from, e.g. `masterAuthorizedNetworks: [{cidrBlock: <your egress IP>/32}]`, or "
            "cluster.allowPublicControlPlane: true to open it on purpose",
        )
    networks = [ipaddress.IPv4Network(n.cidr_block) for n in cluster.master_authorized_networks]
    # 0.0.0.0/0 (or halves that add up to it) is the empty list's "every address", spelled so it looks
    # like an allow-list: refused the same way, pointing at the explicit opt-in.
    if networks and list(ipaddress.collapse_addresses(networks)) == [ipaddress.IPv4Network("0.0.0.0/0")]:
        raise KeyedValueError(
            "masterAuthorizedNetworks",
            f"{', '.join(str(n) for n in networks)} covers every IPv4 address, which opens the control plane to "
            "all of them; allowed: the CIDRs `pulumi up` and kubectl connect from (e.g. <your egress IP>/32), or "
            "no masterAuthorizedNetworks and cluster.allowPublicControlPlane: true to open it on purpose",
        )
    if cluster.master_authorized_networks and cluster.allow_public_control_plane:
        raise KeyedValueError(
            "allowPublicControlPlane",
            "true contradicts the configured cluster.masterAuthorizedNetworks; allowed: false (or remove "
            "masterAuthorizedNetworks to open the control plane)",
        )


class ClusterConfig(Model):
    """The GKE cluster."""

    mode: Literal["standard", "autopilot"] = "standard"
    """`standard`: a GKE Standard cluster, its control plane regional unless `controlPlaneLocation: zonal`, with a CPU
    system pool and a GPU node pool, both in `zone`. `autopilot`: a regional GKE Autopilot cluster without node pools;
    GKE makes the GPU nodes for the Ray worker pods, which select the accelerator and Spot capacity themselves (see
    docs/autopilot.md). Cannot change after creation."""
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = "REGULAR"
    """GKE release channel (Google's A4 blueprint uses REGULAR)."""
    min_master_version: Optional[str] = Field(
        None,
        pattern=GKE_VERSION,
        description="Minimum control-plane version; unset takes the channel's default. When set, at least the "
        f"flavour's minimum GKE version, and {LUSTRE_PORT_988_MIN_GKE} unless `lustre.legacyPort`.",
    )
    block_node_upgrades: bool = True
    """Add a maintenance exclusion that blocks minor and node auto-upgrades (they recreate GPU nodes mid-run);
    control-plane patches continue. Upgrade between runs."""
    deletion_protection: bool = True
    """Refuse `pulumi destroy` of the cluster until set to false."""
    maintenance_start_time: str = Field("03:00", pattern=HH_MM)
    """Daily maintenance window start (UTC, HH:MM)."""
    control_plane_location: Literal["regional", "zonal"] = "regional"
    """`regional` (default, as both seeds and Google's A4/A3 Ultra blueprints): control-plane replicas in several zones
    of `region`, so the API stays up during control-plane upgrades and a zone outage, when the preemption watcher,
    `pulumi` and `python -m jobctl` need it; both node pools stay in `zone`. `zonal`: one control plane in `zone`,
    unreachable for minutes during its upgrades; it is the one cluster the GKE free tier credits. Changing it replaces
    the cluster."""
    control_plane_access: Literal["dns", "ip"] = "dns"
    """How `pulumi up`, kubectl and `python -m jobctl` reach the API server. `dns`: only the cluster's DNS endpoint
    (`gke-<id>.<region>.gke.goog`), where Google IAM (`container.clusters.connect`) checks every request before
    Kubernetes RBAC; the IP endpoints are turned off, so there is no address to allow-list. `ip`: the public IP
    endpoint, limited to `masterAuthorizedNetworks` (or opened with `allowPublicControlPlane`)."""
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = ()
    """With `controlPlaneAccess: ip`: the CIDRs allowed to reach the control plane's public endpoint; must include where
    `pulumi up` and kubectl run. Empty is refused unless `allowPublicControlPlane` is true. Must stay empty with
    `controlPlaneAccess: dns`."""
    allow_public_control_plane: bool = False
    """With `controlPlaneAccess: ip`: open the control plane to any address (Google credentials and RBAC still required)
    when `masterAuthorizedNetworks` is empty."""
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig)
    """CPU system pool."""
    image_streaming: bool = False
    """Pull the NeMo-RL image through an Artifact Registry remote repository in `region` that proxies nvcr.io, with GKE
    Image streaming on every node pool, so a new GPU node starts the Ray worker without downloading the ~20 GB image
    first (GKE "Use Image streaming to pull container images"; Autopilot streams eligible images by itself). The Ray
    head's pull during Managed Lustre's creation fills the repository's cache, so the GPU nodes' first pull streams.
    Off by default: turning it on changes the image reference of the Ray pods, which restarts a running job from its
    last checkpoint."""

    checks = (check_control_plane_access,)


def check_min_master_version(cluster: ClusterConfig, flavour: Flavour, lustre_legacy_port: bool) -> None:
    """`cluster.minMasterVersion`, when set, is at least the flavour's minimum GKE version and the
    Lustre CSI driver's cut-offs (infra/lustre_catalogue.py)."""
    version = cluster.min_master_version
    # Unset means the channel default; in every channel today that is past both minimums below
    # (only checkable on the real cloud: `gcloud container get-server-config`).
    if not version:
        return
    floors = (
        (
            flavour.min_gke_version,
            f"{version} is below {flavour.min_gke_version}, the minimum GKE version for flavour {flavour.name}; "
            f"allowed: {flavour.min_gke_version} or later",
        ),
        (
            None if lustre_legacy_port else LUSTRE_PORT_988_MIN_GKE,
            f"{version} predates {LUSTRE_PORT_988_MIN_GKE}, from which the Lustre CSI driver uses port 988; "
            f"allowed: {LUSTRE_PORT_988_MIN_GKE} or later, or lustre.legacyPort: true",
        ),
        (
            LUSTRE_CSI_MIN_GKE,
            f"{version} predates {LUSTRE_CSI_MIN_GKE}, the oldest node version of the Managed Lustre CSI "
            "add-on (before it, Lustre did not mount on non-GPU nodes with Secure Boot, such as the Ray "
            f"head's system pool); allowed: {LUSTRE_CSI_MIN_GKE} or later",
        ),
    )
    for floor, message in floors:
        if floor and parse_gke_version(version) < parse_gke_version(floor):
            raise KeyedValueError("cluster.minMasterVersion", message)


def head_machines(ray: RayConfig) -> list[str]:
    """The catalogued system-pool types a node of which holds the Ray head, smallest first."""
    fits = []
    for machine, _size in sorted(SYSTEM_POOL_MACHINES.items(), key=lambda kv: kv[1]):
        room = system_node_room(machine)
        if room and math.floor(room[0]) >= ray.head_cpu and math.floor(room[1]) >= ray.head_memory_gib:
            fits.append(machine)
    return fits


def check_system_pool_machine(cluster: ClusterConfig, ray: RayConfig) -> None:
    """`cluster.systemPool.machineType` is a CPU type of the catalogue (infra/machines.py), or the escape hatch is
    set: a made-up type would fail only at `pulumi up`, an uncatalogued one would be priced at nothing."""
    pool = cluster.system_pool
    machine = pool.machine_type
    fits = head_machines(ray)
    allowed = f"allowed (fit ray.headCpu {ray.head_cpu} / ray.headMemoryGib {ray.head_memory_gib}): {', '.join(fits)}"
    if is_gpu_machine_type(machine):
        raise KeyedValueError(
            "cluster.systemPool.machineType",
            f"{machine!r} is a GPU machine type: the CPU pool holds the Ray head and add-ons, its GPUs would be "
            f"paid for and idle; {allowed}",
        )
    if machine not in SYSTEM_POOL_MACHINES and not pool.allow_uncatalogued_machine_type:
        raise KeyedValueError(
            "cluster.systemPool.machineType",
            f"{machine!r} is not in the CPU machine catalogue (the types the cost estimate can price); {allowed}; "
            "or cluster.systemPool.allowUncataloguedMachineType: true for another type (then not priced)",
        )
    room = system_node_room(machine)
    if room and (math.floor(room[0]) < 1 or math.floor(room[1]) < 4):  # below the least head ray.* allows
        raise KeyedValueError(
            "cluster.systemPool.machineType",
            f"{machine!r} leaves no room for a Ray head ({room[0]:.1f} CPU / {room[1]:.1f} GiB after GKE's "
            f"reservations and system pods); {allowed}",
        )


def check_autopilot(cluster: ClusterConfig, gpu_pool: GpuPoolConfig, ray: RayConfig, flavour: Flavour) -> None:
    """What `cluster.mode: autopilot` cannot do: it has no node pools to configure, and GKE admits pods
    only within its compute classes' limits (docs/autopilot.md)."""
    why = "cluster.mode: autopilot has no node pools"
    standard = "or cluster.mode: standard"
    unset = f"is set, but {why} to warm or to give a boot disk; allowed: unset, {standard}"
    too_big = "is more than an Autopilot general-purpose pod may request; allowed: at most"
    refusals = (
        (
            "system_pool" in cluster.model_fields_set,
            "cluster.systemPool",
            f"is set, but {why}: the Ray head runs on Autopilot's general-purpose compute class, sized by "
            f"ray.headCpu/ray.headMemoryGib; allowed: no cluster.systemPool, {standard}",
        ),
        (
            "gpu_driver_version" in gpu_pool.model_fields_set,
            "gpuPool.gpuDriverVersion",
            f"is set, but {why}: Autopilot installs the GPU driver of the node's GKE version; allowed: no "
            f"gpuPool.gpuDriverVersion, {standard}",
        ),
        (gpu_pool.warm_minutes is not None, "gpuPool.warmMinutes", unset),
        (gpu_pool.image_cache_disk_image is not None, "gpuPool.imageCacheDiskImage", unset),
        (
            gpu_pool.compact_placement,
            "gpuPool.compactPlacement",
            f"true, but {why} to give a placement policy; allowed: false, {standard}",
        ),
        (
            gpu_pool.capacity is not None and len(gpu_pool.ladder) > 1,
            "gpuPool.capacity",
            f"has {len(gpu_pool.ladder)} rungs, but {why} to name node pools in a ComputeClass; allowed: one rung, "
            f"{standard}",
        ),
        (
            any(r.provisioning is Provisioning.FLEX_START for r in gpu_pool.ladder),
            "gpuPool.provisioning",
            f"'flexStart' is not built for cluster.mode: autopilot; allowed: spot, reservation, onDemand, {standard}",
        ),
        (
            flavour.autopilot_pod is None,
            "flavour",
            f"{flavour.name} has no Autopilot pod size in the flavour catalogue; allowed: "
            f"{', '.join(n for n, f in FLAVOURS.items() if f.autopilot_pod)}, {standard}",
        ),
        (
            ray.head_cpu > AUTOPILOT_GENERAL_PURPOSE_MAX_CPU,
            "ray.headCpu",
            f"{ray.head_cpu} {too_big} {AUTOPILOT_GENERAL_PURPOSE_MAX_CPU}",
        ),
        (
            ray.head_memory_gib > AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB,
            "ray.headMemoryGib",
            f"{ray.head_memory_gib} {too_big} {AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB}",
        ),
    )
    for refused, key, message in refusals:
        if refused:
            raise KeyedValueError(key, message)
