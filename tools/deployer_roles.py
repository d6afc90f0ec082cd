"""The IAM roles the deploying identity (your Application Default Credentials) needs, per resource type.

`pulumi up`, `pulumi destroy` and `pulumi refresh` create, change and delete every resource of the plan
with one identity (docs/deploy.md, "One identity"). This table says, for each resource type a plan can
hold, which predefined role grants what that resource's create/update/delete calls need. docs/deploy.md
is generated from it (`make docs`), and `tests/test_deployer_roles.py` fails when a plan holds a
resource type that has no entry here, so a new resource cannot ship without its role.

Predefined roles are broader than the exact permissions; an organisation that wants least privilege
can build a custom role from the permissions these roles list (IAM "roles and permissions" pages).
Only on the real cloud: that no call of the providers needs a permission outside these roles (the
providers' own call sequences are not visible offline).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RoleNeed:
    roles: tuple[str, ...]
    why: str


NONE = RoleNeed((), "nothing: exists only in the Pulumi state")

ROLES_OF_TYPE: dict[str, RoleNeed] = {
    "gcp:projects/service:Service": RoleNeed(
        ("roles/serviceusage.serviceUsageAdmin",), "enable the APIs (not needed with `manageApis: false`)"
    ),
    "gcp:compute/network:Network": RoleNeed(("roles/compute.networkAdmin",), "the three VPCs (RoCE profile included)"),
    "gcp:compute/subnetwork:Subnetwork": RoleNeed(("roles/compute.networkAdmin",), "the subnets"),
    "gcp:compute/router:Router": RoleNeed(("roles/compute.networkAdmin",), "the Cloud Router of the NAT"),
    "gcp:compute/routerNat:RouterNat": RoleNeed(("roles/compute.networkAdmin",), "Cloud NAT"),
    "gcp:compute/globalAddress:GlobalAddress": RoleNeed(("roles/compute.networkAdmin",), "the private services range"),
    # compute.networkAdmin excludes firewall rules; compute.securityAdmin holds them.
    "gcp:compute/firewall:Firewall": RoleNeed(("roles/compute.securityAdmin",), "the gVNIC and Lustre firewall rules"),
    "gcp:servicenetworking/connection:Connection": RoleNeed(
        ("roles/servicenetworking.networksAdmin", "roles/compute.networkAdmin"),
        "the Private Service Access peering (servicenetworking.services.addPeering) on the VPC",
    ),
    "gcp:serviceaccount/account:Account": RoleNeed(("roles/iam.serviceAccountAdmin",), "the node service account"),
    "gcp:projects/iAMMember:IAMMember": RoleNeed(
        ("roles/resourcemanager.projectIamAdmin",), "the node service account's project role"
    ),
    "gcp:container/cluster:Cluster": RoleNeed(
        ("roles/container.admin", "roles/iam.serviceAccountUser"),
        "the cluster; actAs (iam.serviceAccounts.actAs) on the node service account its nodes run as",
    ),
    "gcp:container/nodePool:NodePool": RoleNeed(
        ("roles/container.admin", "roles/iam.serviceAccountUser"), "the node pools; actAs on the node service account"
    ),
    "gcp:lustre/instance:Instance": RoleNeed(("roles/lustre.admin",), "the Managed Lustre instance"),
    "gcp:projects/serviceIdentity:ServiceIdentity": RoleNeed(
        ("roles/serviceusage.serviceUsageAdmin",), "the Managed Lustre service agent (generateServiceIdentity)"
    ),
    "gcp:storage/bucket:Bucket": RoleNeed(("roles/storage.admin",), "the artifacts bucket"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": RoleNeed(
        ("roles/storage.admin",), "bucket grants to the Ray pods' KSA and the Lustre service agent"
    ),
    "gcp:logging/metric:Metric": RoleNeed(("roles/logging.configWriter",), "the log-based preemption counter"),
    "gcp:monitoring/dashboard:Dashboard": RoleNeed(("roles/monitoring.dashboardEditor",), "the monitoring dashboard"),
    "pulumi:providers:kubernetes": NONE,
    "pulumi-python:dynamic/nemo-rl-gke:LustreGuard": RoleNeed(
        ("roles/lustre.admin",), "export to / import from Cloud Storage (lustre.instances.exportData/importData)"
    ),
    "pulumi-python:dynamic/nemo-rl-gke:JobSubmission": RoleNeed(
        ("roles/container.developer",),
        "read the RayCluster and reach the Ray dashboard through the API server proxy (services/proxy)",
    ),
}
"""Custom resource types of the plan -> the roles their calls need. Kubernetes objects are added below."""

KUBERNETES = RoleNeed(
    ("roles/container.admin",),
    "in-cluster objects, cluster-scoped ones included (Namespace, PersistentVolume, GKE Network objects); "
    "container.admin also holds container.clusters.connect for the DNS endpoint",
)

INVOKES: dict[str, RoleNeed] = {
    "gcp:organizations/getProject:getProject": RoleNeed(
        ("roles/browser",), "the project number of the Workload Identity principal (resourcemanager.projects.get)"
    ),
}
"""Provider functions the program calls at `pulumi up` (not resources, so not in the plan)."""


def roles_of(resource_type: str) -> RoleNeed:
    """The roles a custom resource type needs; KeyError for a type this table does not know."""
    if resource_type.startswith("kubernetes:"):
        return KUBERNETES
    return ROLES_OF_TYPE[resource_type]


def all_roles() -> list[str]:
    """Every role of the table, once, sorted: what to grant the deploying identity."""
    needs = [*ROLES_OF_TYPE.values(), KUBERNETES, *INVOKES.values()]
    return sorted({role for need in needs for role in need.roles})


def roles_table() -> str:
    """The Markdown table docs/deploy.md shows (generated; `make docs`)."""
    lines = ["| resource type | roles | for |", "|---|---|---|"]
    rows = [*ROLES_OF_TYPE.items(), ("kubernetes:* (every in-cluster object, the Helm release)", KUBERNETES),
            *((f"{name} (function)", need) for name, need in INVOKES.items())]
    for name, need in rows:
        roles = ", ".join(f"`{r}`" for r in need.roles) or "—"
        lines.append(f"| `{name}` | {roles} | {need.why} |")
    lines += ["", "All of them, to grant at once:", "", "```sh"]
    lines += [f"gcloud projects add-iam-policy-binding MY-PROJECT --member=user:YOU@EXAMPLE.COM --role={r}" for r in all_roles()]
    lines.append("```")
    return "\n".join(lines)
