"""Deploy time: typical creation times per type and the critical path through the plan's waits."""

import pytest

from conftest import ALL_STACKS, STACKS, stack_plan
from tools import deploy_time
from tools.mocks import Registration
from tools.offline_plan import Plan, render_tree

# network-vpc -> psa-range -> psa -> lustre-instance -> lustre PV -> PVC -> ray-release
LUSTRE_PATH_MINUTES = 0.5 + 0.25 + 2.0 + 25.0 + 0.05 + 0.2 + 12.0
JOB_SUBMIT_MINUTES = 1.0  # the job is submitted once the Ray release is ready


def reg(name, typ, parent="", custom=True, deps=(), provider="", inputs=None):
    return Registration(f"urn:{name}", typ, name, parent, custom, provider, inputs or {}, list(deps))


def synthetic(*resources) -> Plan:
    return Plan(project="p", stack="s", resources=list(resources), outputs={})


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_resource_type_of_the_committed_stacks_has_a_typical_creation_time(stack):
    est = deploy_time.estimate(stack_plan(stack))
    assert est.unknown_types == []
    for r in stack_plan(stack).resources:
        assert deploy_time.typical(r) is not deploy_time.UNKNOWN, r.type


def test_a_gpu_node_pool_takes_longer_than_a_cpu_one():
    gpu = reg("gpu", deploy_time.NODE_POOL, inputs={"nodeConfig": {"guestAccelerators": [{"count": 8}]}})
    cpu = reg("cpu", deploy_time.NODE_POOL, inputs={"nodeConfig": {}})
    assert deploy_time.typical(gpu).minutes == 15.0 > deploy_time.typical(cpu).minutes == 4.0


def test_components_create_nothing_and_parenthood_is_not_a_wait():
    plan = synthetic(
        reg("comp", "x:index:Component", custom=False),
        reg("vpc", "gcp:compute/network:Network", parent="urn:comp"),
        reg("lustre", "gcp:lustre/instance:Instance", parent="urn:comp"),
    )
    est = deploy_time.estimate(plan)
    assert est.total_minutes == 25.0  # vpc and lustre run in parallel; the component adds nothing
    assert [s.name for s in est.critical_path] == ["lustre"]


def test_a_dependency_on_a_component_waits_for_everything_under_it():
    plan = synthetic(
        reg("comp", "x:index:Component", custom=False),
        reg("cluster", "gcp:container/cluster:Cluster", parent="urn:comp"),
        reg("inner", "x:index:Component", parent="urn:comp", custom=False),
        reg("pool", deploy_time.NODE_POOL, parent="urn:inner", deps=["urn:cluster"]),
        reg("ds", "kubernetes:apps/v1:DaemonSet", deps=["urn:comp"]),
    )
    assert deploy_time.waits(plan)["urn:ds"] == {"urn:cluster", "urn:pool"}
    est = deploy_time.estimate(plan)
    assert est.total_minutes == 8.0 + 4.0 + 2.0
    assert [s.name for s in est.critical_path] == ["cluster", "pool", "ds"]


def test_kubernetes_objects_wait_for_their_provider_and_so_for_the_cluster():
    plan = stack_plan("dev")
    by_name = {r.name: r for r in plan.resources}
    graph = deploy_time.waits(plan)
    params = by_name["gke-networks-params-rdma-0"]
    assert by_name["kube-provider"].urn in graph[params.urn]
    est = deploy_time.estimate(plan)
    assert est.finish_by_name["gke-networks-params-rdma-0"] == pytest.approx(0.5 + 0.5 + 8.0 + 0.0 + 0.1)


@pytest.mark.parametrize("stack", STACKS)
def test_the_critical_path_of_the_committed_stacks_runs_through_lustre_to_the_job_in_about_41_minutes(stack):
    est = deploy_time.estimate(stack_plan(stack))
    names = [s.name for s in est.critical_path]
    assert names == [
        "network-vpc", "network-psa-range", "network-psa", "lustre-instance",
        "workload-lustre-pv", "workload-lustre-pvc", "ray-release", "training-job-submission",
    ]
    assert est.total_minutes == pytest.approx(LUSTRE_PATH_MINUTES + JOB_SUBMIT_MINUTES)
    # The cluster path (vpc, subnet, cluster, GPU pool) is ready well before Lustre.
    assert est.milestones["gke-gpu-pool"] == pytest.approx(0.5 + 0.5 + 8.0 + 15.0)


@pytest.mark.parametrize("stack", ["b200", "h200"])
def test_the_plan_text_prints_the_critical_path_and_the_expected_duration(stack):
    text = render_tree(stack_plan(stack))
    block = text[text.index("\nDeploy time"):text.index("\nOutputs:")]
    assert "~41 min along the critical path" in block
    assert "lustre-instance" in block and "+25 min" in block
    assert "off the path, ready at: gke-cluster 9.0 min" in block


def test_deploy_time_json_lists_the_path_with_start_and_finish_minutes():
    doc = deploy_time.estimate(stack_plan("dev")).to_json()
    assert doc["expectedMinutes"] == 41.0
    release, submission = doc["criticalPath"][-2:]
    assert (release["name"], release["startMinute"], release["finishMinute"]) == ("ray-release", 28.0, 40.0)
    assert (submission["name"], submission["startMinute"], submission["finishMinute"]) == (
        "training-job-submission", 40.0, 41.0,
    )


def test_on_autopilot_the_gpu_nodes_are_made_for_the_ray_workers_so_their_time_is_on_the_release():
    from tools.autopilot_plan import is_autopilot

    plan = stack_plan("autopilot")
    assert is_autopilot(plan) and not is_autopilot(stack_plan("h200"))
    est = deploy_time.estimate(plan)
    (release,) = [s for s in est.critical_path if s.name == "ray-release"]
    assert release.minutes == deploy_time.CREATION_MINUTES["kubernetes:helm.sh/v3:Release"].minutes + deploy_time.GPU_NODE_POOL.minutes
    assert est.total_minutes == pytest.approx(LUSTRE_PATH_MINUTES + JOB_SUBMIT_MINUTES + deploy_time.GPU_NODE_POOL.minutes)
    assert "gke-gpu-pool" not in est.milestones
