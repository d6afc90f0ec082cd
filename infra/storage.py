"""Where training state lives: Managed Lustre for hot data, a GCS bucket for artifacts.

- `Lustre`: the parallel filesystem the Ray head and workers mount at `/lustre` (checkpoints,
  Hugging Face cache). It peers into the cluster VPC through Private Service Access, so it waits
  for the PSA connection but never for the cluster: both are created in parallel, and the GKE
  Lustre CSI driver connects them at mount time
  (https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
- `ArtifactBucket`: a hierarchical-namespace GCS bucket the Ray pods' Kubernetes service account
  may read and write through Workload Identity, with no Google service account or key in between.
  `pulumi destroy` keeps it, objects included, unless `storage.deleteBucketOnDestroy` opts in.
- `LustreDataGuard`: makes `pulumi destroy` export Lustre's checkpoints and logs into that bucket
  before the instance is deleted (and refuse to delete it when the export fails), and a new
  instance import an earlier export (`lustre.importFrom`); see `infra.lustre_guard`.
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

LUSTRE_PORT = 988
"""LNet port of Managed Lustre instances created without GKE support (nodes from
`infra.config.LUSTRE_PORT_988_MIN_GKE` on)."""
LUSTRE_LEGACY_PORT = 6988
"""LNet port of `gkeSupportEnabled` instances, which the CSI driver reaches only with its legacy flag."""

BUCKET_ROLE = "roles/storage.objectUser"
"""Read, create, overwrite and delete objects (and HNS folders), without changing bucket IAM."""

LUSTRE_SERVICE = "lustre.googleapis.com"
LUSTRE_AGENT_EXPORT_ROLE = "roles/storage.objectUser"
LUSTRE_AGENT_IMPORT_ROLE = "roles/storage.objectViewer"
"""What the Managed Lustre service agent needs on a bucket to transfer to and from it, or only from it
(managed-lustre docs, "Transfer data to or from Cloud Storage")."""
LUSTRE_TIMEOUTS = pulumi.CustomTimeouts(create="120m", update="90m", delete="60m")
"""Create as the provider's own default for google_lustre_instance (magic-modules
mmv1/products/lustre/Instance.yaml `timeouts`: insert 120, update 60, delete 60 minutes, set in magic-modules
PR #16046, 2025-12; PR #14878, 2025-08, had raised only the operation poll to 120 minutes, its maintainers
putting the service's P99 creation time at 40-80 minutes); update above the provider's 60 for capacity
growth of large instances; delete as the provider's."""


def lustre_port(legacy: bool) -> int:
    """The TCP port between GKE nodes and Lustre for a stack's `lustre.legacyPort`."""
    return LUSTRE_LEGACY_PORT if legacy else LUSTRE_PORT


def artifact_bucket_name(project: str, prefix: str) -> str:
    """The artifacts bucket's global name; the project id keeps it apart from other projects' stacks.
    The preflight doctor (tools/doctor/network_checks.py) checks that this name is free."""
    return cloud_name(f"{project}-{prefix}", "artifacts", Limit.BUCKET)


def parse_mount_point(mount_point: str) -> str:
    """The server IP of a Lustre mount point `IP@tcp:/fs`; the CSI volume's `ip` attribute."""
    ip, sep, _ = mount_point.partition("@")
    if not sep or not ip:
        raise ValueError(f"unexpected Lustre mount point {mount_point!r}; expected IP@tcp:/filesystem")
    return ip


def workload_identity_principal(project_number: str, workload_pool: str, namespace: str, ksa: str) -> str:
    """The IAM principal of a Kubernetes service account under Workload Identity Federation for GKE.

    Granting roles to it directly needs no Google service account and no annotation on the KSA
    (GKE tutorial, https://cloud.google.com/kubernetes-engine/docs/tutorials/nemo-rl-gke).
    `workload_pool` is `<project>.svc.id.goog`, as the cluster reports it.
    """
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{workload_pool}/subject/ns/{namespace}/sa/{ksa}"
    )


@dataclass(frozen=True)
class LustreArgs:
    """What `Lustre` needs: its config and id, and the cluster VPC with the peering to wait for."""

    ctx: StackContext
    lustre: LustreConfig
    instance_id: str
    network: pulumi.Input[str]
    """The cluster VPC as `projects/<p>/global/networks/<name>` (`Networking.primary_network`)."""
    psa_connection: pulumi.Resource
    """The Service Networking peering (`Networking.psa_connection`)."""


class Lustre(pulumi.ComponentResource):
    """A Managed Lustre instance in the stack's zone, on the cluster VPC.

    `capacityGib` and `perUnitStorageThroughput` are sent as strings: that is their pulumi-gcp type
    (pulumi-gcp 10.2.0 `gcp.lustre.Instance`), and a number would pass mocks but fail on the real API.
    """

    instance: gcp.lustre.Instance
    instance_id: pulumi.Output[str]
    """The instance id; an Output so that users (the CSI PersistentVolume) wait for the instance."""
    mount_ip: pulumi.Output[str]
    """The server IP from the mount point `IP@tcp:/fs`: the CSI volume attribute `ip`."""
    filesystem: pulumi.Output[str]
    """The Lustre fsname: the CSI volume attribute `filesystem`."""
    volume_handle: pulumi.Output[str]
    """`<project>/<zone>/<instanceId>`, the CSI PersistentVolume's `volumeHandle`
    (https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance)."""
    capacity_gib: int
    location: str
    """The zone of the instance."""
    port: int
    """The LNet port the instance serves (988, or 6988 for a GKE-support instance)."""

    def __init__(self, name: str, args: LustreArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:Lustre", name, None, opts)
        ctx, cfg, instance_id, network = args.ctx, args.lustre, args.instance_id, args.network
        psa_connection = args.psa_connection
        self.capacity_gib = cfg.capacity_gib
        self.location = ctx.zone
        self.port = lustre_port(cfg.legacy_port)
        self.instance = gcp.lustre.Instance(
            f"{name}-instance",
            instance_id=instance_id,
            project=ctx.project,
            location=ctx.zone,
            network=network,
            capacity_gib=str(cfg.capacity_gib),
            per_unit_storage_throughput=str(cfg.per_unit_storage_throughput),
            filesystem=cfg.filesystem,
            # The Lustre CSI docs ("Lustre communication ports") and the GKE API reference
            # (LustreCsiDriverConfig.enableLegacyLustrePort) both say a `gke-support-enabled` instance
            # needs the cluster's legacy-port flag (6988) on EVERY GKE version, else mounts fail, while
            # newer clusters mount plain instances on 988. So GKE support follows the same
            # `lustre.legacyPort` switch as the cluster flag and the firewall port; enabling it always
            # would leave a 988 driver facing a 6988 server. Those docs are more precise than
            # a summary of them and win.
            gke_support_enabled=cfg.legacy_port,
            description="nemo-rl-gke checkpoints and model cache",
            labels=ctx.labels("lustre"),
            opts=child_options(
                self,
                opts,
                # Nothing in the inputs refers to the peering, yet creation fails without it.
                depends_on=[psa_connection],
                # Only measurable on the real cloud: creation and growth of large instances take
                # tens of minutes; these bounds leave room without hiding a stuck operation for hours.
                custom_timeouts=LUSTRE_TIMEOUTS,
                # The instance id is fixed, so a replacement can only delete first; that also makes
                # Pulumi delete the `LustreDataGuard` (which exports) before the old instance goes.
                delete_before_replace=True,
            ),
        )
        self.instance_id = self.instance.instance_id
        self.filesystem = self.instance.filesystem
        self.mount_ip = self.instance.mount_point.apply(parse_mount_point)
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
    """What `ArtifactBucket` needs.

    `workload_pool` is the cluster's Workload Identity pool (`ClusterComponent.workload_pool`): the pool
    `<project>.svc.id.goog` exists only once a cluster with Workload Identity was created in the
    project, and a grant to one of its principals made before that fails with "Identity Pool does
    not exist" (terraform-google-modules/terraform-google-kubernetes-engine #916).
    Taking the pool from the cluster's output makes the grant wait for the cluster through its data.

    Without `delete_on_destroy` (`storage.deleteBucketOnDestroy`), `pulumi destroy` keeps the bucket
    and its objects (retainOnDelete: Pulumi only forgets it) and Pulumi never deletes a bucket that
    still holds objects; with it, the bucket goes with everything in it.

    `adopt_existing` (`storage.adoptExistingBucket`) imports the bucket a previous destroy kept,
    for a stack re-created under the same name: its name is fixed, so creating it again would fail.
    """

    ctx: StackContext
    namespace: str
    """The namespace and name of the Kubernetes service account granted the bucket."""
    ksa: str
    workload_pool: pulumi.Input[str]
    delete_on_destroy: bool = False
    adopt_existing: bool = False


class ArtifactBucket(pulumi.ComponentResource):
    """A regional GCS bucket for artifacts, writable by one Kubernetes service account.

    Hierarchical namespace gives real folders (atomic renames, the layout GCS FUSE and checkpoint
    exporters expect); it requires uniform bucket-level access, which also makes IAM the only way
    in. Public access prevention is enforced so no later ACL or IAM change can publish a model.
    """

    bucket: gcp.storage.Bucket
    bucket_name: pulumi.Output[str]
    bucket_url: pulumi.Output[str]
    """`gs://<name>`."""
    bucket_cloud_name: str
    """The bucket name, known at plan time (it is chosen here, not by the cloud)."""
    member: pulumi.Output[str]
    """The Workload Identity principal granted `roles/storage.objectUser`."""

    def __init__(self, name: str, args: ArtifactBucketArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:ArtifactBucket", name, None, opts)
        ctx, delete_on_destroy, adopt_existing = args.ctx, args.delete_on_destroy, args.adopt_existing
        namespace, ksa, workload_pool = args.namespace, args.ksa, args.workload_pool
        child = child_options(self, opts)
        # Bucket names are global across all of GCS: the project id makes collisions with other
        # projects unlikely, the stack prefix separates stacks of one project.
        bucket_cloud_name = artifact_bucket_name(ctx.project, ctx.prefix)
        self.bucket = gcp.storage.Bucket(
            f"{name}-bucket",
            name=bucket_cloud_name,
            project=ctx.project,
            # Same region as the nodes: no inter-region egress, lowest latency. GCS reports
            # locations upper-case; sending that form avoids a diff on every refresh.
            location=ctx.region.upper(),
            uniform_bucket_level_access=True,
            hierarchical_namespace={"enabled": True},
            public_access_prevention="enforced",
            # Deleting a bucket that holds objects needs forceDestroy: only when the user opted in.
            force_destroy=delete_on_destroy,
            labels=ctx.labels("artifacts"),
            opts=child_options(
                self,
                opts,
                retain_on_delete=not delete_on_destroy,
                import_=bucket_cloud_name if adopt_existing else None,
            ),
        )
        self.bucket_cloud_name = bucket_cloud_name
        # The project number is only known to the cloud; the principal is built from it at deploy time.
        # The lookup calls Resource Manager: it waits for what the bucket waits for (its APIs).
        number = gcp.organizations.get_project_output(
            project_id=ctx.project, opts=pulumi.InvokeOutputOptions(depends_on=child.depends_on)
        ).number
        self.member = pulumi.Output.all(number, workload_pool).apply(
            lambda args: workload_identity_principal(str(args[0]), args[1], namespace, ksa)
        )
        gcp.storage.BucketIAMMember(
            f"{name}-object-user",
            bucket=self.bucket.name,
            role=BUCKET_ROLE,
            member=self.member,
            opts=child,
        )
        self.bucket_name = self.bucket.name
        self.bucket_url = self.bucket.url
        self.register_outputs({"bucketName": self.bucket_name, "bucketUrl": self.bucket_url, "member": self.member})


class LustreGuard(pulumi.dynamic.Resource, module="nemo-rl-gke", name="LustreGuard"):
    """The dynamic resource of `infra.lustre_guard` (type `pulumi-python:dynamic/nemo-rl-gke:LustreGuard`)."""

    instance_name: pulumi.Output[str]
    export_root: pulumi.Output[str]
    imported_from: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: Optional[pulumi.ResourceOptions] = None):
        # Output-only properties are declared as None so Pulumi exposes them.
        outputs = {"instance_name": None, "export_root": None, "imported_from": None}
        super().__init__(LustreGuardProvider(), name, {**props, **outputs}, opts)


def bucket_of(uri: str) -> str:
    """The bucket name of `gs://<bucket>/...`."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    return uri[len("gs://") :].split("/", 1)[0]


@dataclass(frozen=True)
class LustreDataGuardArgs:
    """What `LustreDataGuard` needs: the Lustre config (export and import), the instance, the bucket and
    the results directories to export (`workloads.job_spec.results_dirs`)."""

    ctx: StackContext
    lustre_config: LustreConfig
    lustre: Lustre
    bucket: ArtifactBucket
    results_dirs: tuple[str, ...]


class LustreDataGuard(pulumi.ComponentResource):
    """What `pulumi destroy` keeps of Lustre: its results directories, exported to the bucket first.

    Children: the Managed Lustre service agent (created if the project has none yet), its access to
    the bucket (objectUser: export writes there) and, with `lustre.importFrom` in another bucket, read
    access to that bucket; and the `LustreGuard` dynamic resource. The guard depends on the instance,
    the bucket and those grants, so Pulumi deletes it, and so runs the export, before any of them, on
    a plain `pulumi destroy` (no `--run-program`; unlike a `before_delete` resource hook). When the
    export fails the guard stays and so do the instance, the bucket and the grants.

    `export_uri` is where the directories land (`gs://<bucket>/lustre-export/`): the value for
    `lustre.importFrom` of a later stack.
    """

    guard: LustreGuard
    export_uri: pulumi.Output[str]

    def __init__(self, name: str, args: LustreDataGuardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:LustreDataGuard", name, None, opts)
        ctx, cfg, lustre, bucket = args.ctx, args.lustre_config, args.lustre, args.bucket
        results_dirs = args.results_dirs
        grants = self._agent_grants(name, ctx, cfg, bucket, child_options(self, opts))
        props = guard_props(
            project=ctx.project,
            zone=lustre.location,
            instance_id=lustre.instance_id,
            bucket=bucket.bucket.name,
            dirs=results_dirs,
            export_on_destroy=cfg.export_on_destroy,
            import_from=cfg.import_from,
        )
        self.guard = LustreGuard(
            f"{name}-guard",
            props,
            child_options(
                self,
                opts,
                # The instance and the bucket are implied by the props; explicit here because the
                # whole design rests on this order (delete: guard first; create: instance first).
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
                "dirs": list(results_dirs),
            }
        )

    def _agent_grants(
        self, name: str, ctx: StackContext, cfg: LustreConfig, bucket: ArtifactBucket, child: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The Lustre service agent's access to the bucket (and to an import source), when it transfers."""
        grants: list[pulumi.Resource] = []
        if not (cfg.export_on_destroy or cfg.import_from):
            return grants
        agent = gcp.projects.ServiceIdentity(
            f"{name}-lustre-agent", project=ctx.project, service=LUSTRE_SERVICE, opts=child
        )
        grants.append(
            gcp.storage.BucketIAMMember(
                f"{name}-agent-bucket-access",
                bucket=bucket.bucket.name,
                role=LUSTRE_AGENT_EXPORT_ROLE,
                member=agent.member,
                opts=child,
            )
        )
        source_bucket = bucket_of(cfg.import_from) if cfg.import_from else None
        if source_bucket and source_bucket != bucket.bucket_cloud_name:
            # Only the objects are read; the grant goes with this stack, the source bucket stays.
            grants.append(
                gcp.storage.BucketIAMMember(
                    f"{name}-agent-import-access",
                    bucket=source_bucket,
                    role=LUSTRE_AGENT_IMPORT_ROLE,
                    member=agent.member,
                    opts=child,
                )
            )
        return grants
