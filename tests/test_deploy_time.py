"""Deploy time: typical creation times per type and the critical path through the plan's waits."""

import pytest
from conftest import ALL_STACKS, STACKS, merged, run_plan, stack_plan

from tools import deploy_time, gpu_arrival
from tools.mocks import Registration
from tools.offline_plan import Plan, render_tree
from workloads.gate import GatePlan, estimated_seconds

# The first thing on every path: enabling the API a resource calls (infra/project_apis.py).
API_ENABLE_MINUTES = 1.0
# apis-compute -> network-vpc -> psa-range -> psa -> lustre-instance: the Lustre path.
LUSTRE_READY_MINUTES = API_ENABLE_MINUTES + 0.5 + 0.25 + 2.0 + 60.0
# lustre PV -> PVC -> ray-release (warm start from the pre-pulled image) -> the job's submission.
PULLED_GPU_MINUTES = 6.0 + 11.1 - 4.0  # the pre-pull pulls during the ~4 min driver install
STREAMED_GPU_MINUTES = 6.0 + 1.0  # cluster.imageStreaming: the container starts from the streamed image
STREAMING_STACKS = ("b200", "h200", "b200-ladder")  # committed with cluster.imageStreaming


def cold_gpu_minutes(stack: str) -> float:
    """Every GPU pool starts empty: its nodes come for the pending Ray workers (scale-up), then pull or stream."""
    return STREAMED_GPU_MINUTES if stack in STREAMING_STACKS else PULLED_GPU_MINUTES


def after_lustre_minutes(stack: str) -> float:
    """Lustre's claim, the Ray release with the cold GPU nodes, the submission: the weights are staged off the path
    (in the bucket while Lustre is created, imported beside the release: infra/weight_staging.py)."""
    return 0.05 + 0.2 + 1.5 + cold_gpu_minutes(stack) + 1.0


_COLD: dict[str, Plan] = {}


def cold_plan(stack: str) -> Plan:
    """The stack as committed but with `gpuPool.justInTime` false: the GPU nodes come for the pending Ray workers."""
    if stack not in _COLD:
        _COLD[stack] = run_plan(stack, gpuPool=merged(stack, "gpuPool", {"justInTime": False}))
    return _COLD[stack]


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


def test_a_gpu_node_pool_is_created_empty_faster_than_a_cpu_pool_with_its_node():
    # Every GPU pool autoscales from 0: its nodes come later, for pending pods (the Ray release's time).
    gpu = reg("gpu", gpu_arrival.NODE_POOL, inputs={"nodeConfig": {"guestAccelerators": [{"count": 8}]}})
    cpu = reg("cpu", gpu_arrival.NODE_POOL, inputs={"nodeConfig": {}})
    assert deploy_time.typical(gpu).minutes == 3.0 < deploy_time.typical(cpu).minutes == 4.0


def test_components_create_nothing_and_parenthood_is_not_a_wait():
    plan = synthetic(
        reg("comp", "x:index:Component", custom=False),
        reg("vpc", "gcp:compute/network:Network", parent="urn:comp"),
        reg("lustre", "gcp:lustre/instance:Instance", parent="urn:comp"),
    )
    est = deploy_time.estimate(plan)
    assert est.total_minutes == 60.0  # vpc and lustre run in parallel; the component adds nothing
    assert [s.name for s in est.critical_path] == ["lustre"]


def test_a_dependency_on_a_component_waits_for_everything_under_it():
    plan = synthetic(
        reg("comp", "x:index:Component", custom=False),
        reg("cluster", "gcp:container/cluster:Cluster", parent="urn:comp"),
        reg("inner", "x:index:Component", parent="urn:comp", custom=False),
        reg("pool", gpu_arrival.NODE_POOL, parent="urn:inner", deps=["urn:cluster"]),
        reg("ds", "kubernetes:apps/v1:DaemonSet", deps=["urn:comp"]),
    )
    assert deploy_time.waits(plan)["urn:ds"] == {"urn:cluster", "urn:pool"}
    est = deploy_time.estimate(plan)
    assert est.total_minutes == 8.0 + 4.0 + 2.0  # the gIB installer's rollout
    assert [s.name for s in est.critical_path] == ["cluster", "pool", "ds"]


def test_kubernetes_objects_wait_for_their_provider_and_so_for_the_cluster():
    plan = stack_plan("dev")
    by_name = {r.name: r for r in plan.resources}
    graph = deploy_time.waits(plan)
    params = by_name["gke-networks-params-rdma-0"]
    assert by_name["kube-provider"].urn in graph[params.urn]
    est = deploy_time.estimate(plan)
    assert est.finish_by_name["gke-networks-params-rdma-0"] == pytest.approx(
        API_ENABLE_MINUTES + 0.5 + 0.5 + 8.0 + 0.0 + 0.1
    )


def gate_minutes_of(stack: str) -> float:
    """The acceptance gate's typical minutes, from the submission's own gate plan."""
    submission = stack_plan(stack).one(deploy_time.JOB_SUBMISSION, "training-job-submission")
    return round(estimated_seconds(GatePlan.from_dict(submission.inputs["gate_plan"])) / 60, 1)


@pytest.mark.parametrize("stack", STACKS)
def test_the_critical_path_is_the_lustre_path_plus_the_cold_gpu_nodes_and_the_gate_plus_at_most_three_minutes(stack):
    est = deploy_time.estimate(cold_plan(stack))
    names = [s.name for s in est.critical_path]
    assert names == [
        "apis-compute",
        "network-vpc",
        "network-psa-range",
        "network-psa",
        "lustre-instance",
        "workload-lustre-pv",
        "workload-lustre-pvc",
        "ray-release",
        "acceptance-gate",
        "training-job-submission",
    ]
    gate = est.critical_path[-2]
    # Minutes, not tens of minutes (the bound); the step starts when the Ray release is up.
    assert 0.5 <= gate.minutes == gate_minutes_of(stack) <= 5 and gate.source == deploy_time.GATE_SOURCE
    assert gate.start == pytest.approx(est.finish_by_name["ray-release"])
    assert est.milestones["lustre-instance"] == pytest.approx(LUSTRE_READY_MINUTES)
    assert est.total_minutes == pytest.approx(LUSTRE_READY_MINUTES + after_lustre_minutes(stack) + gate.minutes)
    after = est.total_minutes - est.milestones["lustre-instance"] - gate.minutes - cold_gpu_minutes(stack)
    assert after <= 3.0


@pytest.mark.parametrize("stack", STACKS)
def test_the_image_pull_is_its_own_step_off_the_path_after_the_gpu_pool(stack):
    est = deploy_time.estimate(stack_plan(stack))
    pull = gpu_arrival.IMAGE_PULL
    # 20 GB at 30 MB/s: 11.1 minutes, the stated assumptions.
    assert pull.minutes == pytest.approx(20 * 1000 / 30 / 60, abs=0.05)
    assert "20 GB" in pull.basis and "30 MB/s" in pull.basis
    # It starts once the pools and its namespace (created right after the pools) exist.
    start = est.finish_by_name["workload-namespace"]
    assert start == pytest.approx(est.milestones["gke-system-pool"] + 0.1)
    assert est.finish_by_name["image-prepull-daemonset"] == pytest.approx(start + pull.minutes)
    assert "image-prepull-daemonset" not in [s.name for s in est.critical_path]
    assert est.milestones["image-prepull-daemonset"] < est.milestones["lustre-instance"]


@pytest.mark.parametrize("stack", STACKS)
def test_both_node_pools_start_when_the_cluster_is_ready(stack):
    # GKE creates a cluster's node pools concurrently and the provider does not serialize them.
    est = deploy_time.estimate(stack_plan(stack))
    cluster = est.milestones["gke-cluster"]
    assert est.milestones["gke-system-pool"] == pytest.approx(cluster + deploy_time.CPU_NODE_POOL.minutes)
    assert est.milestones["gke-gpu-pool"] == pytest.approx(cluster + deploy_time.GPU_POOL_EMPTY.minutes)


def test_every_typical_time_cites_its_source():
    tables = [
        *deploy_time.CREATION_MINUTES.values(),
        deploy_time.GPU_NODE_POOL,
        deploy_time.CPU_NODE_POOL,
        deploy_time.DYNAMIC_RESOURCE,
        gpu_arrival.IMAGE_PULL,
        deploy_time.UNKNOWN,
    ]
    for t in tables:
        assert t.source.strip() and t.basis.strip(), t
    lustre = deploy_time.CREATION_MINUTES["gcp:lustre/instance:Instance"]
    # The P99 is from PR #14878's review; the 120-minute create timeout is PR #16046's (magic-modules git log).
    assert "PR #14878" in lustre.source and "40-80" in lustre.source
    assert "PR #16046" in lustre.source and "120 minutes" in lustre.source
    assert lustre.source != gpu_arrival.ASSUMED and 40 <= lustre.minutes <= 80


@pytest.mark.parametrize("stack", ["b200", "h200"])
def test_the_plan_text_prints_the_critical_path_its_sources_and_the_pull(stack):
    text = render_tree(stack_plan(stack))
    block = text[text.index("\nDeploy time") : text.index("\nOutputs:")]
    # Just in time (the default): the GPU nodes are there when Lustre's claim is, so only the release's install.
    total = LUSTRE_READY_MINUTES + 0.05 + 0.2 + 1.5 + 1.0 + gate_minutes_of(stack)
    assert f"~{total:.0f} min along the critical path" in block
    assert f"+{gate_minutes_of(stack):g} min  AcceptanceGate" in block
    assert "lustre-instance" in block and "+60 min" in block and "magic-modules PR #14878" in block
    assert "image-prepull-daemonset 25.2 min" in block
    assert "just in time (gpuPool.justInTime): the timer starts the placeholders" in block
    assert "image pull: +11.1 min on every node at once" in block
    assert "+1 min image (streamed from Artifact Registry; +3 min of NeMo-RL start-up for remote reads)" in block


def test_deploy_time_json_lists_the_path_with_start_and_finish_minutes_and_sources():
    doc = deploy_time.estimate(cold_plan("dev")).to_json()
    gate, staged = gate_minutes_of("dev"), 0.0  # the weights are staged off the path
    assert doc["expectedMinutes"] == round(79.6 + staged + gate, 1)
    release, gate_step, submission = doc["criticalPath"][-3:]
    assert (release["name"], release["startMinute"], release["finishMinute"]) == (
        "ray-release",
        round(64.0 + staged, 2),
        round(78.6 + staged, 2),
    )
    assert (gate_step["name"], gate_step["startMinute"], gate_step["finishMinute"]) == (
        "acceptance-gate",
        round(78.6 + staged, 2),
        round(78.6 + staged + gate, 2),
    )
    assert (submission["name"], submission["startMinute"], submission["finishMinute"]) == (
        "training-job-submission",
        round(78.6 + staged + gate, 2),
        round(79.6 + staged + gate, 2),
    )
    assert doc["gpuNodes"]["from"] == "cold" and doc["gpuNodes"]["createdAtMinute"] == round(65.5 + staged, 1)
    assert all(step["source"] for step in doc["criticalPath"])
    assert doc["imagePull"]["imageCompressedGb"] == 20.0 and doc["imagePull"]["pullRateMbPerS"] == 30.0


def test_on_autopilot_the_gpu_nodes_and_the_pull_come_with_the_ray_workers_so_their_time_is_on_the_release():
    from tools.autopilot_plan import is_autopilot

    plan = stack_plan("autopilot")
    assert is_autopilot(plan) and not is_autopilot(stack_plan("h200"))
    est = deploy_time.estimate(plan)
    (release,) = [s for s in est.critical_path if s.name == "ray-release"]
    cold = deploy_time.GPU_NODE_POOL.minutes + gpu_arrival.IMAGE_PULL.minutes  # no pre-pull on Autopilot
    assert release.minutes == pytest.approx(
        deploy_time.CREATION_MINUTES["kubernetes:helm.sh/v3:Release"].minutes + cold
    )
    assert est.total_minutes == pytest.approx(
        LUSTRE_READY_MINUTES
        + after_lustre_minutes("autopilot")
        - PULLED_GPU_MINUTES
        + cold
        + gate_minutes_of("autopilot")
    )
    assert "gke-gpu-pool" not in est.milestones and "image-prepull-daemonset" not in est.finish_by_name


def test_a_submission_without_a_gate_is_one_step_of_one_minute():
    # A real plan (the dev stack's), as the program would hand the hook one: `off` alone says no gate.
    plan = stack_plan("dev").one(deploy_time.JOB_SUBMISSION, "training-job-submission").inputs["gate_plan"]
    release = reg("release", "kubernetes:helm.sh/v3:Release")
    release_minutes = deploy_time.CREATION_MINUTES["kubernetes:helm.sh/v3:Release"].minutes
    for policy, gate in (("off", 0.0), (None, 0.0), ("warn", gate_minutes_of("dev"))):
        inputs = {"gate_policy": policy, "gate_plan": plan}
        submission = reg("job", deploy_time.JOB_SUBMISSION, deps=["urn:release"], inputs=inputs)
        est = deploy_time.estimate(synthetic(release, submission))
        assert [s.name for s in est.critical_path] == ["release", *(["acceptance-gate"] if gate else []), "job"]
        assert est.total_minutes == pytest.approx(release_minutes + gate + 1.0), policy
    assert gate_minutes_of("dev") > 0, "the dev stack gates under warn/enforce: the loop above compares both"


def test_the_plan_prices_one_gate_run_at_the_stacks_hourly_cost():
    from tools import estimates

    est = estimates.compute(stack_plan("b200"))
    gate = estimates.gate_cost(est)
    assert gate["minutes"] == gate_minutes_of("b200")
    # Eight spot B200 nodes plus the rest of the stack for ~1.3 minutes: dollars, not hundreds.
    assert gate["perRun"] == round(est.cost.per_hour * gate["minutes"] / 60, 2) and 1 < gate["perRun"] < 50
    assert estimates.to_json(est)["acceptanceGate"] == gate
    assert any(line.startswith("  acceptance gate before each submission: ~") for line in estimates.render(est))
