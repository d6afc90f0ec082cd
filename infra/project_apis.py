"""The Google Cloud APIs a stack needs enabled in its project: the one list, and the stack enabling them.

Keyed by the Pulumi resource type that calls the API, so a new resource type without an entry fails
a test (tests/test_project_apis.py walks every stack's plan). The preflight doctor
(`python -m tools.doctor`) checks that each is on; `pulumi up` enables them itself (`ProjectApis`,
config `manageApis`, default true) and makes every resource wait for its API.

A fresh project has compute, container, iam, cloudresourcemanager, servicenetworking and lustre off;
logging, monitoring, storage and serviceusage are on by default (docs.cloud.google.com/service-usage/
docs/enabled-service). The Managed Lustre and GKE guides start
with `gcloud services enable` (e.g.
https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
Only on the real cloud: an organisation may turn default ones off.

`disableOnDestroy: false`: `pulumi destroy` leaves the APIs on. Turning an API off on destroy would
break whatever else in the project uses it (a second stack, a hand-made VM), and an enabled API costs
nothing by itself. `manageApis: false` (organisations where the deployer may not enable services)
registers no Service at all; the APIs of `REQUIRED_APIS` must then be on already (docs/deploy.md).
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

REQUIRED_APIS: tuple[str, ...] = tuple(
    sorted(
        {
            *API_BY_RESOURCE_TYPE.values(),
            # The project number (the Workload Identity principal) is read with getProject on every stack.
            RESOURCE_MANAGER,
        }
    )
)
"""Every API any stack uses, sorted."""


@dataclass(frozen=True)
class ProjectApisArgs:
    """What `ProjectApis` needs: the project, and whether to enable the APIs (`manageApis`)."""

    ctx: StackContext
    manage: bool


class ProjectApis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API of `REQUIRED_APIS` (none when `manage` is false).

    Components receive `wait_for(...)` as their options and pass its `depends_on` to each child
    (`infra.options.child_options`), so every Google Cloud resource waits for its own API and the
    plan shows that dependency on the resource itself. Service Usage, through which every API is
    enabled, is on in every project (a Service for it only records that).
    """

    services: dict[str, gcp.projects.Service]
    """API name -> its Service resource; empty with `manageApis: false`."""

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
                    # Left on by `pulumi destroy`: other users of the project may need it (module doc).
                    disable_on_destroy=False,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.register_outputs({"managed": manage, "apis": list(REQUIRED_APIS)})

    def wait_for(self, *apis: str) -> pulumi.ResourceOptions:
        """Options for a component whose resources call `apis`: depend on their Service resources."""
        unknown = sorted(set(apis) - set(REQUIRED_APIS))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} not in REQUIRED_APIS; add the resource type to API_BY_RESOURCE_TYPE"
            )
        return pulumi.ResourceOptions(depends_on=[self.services[a] for a in apis if a in self.services])
