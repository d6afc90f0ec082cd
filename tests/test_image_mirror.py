"""cluster.imageStreaming: the NeMo-RL image through an Artifact Registry remote repository of nvcr.io, streamed by
GKE onto the nodes; off by default, so a stack upgraded without it changes nothing."""

from __future__ import annotations

import pytest
from conftest import merged, run_plan, stack_plan
from test_ray_cluster import ray_container, render_raycluster, worker_template

from infra.config import parse
from infra.gke_common import IMAGE_STREAMING_ROLE as STREAMING_ROLE
from infra.image_mirror import nemo_rl_image, repository_id
from infra.stack_context import StackContext

REPOSITORY = "gcp:artifactregistry/repository:Repository"
NODE_POOL = "gcp:container/nodePool:NodePool"
STREAMED = "us-east1-docker.pkg.dev/my-gcp-project/b200-nvcr/nvidia/nemo-rl"


def streaming(on: bool):
    return run_plan("b200", cluster=merged("b200", "cluster", {"imageStreaming": on}))


def pod_images(plan) -> dict[str, str]:
    """The NeMo-RL image of each pod that runs it: Ray head and workers, the pre-pull, the watcher."""
    cluster = render_raycluster(plan.one("kubernetes:helm.sh/v3:Release").inputs["values"])
    (pull,) = plan.one("kubernetes:apps/v1:DaemonSet", "image-prepull-daemonset").inputs["spec"]["template"]["spec"][
        "initContainers"
    ]
    watcher = plan.one("kubernetes:apps/v1:Deployment", "preemption-watcher-deployment")
    return {
        "head": ray_container(cluster["spec"]["headGroupSpec"]["template"])["image"],
        "worker": ray_container(worker_template(cluster))["image"],
        "prepull": pull["image"],
        **{f"watcher {c['name']}": c["image"] for c in watcher.inputs["spec"]["template"]["spec"]["containers"]},
    }


def test_the_setting_is_off_by_default():
    cfg = parse({"project": "my-gcp-project"}, "dev")
    assert cfg.cluster.image_streaming is False
    assert nemo_rl_image(StackContext.from_config("dev", cfg), cfg) is cfg.recipe.image


def test_off_the_stack_has_no_repository_pulls_from_nvcr_and_streams_on_no_pool():
    plan = streaming(False)
    assert plan.by_type(REPOSITORY) == []
    assert all(ref.startswith("nvcr.io/nvidia/nemo-rl:") for ref in pod_images(plan).values()), pod_images(plan)
    for pool in plan.by_type(NODE_POOL):
        assert "gcfsConfig" not in pool.inputs["nodeConfig"], pool.name
    assert not [r for r in plan.by_type("gcp:projects/iAMMember:IAMMember") if r.inputs["role"] == STREAMING_ROLE]


def test_the_remote_repository_proxies_nvcr_io_in_the_stacks_region():
    (repo,) = stack_plan("b200").by_type(REPOSITORY)
    inputs = repo.inputs
    assert (inputs["format"], inputs["mode"]) == ("DOCKER", "REMOTE_REPOSITORY")
    where = (inputs["project"], inputs["location"], inputs["repositoryId"])
    assert where == ("my-gcp-project", "us-east1", "b200-nvcr")
    assert inputs["remoteRepositoryConfig"]["commonRepository"] == {"uri": "https://nvcr.io"}
    assert inputs["labels"]["stack"] == "b200"


@pytest.mark.parametrize("stack", ["b200", "h200", "b200-ladder"])
def test_on_every_pod_running_nemo_rl_names_the_artifact_registry_image(stack):
    plan = stack_plan(stack)
    (repo,) = plan.by_type(REPOSITORY)
    inputs = repo.inputs
    registry = f"{inputs['location']}-docker.pkg.dev/my-gcp-project/{inputs['repositoryId']}/nvidia/nemo-rl:"
    images = pod_images(plan)
    assert len(set(images.values())) == 1, images
    assert all(ref.startswith(registry) for ref in images.values()), images


@pytest.mark.parametrize("stack", ["b200", "h200", "b200-ladder"])
def test_on_every_node_pool_streams_and_the_pods_wait_for_the_repository(stack):
    plan = stack_plan(stack)
    pools = plan.by_type(NODE_POOL)
    assert len(pools) >= 2
    for pool in pools:
        assert pool.inputs["nodeConfig"]["gcfsConfig"] == {"enabled": True}, pool.name
    (repo,) = plan.by_type(REPOSITORY)
    assert repo.urn in plan.one("kubernetes:apps/v1:DaemonSet", "image-prepull-daemonset").dependencies
    assert repo.urn in plan.one("kubernetes:helm.sh/v3:Release").dependencies


def test_on_the_node_service_account_may_consume_the_images_project_as_image_streaming_requires():
    plan = stack_plan("b200")
    (grant,) = [r for r in plan.by_type("gcp:projects/iAMMember:IAMMember") if r.inputs["role"] == STREAMING_ROLE]
    assert grant.inputs["project"] == "my-gcp-project"
    assert grant.inputs["member"] == "serviceAccount:b200-nodes@my-gcp-project.iam.gserviceaccount.com"
    for pool in plan.by_type(NODE_POOL):  # a node never boots before it may stream
        assert grant.urn in pool.dependencies, pool.name


def test_the_image_keeps_its_tag_and_upstream_path_below_the_repository():
    cfg = parse({"project": "my-gcp-project", "region": "us-east1", "cluster": {"imageStreaming": True}}, "b200")
    ctx = StackContext.from_config("b200", cfg)
    image = nemo_rl_image(ctx, cfg)
    assert image.ref == f"{STREAMED}:{cfg.recipe.image.tag}"
    assert (image.ray_version, image.workdir) == (cfg.recipe.image.ray_version, cfg.recipe.image.workdir)
    assert repository_id(ctx) == "b200-nvcr"
