"""The root model, `StackConfig`: the top-level keys (project, region, zone, prefix, labels, flavour),
one field per section, and the order in which the checks across sections run."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, ValidationInfo, model_validator

from infra.config.base import Model
from infra.config.cluster_config import (
    ClusterConfig,
    check_autopilot,
    check_min_master_version,
    check_system_pool_machine,
)
from infra.config.cost_config import CostConfig, check_preemption_model
from infra.config.errors import ConfigError, KeyedValueError, shown
from infra.config.gpu_pool import GpuPoolConfig
from infra.config.job import JobConfig, check_job_fits
from infra.config.lustre import LustreConfig
from infra.config.network_config import NetworkConfig, check_address_room, check_rdma_subnets
from infra.config.patterns import NAME_PREFIX, PATTERN_HELP, PROJECT_ID, REGION, ZONE
from infra.config.ray import RayConfig, check_head_fits, check_worker_fits, worker_fit
from infra.config.recovery import RecoveryConfig
from infra.config.storage_config import StorageConfig, check_export_kept
from infra.flavours import FLAVOURS, Flavour
from infra.machines import NodeFit
from infra.naming import PROJECT, RESERVED_LABEL_KEYS
from workloads.cli_args import CREDENTIAL_SHOWN, looks_like_credential
from workloads.recipes import Recipe

if TYPE_CHECKING:
    from infra.version_matrix import Pins

# GCP labels (Resource Manager "requirements for labels"; the API field docs give the patterns
# key \p{Ll}\p{Lo}[\p{Ll}\p{Lo}\p{N}_-]{0,62}, value [\p{Ll}\p{Lo}\p{N}_-]{0,63}, each under 128 bytes,
# at most 64 labels on a resource). Every labelled resource also carries ours (infra/naming.labels).
GCP_MAX_LABELS = 64


def check_flavour(v: str) -> str:
    if v not in FLAVOURS:
        raise ValueError(f"unknown flavour {v!r}; allowed: {', '.join(FLAVOURS)}")
    return v


def check_labels(v: dict[str, str]) -> dict[str, str]:
    """At most the labels Google Cloud leaves beside the program's own, none of these, each key and value in
    Google Cloud's label spelling."""
    room = GCP_MAX_LABELS - len(RESERVED_LABEL_KEYS)
    if len(v) > room:
        raise ValueError(
            f"{len(v)} labels; allowed: at most {room} (Google Cloud allows {GCP_MAX_LABELS}, the program sets "
            f"{len(RESERVED_LABEL_KEYS)})"
        )
    for key, value in v.items():
        if looks_like_credential(key) or looks_like_credential(value or ""):
            # Labels are read by anyone who may list the resources, and land in billing exports.
            raise ValueError(
                f"label {'key' if looks_like_credential(key) else f'value of {key!r}'} is {CREDENTIAL_SHOWN}; "
                "allowed: no credential in a label (labels are shown to every viewer of the project and in billing "
                "exports); the secrets are hfToken and wandbApiKey (`pulumi config set --secret`)"
            )
        if key in RESERVED_LABEL_KEYS:
            raise ValueError(
                f"label key {key!r} is the program's own; allowed: any key but {', '.join(RESERVED_LABEL_KEYS)}"
            )
        # An empty key passes `_label_text` (nothing to check) and has no first letter to look at.
        if not (key and _label_text(key, 63) and unicodedata.category(key[0]) in ("Ll", "Lo")):
            raise ValueError(
                f"label key {shown(key)} is not allowed; allowed: 1-63 lowercase letters, digits, '_' or '-', "
                "starting with a lowercase letter (under 128 bytes)"
            )
        if value and not _label_text(value, 63):
            raise ValueError(
                f"label value {shown(value)} of {key!r} is not allowed; allowed: at most 63 lowercase letters, "
                "digits, '_' or '-' (under 128 bytes)"
            )
    return v


def check_no_google(v: str, info: ValidationInfo) -> str:
    """`project` and `namePrefix` are part of the bucket name (<project>-<prefix>-artifacts); Cloud Storage
    refuses names with "google" or a close misspelling, or starting with "goog" (storage docs, bucket naming)."""
    if _looks_like_google(v) or (info.field_name == "project" and v.startswith("goog")):
        raise ValueError(
            f"{v!r} would put 'google' into the bucket name, which Cloud Storage refuses; allowed: a name without it"
        )
    return v


def check_zone_in_region(config: StackConfig) -> None:
    if not config.zone.startswith(config.region + "-"):
        raise KeyedValueError(
            "zone",
            f"{config.zone!r} is not in region {config.region!r}; allowed: a zone named {config.region}-<letter>",
        )


def check_zone_catalogue(config: StackConfig) -> None:
    """The region and zone offer the flavour's machine and Managed Lustre (data/zones.yaml), or the escape hatch."""
    from infra.zones import catalogue, nearest, region_of

    if config.allow_uncatalogued_zone:
        return
    flavour, cat = config.flavour_spec, catalogue()
    zones = cat.zones_for(flavour.machine_type)
    what = f"{flavour.machine_type} (flavour {flavour.name}) and Managed Lustre"
    hint = f"or set {PROJECT}:allowUncataloguedZone: true for a zone Google added since {cat.checked} (data/zones.yaml)"
    if config.region not in {region_of(z) for z in zones}:
        raise KeyedValueError(
            "region",
            f"{config.region!r} has no zone with {what} in the zone catalogue; allowed (nearest first): "
            f"{', '.join(nearest(config.region + '-x', zones))}; {hint}",
        )
    if config.zone not in zones:
        raise KeyedValueError(
            "zone",
            f"{config.zone!r} does not offer {what} in the zone catalogue; allowed (nearest first): "
            f"{', '.join(nearest(config.zone, zones))}; {hint}",
        )


def check_sections_together(config: StackConfig) -> None:
    """The checks that read more than one section, each beside the key it names."""
    flavour, ray, cluster = config.flavour_spec, config.ray, config.cluster
    check_address_room(config.network, config.gpu_pool.node_count, cluster.system_pool.node_count)
    check_rdma_subnets(config.network, flavour)
    check_min_master_version(cluster, flavour, config.lustre.legacy_port)
    if cluster.mode == "autopilot":
        check_autopilot(cluster, config.gpu_pool, ray, flavour)
    else:
        check_system_pool_machine(cluster, ray)
        check_head_fits(ray, cluster.system_pool.machine_type)
    check_worker_fits(ray, flavour)
    check_export_kept(config.storage, config.lustre)
    check_job_fits(config.job, config.gpu_pool.node_count, flavour)


def check_version_matrix(config: StackConfig) -> None:
    """Last: the pins it reads are each valid on their own by now."""
    from infra.version_matrix import VersionError, check

    try:
        check(config.version_pins, config.allow_untested_versions)
    except VersionError as exc:
        raise KeyedValueError(exc.key, str(exc)) from None


class StackConfig(Model):
    """Everything a stack is built from."""

    project: Annotated[str, AfterValidator(check_no_google)] = Field(pattern=PROJECT_ID)
    """Google Cloud project id."""
    region: str = Field("us-east1", pattern=REGION)
    """Region of the networks, cluster and bucket."""
    zone: str = Field("us-east1-b", pattern=ZONE)
    """Zone of the GPU nodes, the RDMA VPC and Lustre; must be in `region`."""
    name_prefix: Annotated[str, AfterValidator(check_no_google)] = Field("", pattern=NAME_PREFIX)
    """Prefix of every cloud name (1-20 chars); default: the stack name."""
    labels: Annotated[dict[str, str], AfterValidator(check_labels)] = Field(
        default_factory=dict,
        description=f"Extra labels on every labelled resource: at most {GCP_MAX_LABELS - len(RESERVED_LABEL_KEYS)} "
        f"(Google Cloud's {GCP_MAX_LABELS} less the program's own: {', '.join(RESERVED_LABEL_KEYS)}).",
    )
    allow_uncatalogued_zone: bool = False
    """Accept a `zone` that the zone catalogue (data/zones.yaml) does not list for the flavour and Managed Lustre: for a
    zone Google added after the catalogue was checked."""
    allow_untested_versions: bool = False
    """Accept pins (GKE version, GPU driver, gIB installer image, NeMo-RL image, KubeRay chart) that no row of the
    version matrix (data/version_matrix.yaml, docs/version-matrix.md) covers: for trying a new combination before its
    row is recorded. Known-bad pairs stay refused."""
    manage_apis: bool = True
    """Enable every Google Cloud API the stack uses (Service Usage; left on by `pulumi destroy`) and make each resource
    wait for its API. false where the deployer may not enable services: the APIs listed in docs/deploy.md must then be
    on already."""
    flavour: Annotated[str, AfterValidator(check_flavour)] = Field(
        "b200", description=f"GPU flavour: one of {', '.join(FLAVOURS)}."
    )
    gpu_pool: GpuPoolConfig = Field(default_factory=GpuPoolConfig)
    """GPU node pool."""
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    """GKE cluster."""
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    """Networks and ranges."""
    lustre: LustreConfig = Field(default_factory=LustreConfig)
    """Managed Lustre."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """The artifacts bucket."""
    ray: RayConfig = Field(default_factory=RayConfig)
    """Kubernetes and Ray."""
    job: JobConfig = Field(default_factory=JobConfig)
    """The training job."""
    recovery: RecoveryConfig = Field(default_factory=RecoveryConfig)
    """Spot-preemption recovery: resubmission of a preempted job."""
    cost: CostConfig = Field(default_factory=CostConfig)
    """Estimates shown by the offline plan: price overrides, bucket size, checkpoint write-time target."""

    # The first problem is the one reported, so their order is part of what a stack file is told.
    checks = (
        check_zone_in_region,
        check_zone_catalogue,
        check_sections_together,
        check_preemption_model,
        check_version_matrix,
    )

    @model_validator(mode="before")
    @classmethod
    def _no_credentials_in_plain_keys(cls, data: Any) -> Any:
        check_no_credentials_in_plain_keys(data)
        return data

    @property
    def version_pins(self) -> "Pins":
        """The stack's pins as the version matrix reads them (infra/version_matrix.py)."""
        from infra.version_matrix import Pins

        return Pins(
            mode=self.cluster.mode,
            flavour=self.flavour,
            gke=self.cluster.min_master_version,
            gpu_driver_version=self.gpu_pool.gpu_driver_version,
            gib_image=self.ray.nccl_installer_image,
            nemo_rl_tag=self.recipe.image.tag,
            chart_version=self.ray.chart_version,
        )

    @property
    def worker_fit(self) -> NodeFit:
        """The Ray worker's requests on one GPU node (config or the flavour's reference) and the node's room."""
        return worker_fit(self.ray, self.flavour_spec)

    @property
    def gate_policy(self) -> str:
        """`job.gate`, or enforce on a multi-node pool (a lone node cannot show the fabric broken), else warn."""
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
    """Lowercase letters (any script), digits, '_' and '-', at most `limit` characters and under 128 bytes: each
    character is checked, so a trailing newline cannot slip past a `$`."""
    return (
        len(text) <= limit
        and len(text.encode()) < 128
        and all(c in "_-" or unicodedata.category(c) in ("Ll", "Lo", "Nd", "Nl", "No") for c in text)
    )


def check_no_credentials_in_plain_keys(data: Any) -> None:
    """No string of the sections that reach the job in plain text (`job`, `ray`) looks like a credential: a W&B key
    pasted into `job.wandbProject` would be published. `job.overrides` have their own check, naming the index."""
    if not isinstance(data, dict):
        return

    def walk(value: Any, key: str) -> None:
        if isinstance(value, str) and looks_like_credential(value):
            raise KeyedValueError(
                key,
                f"{CREDENTIAL_SHOWN}; allowed: no credential in a plain key (it reaches the job's entrypoint, the "
                "plan and the watcher's ConfigMap in plain text); the secrets are hfToken and wandbApiKey "
                "(`pulumi config set --secret`)",
            )
        if isinstance(value, dict):
            for k, v in value.items():
                if f"{key}.{k}" != "job.overrides":
                    walk(v, f"{key}.{k}")

    for section in ("job", "ray"):
        walk(data.get(section), section)


def _looks_like_google(text: str) -> bool:
    return "google" in text.lower().replace("0", "o")


def prefix_for_stack(stack: str) -> str:
    """The default `namePrefix`: the stack name when it is one already; else its lowercase form with `_` and `.` as
    `-`, cut to fit, and a short hash of the stack name (so `Dev` and `dev` never share cloud names)."""
    if re.fullmatch(r"[a-z]([a-z0-9-]{0,18}[a-z0-9])?", stack) and not _looks_like_google(stack):
        return stack
    base = re.sub(r"-+", "-", re.sub(r"[_.]", "-", stack.lower())).strip("-")
    if not base[:1].isalpha() or not base.isascii() or _looks_like_google(base):
        if not base[:1].isalpha():
            why = "does not start with a letter"
        elif not base.isascii():
            why = "has letters outside a-z, which cloud names do not take"
        else:
            why = "would put 'google' into the bucket name"
        raise ConfigError(
            f"{PROJECT}:namePrefix: not set, and the stack name {shown(stack)} {why}; allowed: set "
            f"{PROJECT}:namePrefix to {PATTERN_HELP[NAME_PREFIX]}"
        )
    digest = hashlib.sha256(stack.encode()).hexdigest()[:4]
    return f"{base[:15].rstrip('-')}-{digest}"
