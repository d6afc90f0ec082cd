"""tools/upgrade_check.py: each break an upgrade can bring, on small synthetic plan documents (the continuity
step run for real on a temporary directory), the dev stack's real plans with a stack-file edit, and the command on
temporary git repositories whose `infra/plan.py` prints canned plans."""

from __future__ import annotations

import copy
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, merged, run_plan, stack_plan

from tools import offline_plan as plan_mod
from tools import upgrade_check as uc
from tools import upgrade_continuity as continuity
from workloads import job_spec

STACK_URN = "urn:pulumi:dev::nemo-rl-gke::pulumi:pulumi:Stack::nemo-rl-gke-dev"
JOB_TYPE = "pulumi-python:dynamic/nemo-rl-gke:JobSubmission"
OLD_DIR = "/lustre/checkpoints/dev/qwen2.5-1.5b-gsm8k"
NEW_DIR = "/lustre/checkpoints/dev/qwen2.5-1.5b-gsm8k/Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"


def urn(kind: str, name: str, parent_type: str = "") -> str:
    qualified = f"{parent_type}${kind}" if parent_type else kind
    return f"urn:pulumi:dev::nemo-rl-gke::{qualified}::{name}"


def res(kind, name, inputs=None, options=None, parent_type="nemo-rl-gke:infra:Storage"):
    parent = urn(parent_type, name.split("-")[0]) if parent_type else STACK_URN
    return {
        "urn": urn(kind, name, parent_type),
        "type": kind,
        "name": name,
        "parent": parent,
        "inputs": inputs or {},
        "options": options or {},
    }


def job(checkpoint_dir=OLD_DIR, spec_hash="aaa"):
    entrypoint = f"python run_grpo_math.py checkpointing.checkpoint_dir={checkpoint_dir} checkpointing.save_period=2"
    return res(JOB_TYPE, "training-job-submission", {"entrypoint": entrypoint, "spec_hash": spec_hash})


def doc(*resources, outputs=None, preemption=None):
    return {
        "project": "nemo-rl-gke",
        "stack": "dev",
        "resources": list(resources),
        "outputs": outputs or {},
        "estimates": {"preemption": preemption} if preemption else {},
    }


LUSTRE = res(
    "gcp:lustre/instance:Instance",
    "lustre-instance",
    {"instanceId": "dev-lustre", "capacityGib": "18000", "perUnitStorageThroughput": "1000", "labels": {"a": "1"}},
)
BUCKET = res("gcp:storage/bucket:Bucket", "artifacts-bucket", {"name": "p-dev-artifacts", "location": "US-CENTRAL1"})
CLUSTER = res("gcp:container/cluster:Cluster", "gke-cluster", {"name": "dev-gke", "network": "vpc", "labels": {}})
GPU_POOL = res(
    "gcp:container/nodePool:NodePool",
    "gke-gpu-pool",
    {"nodeConfig": {"spot": True, "guestAccelerators": [{"type": "nvidia-l4", "count": 1}]}, "nodeCount": 1},
)
RAY = res(
    "kubernetes:helm.sh/v3:Release",
    "ray-release",
    {"values": {"head": {"cpu": 2}}, "version": "1.4.2", "chart": "ray-cluster"},
    {"replaceOnChanges": ["values", "version", "chart", "repositoryOpts"]},
)
LOSS = {"worstLossMinutes": 19.1, "expectedLossMinutes": 9.0, "expectedLossUsd": 69.13}


def with_inputs(r, **changes):
    r = copy.deepcopy(r)
    r["inputs"].update(changes)
    return r


def found(findings):
    return [(f.level, f.rule, f.resource) for f in findings]


def test_a_lustre_instance_replaced_by_a_force_new_input_fails_naming_it_and_the_input():
    after = with_inputs(LUSTRE, perUnitStorageThroughput="500")
    [finding] = uc.compare_plans(doc(LUSTRE), doc(after), "dev")
    assert (finding.level, finding.rule, finding.resource) == (
        "fail",
        "data-replaced",
        "gcp:lustre/instance:Instance lustre-instance",
    )
    assert 'perUnitStorageThroughput: "1000" -> "500"' in finding.message


def test_a_lustre_instance_grown_or_relabelled_is_updated_in_place():
    after = with_inputs(LUSTRE, capacityGib="36000", labels={"a": "2"})
    assert uc.compare_plans(doc(LUSTRE), doc(after), "dev") == []


def test_the_bucket_renamed_or_the_cluster_moved_to_another_network_fails():
    findings = uc.compare_plans(
        doc(BUCKET, CLUSTER), doc(with_inputs(BUCKET, name="p-dev-2"), with_inputs(CLUSTER, network="vpc2")), "dev"
    )
    assert sorted(found(findings)) == [
        ("fail", "data-replaced", "gcp:container/cluster:Cluster gke-cluster"),
        ("fail", "data-replaced", "gcp:storage/bucket:Bucket artifacts-bucket"),
    ]


def test_a_data_bearing_resource_deleted_fails():
    assert found(uc.compare_plans(doc(BUCKET, LUSTRE), doc(LUSTRE), "dev")) == [
        ("fail", "data-deleted", "gcp:storage/bucket:Bucket artifacts-bucket")
    ]


def test_a_resource_moved_to_another_parent_without_an_alias_fails_naming_both_urns():
    moved = res(LUSTRE["type"], LUSTRE["name"], LUSTRE["inputs"], parent_type="nemo-rl-gke:infra:Lustre")
    [finding] = uc.compare_plans(doc(LUSTRE), doc(moved), "dev")
    assert (finding.level, finding.rule) == ("fail", "urn-changed")
    assert LUSTRE["urn"] in finding.message and moved["urn"] in finding.message


def test_a_resource_moved_with_an_alias_to_its_old_parent_passes():
    moved = res(LUSTRE["type"], LUSTRE["name"], LUSTRE["inputs"], parent_type="nemo-rl-gke:infra:Lustre")
    moved["options"]["aliases"] = [{"spec": {"parentUrn": LUSTRE["parent"]}}]
    assert uc.alias_urns(moved, {}) == [LUSTRE["urn"]]
    assert uc.compare_plans(doc(LUSTRE), doc(moved), "dev") == []


def test_a_type_change_without_an_alias_fails_and_with_a_urn_alias_passes():
    retyped = res("gcp:lustre/instanceV2:Instance", LUSTRE["name"], LUSTRE["inputs"])
    assert found(uc.compare_plans(doc(LUSTRE), doc(retyped), "dev")) == [
        ("fail", "urn-changed", "gcp:lustre/instance:Instance lustre-instance")
    ]
    retyped["options"]["aliases"] = [{"urn": LUSTRE["urn"]}]
    assert uc.compare_plans(doc(LUSTRE), doc(retyped), "dev") == []


def test_a_dynamic_provider_that_no_longer_loads_fails_naming_the_resource_and_the_error():
    guard = res("pulumi-python:dynamic/nemo-rl-gke:LustreGuard", "lustre-data-guard", {"__provider": "gASV"})
    problems = {"gASV": "ModuleNotFoundError: No module named 'infra.lustre_guard'"}
    [finding] = uc.compare_plans(doc(guard), doc(guard), "dev", problems.get)
    assert (finding.rule, finding.resource) == (
        "provider-import",
        "pulumi-python:dynamic/nemo-rl-gke:LustreGuard lustre-data-guard",
    )
    assert "No module named 'infra.lustre_guard'" in finding.message


def test_todays_job_provider_pickle_loads_here_and_with_its_module_renamed_does_not():
    golden = json.loads((ROOT / "tests" / "golden" / "dev.json").read_text())
    [pickled] = [r["inputs"]["__provider"] for r in golden["resources"] if r["type"] == JOB_TYPE]
    assert uc.provider_problem(pickled) is None
    raw = uc.base64.b64decode(pickled)
    assert b"workloads.hook" in raw
    renamed = uc.base64.b64encode(raw.replace(b"workloads.hook", b"workloads.hokk")).decode()
    assert "No module named 'workloads.hokk'" in uc.provider_problem(renamed)


def test_a_run_id_change_fails_naming_the_lost_ledger_not_its_checkpoints():
    before = doc(job(), outputs={"runId": "dev-qwen-11111111"})
    after = doc(job(spec_hash="bbb"), outputs={"runId": "dev-qwen-22222222"})
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule, finding.resource) == ("fail", "ledger-lost", "run dev-qwen-11111111")
    assert "run id changes to dev-qwen-22222222" in finding.message
    assert "the run's ledger (spend, budget, attempt history) is lost" in finding.message
    assert "checkpoints" not in finding.message  # same directory: the steps are still found


def test_a_legacy_run_whose_checkpoints_move_without_continuity_fails_naming_both_directories():
    before = doc(job(), outputs={"jobId": "dev-qwen2-5-1-5b-gsm8k-ad8faa34"})
    after = doc(job(NEW_DIR, "bbb"), outputs={"jobId": "dev-x"})
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule, finding.resource) == (
        "fail",
        "run-restart",
        "run dev-qwen2-5-1-5b-gsm8k-ad8faa34",
    )
    assert f"move from {OLD_DIR} to {NEW_DIR}" in finding.message


def test_a_ledger_keyed_by_a_submission_id_before_run_ids_starts_over_once_said_without_a_training_cost():
    before = doc(job(NEW_DIR), outputs={"jobId": "dev-qwen2-5-1-5b-gsm8k-a3ddabad"}, preemption=LOSS)
    after = doc(job(NEW_DIR), outputs={"runId": "dev-qwen2-5-1-5b-gsm8k-ed6341a2"}, preemption=LOSS)
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule, finding.minutes) == ("warn", "ledger-restarts", None)
    assert "the run's ledger (spend, budget, attempt history) is lost once" in finding.message
    assert finding.resource == "run dev-qwen2-5-1-5b-gsm8k-a3ddabad" and "run id (dev-qwen2-5-1-5b-gsm8k-ed6341a2)" in (
        finding.message
    )


def continued_job(step: str, checkpoint_dir: str = NEW_DIR, spec_hash: str = "bbb"):
    """A job whose entrypoint runs `step` before NeMo-RL, as workloads/job_spec.py `build_job` writes it."""
    overrides = f"checkpointing.checkpoint_dir={checkpoint_dir} policy.model_name=Qwen/Qwen2.5-1.5B-Instruct"
    entrypoint = f"{step}; cd /opt/nemo-rl && python examples/run_grpo.py {overrides}"
    return res(JOB_TYPE, "training-job-submission", {"entrypoint": entrypoint, "spec_hash": spec_hash})


def test_a_legacy_run_brought_over_by_this_trees_continuity_step_run_for_real_only_warns_with_its_cost():
    step = job_spec.prepare_checkpoints(NEW_DIR, OLD_DIR)  # the real step, run on a temporary directory
    before = doc(job(), outputs={"jobId": "old"})
    after = doc(continued_job(step), outputs={"jobId": "new"}, preemption=LOSS)
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule) == ("warn", "job-resubmitted")
    assert f"brought over from {OLD_DIR}" in finding.message
    assert (finding.minutes, finding.usd) == (19.1, round(19.1 * 69.13 / 9.0, 2))


GLOB_THAT_MATCHES_NOTHING = (
    f'o={OLD_DIR}; c={NEW_DIR}; for d in "$o"/steps_*; do [ -d "$d" ] || continue; '
    'mkdir -p "$c" && mv "$d" "$c/${d##*/}" || exit 1; done'
)


def test_a_continuity_step_whose_glob_matches_nothing_fails_naming_the_checkpoint_lost():
    # It names the old directory, as the old string match wanted, and moves nothing.
    before = doc(job(), outputs={"jobId": "old"})
    [finding] = uc.compare_plans(before, doc(continued_job(GLOB_THAT_MATCHES_NOTHING)), "dev")
    assert (finding.level, finding.rule) == ("fail", "run-restart")
    assert f"NeMo-RL finds no step_N in {NEW_DIR} and starts at step 0" in finding.message
    assert f"newest whole checkpoint, step_4 in {OLD_DIR}, is lost" in finding.message


def test_a_continuity_step_that_leaves_a_torn_save_newest_or_fails_is_caught_on_a_real_directory():
    before = doc(job(NEW_DIR), outputs={"runId": "r"})
    # The whole steps stay, but nothing sets the async save cut short (step_5) aside: NeMo-RL would load it.
    [torn] = uc.compare_plans(before, doc(continued_job("true"), outputs={"runId": "r"}), "dev")
    assert torn.rule == "run-restart" and "resumes from step_5" in torn.message and "never finished" in torn.message
    # The real step with its own step pattern broken, as a regression in workloads/checkpoints.py would ship it.
    program = job_spec.checkpoints_program().replace('r"step_(\\d+)"', 'r"steps_(\\d+)"')
    assert program != job_spec.checkpoints_program()
    broken = f"python -c {shlex.quote(program)} {NEW_DIR} {OLD_DIR} || exit $?"
    [lost] = uc.compare_plans(doc(job(), outputs={"jobId": "old"}), doc(continued_job(broken)), "dev")
    assert lost.rule == "run-restart" and "starts at step 0" in lost.message
    failing = f"echo 'cannot rename {NEW_DIR}/step_5' >&2; exit 1"
    [failed] = uc.compare_plans(before, doc(continued_job(failing), outputs={"runId": "r"}), "dev")
    assert f"fails on the checkpoints {NEW_DIR} holds (attempt 1): cannot rename {NEW_DIR}/step_5" in failed.message


def test_the_continuity_step_is_the_entrypoint_before_the_cd_to_the_workdir():
    step = job_spec.prepare_checkpoints(NEW_DIR, OLD_DIR)
    assert continuity.prelude(f"{step}; cd /opt/nemo-rl && python x.py a=1") == step
    assert continuity.prelude("cd /opt/nemo-rl && python x.py") == ""  # 1.0.0: NeMo-RL at once


def test_a_spot_pool_replaced_and_a_ray_release_reinstalled_warn_with_minutes_and_dollars():
    pool = copy.deepcopy(GPU_POOL)
    pool["inputs"]["nodeConfig"]["reservationAffinity"] = {"consumeReservationType": "NO_RESERVATION"}
    ray = with_inputs(RAY, values={"head": {"cpu": 4}})
    findings = uc.compare_plans(doc(GPU_POOL, RAY), doc(pool, ray, preemption=LOSS), "dev")
    assert found(findings) == [
        ("warn", "pool-replaced", "gcp:container/nodePool:NodePool gke-gpu-pool"),
        ("warn", "ray-restart", "kubernetes:helm.sh/v3:Release ray-release"),
    ]
    assert (
        "nodeConfig.reservationAffinity" in findings[0].message and "values (replaceOnChanges)" in findings[1].message
    )
    assert findings[0].line().endswith("[cost: at most 19.1 min of training, $146.71]")


@pytest.mark.parametrize(
    "field, old, new",
    [
        ("diskSizeGb", 200, 500),
        ("diskType", "pd-balanced", "hyperdisk-balanced"),
        ("imageType", "COS_CONTAINERD", "UBUNTU_CONTAINERD"),
    ],
)
def test_a_gpu_pool_updated_in_place_by_recreating_its_nodes_warns_with_the_cost(field, old, new):
    before, after = copy.deepcopy(GPU_POOL), copy.deepcopy(GPU_POOL)
    before["inputs"]["nodeConfig"][field], after["inputs"]["nodeConfig"][field] = old, new
    [finding] = uc.compare_plans(doc(before), doc(after, preemption=LOSS), "dev")
    assert (finding.level, finding.rule) == ("warn", "pool-nodes-recreated")
    assert f"nodeConfig.{field}: {json.dumps(old)} -> {json.dumps(new)}" in finding.message
    assert "recreating every GPU node of the pool" in finding.message and "running attempt dies" in finding.message
    assert finding.line().endswith("[cost: at most 19.1 min of training, $146.71]")


@pytest.mark.parametrize("field, new", [("namespace", "ray"), ("name", "nemo-rl-2")])
def test_a_helm_release_renamed_or_moved_to_another_namespace_is_a_reinstall_whatever_replace_on_changes_says(
    field, new
):
    before = with_inputs(RAY, name="nemo-rl", namespace="nemo-rl")
    [finding] = uc.compare_plans(doc(before), doc(with_inputs(before, **{field: new}), preemption=LOSS), "dev")
    assert (finding.level, finding.rule) == ("warn", "ray-restart")
    assert f'{field}: "nemo-rl" -> "{new}"' in finding.message and "running attempt stops" in finding.message
    assert finding.minutes == 19.1


def test_a_pool_resized_or_relabelled_and_the_ray_release_unchanged_say_nothing():
    relabelled = copy.deepcopy(GPU_POOL)
    relabelled["inputs"]["nodeConfig"]["resourceLabels"] = {"team": "ml"}
    assert uc.compare_plans(doc(GPU_POOL, RAY), doc(with_inputs(GPU_POOL, nodeCount=4), RAY), "dev") == []
    assert uc.compare_plans(doc(GPU_POOL), doc(relabelled), "dev") == []


# ---- real plans of the dev stack (in-process, shared with the suite)


def test_real_dev_plans_the_same_pass_and_a_stack_file_edit_says_what_each_change_loses():
    committed = plan_mod.plan_document(stack_plan("dev"))
    # This tree's real continuity step, run on a directory laid out as the run saved it, keeps the run.
    assert uc.compare_plans(committed, committed, "dev") == []
    edited = plan_mod.plan_document(
        run_plan(
            "dev",
            cluster=merged("dev", "cluster", {"systemPool": {"machineType": "n2-standard-8", "diskSizeGb": 300}}),
            job=merged("dev", "job", {"overrides": ["policy.max_total_sequence_length=1024"]}),
        )
    )
    findings = uc.compare_plans(committed, edited, "dev")
    assert found(findings) == [
        ("warn", "pool-nodes-recreated", "gcp:container/nodePool:NodePool gke-system-pool"),
        ("fail", "ledger-lost", f"run {committed['outputs']['runId']}"),
        ("fail", "run-restart", f"run {committed['outputs']['runId']}"),
    ]
    pool, ledger, restart = findings
    assert "nodeConfig.diskSizeGb: 200 -> 300" in pool.message and pool.minutes is not None
    assert "the run's ledger (spend, budget, attempt history) is lost" in ledger.message
    assert "seq1024" in restart.message and "starts at step 0" in restart.message and "seq512" in restart.message


# ---- the command, on a temporary repository whose `infra/plan.py` prints canned plans

FAKE_PLAN = """
import json, os, pathlib, re, sys, time
args = sys.argv[1:]
stack = args[args.index("--stack") + 1]
config = pathlib.Path(args[args.index("--config-file") + 1] if "--config-file" in args else f"Pulumi.{stack}.yaml")
canned = pathlib.Path("canned") / f"{stack}.json"
if not canned.exists():
    print(f"error: {stack}: refused by this release", file=sys.stderr)
    sys.exit(2)
if os.environ.get("FAKE_PLAN_SLEEP"):
    pathlib.Path(os.environ["FAKE_PLAN_SLEEP"]).write_text(str(os.getpid()))
    time.sleep(60)
instance = re.search(r"instance: (\\S+)", config.read_text()).group(1)
print(canned.read_text().replace("@INSTANCE@", instance))
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path):
    """A repository with two stacks at its first commit; the working tree replaces dev's Lustre instance (in its
    code) and no longer plans `old`."""
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "__init__.py").write_text("")
    (tmp_path / "infra" / "plan.py").write_text(textwrap.dedent(FAKE_PLAN))
    (tmp_path / "canned").mkdir()
    templated = json.dumps(doc(with_inputs(LUSTRE, instanceId="@INSTANCE@")))
    for stack in ("dev", "old"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("instance: dev-lustre\n")
        (tmp_path / "canned" / f"{stack}.json").write_text(templated)
    git(tmp_path, "init", "-q")
    commit_all(tmp_path, "1.0.0")
    return tmp_path


def test_the_command_plans_both_trees_and_fails_naming_each_break(repo, capsys):
    (repo / "canned" / "dev.json").write_text(json.dumps(doc(with_inputs(LUSTRE, perUnitStorageThroughput="500"))))
    (repo / "canned" / "old.json").unlink()
    assert uc.main(["--from", "HEAD", "--json"], root=repo) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["stack"], f["rule"], f["resource"]) for f in report["findings"]] == [
        ("dev", "data-replaced", "gcp:lustre/instance:Instance lustre-instance"),
        ("old", "no-longer-plans", "stack file"),
    ]
    assert "refused by this release" in report["findings"][1]["message"]
    assert git(repo, "worktree", "list").count("\n") == 0, "the REF worktree is removed after"


def test_the_new_side_is_planned_with_this_trees_version_of_a_committed_stack_file(repo, capsys):
    (repo / "Pulumi.dev.yaml").write_text("instance: dev-lustre-2\n")  # the new release's example, code unchanged
    assert uc.main(["--from", "HEAD"], root=repo) == 1
    out = capsys.readouterr().out
    assert "note dev: the stack file changed since REF" in out
    assert (
        'FAIL dev: gcp:lustre/instance:Instance lustre-instance: REPLACED, its data lost (instanceId: "dev-lustre"'
        in out
    )


def test_a_release_the_changelog_records_is_found_without_its_tag_and_an_unknown_one_says_what_is_known(repo, capsys):
    first = git(repo, "rev-parse", "HEAD")
    (repo / "CHANGELOG.md").write_text(
        f"# Changelog\n\n## [Unreleased]\n\n## [1.0.0] - 2026-12-03\n\nrelease-commit: {first[:7]}\n\n"
        "## [0.9.0] - 2026-11-01\n\nrelease-commit: 0123abc\n"
    )
    assert uc.main(["--from", "v1.0.0"], root=repo) == 0
    assert f"upgrade check: v1.0.0 ({first[:10]}, CHANGELOG.md release-commit {first[:7]})" in capsys.readouterr().out
    assert uc.main(["--from", "v9.9.9"], root=repo) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a release CHANGELOG.md records (its releases: 1.0.0, 0.9.0)" in err
    assert "`git fetch --tags`" in err
    assert uc.main(["--from", "0.9.0"], root=repo) == 3
    assert "(0123abc) is not in this clone either" in capsys.readouterr().err


def test_a_ref_of_unrelated_history_or_without_stack_files_is_an_error_not_nothing_lost(repo, capsys):
    empty_tree = git(repo, "mktree")  # stdin is empty: the empty tree
    unrelated = git(repo, "commit-tree", empty_tree, "-m", "another project")
    assert uc.main(["--from", unrelated], root=repo) == 2
    assert "shares no history with this checkout" in capsys.readouterr().err
    bare = git(repo, "commit-tree", empty_tree, "-p", "HEAD", "-m", "no stacks")
    assert uc.main(["--from", bare], root=repo) == 2
    assert "has no committed stack file" in capsys.readouterr().err
    # With a stack file of the user's it is planned, and a REF whose code plans nothing compares nothing.
    assert uc.main(["--from", bare, "--stack-file", str(repo / "Pulumi.dev.yaml")], root=repo) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none of its 1 stack file(s) could be compared" in err
    assert f"--from {bare[:12]} (" in err and "nothing lost" not in err


def test_a_credential_typed_as_the_ref_is_not_repeated(repo, capsys):
    token = "ghp_" + "a1B2c3D4e5" * 4
    assert uc.main(["--from", token], root=repo) == 3
    err = capsys.readouterr().err
    assert token not in err and "looks like a credential" in err and err.count("\n") == 1
    for bad in ("", "-x", "HEAD\nerror: forged"):
        assert uc.main([f"--from={bad}"], root=repo) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--from: the value" in err


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_plans_stops_them_and_removes_the_worktree_without_a_traceback(repo, tmp_path, signum):
    pid_file = tmp_path / "plan.pid"
    code = (
        "import sys, pathlib; from tools import upgrade_check as uc; "
        f"sys.exit(uc.main(['--from', 'HEAD'], root=pathlib.Path({str(repo)!r})))"
    )
    env = {**os.environ, "FAKE_PLAN_SLEEP": str(pid_file), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_file.exists(), "a plan started"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    name = signal.Signals(signum).name
    assert err == f"error: interrupted ({name}): the plans were stopped and the temporary worktree removed\n"
    assert git(repo, "worktree", "list").count("\n") == 0
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_an_unknown_ref_is_an_environment_error_and_a_misnamed_stack_file_a_usage_error(repo, capsys):
    assert uc.main(["--from", "v9.9.9"], root=repo) == 3
    assert capsys.readouterr().err.startswith("error: --from v9.9.9: not a tag, branch or commit of this clone")
    assert uc.main(["--from", "HEAD", "--stack-file", str(repo / "canned" / "dev.json")], root=repo) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not named Pulumi.<stack>.yaml" in err


def test_a_missing_from_is_one_usage_line(capsys):
    assert uc.main([]) == 2
    assert capsys.readouterr().err == "error: the following arguments are required: --from\n"
