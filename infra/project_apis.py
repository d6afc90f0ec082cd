"""The Google Cloud APIs a stack needs, keyed by the Pulumi resource type that calls each (a new type without an
entry fails tests/test_project_apis.py), and the component enabling them (`manageApis`). A fresh project has
several off (docs.cloud.google.com/service-usage/docs/enabled-service). `pulumi destroy` leaves them on: other
users of the project may need them, and an enabled API costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from infra.stack_context import StackContext

COMPUTE = "compute.googleapis.com"
CONTAINER = "container.googleapis.com"
IAM = "iam.googleapis.com"
RESOURCE_MANAGER = "cloudresourcemanager.googleapis.com"
SERVICE_NETWORKING = "servicenetworking.googleapis.com"
SERVICE_USAGE = "serviceusage.googleapis.com"
LUSTRE = "lustre.googleapis.com"
STORAGE = "storage.googleapis.com"
MONITORING = "monitoring.googleapis.com"
LOGGING = "logging.googleapis.com"

API_BY_RESOURCE_TYPE: dict[str, str] = {
    "gcp:compute/network:Network": COMPUTE,
    "gcp:compute/subnetwork:Subnetwork": COMPUTE,
    "gcp:compute/firewall:Firewall": COMPUTE,
    "gcp:compute/router:Router": COMPUTE,
    "gcp:compute/routerNat:RouterNat": COMPUTE,
    "gcp:compute/globalAddress:GlobalAddress": COMPUTE,
    "gcp:servicenetworking/connection:Connection": SERVICE_NETWORKING,
    "gcp:container/cluster:Cluster": CONTAINER,
    "gcp:container/nodePool:NodePool": CONTAINER,
    "gcp:serviceaccount/account:Account": IAM,
    "gcp:projects/iAMMember:IAMMember": RESOURCE_MANAGER,
    "gcp:projects/serviceIdentity:ServiceIdentity": SERVICE_USAGE,
    "gcp:projects/service:Service": SERVICE_USAGE,
    "gcp:lustre/instance:Instance": LUSTRE,
    "gcp:storage/bucket:Bucket": STORAGE,
    "gcp:storage/bucketIAMMember:BucketIAMMember": STORAGE,
    "gcp:logging/metric:Metric": LOGGING,
    "gcp:monitoring/dashboard:Dashboard": MONITORING,
}

# With RESOURCE_MANAGER for getProject (the project number of the Workload Identity principal), on every stack.
REQUIRED_APIS: tuple[str, ...] = tuple(sorted({*API_BY_RESOURCE_TYPE.values(), RESOURCE_MANAGER}))


@dataclass(frozen=True)
class ProjectApisArgs:
    ctx: StackContext
    manage: bool


class ProjectApis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API (none when `manage` is false); `wait_for` makes each resource wait
    for its own API."""

    def __init__(self, name: str, args: ProjectApisArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("nemo-rl-gke:infra:ProjectApis", name, None, opts)
        ctx, manage = args.ctx, args.manage
        self.services = {}
        if manage:
            for api in REQUIRED_APIS:
                self.services[api] = gcp.projects.Service(
                    f"{name}-{api.split('.', 1)[0]}",
                    project=ctx.project,
                    service=api,
                    disable_on_destroy=False,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.register_outputs({"managed": manage, "apis": list(REQUIRED_APIS)})

    def wait_for(self, *apis: str) -> pulumi.ResourceOptions:
        unknown = sorted(set(apis) - set(REQUIRED_APIS))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} not in REQUIRED_APIS; add the resource type to API_BY_RESOURCE_TYPE"
            )
        return pulumi.ResourceOptions(depends_on=[self.services[a] for a in apis if a in self.services])
