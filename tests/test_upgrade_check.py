"""tools/upgrade_check.py: each break an upgrade can bring, on small synthetic plan documents, and one run of
the command on a temp git repository whose `infra/plan.py` prints canned plans (no real stack is planned)."""

from __future__ import annotations

import copy
import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from tools import upgrade_check as uc

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


def test_a_run_whose_run_id_changes_restarts_from_step_0_and_fails():
    before = doc(job(), outputs={"runId": "dev-qwen-11111111"})
    after = doc(job(spec_hash="bbb"), outputs={"runId": "dev-qwen-22222222"})
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule, finding.resource) == ("fail", "run-restart", "run dev-qwen-11111111")
    assert "run id changes to dev-qwen-22222222" in finding.message


def test_a_legacy_run_whose_checkpoints_move_without_continuity_fails_naming_both_directories():
    before = doc(job(), outputs={"jobId": "dev-qwen2-5-1-5b-gsm8k-ad8faa34"})
    after = doc(job(NEW_DIR, "bbb"), outputs={"jobId": "dev-x", "runId": "dev-qwen-22222222"})
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule, finding.resource) == (
        "fail",
        "run-restart",
        "run dev-qwen2-5-1-5b-gsm8k-ad8faa34",
    )
    assert f"move from {OLD_DIR} to {NEW_DIR}" in finding.message


def test_a_legacy_run_continued_from_its_old_directory_by_the_watchers_run_file_only_warns_with_its_cost():
    run_file = json.dumps(
        {"checkpoint_dir": NEW_DIR.replace("/lustre", ""), "legacy_dirs": ["/checkpoints/dev/qwen2.5-1.5b-gsm8k"]}
    )
    config_map = res("kubernetes:core/v1:ConfigMap", "preemption-watcher-code", {"data": {"run.json": run_file}})
    before = doc(job(), outputs={"jobId": "old"})
    after = doc(job(NEW_DIR, "bbb"), config_map, outputs={"runId": "dev-qwen-22222222"}, preemption=LOSS)
    [finding] = uc.compare_plans(before, after, "dev")
    assert (finding.level, finding.rule) == ("warn", "job-resubmitted")
    assert (finding.minutes, finding.usd) == (19.1, round(19.1 * 69.13 / 9.0, 2))


def test_the_old_directory_named_only_in_shipped_source_text_is_no_continuity():
    shipped = res("kubernetes:core/v1:ConfigMap", "code", {"data": {"job_types.py": f"# was {OLD_DIR}"}})
    assert not uc.names_dir(doc(job(NEW_DIR), shipped), OLD_DIR)
    # The new directory starts with the old one: a prefix is not a mention.
    assert not uc.names_dir(doc(job(NEW_DIR)), OLD_DIR)


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


def test_a_pool_resized_and_the_ray_release_unchanged_say_nothing():
    assert uc.compare_plans(doc(GPU_POOL, RAY), doc(with_inputs(GPU_POOL, nodeCount=4), RAY), "dev") == []


FAKE_PLAN = """
import json, pathlib, sys
args = sys.argv[1:]
stack = args[args.index("--stack") + 1]
canned = pathlib.Path("canned") / f"{stack}.json"
if not canned.exists():
    print(f"error: {stack}: refused by this release", file=sys.stderr)
    sys.exit(2)
print(canned.read_text())
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A repository with two stacks at its first commit; the working tree replaces dev's Lustre instance and no
    longer plans `old`."""
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "__init__.py").write_text("")
    (tmp_path / "infra" / "plan.py").write_text(textwrap.dedent(FAKE_PLAN))
    (tmp_path / "canned").mkdir()
    for stack in ("dev", "old"):
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
        (tmp_path / "canned" / f"{stack}.json").write_text(json.dumps(doc(LUSTRE)))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "1.0.0")
    (tmp_path / "canned" / "dev.json").write_text(json.dumps(doc(with_inputs(LUSTRE, instanceId="dev-lustre-2"))))
    (tmp_path / "canned" / "old.json").unlink()
    return tmp_path


def test_the_command_plans_both_trees_and_fails_naming_each_break(repo, capsys):
    assert uc.main(["--from", "HEAD", "--json"], root=repo) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(f["stack"], f["rule"], f["resource"]) for f in report["findings"]] == [
        ("dev", "data-replaced", "gcp:lustre/instance:Instance lustre-instance"),
        ("old", "no-longer-plans", "stack file"),
    ]
    assert "refused by this release" in report["findings"][1]["message"]
    assert git(repo, "worktree", "list").count("\n") == 0, "the REF worktree is removed after"


def test_an_unknown_ref_is_an_environment_error_and_a_misnamed_stack_file_a_usage_error(repo, capsys):
    assert uc.main(["--from", "v9.9.9"], root=repo) == 3
    assert capsys.readouterr().err.startswith("error: --from v9.9.9: not a commit of this repository")
    assert uc.main(["--from", "HEAD", "--stack-file", str(repo / "canned" / "dev.json")], root=repo) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not named Pulumi.<stack>.yaml" in err


def test_a_missing_from_is_one_usage_line(capsys):
    assert uc.main([]) == 2
    assert capsys.readouterr().err == "error: the following arguments are required: --from\n"
