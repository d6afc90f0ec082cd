"""The stack configuration: one validated pydantic model, read once from the Pulumi config.

Every key lives under the project namespace (`nemo-rl-gke:<key>`) in `Pulumi.<stack>.yaml`, in
camelCase, structured keys as YAML maps. Secrets (`hfToken`, `wandbApiKey`) never enter the model:
they are read as Pulumi secret Outputs by `load()` and refused when stored in plaintext.

Validation runs before any resource is registered; `ConfigError` carries one line per problem,
each naming the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import ipaddress
import itertools
import json
import math
import posixpath
import re
import typing
import unicodedata
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Optional

import pulumi
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from infra.flavours import FLAVOURS, Flavour, parse_gke_version
from infra.machines import (
    AUTOPILOT_GENERAL_PURPOSE_MAX_CPU,
    AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB,
    NodeFit,
    gpu_node_allocatable,
    gpu_node_room,
    system_node_room,
)
from workloads.overrides import data_key_problem
from workloads.recipes import GATED_MODELS, RECIPES, Parallelism, Recipe

PROJECT = "nemo-rl-gke"
"""The Pulumi project name; also the config namespace."""

SECRET_KEYS = ("hfToken", "wandbApiKey")
"""Config keys that must be Pulumi secrets (`pulumi config set --secret`)."""

@dataclass(frozen=True)
class LustreTier:
    """The capacities one Managed Lustre performance tier accepts.

    From `min_gib`, in steps of `step_gib` up to `threshold_gib`; above it, multiples of the larger
    `large_step_gib` up to `max_gib` (every tier's maximum is 139 of those). An instance created at or
    below the threshold can later grow only up to it (managed-lustre docs, "Increase capacity").
    """

    min_gib: int
    step_gib: int
    threshold_gib: int
    large_step_gib: int
    max_gib: int

    def accepts(self, capacity_gib: int) -> bool:
        if not self.min_gib <= capacity_gib <= self.max_gib:
            return False
        step = self.step_gib if capacity_gib <= self.threshold_gib else self.large_step_gib
        return capacity_gib % step == 0

    def round_up(self, need_gib: float) -> Optional[int]:
        """The smallest accepted capacity of at least `need_gib`, or None when the tier cannot hold it."""
        capacity = max(self.min_gib, math.ceil(need_gib / self.step_gib) * self.step_gib)
        if capacity > self.threshold_gib:
            capacity = math.ceil(need_gib / self.large_step_gib) * self.large_step_gib
        return capacity if capacity <= self.max_gib else None

    def allowed(self) -> str:
        text = f"{self.min_gib} to {self.threshold_gib} GiB in steps of {self.step_gib}"
        if self.threshold_gib < self.max_gib:
            text += f", or up to {self.max_gib} GiB in multiples of {self.large_step_gib}"
        return text


# Managed Lustre performance tiers, MB/s per TiB -> capacities (checked
# against docs.cloud.google.com/managed-lustre/docs/performance-tiers and .../increase-capacity, 2026-12).
LUSTRE_TIERS: dict[int, LustreTier] = {
    1000: LustreTier(9_000, 9_000, 1_530_000, 72_000, 10_008_000),
    500: LustreTier(18_000, 18_000, 3_060_000, 144_000, 20_016_000),
    250: LustreTier(36_000, 36_000, 6_120_000, 288_000, 40_032_000),
    125: LustreTier(72_000, 72_000, 12_240_000, 72_000, 12_240_000),
}

LUSTRE_PORT_988_MIN_GKE = "1.33.2-gke.4655000"
"""The one cut-off of the Lustre port, used everywhere: from this GKE node version the Lustre CSI driver
reaches plain instances on port 988 and the legacy flag (6988, `gkeSupportEnabled` instances) is not
needed (container.v1 API reference rev 20261027, LustreCsiDriverConfig.enableLegacyLustrePort,
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters).
The GKE Managed Lustre page names 1.33.2-gke.4780000 for the default port change;
the earlier of the two is the API's own statement about the flag."""


def lustre_aggregate_mb_s(capacity_gib: float, tier: int) -> float:
    """A Managed Lustre instance's aggregate throughput in MB/s: capacity in TiB x the tier's MB/s per TiB
    (https://cloud.google.com/managed-lustre/docs/performance-tiers). The checkpoint sizing (tools/sizing.py) and the
    acceptance gate's
    storage floor (infra/gate_plan.py) both use it."""
    return capacity_gib / 1024 * tier


LUSTRE_CSI_MIN_GKE = "1.33.2-gke.1111000"
"""The oldest node version the GKE Managed Lustre CSI add-on supports (GKE "About the Managed Lustre CSI
driver", limitations). Older guidance (managed-lustre "Connect from GKE", nodes from 1.31.5) allowed
Secure Boot only on GPU machine types; the current page has no such limit, and Google's Cluster Toolkit
daily test (examples/gke-managed-lustre.yaml, version_prefix 1.33) mounts Lustre on an n2-standard-16
pool with Secure Boot on. The system pool (Secure Boot on) mounts Lustre for the Ray head, so older
versions are refused."""

# Values that end up on a command line or in a cloud name: no shell metacharacters, no newlines.
_SAFE_TOKEN = r"^[A-Za-z0-9._/:=+~@%,\-\[\]]+$"
LOWER_NAME = r"^[a-z]([a-z0-9-]*[a-z0-9])?$"
PATTERN_HELP = {
    _SAFE_TOKEN: "letters, digits and . _ / : = + ~ @ % , - [ ] (no spaces, quotes, shell metacharacters or newlines)",
    LOWER_NAME: "lowercase letters, digits and hyphens, starting with a letter and not ending with a hyphen",
    r"^([a-z][a-z0-9-]{0,19})?$": "1-20 lowercase letters, digits or hyphens, starting with a letter",
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$": "a Google Cloud project id: 6-30 lowercase letters, digits or hyphens, starting with a letter",
    r"^/[A-Za-z0-9._/\-]*$": "an absolute path of letters, digits and . _ / -",
    r"^[a-z]+-[a-z]+\d+$": "a region name such as us-east1",
    r"^[a-z]+-[a-z]+\d+-[a-z]$": "a zone name such as us-east1-b",
}
# GCP labels (Resource Manager "requirements for labels"; the API field docs give the patterns
# key \p{Ll}\p{Lo}[\p{Ll}\p{Lo}\p{N}_-]{0,62}, value [\p{Ll}\p{Lo}\p{N}_-]{0,63}, each under 128 bytes,
# at most 64 labels on a resource). Every labelled resource also carries ours (infra/naming.labels).
GCP_MAX_LABELS = 64
RESERVED_LABEL_KEYS = ("managed-by", "app", "stack", "component")


class ConfigError(pulumi.RunError):
    """Bad stack configuration. `RunError` makes the Pulumi CLI print it without a traceback."""


class MissingSecretError(ConfigError):
    """A secret the stack's job needs is not set (`refuse_missing_secrets`)."""


class KeyedValueError(ValueError):
    """A cross-field problem that belongs to a specific key (camelCase path below the namespace)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


# NeMo-RL override keys that change how a job lays out over GPUs (NVIDIA-NeMo/RL examples/configs).
_PARALLELISM_KEYS = {
    "policy.dtensor_cfg.tensor_parallel_size": "train_tensor_parallel",
    "policy.megatron_cfg.tensor_model_parallel_size": "train_tensor_parallel",
    "policy.generation.vllm_cfg.tensor_parallel_size": "generation_tensor_parallel",
    "policy.generation.colocated.enabled": "colocated",
    "policy.generation.colocated.resources.num_nodes": "generation_nodes",
}


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=False,
        # inf/nan would pass `ge=0` and reach the plan as `$inf/h` and as `Infinity`, which is not JSON.
        allow_inf_nan=False,
    )

    @field_validator("*", mode="before")
    @classmethod
    def _plain_input(cls, value: Any, info: ValidationInfo) -> Any:
        """What pydantic's lax mode would get wrong for a stack file: an empty section (`gpuPool:` with
        every key commented out) means its defaults; `true` is not the number 1, and neither `1` nor
        `yes` is a boolean (`pulumi config set --path` writes "true"/"false" strings, which are)."""
        field = cls.model_fields[info.field_name]
        annotation = field.annotation
        if value is None or value == "":
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                return field.get_default(call_default_factory=True)
            return value
        if annotation is bool:
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            if not isinstance(value, bool):
                raise ValueError(f"{_shown(value)} is not allowed; allowed: true or false")
            return value
        kind = _number_kind(annotation)
        if kind and isinstance(value, bool):
            raise ValueError(f"{str(value).lower()} is not allowed; allowed: {kind}")
        if kind and typing.get_origin(annotation) is dict and isinstance(value, dict):
            for k, v in value.items():
                if isinstance(v, bool):
                    raise ValueError(f"{k!r}: {str(v).lower()} is not allowed; allowed: {kind}")
        return value


def _number_kind(annotation: Any) -> Optional[str]:
    """'a whole number' / 'a number' when the field (or its map's values) holds numbers."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict:
        args = args[1:]
    types = {annotation, *args}
    if bool in types:
        return None
    if int in types:
        return "a whole number"
    if float in types:
        return "a number"
    return None


def _shown(value: Any, limit: int = 60) -> str:
    """A value as it appears in a one-line message: repr (newlines escaped), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Provisioning(str, Enum):
    """How the GPU nodes are obtained."""

    SPOT = "spot"
    RESERVATION = "reservation"
    FLEX_START = "flexStart"
    ON_DEMAND = "onDemand"


class GpuPoolConfig(_Model):
    """The GPU node pool."""

    node_count: int = Field(1, ge=1, le=64, description="GPU nodes in the pool; the Ray worker replicas and the job's `cluster.num_nodes`.")
    provisioning: Provisioning = Field(
        Provisioning.SPOT,
        description="`spot` (default, cheapest, preemptible), `reservation` (needs `reservationName`), "
        "`flexStart` (DWS queued provisioning: the pool starts empty and gets nodes only for a ProvisioningRequest, "
        "which this program does not create; needs `job.submit: false`) or `onDemand`.",
    )
    reservation_name: Optional[str] = Field(
        None, pattern=LOWER_NAME, max_length=63, description="Compute Engine reservation to consume when `provisioning` is `reservation`."
    )
    compact_placement: bool = Field(False, description="Ask for a COMPACT placement policy (lower latency between nodes).")
    gpu_driver_version: Literal["DEFAULT", "LATEST"] = Field(
        "LATEST", description="GPU driver GKE installs on the nodes."
    )

    @model_validator(mode="after")
    def _reservation_needs_name(self) -> "GpuPoolConfig":
        if self.provisioning is Provisioning.RESERVATION and not self.reservation_name:
            raise KeyedValueError("reservationName", "required when gpuPool.provisioning is 'reservation'")
        if self.provisioning is not Provisioning.RESERVATION and self.reservation_name:
            raise KeyedValueError("reservationName", "only allowed when gpuPool.provisioning is 'reservation'")
        if self.provisioning is Provisioning.FLEX_START and self.compact_placement:
            raise KeyedValueError("compactPlacement", "not allowed with gpuPool.provisioning 'flexStart'; allowed: false")
        return self


class SystemPoolConfig(_Model):
    """The CPU system pool that hosts the Ray head and cluster add-ons."""

    machine_type: str = Field(
        "n2-highmem-16",
        pattern=r"^[a-z0-9]+-[a-z0-9-]+$",
        description="Machine type of the CPU pool; must fit the Ray head (16 vCPU / 128 GB by default).",
    )
    node_count: int = Field(1, ge=1, le=10, description="Nodes in the CPU pool.")
    disk_size_gb: int = Field(
        200,
        ge=10,
        le=65536,
        description="Boot disk size of CPU nodes (GB); holds the NeMo-RL image of the Ray head. Default as in "
        "Google's A4 and A3 Ultra Cluster Toolkit blueprints.",
    )


def _ipv4_network(text: str) -> str:
    try:
        return str(ipaddress.IPv4Network(text, strict=True))
    except ValueError as err:
        raise ValueError(f"{_shown(text)} is not allowed ({err}); allowed: an IPv4 range such as 10.0.0.0/20") from None


class AuthorizedNetwork(_Model):
    """A CIDR allowed to reach the GKE control plane."""

    cidr_block: str = Field(description="IPv4 CIDR, e.g. 203.0.113.0/24.")
    display_name: str = Field("", max_length=64, description="Label shown in the console.")

    @field_validator("cidr_block")
    @classmethod
    def _cidr(cls, v: str) -> str:
        return str(ipaddress.IPv4Network(v, strict=True))


class ClusterConfig(_Model):
    """The GKE cluster."""

    mode: Literal["standard", "autopilot"] = Field(
        "standard",
        description="`standard`: a zonal GKE Standard cluster with a CPU system pool and a GPU node pool. `autopilot`: a "
        "regional GKE Autopilot cluster without node pools; GKE makes the GPU nodes for the Ray worker pods, which "
        "select the accelerator and Spot capacity themselves (see docs/autopilot.md). Cannot change after creation.",
    )
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] = Field(
        "REGULAR", description="GKE release channel (Google's A4 blueprint uses REGULAR)."
    )
    min_master_version: Optional[str] = Field(
        None,
        pattern=r"^\d+\.\d+(\.\d+(-gke\.\d+)?)?$",
        description="Minimum control-plane version; unset takes the channel's default. When set, at least the "
        f"flavour's minimum GKE version, and {LUSTRE_PORT_988_MIN_GKE} unless `lustre.legacyPort`.",
    )
    block_node_upgrades: bool = Field(
        True,
        description="Add a maintenance exclusion that blocks minor and node auto-upgrades (they recreate GPU "
        "nodes mid-run); control-plane patches continue. Upgrade between runs.",
    )
    deletion_protection: bool = Field(True, description="Refuse `pulumi destroy` of the cluster until set to false.")
    maintenance_start_time: str = Field(
        "03:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="Daily maintenance window start (UTC, HH:MM)."
    )
    control_plane_location: Literal["regional", "zonal"] = Field(
        "regional",
        description="`regional` (default, as both seeds and Google's A4/A3 Ultra blueprints): control-plane replicas in "
        "several zones of `region`, so the API stays up during control-plane upgrades and a zone outage, when the "
        "preemption watcher, `pulumi` and `python -m workloads` need it; both node pools stay in `zone`. `zonal`: one "
        "control plane in `zone`, unreachable for minutes during its upgrades; it is the one cluster the GKE free tier "
        "credits. Changing it replaces the cluster.",
    )
    control_plane_access: Literal["dns", "ip"] = Field(
        "dns",
        description="How `pulumi up`, kubectl and `python -m workloads` reach the API server. `dns`: only the "
        "cluster's DNS endpoint (`gke-<id>.<region>.gke.goog`), where Google IAM (`container.clusters.connect`) "
        "checks every request before Kubernetes RBAC; the IP endpoints are turned off, so there is no address to "
        "allow-list. `ip`: the public IP endpoint, limited to `masterAuthorizedNetworks` (or opened with "
        "`allowPublicControlPlane`).",
    )
    master_authorized_networks: tuple[AuthorizedNetwork, ...] = Field(
        (),
        description="With `controlPlaneAccess: ip`: the CIDRs allowed to reach the control plane's public endpoint; "
        "must include where `pulumi up` and kubectl run. Empty is refused unless `allowPublicControlPlane` is true. "
        "Must stay empty with `controlPlaneAccess: dns`.",
    )
    allow_public_control_plane: bool = Field(
        False,
        description="With `controlPlaneAccess: ip`: open the control plane to any address (Google credentials and "
        "RBAC still required) when `masterAuthorizedNetworks` is empty.",
    )
    system_pool: SystemPoolConfig = Field(default_factory=SystemPoolConfig, description="CPU system pool.")

    @model_validator(mode="after")
    def _control_plane_access(self) -> "ClusterConfig":
        # An empty list without the opt-in is refused by StackConfig, so that it is also refused when
        # the whole `cluster` section is missing.
        if self.control_plane_access == "dns":
            # Both settings govern the IP endpoint, which DNS access turns off: refuse rather than
            # let a user believe an allow-list protects the cluster.
            if self.master_authorized_networks:
                raise KeyedValueError(
                    "masterAuthorizedNetworks",
                    "limits the IP endpoint, which cluster.controlPlaneAccess: dns turns off (IAM guards the DNS "
                    "endpoint); allowed: [] with dns, or cluster.controlPlaneAccess: ip",
                )
            if self.allow_public_control_plane:
                raise KeyedValueError(
                    "allowPublicControlPlane",
                    "true opens the IP endpoint, which cluster.controlPlaneAccess: dns turns off; allowed: false "
                    "with dns, or cluster.controlPlaneAccess: ip",
                )
            return self
        if self.master_authorized_networks and self.allow_public_control_plane:
            raise KeyedValueError(
                "allowPublicControlPlane",
                "true contradicts the configured cluster.masterAuthorizedNetworks; allowed: false (or remove "
                "masterAuthorizedNetworks to open the control plane)",
            )
        return self


# Ranges a VPC subnet or secondary range cannot use (VPC docs "prohibited IPv4 ranges"; RFC 6890).
_RESERVED_RANGES = (
    (ipaddress.IPv4Network("0.0.0.0/8"), "\"this\" network"),
    (ipaddress.IPv4Network("127.0.0.0/8"), "loopback"),
    (ipaddress.IPv4Network("169.254.0.0/16"), "link-local, where the metadata server lives"),
    (ipaddress.IPv4Network("224.0.0.0/4"), "multicast"),
    (ipaddress.IPv4Network("255.255.255.255/32"), "broadcast"),
)
_SMALLEST_SUBNET = 29  # VPC docs: a subnet's primary IPv4 range is at least a /29
_SUBNETS = ("primary_cidr", "gvnic_cidr", "rdma_cidrs")
_DEFAULT_VPC_RANGE = ipaddress.IPv4Network("10.128.0.0/9")


class NetworkConfig(_Model):
    """VPCs, subnets and address ranges."""

    use_default_network: bool = Field(False, description="Put the cluster on the project's `default` VPC instead of a new one.")
    primary_cidr: str = Field("10.0.0.0/20", description="Primary subnet of the cluster's VPC (nodes).")
    pods_cidr: str = Field("10.4.0.0/14", description="Secondary range for pods.")
    services_cidr: str = Field("10.8.0.0/20", description="Secondary range for services.")
    gvnic_cidr: str = Field("192.168.0.0/24", description="Subnet of the gVNIC VPC (the second NIC of each GPU node).")
    rdma_cidrs: tuple[str, ...] = Field(
        tuple(f"192.168.{n}.0/24" for n in range(1, 9)),
        description="One subnet per RDMA NIC, in NIC order (rdma-0 first); as many as the flavour has RDMA NICs.",
    )
    psa_cidr: str = Field("10.16.0.0/22", description="Private Service Access range for Managed Lustre (/23 or larger).")
    rdma_mtu: int = Field(8896, ge=1300, le=8896, description="MTU of the RDMA VPC (RoCE default 8896).")
    gvnic_mtu: int = Field(8896, ge=1300, le=8896, description="MTU of the gVNIC VPC.")

    @field_validator("primary_cidr", "pods_cidr", "services_cidr", "gvnic_cidr", "psa_cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        return _ipv4_network(v)

    @field_validator("rdma_cidrs")
    @classmethod
    def _cidrs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_ipv4_network(c) for c in v)

    @field_validator("primary_cidr", "pods_cidr", "services_cidr", "gvnic_cidr", "psa_cidr", "rdma_cidrs")
    @classmethod
    def _usable_in_a_vpc(cls, v: Any, info: ValidationInfo) -> Any:
        for cidr in v if isinstance(v, tuple) else (v,):
            net = ipaddress.IPv4Network(cidr)
            for reserved, what in _RESERVED_RANGES:
                if net.overlaps(reserved):
                    raise ValueError(
                        f"{cidr} overlaps {reserved} ({what}), which a VPC cannot use; allowed: private ranges "
                        "such as 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
                    )
            if info.field_name in _SUBNETS and net.prefixlen > _SMALLEST_SUBNET:
                raise ValueError(
                    f"{cidr} is smaller than a /{_SMALLEST_SUBNET}, the smallest subnet Google Cloud creates; "
                    f"allowed: /{_SMALLEST_SUBNET} or larger"
                )
        return v

    @field_validator("psa_cidr")
    @classmethod
    def _psa_prefix(cls, v: str) -> str:
        if ipaddress.IPv4Network(v).prefixlen > 23:
            raise ValueError(f"{v} is smaller than Managed Lustre needs; allowed: a /23 or larger range")
        return v

    def named_ranges(self) -> dict[str, ipaddress.IPv4Network]:
        """Every range the stack allocates, keyed by its config key."""
        ranges = {
            "gvnicCidr": self.gvnic_cidr,
            "psaCidr": self.psa_cidr,
            "podsCidr": self.pods_cidr,
            "servicesCidr": self.services_cidr,
        }
        if not self.use_default_network:
            ranges["primaryCidr"] = self.primary_cidr
        ranges |= {f"rdmaCidrs[{i}]": c for i, c in enumerate(self.rdma_cidrs)}
        return {k: ipaddress.IPv4Network(v) for k, v in ranges.items()}

    @model_validator(mode="after")
    def _no_overlaps(self) -> "NetworkConfig":
        for (ka, a), (kb, b) in itertools.combinations(self.named_ranges().items(), 2):
            if a.overlaps(b):
                raise KeyedValueError(kb, f"{b} overlaps network.{ka} ({a}); allowed: ranges disjoint from every other range")
        if self.use_default_network:
            # The cluster joins the project's `default` VPC, whose auto-mode subnets take 10.128.0.0/9
            # (VPC docs, auto mode IPv4 ranges); a custom-mode `default` VPC is not known here.
            for key, net in self.named_ranges().items():
                if net.overlaps(_DEFAULT_VPC_RANGE):
                    raise KeyedValueError(
                        key,
                        f"{net} overlaps {_DEFAULT_VPC_RANGE}, the subnets of the `default` VPC the cluster joins with "
                        "network.useDefaultNetwork; allowed: a range outside 10.128.0.0/9",
                    )
        return self


class LustreConfig(_Model):
    """The Managed Lustre instance (checkpoints, HF cache)."""

    capacity_gib: int = Field(18000, description="Capacity in GiB; at least the tier's minimum and a multiple of its step.")
    per_unit_storage_throughput: int = Field(
        500, description="Throughput tier in MB/s per TiB: 125, 250, 500 or 1000. Cannot change after creation."
    )
    filesystem: str = Field("lustrefs", description="Lustre filesystem name: 1-8 letters or digits.")
    instance_id: Optional[str] = Field(
        None, description="Instance id (lowercase letters, digits, hyphens; 1-63; starts with a letter). Default `<prefix>-lustre`."
    )
    legacy_port: bool = Field(
        False,
        description="Use the legacy Lustre port 6988 (gkeSupportEnabled instances on GKE older than "
        f"{LUSTRE_PORT_988_MIN_GKE}).",
    )
    export_on_destroy: bool = Field(
        True,
        description="Before `pulumi destroy` deletes the instance, export its `checkpoints/` and `logs/` to "
        "`gs://<bucket>/lustre-export/` and wait; a failed export stops the destroy. false for scratch stacks.",
    )
    import_from: Optional[str] = Field(
        None,
        pattern=r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]/([A-Za-z0-9._=@+-][A-Za-z0-9._=@+/-]*/)?$",
        description="When the instance is created, import this Cloud Storage folder (`gs://bucket/path/`, ending in "
        "`/`; e.g. an earlier stack's `gs://<bucket>/lustre-export/`) into the filesystem root, and wait.",
    )

    @field_validator("per_unit_storage_throughput")
    @classmethod
    def _tier(cls, v: int) -> int:
        if v not in LUSTRE_TIERS:
            raise ValueError(f"{_shown(v)} is not allowed; allowed: {', '.join(map(str, sorted(LUSTRE_TIERS)))}")
        return v

    @field_validator("filesystem")
    @classmethod
    def _filesystem(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9]{1,8}", v):
            raise ValueError(f"{_shown(v)} is not allowed; allowed: 1-8 letters or digits")
        return v

    @field_validator("instance_id")
    @classmethod
    def _instance_id(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not (len(v) <= 63 and re.fullmatch(LOWER_NAME, v)):
            raise ValueError(
                f"{_shown(v)} is not allowed; allowed: 1-63 lowercase letters, digits or hyphens, starting with a letter "
                "and ending with a letter or digit"
            )
        return v

    @model_validator(mode="after")
    def _capacity(self) -> "LustreConfig":
        tier = LUSTRE_TIERS[self.per_unit_storage_throughput]
        if not tier.accepts(self.capacity_gib):
            raise KeyedValueError(
                "capacityGib",
                f"{self.capacity_gib} is not valid for perUnitStorageThroughput {self.per_unit_storage_throughput}; "
                f"allowed: {tier.allowed()}",
            )
        return self


class StorageConfig(_Model):
    """The artifacts bucket, and what `pulumi destroy` does with it."""

    delete_bucket_on_destroy: bool = Field(
        False,
        description="Let `pulumi destroy` delete the artifacts bucket with every object in it (exported checkpoints "
        "too). Default: the bucket and its objects are kept and only removed from the stack.",
    )
    adopt_existing_bucket: bool = Field(
        False,
        description="Take over the bucket an earlier `pulumi destroy` of a stack with this name kept, instead of "
        "failing to create it (Pulumi import; the bucket's settings must match).",
    )


_SYSTEM_NAMESPACE_PREFIXES = ("kube-", "gke-", "gmp-")
_SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/usr", "/var")
# Directories the Ray containers need: the images' NeMo-RL checkouts, and Ray's session directory
# (ray.init's default temp dir /tmp/ray). Mounting at or above one of them hides it.
_CONTAINER_DIRS = tuple(sorted({r.image.workdir for r in RECIPES.values()} | {"/tmp/ray"}))


class RayConfig(_Model):
    """In-cluster objects: namespace, KubeRay chart, NCCL installer, Lustre mount."""

    namespace: str = Field("nemo-rl", pattern=LOWER_NAME, max_length=63, description="Namespace of the Ray cluster and its secrets.")
    service_account: str = Field("ray", pattern=LOWER_NAME, max_length=63, description="Kubernetes service account of the Ray pods (Workload Identity).")
    chart_version: str = Field("1.7.0", pattern=r"^\d+\.\d+\.\d+$", description="Version of the upstream KubeRay `ray-cluster` Helm chart.")
    nccl_installer_image: str = Field(
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1",
        pattern=r"^[a-z0-9.\-/]+:[A-Za-z0-9._\-]+$",
        description="NCCL gIB RDMA plugin installer image, pinned to a tag (upstream `master` moves).",
    )
    mount_path: str = Field("/lustre", pattern=r"^/[A-Za-z0-9._/\-]*$", description="Where Lustre is mounted in the Ray head and workers.")
    head_cpu: int = Field(8, ge=1, le=64, description="CPUs requested by the Ray head.")
    head_memory_gib: int = Field(
        64,
        ge=4,
        le=512,
        description="Memory requested by the Ray head (GiB); the NeMo-RL driver runs there. The default is the "
        "request of Google's codelab for the 72B recipe (8 CPU / 64 GiB).",
    )
    worker_cpu: Optional[int] = Field(
        None,
        ge=1,
        description="CPUs requested (and limited to) by each Ray worker, one per GPU node. Default: the flavour's "
        "reference (206 on A4 and A3 Ultra, from Google's NeMo-RL on GKE sample); at most what GKE leaves for pods "
        "on the node minus 2 CPUs for its DaemonSets.",
    )
    worker_memory_gib: Optional[int] = Field(
        None,
        ge=1,
        description="Memory (GiB) requested (and limited to) by each Ray worker. Default: the flavour's reference "
        "(2400 on A4 and A3 Ultra); at most the node's allocatable memory minus 16 GiB for its DaemonSets.",
    )
    worker_shm_gib: int = Field(
        240,
        ge=1,
        description="Size limit of each worker's memory-backed /dev/shm (GiB; NCCL and the Ray object store use it); "
        "counts against the worker's memory. Default from Google's NeMo-RL on GKE sample.",
    )

    @field_validator("namespace")
    @classmethod
    def _not_a_system_namespace(cls, v: str) -> str:
        # Kubernetes' own namespaces and GKE's (kube-*, gke-*, gmp-*): the stack would put its objects
        # among the cluster's, and `pulumi destroy` would delete a namespace it never owned.
        if v == "default" or v.startswith(_SYSTEM_NAMESPACE_PREFIXES):
            raise ValueError(
                f"{v!r} is a system namespace; allowed: a namespace of its own, not default or "
                f"{', '.join(p + '*' for p in _SYSTEM_NAMESPACE_PREFIXES)}"
            )
        return v

    @field_validator("service_account")
    @classmethod
    def _not_the_default_account(cls, v: str) -> str:
        # Every pod of the namespace without its own account runs as `default`: binding the bucket's
        # Workload Identity grant to it would hand the bucket to all of them.
        if v == "default":
            raise ValueError("'default' is the account of every pod in the namespace; allowed: a dedicated name such as ray")
        return v

    @field_validator("mount_path")
    @classmethod
    def _safe_mount_path(cls, v: str) -> str:
        if posixpath.normpath(v) != v or "/." in v:
            raise ValueError(f"{v!r} is not allowed; allowed: a normalized absolute path (no '.', '..', '//' or trailing '/')")
        for system in _SYSTEM_DIRS:
            if v == system or v.startswith(system + "/"):
                raise ValueError(f"{v!r} would mount Lustre over the system directory {system}; allowed: a path such as /lustre")
        for needed in _CONTAINER_DIRS:
            if needed == v or needed.startswith(v.rstrip("/") + "/"):
                raise ValueError(f"{v!r} would hide {needed} in the Ray containers; allowed: a path such as /lustre")
        return v


Override = Annotated[str, StringConstraints(pattern=_SAFE_TOKEN, max_length=512)]


class JobConfig(_Model):
    """The NeMo-RL GRPO job submitted after deploy."""

    recipe: str = Field("qwen2.5-1.5b-gsm8k", description=f"Recipe name: one of {', '.join(RECIPES)}.")
    overrides: tuple[Override, ...] = Field(
        (),
        description="Extra NeMo-RL overrides, applied last: `a.b=v` sets a key of the recipe's config, `+a.b=v` adds "
        "a new one, `++a.b=v` adds or sets, `~a.b` deletes. Checked before any resource with NeMo-RL's own parser "
        "against the recipe's config at its pinned NeMo-RL version; refused: a leading `-`, a key the config lacks "
        "(without `+`), deleting or replacing what the stack sets (e.g. `~checkpointing`).",
    )
    submit: bool = Field(True, description="Submit the job on `pulumi up`; false deploys the Ray cluster only.")
    max_num_steps: Optional[int] = Field(None, ge=1, description="Override the recipe's `grpo.max_num_steps`.")
    wandb_project: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9._\-]{1,128}$", description="W&B project; enables W&B logging (needs the `wandbApiKey` secret).")
    gate: Optional[Literal["enforce", "warn", "off"]] = Field(
        None,
        description="The acceptance gate before the job is submitted (GPUs, gIB fabric bandwidth, Lustre throughput; "
        "docs/acceptance-gate.md): `enforce` does not submit after a failed gate, `warn` reports and submits, `off` "
        "skips it. Default: `enforce` when `gpuPool.nodeCount` > 1, else `warn`. It holds on every attempt: the "
        "preemption watcher gates each resubmission onto the nodes that replaced the lost ones.",
    )
    max_lost_minutes: Optional[float] = Field(
        None,
        ge=1,
        le=10080,
        description="Bound on the training one preemption may throw away, in minutes: the job's "
        "`checkpointing.save_period` is the largest whose save cycle plus one checkpoint write stays within it "
        "(from the plan's step time and checkpoint write time; at least 1 step). Default: the period whose writes "
        "take at most 10 % of training time, which keeps the loss near a step.",
    )
    budget_usd: Optional[float] = Field(
        None,
        gt=0,
        description="Spend limit of the run in USD: GPU node-hours of all its attempts x the plan's node-hour price of "
        "the pool's provisioning (the run ledger, docs/preemption-recovery.md). The watcher warns at 80 %; at 100 % it "
        "stops the run after its next complete checkpoint (at once when none comes within one save period) and "
        "resubmits nothing. Default: no limit.",
    )

    @field_validator("recipe")
    @classmethod
    def _recipe(cls, v: str) -> str:
        if v not in RECIPES:
            raise ValueError(f"unknown recipe {v!r}; allowed: {', '.join(RECIPES)}")
        return v

    @field_validator("overrides")
    @classmethod
    def _override_syntax(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Only the shape here; which keys may be set is the job builder's (workloads/job_spec.py).
        for i, override in enumerate(v):
            deletion = override.startswith("~")
            key, sep, _ = override.lstrip("~+").partition("=")
            if not key:
                raise KeyedValueError(f"[{i}]", f"{_shown(override)} has no key; allowed: key=value, +key=value, ++key=value or ~key")
            if not sep and not deletion:
                raise KeyedValueError(f"[{i}]", f"{_shown(override)} has no '='; allowed: key=value, +key=value, ++key=value or ~key")
        return v

    @model_validator(mode="after")
    def _data_keys_the_images_loader_reads(self) -> "JobConfig":
        image = RECIPES[self.recipe].image
        problems = [p for o in self.overrides if (p := data_key_problem(image.tag, o))]
        if problems:
            raise KeyedValueError("overrides", f"recipe {self.recipe!r} runs {image.ref}: " + "; ".join(problems))
        return self

    @property
    def recipe_spec(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def parallelism(self) -> Parallelism:
        """The recipe's parallelism with the user's overrides of the parallelism keys applied."""
        changes: dict[str, Any] = {}
        for override in self.overrides:
            key, sep, value = override.lstrip("+").partition("=")
            field_name = _PARALLELISM_KEYS.get(key)
            if not sep or field_name is None:
                continue
            if field_name == "colocated":
                changes[field_name] = value.strip().lower() == "true"
            elif value.strip().isdigit():
                changes[field_name] = int(value)
        return dataclasses.replace(self.recipe_spec.parallelism, **changes)


class RecoveryConfig(_Model):
    """Spot-preemption recovery: the in-cluster watcher that resubmits a preempted job (workloads/preemption.py)."""

    enabled: bool = Field(
        True,
        description="Run the preemption watcher (a small Deployment on the CPU pool). After a preemption-like failure "
        "it resubmits the same job, which resumes from the latest checkpoint on Lustre; a job that failed on its own "
        "(e.g. a Python exception) or was stopped is never resubmitted.",
    )
    check_interval_seconds: int = Field(60, ge=5, le=3600, description="How often the watcher looks at the job's status.")
    max_restarts: int = Field(
        10,
        ge=0,
        le=1000,
        description="Consecutive automatic resubmissions before the watcher gives up; a submission by hand starts the "
        "count again.",
    )
    backoff_seconds: int = Field(
        120,
        ge=0,
        le=86400,
        description="Wait after a preemption before the first resubmission (time for GKE to bring a replacement spot "
        "node); doubles with every further consecutive restart.",
    )
    max_backoff_seconds: int = Field(
        1800, ge=0, le=86400, description="Upper bound of the doubling wait; at least `backoffSeconds`."
    )

    @model_validator(mode="after")
    def _backoff_bounds(self) -> "RecoveryConfig":
        if self.max_backoff_seconds < self.backoff_seconds:
            raise KeyedValueError(
                "maxBackoffSeconds",
                f"{self.max_backoff_seconds} is below recovery.backoffSeconds ({self.backoff_seconds}); allowed: "
                f"{self.backoff_seconds} to 86400",
            )
        return self


class CostConfig(_Model):
    """Inputs of the estimates the offline plan prints (cost, checkpoint sizing); nothing is deployed from them."""

    price_overrides: dict[str, float] = Field(
        default_factory=dict,
        description="Replace prices of data/prices.yaml, keyed by price-table key (e.g. `gpu.a4-highgpu-8g.spot` in "
        "USD per node-hour, `lustre.500.gibMonth` in USD per GiB-month); applies to the stack's region.",
    )
    bucket_gib: Optional[float] = Field(
        None, ge=0, description="Average GiB kept in the artifacts bucket; default: one bf16 export of the recipe's model."
    )
    checkpoint_write_target_seconds: int = Field(
        300, ge=1, le=86400, description="Warn when writing one checkpoint to Lustre is estimated to take longer than this."
    )

    @field_validator("price_overrides")
    @classmethod
    def _prices_not_negative(cls, v: dict[str, float]) -> dict[str, float]:
        # Which keys exist is the price table's business (tools/cost.py checks them when the offline
        # plan estimates); the program deploys nothing from these numbers.
        for key, value in v.items():
            if not value >= 0:
                raise ValueError(f"price {key!r}: {_shown(value)} is not allowed; allowed: a number, 0 or more")
        return v


class StackConfig(_Model):
    """Everything a stack is built from."""

    project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", description="Google Cloud project id.")
    region: str = Field("us-east1", pattern=r"^[a-z]+-[a-z]+\d+$", description="Region of the networks, cluster and bucket.")
    zone: str = Field("us-east1-b", pattern=r"^[a-z]+-[a-z]+\d+-[a-z]$", description="Zone of the GPU nodes, the RDMA VPC and Lustre; must be in `region`.")
    name_prefix: str = Field(
        "", pattern=r"^([a-z][a-z0-9-]{0,19})?$", description="Prefix of every cloud name (1-20 chars); default: the stack name."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description=f"Extra labels on every labelled resource: at most {GCP_MAX_LABELS - len(RESERVED_LABEL_KEYS)} "
        f"(Google Cloud's {GCP_MAX_LABELS} less the program's own: {', '.join(RESERVED_LABEL_KEYS)}).",
    )
    allow_uncatalogued_zone: bool = Field(
        False,
        description="Accept a `zone` that the zone catalogue (data/zones.yaml) does not list for the flavour and "
        "Managed Lustre: for a zone Google added after the catalogue was checked.",
    )
    manage_apis: bool = Field(
        True,
        description="Enable every Google Cloud API the stack uses (Service Usage; left on by `pulumi destroy`) and make "
        "each resource wait for its API. false where the deployer may not enable services: the APIs listed in "
        "docs/deploy.md must then be on already.",
    )
    flavour: str = Field("b200", description=f"GPU flavour: one of {', '.join(FLAVOURS)}.")
    gpu_pool: GpuPoolConfig = Field(default_factory=GpuPoolConfig, description="GPU node pool.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="GKE cluster.")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="Networks and ranges.")
    lustre: LustreConfig = Field(default_factory=LustreConfig, description="Managed Lustre.")
    storage: StorageConfig = Field(default_factory=StorageConfig, description="The artifacts bucket.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Kubernetes and Ray.")
    job: JobConfig = Field(default_factory=JobConfig, description="The training job.")
    recovery: RecoveryConfig = Field(
        default_factory=RecoveryConfig, description="Spot-preemption recovery: resubmission of a preempted job."
    )
    cost: CostConfig = Field(
        default_factory=CostConfig,
        description="Estimates shown by the offline plan: price overrides, bucket size, checkpoint write-time target.",
    )

    @field_validator("flavour")
    @classmethod
    def _flavour(cls, v: str) -> str:
        if v not in FLAVOURS:
            raise ValueError(f"unknown flavour {v!r}; allowed: {', '.join(FLAVOURS)}")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        room = GCP_MAX_LABELS - len(RESERVED_LABEL_KEYS)
        if len(v) > room:
            raise ValueError(f"{len(v)} labels; allowed: at most {room} (Google Cloud allows {GCP_MAX_LABELS}, the program sets {len(RESERVED_LABEL_KEYS)})")
        for key, value in v.items():
            if key in RESERVED_LABEL_KEYS:
                raise ValueError(f"label key {key!r} is the program's own; allowed: any key but {', '.join(RESERVED_LABEL_KEYS)}")
            if not (_label_text(key, 63) and unicodedata.category(key[0]) in ("Ll", "Lo")):
                raise ValueError(
                    f"label key {_shown(key)} is not allowed; allowed: 1-63 lowercase letters, digits, '_' or '-', "
                    "starting with a lowercase letter (under 128 bytes)"
                )
            if value and not _label_text(value, 63):
                raise ValueError(
                    f"label value {_shown(value)} of {key!r} is not allowed; allowed: at most 63 lowercase letters, "
                    "digits, '_' or '-' (under 128 bytes)"
                )
        return v

    @field_validator("project", "name_prefix")
    @classmethod
    def _no_google_in_bucket_name(cls, v: str, info: ValidationInfo) -> str:
        # Both are part of the bucket name (<project>-<prefix>-artifacts); Cloud Storage refuses names
        # with "google" or a close misspelling, or starting with "goog" (storage docs, bucket naming).
        if _looks_like_google(v) or (info.field_name == "project" and v.startswith("goog")):
            raise ValueError(f"{v!r} would put 'google' into the bucket name, which Cloud Storage refuses; allowed: a name without it")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "StackConfig":
        if not self.zone.startswith(self.region + "-"):
            raise KeyedValueError("zone", f"{self.zone!r} is not in region {self.region!r}; allowed: a zone named {self.region}-<letter>")
        flavour = self.flavour_spec
        if not self.allow_uncatalogued_zone:
            self._check_zone_catalogue(flavour)
        self._check_address_room()
        if len(self.network.rdma_cidrs) != flavour.rdma_nics:
            raise KeyedValueError(
                "network.rdmaCidrs",
                f"has {len(self.network.rdma_cidrs)} entries; flavour {flavour.name} has "
                f"{flavour.rdma_nics} RDMA NICs and needs exactly that many subnets",
            )
        version = self.cluster.min_master_version
        # Unset means the channel default; in every channel today that is past both minimums below
        # (only checkable on the real cloud: `gcloud container get-server-config`).
        if version and parse_gke_version(version) < parse_gke_version(flavour.min_gke_version):
            raise KeyedValueError(
                "cluster.minMasterVersion",
                f"{version} is below {flavour.min_gke_version}, the minimum GKE "
                f"version for flavour {flavour.name}; allowed: {flavour.min_gke_version} or later",
            )
        if (
            version
            and not self.lustre.legacy_port
            and parse_gke_version(version) < parse_gke_version(LUSTRE_PORT_988_MIN_GKE)
        ):
            raise KeyedValueError(
                "cluster.minMasterVersion",
                f"{version} predates {LUSTRE_PORT_988_MIN_GKE}, from which the Lustre CSI driver uses port 988; "
                f"allowed: {LUSTRE_PORT_988_MIN_GKE} or later, or lustre.legacyPort: true",
            )
        if version and parse_gke_version(version) < parse_gke_version(LUSTRE_CSI_MIN_GKE):
            raise KeyedValueError(
                "cluster.minMasterVersion",
                f"{version} predates {LUSTRE_CSI_MIN_GKE}, the oldest node version of the Managed Lustre CSI "
                "add-on (before it, Lustre did not mount on non-GPU nodes with Secure Boot, such as the Ray "
                f"head's system pool); allowed: {LUSTRE_CSI_MIN_GKE} or later",
            )
        if (
            self.cluster.control_plane_access == "ip"
            and not self.cluster.master_authorized_networks
            and not self.cluster.allow_public_control_plane
        ):
            raise KeyedValueError(
                "cluster.masterAuthorizedNetworks",
                "is empty, which would open the control plane to every address; allowed: the CIDRs `pulumi up` and "
                "kubectl connect from, e.g. `masterAuthorizedNetworks: [{cidrBlock: <your egress IP>/32}]`, or "
                "cluster.allowPublicControlPlane: true to open it on purpose",
            )
        if self.cluster.mode == "autopilot":
            self._check_autopilot(flavour)
        else:
            self._check_head_fits()
        self._check_worker_fits(flavour)
        if self.gpu_pool.provisioning is Provisioning.FLEX_START and self.job.submit:
            # The job would wait an hour for workers that never come, then fail the deploy.
            raise KeyedValueError(
                "job.submit",
                "true with gpuPool.provisioning 'flexStart': that pool gets nodes only for a ProvisioningRequest "
                "(or Kueue), which this program does not create, so the job would never start; allowed: false "
                "(create the request yourself, then `python -m workloads submit`), or another gpuPool.provisioning",
            )
        if self.lustre.export_on_destroy and self.storage.delete_bucket_on_destroy:
            raise KeyedValueError(
                "storage.deleteBucketOnDestroy",
                "true would delete the bucket right after lustre.exportOnDestroy exported the checkpoints into it; "
                "allowed: false, or set lustre.exportOnDestroy: false as well",
            )
        self._check_job_fits(flavour)
        return self

    def _check_autopilot(self, flavour: Flavour) -> None:
        """What an Autopilot cluster cannot do: it has no node pools to configure, and GKE admits pods
        only within its compute classes' limits (docs/autopilot.md)."""
        why = "cluster.mode: autopilot has no node pools"
        if "system_pool" in self.cluster.model_fields_set:
            raise KeyedValueError(
                "cluster.systemPool",
                f"is set, but {why}: the Ray head runs on Autopilot's general-purpose compute class, sized by "
                "ray.headCpu/ray.headMemoryGib; allowed: no cluster.systemPool, or cluster.mode: standard",
            )
        if "gpu_driver_version" in self.gpu_pool.model_fields_set:
            raise KeyedValueError(
                "gpuPool.gpuDriverVersion",
                f"is set, but {why}: Autopilot installs the GPU driver of the node's GKE version; allowed: no "
                "gpuPool.gpuDriverVersion, or cluster.mode: standard",
            )
        if self.gpu_pool.compact_placement:
            raise KeyedValueError(
                "gpuPool.compactPlacement",
                f"true, but {why} to give a placement policy; allowed: false, or cluster.mode: standard",
            )
        if self.gpu_pool.provisioning is Provisioning.FLEX_START:
            raise KeyedValueError(
                "gpuPool.provisioning",
                "'flexStart' is not built for cluster.mode: autopilot; allowed: spot, reservation, onDemand, or "
                "cluster.mode: standard",
            )
        if flavour.autopilot_pod is None:
            raise KeyedValueError(
                "flavour",
                f"{flavour.name} has no Autopilot pod size in the flavour catalogue; allowed: "
                f"{', '.join(n for n, f in FLAVOURS.items() if f.autopilot_pod)}, or cluster.mode: standard",
            )
        cpu, memory = self.ray.head_cpu, self.ray.head_memory_gib
        if cpu > AUTOPILOT_GENERAL_PURPOSE_MAX_CPU:
            raise KeyedValueError(
                "ray.headCpu",
                f"{cpu} is more than an Autopilot general-purpose pod may request; allowed: at most "
                f"{AUTOPILOT_GENERAL_PURPOSE_MAX_CPU}",
            )
        if memory > AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB:
            raise KeyedValueError(
                "ray.headMemoryGib",
                f"{memory} is more than an Autopilot general-purpose pod may request; allowed: at most "
                f"{AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB}",
            )

    def _check_zone_catalogue(self, flavour: Flavour) -> None:
        from infra.zones import catalogue, nearest, region_of

        cat = catalogue()
        zones = cat.zones_for(flavour.machine_type)
        what = f"{flavour.machine_type} (flavour {flavour.name}) and Managed Lustre"
        hint = f"or set {PROJECT}:allowUncataloguedZone: true for a zone Google added since {cat.checked} (data/zones.yaml)"
        if self.region not in {region_of(z) for z in zones}:
            raise KeyedValueError(
                "region",
                f"{self.region!r} has no zone with {what} in the zone catalogue; allowed (nearest first): "
                f"{', '.join(nearest(self.region + '-x', zones))}; {hint}",
            )
        if self.zone not in zones:
            raise KeyedValueError(
                "zone",
                f"{self.zone!r} does not offer {what} in the zone catalogue; allowed (nearest first): "
                f"{', '.join(nearest(self.zone, zones))}; {hint}",
            )

    def _check_address_room(self) -> None:
        # Every node takes a /24 of the pod range (GKE's default of 110 pods per node, which the node
        # pools keep) and one address of the primary subnet; the system pool surges one node on upgrade.
        nodes = self.gpu_pool.node_count + self.cluster.system_pool.node_count + 1
        pods = ipaddress.IPv4Network(self.network.pods_cidr)
        if pods.prefixlen > 24 or 2 ** (24 - pods.prefixlen) < nodes:
            need = 24 - max(nodes - 1, 1).bit_length()
            raise KeyedValueError(
                "network.podsCidr",
                f"{pods} holds pod addresses for {2 ** max(24 - pods.prefixlen, 0)} node(s), the stack runs up to {nodes} "
                f"(a /24 each); allowed: a /{need} or larger",
            )
        primary = ipaddress.IPv4Network(self.network.primary_cidr)
        if not self.network.use_default_network and primary.num_addresses - 4 < nodes:
            raise KeyedValueError(
                "network.primaryCidr",
                f"{primary} has {primary.num_addresses - 4} usable addresses, the stack runs up to {nodes} nodes; allowed: a larger range",
            )

    def _check_head_fits(self) -> None:
        # A head that fits no system node stays Pending, and the deploy waits on it for an hour.
        machine = self.cluster.system_pool.machine_type
        room = system_node_room(machine)
        if room is None:  # a machine type whose shape infra/machines.py does not know: not checked
            return
        cpu, memory = math.floor(room[0]), math.floor(room[1])
        if self.ray.head_cpu > cpu:
            raise KeyedValueError(
                "ray.headCpu",
                f"{self.ray.head_cpu} does not fit a {machine} system node (room for {cpu} after GKE's reservations "
                f"and system pods); allowed: at most {cpu}, or a larger cluster.systemPool.machineType",
            )
        if self.ray.head_memory_gib > memory:
            raise KeyedValueError(
                "ray.headMemoryGib",
                f"{self.ray.head_memory_gib} does not fit a {machine} system node (room for {memory} GiB after GKE's "
                f"reservations and system pods); allowed: at most {memory}, or a larger cluster.systemPool.machineType",
            )

    def _check_worker_fits(self, flavour: Flavour) -> None:
        # A worker that fits no GPU node stays Pending, and the deploy waits on it for an hour.
        fit = self.worker_fit
        room_cpu, room_memory = gpu_node_room(flavour.vcpus, flavour.memory_gib)
        if fit.cpu > room_cpu:
            raise KeyedValueError(
                "ray.workerCpu",
                f"{fit.cpu} does not fit a {flavour.machine_type} node (room for {room_cpu} after GKE's reservations "
                f"and its DaemonSets); allowed: 1 to {room_cpu}",
            )
        if fit.memory_gib > room_memory:
            raise KeyedValueError(
                "ray.workerMemoryGib",
                f"{fit.memory_gib} does not fit a {flavour.machine_type} node (room for {room_memory} GiB after GKE's "
                f"reservations and its DaemonSets); allowed: 1 to {room_memory}",
            )
        if fit.shm_gib >= fit.memory_gib:
            raise KeyedValueError(
                "ray.workerShmGib",
                f"{fit.shm_gib} leaves nothing of the worker's {fit.memory_gib} GiB (/dev/shm counts against it); "
                f"allowed: 1 to {fit.memory_gib - 1}",
            )

    @property
    def worker_fit(self) -> NodeFit:
        """The Ray worker's requests on one GPU node (config or the flavour's reference) and the node's room."""
        flavour = self.flavour_spec
        cpu, memory = gpu_node_allocatable(flavour.vcpus, flavour.memory_gib)
        return NodeFit(
            machine_type=flavour.machine_type,
            cpu=self.ray.worker_cpu or flavour.worker_cpu,
            memory_gib=self.ray.worker_memory_gib or flavour.worker_memory_gib,
            shm_gib=self.ray.worker_shm_gib,
            allocatable_cpu=cpu,
            allocatable_memory_gib=memory,
        )

    def _check_job_fits(self, flavour: Flavour) -> None:
        try:
            par = self.job.parallelism
        except ValueError as err:  # the recipe's layout refuses the overridden values
            raise KeyedValueError("job.overrides", str(err)) from None
        nodes, gpus = self.gpu_pool.node_count, flavour.gpus_per_node
        recipe = self.job.recipe
        if par.train_tensor_parallel > gpus:
            raise KeyedValueError(
                "job.overrides",
                f"recipe {recipe!r} with these overrides uses tensor parallel {par.train_tensor_parallel}, "
                f"more than the {gpus} GPUs per node of flavour {flavour.name}; allowed: 1 to {gpus}",
            )
        if par.generation_tensor_parallel > gpus:
            raise KeyedValueError(
                "job.overrides",
                f"recipe {recipe!r} with these overrides uses vLLM tensor parallel "
                f"{par.generation_tensor_parallel}, more than the {gpus} GPUs per node of flavour "
                f"{flavour.name}; allowed: 1 to {gpus}",
            )
        if not par.colocated and nodes - par.generation_nodes < 1:
            raise KeyedValueError(
                "gpuPool.nodeCount",
                f"{nodes} leaves no node for training: job.recipe {recipe!r} is not colocated and reserves "
                f"{par.generation_nodes} node(s) for generation; allowed: at least {par.generation_nodes + 1}",
            )
        if nodes < par.min_nodes:
            raise KeyedValueError(
                "gpuPool.nodeCount",
                f"{nodes} is too small for job.recipe {recipe!r}; allowed: at least {par.min_nodes}",
            )

    @property
    def gate_policy(self) -> str:
        """`job.gate`, or its default: enforce on a multi-node pool (the fabric is what a lone node cannot
        show broken), warn on one node."""
        return self.job.gate or ("enforce" if self.gpu_pool.node_count > 1 else "warn")

    @property
    def flavour_spec(self) -> Flavour:
        return FLAVOURS[self.flavour]

    @property
    def recipe(self) -> Recipe:
        return self.job.recipe_spec

    @property
    def lustre_instance_id(self) -> str:
        return self.lustre.instance_id or f"{self.name_prefix}-lustre"

    @property
    def lustre_needs_legacy_port(self) -> bool:
        return self.lustre.legacy_port


def _label_text(text: str, limit: int) -> bool:
    """Lowercase letters (any script), digits, '_' and '-' only, at most `limit` characters and under
    128 bytes: every character is checked, so a trailing newline cannot slip past a `$`."""
    return (
        len(text) <= limit
        and len(text.encode()) < 128
        and all(c in "_-" or unicodedata.category(c) in ("Ll", "Lo", "Nd", "Nl", "No") for c in text)
    )


def _looks_like_google(text: str) -> bool:
    return "google" in text.lower().replace("0", "o")


@dataclass(frozen=True)
class StackSecrets:
    """Secret values as Pulumi secret Outputs; None when not configured."""

    hf_token: Optional[pulumi.Output[str]]
    wandb_api_key: Optional[pulumi.Output[str]]


@dataclass(frozen=True)
class Settings:
    """What `load()` returns: the validated config, the stack name and the secrets."""

    stack: str
    config: StackConfig
    secrets: StackSecrets

    @property
    def wandb_key_set(self) -> bool:
        return self.secrets.wandb_api_key is not None


def wandb_key_set(secret_keys: "set[str] | frozenset[str]") -> bool:
    """Whether the stack holds the `wandbApiKey` secret, from its secret key names (`namespace:key`):
    how the CLI, which cannot decrypt secrets, tells what `Settings.wandb_key_set` tells the program."""
    return f"{PROJECT}:wandbApiKey" in secret_keys


def namespaced(flat: dict[str, Any]) -> dict[str, Any]:
    """This project's keys of a flat engine config map (`nemo-rl-gke:<key>` -> value), without the
    namespace, structured values (passed by the engine as JSON strings) decoded.

    Other namespaces (provider keys such as `gcp:project`) are left to their owners, but one that is
    a near miss of this project's (`nemo-rl-gk:flavour`) is refused: the CLI would pass it on and the
    program would silently run without it."""
    out: dict[str, Any] = {}
    prefix = f"{PROJECT}:"
    for key, value in flat.items():
        if not key.startswith(prefix):
            namespace, _, name = key.partition(":")
            if namespace.lower() == PROJECT or difflib.get_close_matches(namespace.lower(), [PROJECT], cutoff=0.8):
                raise ConfigError(
                    f"{key}: unknown namespace {namespace!r}; allowed: {PROJECT}:<key> (did you mean {PROJECT}:{name}?)"
                )
            continue
        if isinstance(value, str) and value[:1] in "{[":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        out[key[len(prefix):]] = value
    return out


def _namespaced_config() -> dict[str, Any]:
    """All config values of this project's namespace, as the engine passed them to the program."""
    from pulumi.runtime import config as runtime_config

    return namespaced({**runtime_config.get_config_env(), **runtime_config.CONFIG.get()})


# pydantic error types -> what is allowed, in the words of a stack file (never a class name).
_ALLOWED_BY_TYPE = {
    "model_type": "a map of keys (key: value lines)",
    "model_attributes_type": "a map of keys (key: value lines)",
    "dict_type": "a map (key: value lines)",
    "tuple_type": "a list",
    "list_type": "a list",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
}


def format_validation_error(err: ValidationError) -> str:
    """One line per problem: `nemo-rl-gke:<key.path>: <message>`, in stack-file words."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc)
        error = (e.get("ctx") or {}).get("error")
        if isinstance(error, KeyedValueError):
            path = f"{path}.{error.key}" if path else error.key
        path = path.replace(".[", "[")
        msg, kind, ctx = e["msg"], e["type"], e.get("ctx") or {}
        for pfx in ("Value error, ", "Assertion failed, "):
            msg = msg.removeprefix(pfx)
        if kind == "extra_forbidden":
            msg = _unknown_key_message(loc)
        elif kind == "missing":
            field = _field_at(loc)
            msg = "required key is not set" + (f"; allowed: {field.description.rstrip('.')}" if field and field.description else "")
        elif kind == "string_too_long":
            msg = f"{len(e['input'])} characters; allowed: at most {ctx['max_length']}"
        elif kind == "string_pattern_mismatch":
            pattern = ctx["pattern"]
            msg = f"{_shown(e['input'])} is not allowed; allowed: {PATTERN_HELP.get(pattern, 'values matching ' + pattern)}"
        elif kind in _ALLOWED_BY_TYPE:
            msg = f"{_shown(e['input'])} is not allowed; allowed: {_ALLOWED_BY_TYPE[kind]}"
        elif kind in ("literal_error", "enum"):
            msg = f"{_shown(e['input'])} is not allowed; allowed: {ctx.get('expected', '')}"
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            bound = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most", "less_than": "less than"}[kind]
            limit = next(v for k, v in ctx.items() if k in ("ge", "gt", "le", "lt"))
            msg = f"{_shown(e['input'])} is not allowed; allowed: {bound} {limit}"
        key = f"{PROJECT}:{path}" if path else PROJECT
        lines.append(f"{key}: {msg}".replace("\n", " "))
    return "\n".join(lines)


def _field_at(loc: tuple[Any, ...]) -> Any:
    """The pydantic field a `loc` of `StackConfig` points at (by name or camelCase alias), or None."""
    model: Any = StackConfig
    field = None
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        if field is None:
            return None
        model = field.annotation
    return field


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    name = str(loc[-1])
    model: Any = StackConfig
    for part in loc[:-1]:
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            model = None
            break
        model = annotation
    if len(loc) == 1 and "." in name:
        return (
            f"unknown key (`pulumi config set {name}` writes a flat key with a dot); allowed: the nested key, "
            f"set with `pulumi config rm {name}` and `pulumi config set --path {name} <value>`"
        )
    known = [f.alias or n for n, f in model.model_fields.items()] if model else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key; {hint}allowed: the keys of the config reference in docs/configuration.md"


def prefix_for_stack(stack: str) -> str:
    """The default `namePrefix`: the stack name when it is one already; else its lowercase form with
    `_` and `.` as `-`, cut to fit and told apart by a short hash of the stack name (so `Dev` and `dev`
    never share cloud names). Raises `ConfigError` naming the stack when no prefix can be made."""
    if re.fullmatch(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?", stack) and not _looks_like_google(stack):
        return stack
    base = re.sub(r"-+", "-", re.sub(r"[_.]", "-", stack.lower())).strip("-")
    if not base[:1].isalpha() or not base.isascii() or _looks_like_google(base):
        why = "does not start with a letter" if not base[:1].isalpha() else "would put 'google' into the bucket name"
        raise ConfigError(
            f"{PROJECT}:namePrefix: not set, and the stack name {_shown(stack)} {why}; allowed: set {PROJECT}:namePrefix "
            f"to {PATTERN_HELP[r'^([a-z][a-z0-9-]{0,19})?$']}"
        )
    digest = hashlib.sha256(stack.encode()).hexdigest()[:4]
    return f"{base[:15].rstrip('-')}-{digest}"


def parse(raw: dict[str, Any], stack: str) -> StackConfig:
    """Validate a raw config mapping (camelCase keys, no namespace) into a `StackConfig`."""
    data = {k: v for k, v in raw.items() if k not in SECRET_KEYS}
    if data.get("namePrefix") in (None, ""):
        data["namePrefix"] = prefix_for_stack(stack)
    try:
        return StackConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err)) from None


def load() -> Settings:
    """Read and validate the stack config once; call before creating any resource."""
    from pulumi.runtime import config as runtime_config

    stack = pulumi.get_stack()
    raw = _namespaced_config()
    secret_keys = set(runtime_config.get_config_secret_keys_env()) | set(runtime_config._SECRET_KEYS.get())
    refuse_plaintext_secrets(raw, secret_keys, stack)
    config = parse(raw, stack)
    refuse_missing_secrets(config, {k for k in SECRET_KEYS if f"{PROJECT}:{k}" in secret_keys})
    cfg = pulumi.Config(PROJECT)
    secrets = StackSecrets(hf_token=cfg.get_secret("hfToken"), wandb_api_key=cfg.get_secret("wandbApiKey"))
    return Settings(stack=stack, config=config, secrets=secrets)


def refuse_plaintext_secrets(raw: dict[str, Any], secret_keys: "set[str] | frozenset[str] | list[str]", stack: str) -> None:
    """Raise `ConfigError` for each secret key (`hfToken`, `wandbApiKey`) present in `raw` but not
    marked secret (`secret_keys` holds `namespace:key` names): a plaintext token would sit in the stack
    file and in every copy of the repository."""
    plaintext = [k for k in SECRET_KEYS if k in raw and f"{PROJECT}:{k}" not in secret_keys]
    if plaintext:
        raise ConfigError(
            "\n".join(
                f"{PROJECT}:{k}: stored in plaintext; allowed: a secret (remove it from Pulumi.{stack}.yaml and run "
                f"`pulumi config set --secret {k}`)"
                for k in plaintext
            )
        )



def required_secrets(config: StackConfig) -> dict[str, str]:
    """The secrets the stack's job cannot run without (key without namespace -> why)."""
    needed = {}
    model = config.recipe.model
    if model in GATED_MODELS:
        needed["hfToken"] = (
            f"job.recipe {config.job.recipe!r} downloads {model}, which Hugging Face serves only to accounts that "
            "accepted its licence; allowed: `pulumi config set --secret hfToken <token>` with a token of such an account"
        )
    if config.job.wandb_project:
        needed["wandbApiKey"] = (
            f"job.wandbProject {config.job.wandb_project!r} asks for W&B logging; allowed: "
            "`pulumi config set --secret wandbApiKey <key>`, or remove job.wandbProject"
        )
    return needed


def refuse_missing_secrets(config: StackConfig, present: "set[str] | frozenset[str]") -> None:
    """Raise `ConfigError` when the stack's job needs a secret that is not set (`present` holds the
    secret keys that are, without namespace): found now, not hours later on the cluster."""
    missing = {k: why for k, why in required_secrets(config).items() if k not in present}
    if missing:
        raise MissingSecretError("\n".join(f"{PROJECT}:{k}: not set, and {why}" for k, why in missing.items()))
