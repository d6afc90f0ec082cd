"""Where training state lives: Managed Lustre for hot data, a GCS bucket for artifacts, and the guard that
exports Lustre's results into the bucket before `pulumi destroy` deletes it (`infra.lustre_guard`).
Lustre waits for the PSA peering, never for the cluster: the CSI driver connects them at mount time
(https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi.dynamic
import pulumi_gcp as gcp

from infra.config import LustreConfig
from infra.lustre_guard import LustreGuardProvider, export_root, guard_props
from infra.naming import Limit, cloud_name
from infra.options import child_options
from infra.stack_context import StackContext

LUSTRE_PORT = 988  # instances without GKE support (nodes from `infra.config.LUSTRE_PORT_988_MIN_GKE` on)
LUSTRE_LEGACY_PORT = 6988  # `gkeSupportEnabled` instances, reached only with the CSI driver's legacy flag
BUCKET_ROLE = "roles/storage.objectUser"  # objects and HNS folders, not bucket IAM
LUSTRE_SERVICE = "lustre.googleapis.com"
# The Lustre service agent's roles to export to / import from a bucket (managed-lustre docs, "Transfer data to
# or from Cloud Storage").
LUSTRE_AGENT_EXPORT_ROLE = "roles/storage.objectUser"
LUSTRE_AGENT_IMPORT_ROLE = "roles/storage.objectViewer"
# The provider's defaults (magic-modules mmv1/products/lustre/Instance.yaml `timeouts`, PR #16046: P99 creation
# 40-80 minutes) but update at 90 for capacity growth of large instances.
LUSTRE_TIMEOUTS = pulumi.CustomTimeouts(create="120m", update="90m", delete="60m")


def lustre_port(legacy: bool) -> int:
    return LUSTRE_LEGACY_PORT if legacy else LUSTRE_PORT


def artifact_bucket_name(project: str, prefix: str) -> str:
    """Global: the project id keeps it apart from other projects' stacks (the doctor checks it is free)."""
    return cloud_name(f"{project}-{prefix}", "artifacts", Limit.BUCKET)


def parse_mount_point(mount_point: str) -> str:
    ip, sep, _ = mount_point.partition("@")
    if not sep or not ip:
        raise ValueError(f"unexpected Lustre mount point {mount_point!r}; expected IP@tcp:/filesystem")
    return ip


def workload_identity_principal(project_number: str, workload_pool: str, namespace: str, ksa: str) -> str:
    """A KSA's principal under Workload Identity Federation: no Google SA, no KSA annotation
    (https://cloud.google.com/kubernetes-engine/docs/tutorials/nemo-rl-gke)."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{workload_pool}/subject/ns/{namespace}/sa/{ksa}"
    )


@dataclass(frozen=True)
class LustreArgs:
    ctx: StackContext
    lustre: LustreConfig
    instance_id: str
    network: pulumi.Input[str]
    psa_connection: pulumi.Resource


class Lustre(pulumi.ComponentResource):
    """A Managed Lustre instance. Sizes are strings: their pulumi-gcp 10.2.0 type (a number passes mocks only)."""

    def __init__(self, name: str, args: LustreArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:Lustre", name, None, opts)
        ctx, cfg = args.ctx, args.lustre
        self.capacity_gib = cfg.capacity_gib
        self.location = ctx.zone
        self.port = lustre_port(cfg.legacy_port)
        self.instance = gcp.lustre.Instance(
            f"{name}-instance",
            instance_id=args.instance_id,
            project=ctx.project,
            location=ctx.zone,
            network=args.network,
            capacity_gib=str(cfg.capacity_gib),
            per_unit_storage_throughput=str(cfg.per_unit_storage_throughput),
            filesystem=cfg.filesystem,
            # A `gke-support-enabled` instance needs the cluster's legacy-port flag (6988) on every GKE version
            # (Lustre CSI docs "Lustre communication ports"; GKE API LustreCsiDriverConfig.enableLegacyLustrePort).
            gke_support_enabled=cfg.legacy_port,
            description="nemo-rl-gke checkpoints and model cache",
            labels=ctx.labels("lustre"),
            opts=child_options(
                self,
                opts,
                # Nothing in the inputs refers to the peering, yet creation fails without it.
                depends_on=[args.psa_connection],
                custom_timeouts=LUSTRE_TIMEOUTS,
                # The id is fixed; deleting first also deletes (exports) the `LustreDataGuard` before it.
                delete_before_replace=True,
            ),
        )
        self.instance_id = self.instance.instance_id
        self.filesystem = self.instance.filesystem
        self.mount_ip = self.instance.mount_point.apply(parse_mount_point)
        # The CSI PersistentVolume's handle.
        self.volume_handle = pulumi.Output.concat(ctx.project, "/", ctx.zone, "/", self.instance.instance_id)
        self.register_outputs(
            {
                "instanceId": self.instance_id,
                "mountIp": self.mount_ip,
                "filesystem": self.filesystem,
                "volumeHandle": self.volume_handle,
                "capacityGib": self.capacity_gib,
                "location": self.location,
                "port": self.port,
            }
        )


@dataclass(frozen=True)
class ArtifactBucketArgs:
    """`workload_pool` comes from the cluster's output: a grant before the pool exists fails with "Identity Pool
    does not exist" (terraform-google-modules/terraform-google-kubernetes-engine #916). `adopt_existing`
    imports the bucket an earlier destroy kept (its name is fixed)."""

    ctx: StackContext
    namespace: str
    ksa: str
    workload_pool: pulumi.Input[str]
    delete_on_destroy: bool = False
    adopt_existing: bool = False


class ArtifactBucket(pulumi.ComponentResource):
    """A regional hierarchical-namespace bucket (real folders, atomic renames), writable by one KSA; kept by
    `pulumi destroy` unless `storage.deleteBucketOnDestroy`."""

    def __init__(self, name: str, args: ArtifactBucketArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:ArtifactBucket", name, None, opts)
        ctx, delete_on_destroy = args.ctx, args.delete_on_destroy
        child = child_options(self, opts)
        bucket_cloud_name = artifact_bucket_name(ctx.project, ctx.prefix)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=bucket_cloud_name,
            project=ctx.project,
            # GCS reports locations upper-case; sending that form avoids a diff on every refresh.
            location=ctx.region.upper(),
            uniform_bucket_level_access=True,
            hierarchical_namespace={"enabled": True},
            public_access_prevention="enforced",
            force_destroy=delete_on_destroy,
            labels=ctx.labels("artifacts"),
            opts=child_options(
                self,
                opts,
                retain_on_delete=not delete_on_destroy,
                import_=bucket_cloud_name if args.adopt_existing else None,
            ),
        )
        self.bucket_cloud_name = bucket_cloud_name
        # The lookup calls Resource Manager: it waits for what the bucket waits for (its APIs).
        number = gcp.organizations.get_project_output(
            project_id=ctx.project, opts=pulumi.InvokeOutputOptions(depends_on=child.depends_on)
        ).number
        self.member = pulumi.Output.all(number, args.workload_pool).apply(
            lambda got: workload_identity_principal(str(got[0]), got[1], args.namespace, args.ksa)
        )
        gcp.storage.BucketIAMMember(
            f"{name}-object-user", bucket=self.bucket.name, role=BUCKET_ROLE, member=self.member, opts=child
        )
        self.bucket_name = self.bucket.name
        self.bucket_url = self.bucket.url
        self.register_outputs({"bucketName": self.bucket_name, "bucketUrl": self.bucket_url, "member": self.member})


class LustreGuard(pulumi.dynamic.Resource, module="nemo-rl-gke", name="LustreGuard"):
    instance_name: pulumi.Output[str]
    export_root: pulumi.Output[str]
    imported_from: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: Optional[pulumi.ResourceOptions] = None):
        # Output-only properties are declared as None so Pulumi exposes them.
        outputs = {"instance_name": None, "export_root": None, "imported_from": None}
        super().__init__(LustreGuardProvider(), name, {**props, **outputs}, opts)


@dataclass(frozen=True)
class LustreDataGuardArgs:
    ctx: StackContext
    lustre_config: LustreConfig
    lustre: Lustre
    bucket: ArtifactBucket
    results_dirs: tuple[str, ...]
    weights_import: bool = False  # Lustre imports the staged weights from the bucket (infra/weight_staging.py)


class LustreDataGuard(pulumi.ComponentResource):
    """Exports Lustre's results directories to the bucket before `pulumi destroy` deletes it. The guard depends
    on the instance, the bucket and the agent's grants, so a plain `pulumi destroy` (no `--run-program`, unlike
    a `before_delete` hook) deletes (exports) it first; a failed export keeps them all."""

    def __init__(self, name: str, args: LustreDataGuardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:LustreDataGuard", name, None, opts)
        ctx, cfg, lustre, bucket = args.ctx, args.lustre_config, args.lustre, args.bucket
        grants = self._agent_grants(name, ctx, cfg, bucket, args.weights_import, child_options(self, opts))
        self.grants = grants  # what a transfer into or out of this instance waits for
        props = guard_props(
            project=ctx.project,
            zone=lustre.location,
            instance_id=lustre.instance_id,
            bucket=bucket.bucket.name,
            dirs=args.results_dirs,
            export_on_destroy=cfg.export_on_destroy,
            import_from=cfg.import_from,
        )
        self.guard = LustreGuard(
            f"{name}-guard",
            props,
            child_options(
                self,
                opts,
                # Implied by the props; explicit because the design rests on this order.
                depends_on=[lustre.instance, bucket.bucket, *grants],
                # A replaced instance replaces the guard, which is deleted (exported) first.
                replace_with=[lustre.instance],
                delete_before_replace=True,
            ),
        )
        self.export_uri = bucket.bucket.name.apply(export_root)
        self.register_outputs(
            {
                "exportUri": self.export_uri,
                "exportOnDestroy": cfg.export_on_destroy,
                "importFrom": cfg.import_from or "",
                "dirs": list(args.results_dirs),
            }
        )

    def _agent_grants(
        self,
        name: str,
        ctx: StackContext,
        cfg: LustreConfig,
        bucket: ArtifactBucket,
        weights_import: bool,
        child: pulumi.ResourceOptions,
    ) -> list[pulumi.Resource]:
        if not (cfg.export_on_destroy or cfg.import_from or weights_import):
            return []
        agent = gcp.projects.ServiceIdentity(
            f"{name}-lustre-agent", project=ctx.project, service=LUSTRE_SERVICE, opts=child
        )
        access = [("bucket", bucket.bucket.name, LUSTRE_AGENT_EXPORT_ROLE)]
        # `lustre.importFrom` is a gs:// folder (the config's pattern).
        source_bucket = cfg.import_from.removeprefix("gs://").split("/", 1)[0] if cfg.import_from else None
        if source_bucket and source_bucket != bucket.bucket_cloud_name:
            access.append(("import", source_bucket, LUSTRE_AGENT_IMPORT_ROLE))
        return [
            gcp.storage.BucketIAMMember(
                f"{name}-agent-{what}-access", bucket=target, role=role, member=agent.member, opts=child
            )
            for what, target, role in access
        ]
