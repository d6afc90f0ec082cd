"""The offline plan command: its JSON contract, tree output, manifests and exit codes."""

import json
import subprocess
import sys

import pytest

from conftest import ALL_STACKS, ROOT, plan_mod


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m tools.offline_plan ARGS` in this process (a fresh interpreter per call costs ~2 s of imports);
    `test_plan_without_a_stack_runs_the_dev_stack` runs the real command once."""
    import contextlib
    import io

    from tools import offline_plan as plan

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = plan.main(list(args))
    return subprocess.CompletedProcess(["python", "-m", "tools.offline_plan", *args], code, out.getvalue(), err.getvalue())


def run_command(*args: str) -> subprocess.CompletedProcess:
    # The command users type (`python -m infra.plan`, the launcher of tools/offline_plan.py), for real.
    return subprocess.run([sys.executable, "-m", "infra.plan", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_plan_json_follows_the_documented_contract(stack):
    proc = run_cli("--stack", stack, "--assume-secrets", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"project", "stack", "resources", "outputs", "estimates"}
    assert doc["project"] == "nemo-rl-gke" and doc["stack"] == stack
    urns = {r["urn"] for r in doc["resources"]}
    for r in doc["resources"]:
        assert set(r) == {"urn", "type", "name", "parent", "custom", "provider", "inputs", "dependencies", "options"}, r["name"]
        for dep in r["dependencies"]:
            assert dep in urns, f"{r['name']} depends on unknown {dep}"


def test_plan_without_a_stack_runs_the_dev_stack():
    proc = run_command()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "nemo-rl-gke / dev"
    assert "Resources:" in proc.stdout and "GPU nodes:" in proc.stdout


def test_plan_of_an_unknown_stack_fails_with_a_one_line_error():
    proc = run_cli("--stack", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: stack file Pulumi.nope.yaml not found (stacks here: autopilot, b200, b200-ladder, dev, h200)"
    assert "Traceback" not in proc.stderr


def test_the_same_stack_plans_to_the_same_document_every_time():
    # Apply callbacks finish in a different order on every run; the plan must not.
    from tools.offline_plan import committed_plan

    first, *others = (json.dumps(committed_plan("h200").to_json()) for _ in range(3))
    assert all(o == first for o in others), "two runs of the h200 plan listed resources differently"


def test_the_plan_lists_every_parent_before_its_children_and_siblings_by_name():
    from conftest import stack_plan

    plan = stack_plan("b200")
    position = {r.urn: i for i, r in enumerate(plan.resources)}
    for r in plan.resources:
        if r.parent in position:
            assert position[r.parent] < position[r.urn], f"{r.name} is listed before its parent"
    siblings: dict[str, list[str]] = {}
    for r in plan.resources:
        siblings.setdefault(r.parent, []).append(r.name)
    for parent, names in siblings.items():
        assert names == sorted(names), f"children of {parent} are not in name order: {names}"


@pytest.mark.parametrize(("flag", "target", "reason"), [
    # Found before the plan runs: a regular file where the directory should go, or on its path.
    ("--out", "taken", "exists and is not a directory; allowed: a writable directory (created if missing)"),
    ("--graph", "taken/graphs", "{tmp_path}/taken is not a directory; allowed: a writable directory (created if missing)"),
    ("--graph", "/proc/nonexistent/dir", "No such file or directory"),
])
def test_plan_output_that_cannot_be_written_fails_with_a_one_line_error_naming_the_flag(flag, target, reason, tmp_path):
    (tmp_path / "taken").write_text("")
    path = tmp_path / target  # an absolute target stays as it is
    reason = reason.format(tmp_path=tmp_path)
    proc = run_cli(flag, str(path))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: {flag} {path}: {reason}\n")


def test_out_writes_one_manifest_per_kubernetes_object_and_the_helm_values(tmp_path):
    import yaml

    from conftest import stack_plan

    proc = run_cli("--stack", "h200", "--assume-secrets", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    plan = stack_plan("h200")
    objects = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:") and "helm.sh" not in r.type]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == len(objects) + 1, files
    assert proc.stderr.strip().splitlines()[-1] == f"wrote {len(files)} files to {tmp_path}"
    values = yaml.safe_load((tmp_path / "helm-values-nemo-rl.yaml").read_text())
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    assert values == release.inputs["values"], "the written values are not the release's"
    for name in files:
        doc = yaml.safe_load((tmp_path / name).read_text())
        if name.startswith("helm-values-"):
            continue
        # Named after the object (auto-named ones, like the watcher's ConfigMap, after the resource).
        assert name.startswith(f"{doc['kind'].lower()}-") and doc["apiVersion"], name


def test_a_stack_whose_job_needs_an_unset_secret_is_refused_with_the_offline_way_to_plan_it(capsys):
    assert plan_mod.main(["--stack", "h200", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: nemo-rl-gke:hfToken: not set, and job.recipe 'gemma3-27b-gsm8k'")
    assert err.rstrip().endswith("; or plan offline as if it were set: --assume-secrets")
    assert plan_mod.main(["--stack", "h200", "--assume-secrets", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["stack"] == "h200"
    assert err.splitlines() == [
        "note: nemo-rl-gke:hfToken: not set; planned as if it were (--assume-secrets), `pulumi up` refuses until "
        "`pulumi config set --secret hfToken ...`"
    ]
