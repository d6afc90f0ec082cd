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

from infra.config import StackConfig
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
ARTIFACT_REGISTRY = "artifactregistry.googleapis.com"
CONTAINER_FILESYSTEM = "containerfilesystem.googleapis.com"

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
    "gcp:artifactregistry/repository:Repository": ARTIFACT_REGISTRY,
}

IMAGE_STREAMING_APIS = (ARTIFACT_REGISTRY, CONTAINER_FILESYSTEM)
"""Only with `cluster.imageStreaming` (infra/image_mirror.py): the mirror's repository, and the Container File System
API that GKE Image streaming requires (kubernetes-engine/docs/how-to/image-streaming), which no resource calls itself.
A stack without the setting enables neither, so upgrading it changes nothing."""
# With RESOURCE_MANAGER for getProject (the project number of the Workload Identity principal), on every stack.
REQUIRED_APIS: tuple[str, ...] = tuple(
    sorted({*API_BY_RESOURCE_TYPE.values(), RESOURCE_MANAGER} - set(IMAGE_STREAMING_APIS))
)


def required_apis(cfg: StackConfig) -> tuple[str, ...]:
    """The APIs one stack uses: `REQUIRED_APIS`, `IMAGE_STREAMING_APIS` with `cluster.imageStreaming`, and the
    Container File System API with `gpuPool.imageCacheDiskImage` too (its cache mode runs on Image streaming)."""
    apis = set(REQUIRED_APIS)
    if cfg.cluster.image_streaming:
        apis.update(IMAGE_STREAMING_APIS)
    if cfg.gpu_pool.image_cache_disk_image is not None:
        apis.add(CONTAINER_FILESYSTEM)
    return tuple(sorted(apis))


@dataclass(frozen=True)
class ProjectApisArgs:
    ctx: StackContext
    manage: bool
    apis: tuple[str, ...] = REQUIRED_APIS  # the stack's (`required_apis`)


class ProjectApis(pulumi.ComponentResource):
    """One `gcp.projects.Service` per API (none when `manage` is false); `wait_for` makes each resource wait
    for its own API."""

    def __init__(self, name: str, args: ProjectApisArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("nemo-rl-gke:infra:ProjectApis", name, None, opts)
        ctx, manage = args.ctx, args.manage
        self.apis, self.services = args.apis, {}
        if manage:
            for api in self.apis:
                self.services[api] = gcp.projects.Service(
                    f"{name}-{api.split('.', 1)[0]}",
                    project=ctx.project,
                    service=api,
                    disable_on_destroy=False,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.register_outputs({"managed": manage, "apis": list(self.apis)})

    def wait_for(self, *apis: str) -> pulumi.ResourceOptions:
        unknown = sorted(set(apis) - set(self.apis))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)} not among the stack's APIs; add the resource type to API_BY_RESOURCE_TYPE"
            )
        return pulumi.ResourceOptions(depends_on=[self.services[a] for a in apis if a in self.services])
