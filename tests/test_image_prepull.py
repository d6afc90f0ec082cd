"""ImagePrePull: the NeMo-RL image on every node while Lustre is still being created."""

from __future__ import annotations

import pytest
from conftest import STACKS, stack_plan
from k8s_support import gpu_pool, k8s_doc, record, schema_problems

from infra.image_prepull import NAME, ImagePrePull, ImagePrePullArgs
from workloads.recipes import IMAGES

DAEMONSET = "kubernetes:apps/v1:DaemonSet"
IMAGE = IMAGES["v0.5.0"]


def prepull(system_pool="t-system", taints=None):
    pool = gpu_pool("b200", taints=taints)
    args = ImagePrePullArgs(IMAGE, "nemo-rl", (system_pool, pool.pool_name), pool.taints)
    rec = record(lambda: ImagePrePull("image-prepull", args))
    return rec, k8s_doc(rec.one(DAEMONSET))


def test_the_daemonset_is_a_valid_apps_v1_object_in_the_ray_namespace():
    rec, doc = prepull()
    assert not schema_problems(doc, rec.one(DAEMONSET).name)
    assert (doc["metadata"]["name"], doc["metadata"]["namespace"]) == (NAME, "nemo-rl")


def test_it_pulls_the_recipes_image_in_an_init_container_and_then_only_pauses():
    _, doc = prepull()
    spec = doc["spec"]["template"]["spec"]
    (pull,) = spec["initContainers"]
    assert pull["image"] == IMAGE.ref and pull["imagePullPolicy"] == "IfNotPresent"
    assert pull["command"] == ["/bin/sh", "-c", "exit 0"]
    assert [c["name"] for c in spec["containers"]] == ["pause"] and "@sha256:" in spec["containers"][0]["image"]
    assert spec["automountServiceAccountToken"] is False and "securityContext" not in pull, "unprivileged, no API token"


def test_it_runs_on_the_system_and_gpu_pools_and_tolerates_the_gpu_taint():
    _, doc = prepull(system_pool="t-system")
    spec = doc["spec"]["template"]["spec"]
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {
        "matchExpressions": [
            {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["t-gpu-b200", "t-system"]}
        ]
    }
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]


def test_a_new_image_is_pulled_on_all_nodes_at_once_and_the_pull_may_take_an_hour():
    rec, doc = prepull()
    assert doc["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}}
    # pulumi-kubernetes waits 10 minutes for a DaemonSet unless told otherwise.
    assert rec.one(DAEMONSET).options["customTimeouts"] == {"create": "60m", "update": "60m", "delete": "10m"}


# ---------------------------------------------------------------- whole program


def transitive(plan, urn: str) -> set[str]:
    by_urn = plan.by_urn()
    children: dict[str, list[str]] = {}
    for r in plan.resources:
        children.setdefault(r.parent, []).append(r.urn)
    seen: set[str] = set()
    stack = [urn]
    while stack:
        cur = stack.pop()
        for dep in [*by_urn[cur].dependencies, by_urn[cur].provider, *children.get(cur, [])]:
            if dep in by_urn and dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen


def prepull_of(plan):
    (ds,) = [d for d in plan.by_type(DAEMONSET) if d.inputs["metadata"]["name"] == NAME]
    return ds


@pytest.mark.parametrize("stack", STACKS)
def test_the_pull_waits_for_the_node_pools_but_never_for_lustre(stack):
    plan = stack_plan(stack)
    ds = prepull_of(plan)
    waits = transitive(plan, ds.urn)
    types = {plan.by_urn()[u].type for u in waits}
    assert "gcp:lustre/instance:Instance" not in types, f"{ds.name} waits for Lustre"
    assert "kubernetes:core/v1:PersistentVolumeClaim" not in types
    pools = {p.urn for p in plan.by_type("gcp:container/nodePool:NodePool")}
    assert pools <= set(ds.dependencies), f"{ds.name} must be created after (and deleted before) the node pools"
    assert not schema_problems({k: v for k, v in ds.inputs.items() if not k.startswith("__")}, ds.name)


@pytest.mark.parametrize("stack", STACKS)
def test_the_ray_release_starts_after_the_pull_with_the_same_image(stack):
    plan = stack_plan(stack)
    ds = prepull_of(plan)
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    assert ds.urn in release.dependencies, f"{release.name} does not wait for {ds.name}"
    values = release.inputs["values"]
    (pull,) = ds.inputs["spec"]["template"]["spec"]["initContainers"]
    assert pull["image"] == f"{values['image']['repository']}:{values['image']['tag']}"
    pools = ds.inputs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
    assert values["head"]["nodeSelector"]["cloud.google.com/gke-nodepool"] in pools
    assert values["worker"]["nodeSelector"]["cloud.google.com/gke-nodepool"] in pools


# ----------------------------------------------------------------------------- gpuPool.warmMinutes


def test_no_placeholder_job_is_planned_with_just_in_time_off_and_warm_minutes_unset():
    from conftest import merged, run_plan

    plan = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"justInTime": False}))
    names = [j.inputs["metadata"]["name"] for j in plan.by_type("kubernetes:batch/v1:Job")]
    assert names == ["hf-weights"], "a placeholder Job without gpuPool.warmMinutes or justInTime"
    assert not plan.by_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")


def test_warm_minutes_plans_one_low_priority_placeholder_per_gpu_node_that_ends_on_its_own():
    from conftest import merged, run_plan

    plan = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"nodeCount": 2, "warmMinutes": 90}))
    (job,) = [j for j in plan.by_type("kubernetes:batch/v1:Job") if j.inputs["metadata"]["name"] == "gpu-warmup"]
    (pc,) = plan.by_type("kubernetes:scheduling.k8s.io/v1:PriorityClass")
    # -10: the lowest priority that still scales up (cluster-autoscaler's expendable cutoff); never preempts.
    assert (pc.inputs["value"], pc.inputs["preemptionPolicy"]) == (-10, "Never"), pc.name
    spec = job.inputs["spec"]
    assert (spec["parallelism"], spec["completions"]) == (2, 2), job.name
    # Ends at the first preemption by a worker, and at the latest warmMinutes after it starts.
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 90 * 60), job.name
    assert "suspend" not in spec, "warmMinutes starts at once; it replaces the just-in-time timer"
    assert job.inputs["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}, job.name
    pod = spec["template"]["spec"]
    assert pod["priorityClassName"] == pc.inputs["metadata"]["name"], job.name
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "dev-gpu"}, job.name
    (container,) = pod["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}, job.name
    # The placeholders pull the NeMo-RL image (the pre-pull's) onto the warm nodes.
    (ds,) = [d for d in plan.by_type(DAEMONSET) if d.inputs["metadata"]["name"] == NAME]
    assert container["image"] == ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["image"], job.name
    assert not schema_problems(k8s_doc(job), job.name)


def test_warm_minutes_is_refused_on_autopilot_in_one_line():
    from infra.config import ConfigError, parse

    with pytest.raises(ConfigError, match=r"gpuPool\.warmMinutes"):
        parse(
            {"project": "my-gcp-project", "cluster": {"mode": "autopilot"}, "gpuPool": {"warmMinutes": 60}},
            "dev",
        )
