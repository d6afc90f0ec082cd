"""The NeMo-RL image through Artifact Registry, for GKE Image streaming (`cluster.imageStreaming`, off by default).

GKE streams only images "stored in standard or remote repositories in Artifact Registry, or public registries on
Docker Hub" (https://cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, Requirements); NeMo-RL's is on
nvcr.io. A remote repository in the stack's region proxies nvcr.io and keeps what it serves, and the image reference
every pod uses becomes `<region>-docker.pkg.dev/<project>/<repository>/nvidia/nemo-rl:<tag>`: `nemo_rl_image`, called
once in `__main__.py`, is the one route (Ray head and workers, the pre-pull DaemonSet, the watcher).

Why the GPU nodes' first pull streams: the doc warns that "during the first pull of an eligible image you might not
notice the benefit"; only once Image streaming has cached the image do later pulls gain. The first pull here is the
system node's: the pre-pull DaemonSet (and then the Ray head) there pulls through the repository while Managed Lustre is
created (about minutes 14-25 of a first `pulumi up`, tools/deploy_time.py), so Artifact Registry holds the image and
Image streaming has cached it long before the GPU nodes come for the Ray workers (after Lustre, about minute 65).

The doc's other requirements, and where each is met: the Container File System API (`infra.project_apis.required_apis`);
COS with containerd (every pool's `image_type`); Private Google Access on the nodes' subnet (infra/network.py, for
private nodes); the non-default node service account holding roles/serviceusage.serviceUsageConsumer in the images'
project (`infra.gke_common.IMAGE_STREAMING_ROLE`, a node grant every pool waits for); `gcfs_config` on each Standard
pool (infra/cluster.py `streaming_settings`; Autopilot streams eligible images by itself).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import StackConfig
from infra.options import child_options
from infra.stack_context import StackContext
from workloads.recipes import NemoRLImage

UPSTREAM = "nvcr.io"
COMPONENT = "image-mirror"


def repository_id(ctx: StackContext) -> str:
    """The remote repository's id: lowercase letters, digits and '-', at most 63 (the stack's cloud-name rule)."""
    return ctx.name("nvcr")


def nemo_rl_image(ctx: StackContext, cfg: StackConfig) -> NemoRLImage:
    """The recipe's image as every pod names it: on nvcr.io, or through the stack's remote repository with
    `cluster.imageStreaming` (the upstream path kept below the repository: `nvidia/nemo-rl`). Pure: no Outputs."""
    image = cfg.recipe.image
    if not cfg.cluster.image_streaming:
        return image
    host, _, path = image.repository.partition("/")
    if host != UPSTREAM:
        raise ValueError(f"{image.ref} is not on {UPSTREAM}, the registry the remote repository proxies")
    registry = f"{ctx.region}-docker.pkg.dev/{ctx.project}/{repository_id(ctx)}"
    return dataclasses.replace(image, repository=f"{registry}/{path}")


@dataclass(frozen=True)
class ImageMirrorArgs:
    ctx: StackContext


class ImageMirror(pulumi.ComponentResource):
    """An Artifact Registry remote Docker repository proxying nvcr.io in the stack's region; no upstream credentials:
    the NeMo-RL images are public on NGC. Created in parallel with the cluster; the pods that pull wait for it."""

    def __init__(self, name: str, args: ImageMirrorArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:ImageMirror", name, None, opts)
        ctx = args.ctx
        # pulumi_gcp 10.2.0 artifactregistry/repository.py and _inputs.py: `format`, `mode` (REMOTE_REPOSITORY),
        # `remote_repository_config.common_repository.uri` ("URI to the registry", the successor of the deprecated
        # `docker_repository.custom_repository`); in the region, where the nodes stream from.
        self.repository = gcp.artifactregistry.Repository(
            f"{name}-repository",
            project=ctx.project,
            location=ctx.region,
            repository_id=repository_id(ctx),
            format="DOCKER",
            mode="REMOTE_REPOSITORY",
            description=f"nemo-rl-gke: {UPSTREAM} through Artifact Registry, for GKE Image streaming",
            labels=ctx.labels(COMPONENT),
            remote_repository_config={"description": UPSTREAM, "common_repository": {"uri": f"https://{UPSTREAM}"}},
            opts=child_options(self, opts),
        )
        self.register_outputs({"repository": self.repository.name, "repositoryId": repository_id(ctx)})
