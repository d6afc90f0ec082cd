"""What the identity that runs `pulumi up` and `pulumi destroy` must be allowed to do in the project: the one list.

Keyed by Pulumi resource type; each permission names a predefined role that grants it (Google Cloud IAM's
"permissions reference" and "predefined roles"). Each type lists create AND delete calls: a deployer who cannot
delete gets a destroy that stops halfway with Lustre still billing. PSA's deletion_policy REMOVE_PEERING also
deletes the peering (pulumi-gcp 10.2.0 `Connection.deletion_policy`; terraform-provider-google
resource_service_networking_connection.go Delete).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.config import StackConfig


@dataclass(frozen=True)
class Grant:
    role: str
    permissions: tuple[str, ...]


def _lifecycle(role: str, prefix: str, *between: str) -> Grant:
    """`<prefix>.create`, `.get`, what else the type calls, `.delete`: the usual permissions of one resource."""
    return Grant(role, (f"{prefix}.create", f"{prefix}.get", *between, f"{prefix}.delete"))


# Reading the project (its number for the Workload Identity principal) happens for every stack.
PROJECT_READ = Grant("roles/browser", ("resourcemanager.projects.get",))
NETWORK_ADMIN, CONTAINER_ADMIN, STORAGE_ADMIN = (
    "roles/compute.networkAdmin",
    "roles/container.admin",
    "roles/storage.admin",
)
# Node pools (and the cluster's initial, removed, default pool) run as the stack's node service account.
ACT_AS = Grant("roles/iam.serviceAccountUser", ("iam.serviceAccounts.actAs",))
SERVICE_USAGE = "roles/serviceusage.serviceUsageAdmin"

BY_RESOURCE_TYPE: dict[str, tuple[Grant, ...]] = {
    "gcp:compute/network:Network": (_lifecycle(NETWORK_ADMIN, "compute.networks"),),
    "gcp:compute/subnetwork:Subnetwork": (_lifecycle(NETWORK_ADMIN, "compute.subnetworks"),),
    "gcp:compute/firewall:Firewall": (
        _lifecycle("roles/compute.securityAdmin", "compute.firewalls", "compute.networks.updatePolicy"),
    ),
    "gcp:compute/router:Router": (_lifecycle(NETWORK_ADMIN, "compute.routers"),),
    "gcp:compute/routerNat:RouterNat": (Grant(NETWORK_ADMIN, ("compute.routers.update",)),),
    "gcp:compute/globalAddress:GlobalAddress": (
        Grant(
            NETWORK_ADMIN,
            (
                "compute.globalAddresses.create",
                "compute.globalAddresses.createInternal",
                "compute.globalAddresses.get",
                "compute.globalAddresses.setLabels",
                "compute.networks.use",
                "compute.globalAddresses.delete",
                "compute.globalAddresses.deleteInternal",
            ),
        ),
    ),
    "gcp:servicenetworking/connection:Connection": (
        Grant(
            "roles/servicenetworking.networksAdmin",
            ("servicenetworking.services.addPeering", "servicenetworking.services.deleteConnection"),
        ),
        Grant(NETWORK_ADMIN, ("compute.networks.use", "compute.networks.removePeering")),
    ),
    "gcp:container/cluster:Cluster": (
        _lifecycle(CONTAINER_ADMIN, "container.clusters", "container.clusters.update", "container.operations.get"),
        ACT_AS,
    ),
    "gcp:container/nodePool:NodePool": (Grant(CONTAINER_ADMIN, ("container.clusters.update",)), ACT_AS),
    "gcp:serviceaccount/account:Account": (_lifecycle("roles/iam.serviceAccountAdmin", "iam.serviceAccounts"),),
    "gcp:projects/iAMMember:IAMMember": (
        Grant(
            "roles/resourcemanager.projectIamAdmin",
            ("resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy"),
        ),
    ),
    "gcp:projects/serviceIdentity:ServiceIdentity": (Grant(SERVICE_USAGE, ("serviceusage.services.get",)),),
    "gcp:projects/service:Service": (
        Grant(SERVICE_USAGE, ("serviceusage.services.enable", "serviceusage.services.get")),
    ),
    "gcp:lustre/instance:Instance": (_lifecycle("roles/lustre.admin", "lustre.instances", "lustre.operations.get"),),
    # Deleting it only with storage.deleteBucketOnDestroy (BUCKET_DELETE); otherwise Pulumi only forgets it.
    "gcp:storage/bucket:Bucket": (Grant(STORAGE_ADMIN, ("storage.buckets.create", "storage.buckets.get")),),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (
        Grant(STORAGE_ADMIN, ("storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy")),
    ),
    "gcp:logging/metric:Metric": (_lifecycle("roles/logging.configWriter", "logging.logMetrics"),),
    "gcp:monitoring/dashboard:Dashboard": (_lifecycle("roles/monitoring.dashboardEditor", "monitoring.dashboards"),),
    # cluster.imageStreaming's remote repository (infra/image_mirror.py); repoAdmin cannot create one.
    "gcp:artifactregistry/repository:Repository": (
        _lifecycle(
            "roles/artifactregistry.admin", "artifactregistry.repositories", "artifactregistry.repositories.update"
        ),
    ),
}


# Registered by every stack; the rest only under the conditions in `resource_types`.
_CONDITIONAL = frozenset(
    {
        "gcp:projects/serviceIdentity:ServiceIdentity",
        "gcp:projects/service:Service",
        "gcp:artifactregistry/repository:Repository",
    }
)

# What the Lustre data guard (infra/lustre_guard.py) calls with the deployer's credentials.
LUSTRE_EXPORT = Grant("roles/lustre.admin", ("lustre.instances.exportData",))
LUSTRE_IMPORT = Grant("roles/lustre.admin", ("lustre.instances.importData",))

# storage.deleteBucketOnDestroy: the provider's force_destroy lists and deletes every object, then the bucket.
BUCKET_DELETE = Grant(STORAGE_ADMIN, ("storage.buckets.delete", "storage.objects.list", "storage.objects.delete"))


# Beyond the Google Cloud resources (which the doctor checks): listed for docs/deploy.md, held against the plans.
IN_CLUSTER: dict[str, tuple[Grant, ...]] = {
    # Every in-cluster object (the Helm release included) goes through the Kubernetes API of the DNS
    # endpoint, where IAM checks container.clusters.connect first; cluster-scoped objects (Namespace,
    # PersistentVolume, the GKE Network objects) need the cluster-wide rights of roles/container.admin.
    "kubernetes:*": (Grant(CONTAINER_ADMIN, ("container.clusters.connect",)),),
    # The job submission reads the RayCluster and proxies to the Ray dashboard (services/proxy).
    "pulumi-python:dynamic/nemo-rl-gke:JobSubmission": (
        Grant("roles/container.developer", ("container.clusters.connect",)),
    ),
    # Export before Lustre is deleted, import when created (infra/lustre_guard.py).
    "pulumi-python:dynamic/nemo-rl-gke:LustreGuard": (LUSTRE_EXPORT, LUSTRE_IMPORT),
    # The staged weights into Lustre before the job (infra/weights_import.py).
    "pulumi-python:dynamic/nemo-rl-gke:WeightsImport": (LUSTRE_IMPORT,),
}


def roles_table() -> str:
    """The deployer's roles per resource type, as docs/deploy.md shows them (`make docs`)."""
    rows = [
        *BY_RESOURCE_TYPE.items(),
        *IN_CLUSTER.items(),
        ("gcp:organizations/getProject (function)", (PROJECT_READ,)),
    ]
    lines = ["| resource type | role | permissions it grants that the stack uses |", "|---|---|---|"]
    for typ, grants in rows:
        for grant in grants:
            lines.append(f"| `{typ}` | `{grant.role}` | {', '.join(f'`{p}`' for p in grant.permissions)} |")
    roles = sorted({g.role for _, grants in rows for g in grants})
    lines += ["", "All of them at once (project owners hold them already):", "", "```sh"]
    lines += [
        f"gcloud projects add-iam-policy-binding MY-PROJECT --member=user:YOU@EXAMPLE.COM --role={r}" for r in roles
    ]
    lines.append("```")
    return "\n".join(lines)


def resource_types(cfg: StackConfig) -> frozenset[str]:
    """The Google Cloud resource types a stack with this config registers (held against every stack's plan)."""
    types = set(BY_RESOURCE_TYPE) - _CONDITIONAL
    if cfg.lustre.export_on_destroy or cfg.lustre.import_from or cfg.cluster.mode != "autopilot":
        # The Lustre service agent: exports, imports, and the staged weights' import (infra/weight_staging.py).
        types.add("gcp:projects/serviceIdentity:ServiceIdentity")
    if getattr(cfg, "manage_apis", False):  # project.manageApis (issue 11)
        types.add("gcp:projects/service:Service")
    if cfg.cluster.image_streaming:
        types.add("gcp:artifactregistry/repository:Repository")
    return frozenset(types)


def required_permissions(cfg: StackConfig) -> dict[str, str]:
    """`permission -> role` the deployer needs for this stack, to create it and to destroy it."""
    grants = [PROJECT_READ]
    for typ in sorted(resource_types(cfg)):
        grants.extend(BY_RESOURCE_TYPE[typ])
    if cfg.lustre.export_on_destroy:
        grants.append(LUSTRE_EXPORT)
    if cfg.lustre.import_from:
        grants.append(LUSTRE_IMPORT)
    if cfg.storage.delete_bucket_on_destroy:
        grants.append(BUCKET_DELETE)
    needed: dict[str, str] = {}
    for grant in grants:
        for permission in grant.permissions:
            needed.setdefault(permission, grant.role)
    return needed
