"""Just-in-time GPU nodes (gpuPool.justInTime): the lead time's arithmetic, the timer's decisions, the objects the
program plans, and the plan's three-way comparison (infra/jit_gpu_nodes.py, workloads/jit_timer.py, tools/estimates.py;
the comparison's arithmetic at a late Lustre, tools/gpu_arrival.py `scenario`, is tests/test_gpu_arrival.py's)."""

from __future__ import annotations

import pytest
from conftest import STACKS, merged, run_plan, stack_plan
from k8s_support import k8s_doc, schema_problems

from infra import jit_gpu_nodes as jit
from infra.naming import GPU_WARMUP
from tools import deploy_time, estimates, gpu_arrival
from tools.offline_plan import render_tree
from workloads import jit_timer

JOB = "kubernetes:batch/v1:Job"


def jobs_of(plan) -> dict[str, object]:
    return {r.inputs["metadata"]["name"]: r for r in plan.by_type(JOB)}


# ----------------------------------------------------------------------------- the lead and the delay


def test_the_lead_is_the_boot_the_driver_and_the_image_left_after_the_driver():
    # Boot 2 + driver 4, then the 11.1-minute pull less the 4 minutes the pre-pull pulls during the driver install.
    assert jit.lead_minutes(jit.PULL) == pytest.approx(2 + 4 + (11.1 - 4))
    assert jit.lead_minutes(jit.PULL, prepull=False) == pytest.approx(2 + 4 + 11.1)
    assert jit.lead_minutes(jit.STREAM) == jit.lead_minutes(jit.CACHE) == pytest.approx(2 + 4 + 1)
    # One source: the deploy-time model's arrival of the same nodes takes as long.
    pulled = gpu_arrival.GpuArrival(False, gpu_arrival.IMAGE_PULL, prepull=True)
    streamed = gpu_arrival.GpuArrival(False, gpu_arrival.IMAGE_STREAM_PULL, prepull=True)
    assert (pulled.minutes, streamed.minutes) == (jit.lead_minutes(jit.PULL), jit.lead_minutes(jit.STREAM))


def test_the_delay_is_lustres_typical_creation_less_the_timers_start_and_the_lead_and_never_negative():
    t = jit.JitTiming(lead_minutes=7.0, max_wait_minutes=15)
    # Lustre 60 + its claim 0.25, less the timer's 10.5 after Lustre's start, less the 7-minute lead.
    assert t.delay_minutes == pytest.approx(60 + 0.25 - 10.5 - 7, abs=0.05)
    late = jit.JitTiming(lead_minutes=7.0, max_wait_minutes=15, lustre_minutes=80.0)
    assert late.delay_minutes == pytest.approx(t.delay_minutes + 20, abs=0.11), "timed to Lustre's expected time"
    # The placeholders hold nodes for the lead, then at most the late-Lustre bound; the deadline two polls later.
    assert (t.hold_minutes, t.hold_seconds, t.backstop_seconds) == (22.0, 1320, 1350)
    assert jit.JitTiming(lead_minutes=55.0, max_wait_minutes=15).delay_minutes == 0.0
    assert jit.JitTiming(lead_minutes=7.0, max_wait_minutes=15).delay_seconds == round(t.delay_minutes * 60)


@pytest.mark.parametrize("stack", STACKS)
def test_the_programs_delay_is_the_plans_own_model_within_half_a_minute(stack):
    est = deploy_time.estimate(stack_plan(stack))
    t = est.timing
    assert est.arrival.mode == "justInTime", "on by default"
    # The timer's delay as the program baked it in equals the Ray release's modelled start (Lustre and its claim;
    # the weights are staged off this path) less the lead less the timer's modelled creation: the nodes are ready
    # the minute it starts.
    assert t.delay == pytest.approx(t.ideal_delay, abs=0.5)
    assert t.jit_start + t.lead == pytest.approx(t.claim_ready, abs=0.5)
    assert t.claim_ready > est.milestones["lustre-instance"]
    timer = jobs_of(stack_plan(stack))[jit.TIMER]
    notes = timer.inputs["metadata"]["annotations"]
    assert int(notes[jit.DELAY_ANNOTATION]) == round(t.delay * 60) and int(notes[jit.HOLD_ANNOTATION]) == round(
        t.hold * 60
    )


# ----------------------------------------------------------------------------- the timer (workloads/jit_timer.py)


class FakeCluster:
    """The three calls the timer's Role allows, on a clock the test moves."""

    def __init__(self, claim_at: float, created: str = "2026-12-07T04:00:00Z"):
        self.now = jit_timer.created_at(lambda *_: (200, {"metadata": {"creationTimestamp": created}}), "ns", "t")
        self.claim_at, self.created = self.now + claim_at, created
        self.patches: list[tuple[float, bool]] = []
        self.paths: set[str] = set()

    def api(self, method, path, body):
        self.paths.add(f"{method} {path}")
        if path == jit_timer.ray_cluster_path("ns", "nemo-rl"):
            return (200, {}) if self.now >= self.claim_at else (404, {})
        if method == "GET" and path.endswith(f"/jobs/{jit.TIMER}"):
            return 200, {"metadata": {"creationTimestamp": self.created}}
        if method == "PATCH" and path.endswith(f"/jobs/{GPU_WARMUP}"):
            self.patches.append((self.now, body["spec"]["suspend"]))
            return 200, {}
        return 403, {}

    def sleep(self, seconds):
        self.now += seconds

    def run(self, delay=600.0, hold=300.0):
        start = self.now
        outcome = jit_timer.run(
            self.api,
            "ns",
            jit.TIMER,
            GPU_WARMUP,
            "nemo-rl",
            delay,
            hold,
            clock=lambda: self.now,
            sleep=self.sleep,
            say=lambda _: None,
        )
        return outcome, [(round(t - start), s) for t, s in self.patches]


def test_the_timer_starts_the_placeholders_at_the_delay_and_hands_them_over_when_the_raycluster_appears():
    outcome, patches = FakeCluster(claim_at=700).run(delay=600, hold=300)
    assert outcome == jit_timer.HANDED_OVER
    assert patches[0] == (600, False) and patches[1][1] is True and 700 <= patches[1][0] <= 700 + jit_timer.POLL_SECONDS


def test_the_timer_gives_the_nodes_back_after_the_hold_when_lustre_is_late():
    outcome, patches = FakeCluster(claim_at=10_000).run(delay=600, hold=300)
    assert outcome == jit_timer.LATE and patches == [(600, False), (900, True)]


def test_on_a_live_stack_or_an_early_lustre_the_timer_starts_nothing():
    # An upgrade of a running stack: the RayCluster is there before the timer's first look.
    cluster = FakeCluster(claim_at=0)
    assert cluster.run() == (jit_timer.LIVE, [])
    assert not any(p.startswith("PATCH") for p in cluster.paths)
    assert FakeCluster(claim_at=200).run(delay=600) == (jit_timer.EARLY, [])


def test_the_timer_counts_from_its_jobs_creation_not_from_its_pods_late_start():
    cluster = FakeCluster(claim_at=10_000)
    cluster.now += 400  # the pod started 400 s after its Job (the image pull on the system node)
    outcome, patches = cluster.run(delay=600, hold=300)
    assert patches[0] == (200, False), "600 s after the Job's creation, 200 s after the pod's start"


# ----------------------------------------------------------------------------- what the program plans


def test_the_default_plans_suspended_placeholders_and_a_timer_on_the_system_pool_with_only_its_grants():
    plan = stack_plan("b200")
    jobs = jobs_of(plan)
    placeholders, timer = jobs[GPU_WARMUP], jobs[jit.TIMER]
    spec = placeholders.inputs["spec"]
    t = deploy_time.estimate(plan).timing
    assert spec["suspend"] is True and spec["activeDeadlineSeconds"] == round(t.hold * 60) + 30
    # The timer owns `spec.suspend` once the Job exists: `pulumi up --refresh` must not undo its start or stop.
    assert placeholders.options["ignoreChanges"] == ["spec.suspend"]
    pod = timer.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "b200-system"} and pod["serviceAccountName"] == (
        jit.TIMER
    )
    (container,) = pod["containers"]
    assert container["command"][:3] == ["python", "-S", "-c"] and "def run(" in container["command"][3]
    assert container["command"][4:7] == [jit.TIMER, GPU_WARMUP, "nemo-rl"]
    assert "env" not in container and "volumeMounts" not in container, "no secret, no volume"
    (role,) = [
        r for r in plan.by_type("kubernetes:rbac.authorization.k8s.io/v1:Role") if r.name.endswith("jit-timer-role")
    ]
    rules = {
        (rule["resources"][0], tuple(rule["resourceNames"])): tuple(rule["verbs"]) for rule in role.inputs["rules"]
    }
    assert rules == {
        ("jobs", (jit.TIMER,)): ("get",),
        ("jobs", (GPU_WARMUP,)): ("get", "patch"),
        ("rayclusters", ("nemo-rl",)): ("get",),
    }
    for job in (placeholders, timer):
        assert job.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert not schema_problems(k8s_doc(job), job.name)


def test_just_in_time_off_or_warm_minutes_plans_no_timer():
    off = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"justInTime": False}))
    warm = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"warmMinutes": 60}))
    assert jit.TIMER not in jobs_of(off) and GPU_WARMUP not in jobs_of(off)
    assert jit.TIMER not in jobs_of(warm) and "suspend" not in jobs_of(warm)[GPU_WARMUP].inputs["spec"]
    assert deploy_time.estimate(warm).arrival.mode == "warm"


# ----------------------------------------------------------------------------- the plan's three-way table


def test_b200_meets_issue_44_first_step_within_three_minutes_and_spend_within_the_bound():
    plan = stack_plan("b200")
    est = estimates.compute(plan)
    doc = estimates.arrival_costs(est)
    rows = {(r["mode"], r["lustreCreateMinutes"]): r for r in doc["scenarios"]}
    assert set(rows) == {(m, lustre) for m in ("cold", "justInTime", "warm") for lustre in (60.0, 80.0)}
    jit_typical, cold = rows[("justInTime", 60.0)], rows[("cold", 60.0)]
    gate, startup = est.deploy.gate_minutes, est.deploy.arrival.startup_minutes
    # The first step within 3 minutes plus the gate and start-up after Lustre is ready: the weights are staged in the
    # bucket while Lustre is created and imported beside the Ray release (infra/weight_staging.py).
    assert jit_typical["firstStepMinute"] <= jit_typical["lustreReadyMinute"] + 3 + gate + startup
    after = doc["afterLustre"]
    assert after["minutes"] == pytest.approx(jit_typical["firstStepMinute"] - jit_typical["lustreReadyMinute"], abs=0.1)
    assert after["limitMinutes"] == pytest.approx(3 + gate + startup) and after["minutes"] <= after["limitMinutes"]
    assert after["restMinutes"] == pytest.approx(0.25 + 1.5 + 1.0, abs=0.1), "the claim, the release, the submission"
    assert cold["firstStepMinute"] > jit_typical["firstStepMinute"] + 5
    # GPU spend before the job no higher than cold's plus the boot and pull that now overlap Lustre.
    per_minute = cold["gpuUsdBeforeJob"] / cold["gpuMinutesBeforeJob"]
    assert doc["boundUsd"] == pytest.approx(per_minute * (cold["gpuMinutesBeforeJob"] + 7.0), rel=0.01)
    assert cold["gpuUsdBeforeJob"] < jit_typical["gpuUsdBeforeJob"] <= doc["boundUsd"]
    assert jit_typical["gpuUsdBeforeJob"] < rows[("warm", 60.0)]["gpuUsdBeforeJob"] / 3


def test_the_text_plan_shows_minutes_and_dollars_for_the_three_ways_at_typical_and_slow_lustre():
    text = render_tree(stack_plan("b200"))
    block = text[text.index("GPU arrival (this stack: just in time") : text.index("\nGoodput")]
    rows = [line for line in block.splitlines() if line.startswith(("  60 min", "  80 min"))]
    assert len(rows) == 6 and all("USD" in line for line in rows)
    assert [line.split()[2] for line in rows] == ["cold", "just", "warm"] * 2
    assert "bound at Lustre's typical time: cold USD 40.43" in block


def test_turning_just_in_time_on_changes_neither_the_job_nor_the_ray_release_so_a_live_stack_keeps_training():
    on, off = stack_plan("dev"), run_plan("dev", gpuPool=merged("dev", "gpuPool", {"justInTime": False}))

    def submission(plan):
        (sub,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
        return sub.inputs["spec_hash"], sub.inputs["submission_id"], sub.options.get("replaceWith")

    def release(plan):
        (rel,) = plan.by_type("kubernetes:helm.sh/v3:Release")
        return rel.inputs["values"], rel.options.get("replaceWith")

    assert submission(on) == submission(off) and release(on) == release(off)
    added = {r.name for r in on.resources} - {r.name for r in off.resources}
    assert {r.name for r in off.resources} <= {r.name for r in on.resources}, "nothing removed"
    assert added == {
        "image-prepull-warmup-priority",
        "image-prepull-warmup-job",
        "image-prepull-jit-timer-account",
        "image-prepull-jit-timer-role",
        "image-prepull-jit-timer-binding",
        "image-prepull-jit-timer-job",
    }
