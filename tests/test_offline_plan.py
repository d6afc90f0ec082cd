"""The offline plan command: its JSON contract, tree output, manifests and exit codes."""

import json
import subprocess
import sys

import pytest
from conftest import ALL_STACKS, ROOT, plan_mod, stack_plan


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m tools.offline_plan ARGS` in this process (a fresh interpreter per call costs ~2 s of imports);
    `test_plan_without_a_stack_runs_the_dev_stack` runs the real command once."""
    import contextlib
    import io

    from tools import offline_plan as plan

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = plan.main(list(args))
    return subprocess.CompletedProcess(
        ["python", "-m", "tools.offline_plan", *args], code, out.getvalue(), err.getvalue()
    )


def run_command(*args: str) -> subprocess.CompletedProcess:
    # The command users type (`python -m infra.plan`, the launcher of tools/offline_plan.py), for real.
    return subprocess.run(
        [sys.executable, "-m", "infra.plan", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_plan_json_follows_the_documented_contract(stack):
    proc = run_cli("--stack", stack, "--assume-secrets", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {
        "project",
        "stack",
        "resources",
        "outputs",
        "estimates",
        "goodput",
        "versionMatrix",
        "sizeLadder",
    }
    assert doc["versionMatrix"]["row"] and not doc["versionMatrix"]["outside"]
    assert doc["project"] == "nemo-rl-gke" and doc["stack"] == stack
    urns = {r["urn"] for r in doc["resources"]}
    for r in doc["resources"]:
        assert set(r) == {"urn", "type", "name", "parent", "custom", "provider", "inputs", "dependencies", "options"}, (
            r["name"]
        )
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
    assert (
        proc.stderr.strip()
        == "error: stack file Pulumi.nope.yaml not found (stacks here: autopilot, b200, b200-ladder, dev, h200)"
    )
    assert "Traceback" not in proc.stderr


@pytest.mark.fresh_plans
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


@pytest.mark.parametrize(
    ("flag", "target", "reason"),
    [
        # Found before the plan runs: a regular file where the directory should go, or on its path.
        ("--out", "taken", "exists and is not a directory; allowed: a writable directory (created if missing)"),
        (
            "--graph",
            "taken/graphs",
            "{tmp_path}/taken is not a directory; allowed: a writable directory (created if missing)",
        ),
        ("--graph", "/proc/nonexistent/dir", "No such file or directory"),
    ],
)
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


# ---------------------------------------------------------------- node pool replacement (--compare)


def test_compare_names_the_pool_an_edit_replaces_before_pulumi_up(tmp_path):
    stack_file = tmp_path / "Pulumi.h200.yaml"
    stack_file.write_text(
        (ROOT / "Pulumi.h200.yaml").read_text().replace("provisioning: spot", "provisioning: onDemand")
    )
    proc = run_cli(
        "--stack",
        "h200",
        "--assume-secrets",
        "--config-file",
        str(stack_file),
        "--compare",
        str(ROOT / "tests" / "golden" / "h200.json"),
    )
    assert proc.returncode == 0, proc.stderr
    tail = proc.stdout.rsplit("Node pools against", 1)[1]
    assert "node pool gke-gpu-pool: REPLACED, deleted first: every node of the pool is lost" in tail, tail
    assert "nodeConfig.spot: true -> unset" in tail and "node pool gke-system-pool: unchanged" in tail, tail


def test_compare_with_json_keeps_the_document_clean_and_says_it_on_stderr():
    proc = run_cli("--stack", "dev", "--json", "--compare", str(ROOT / "tests" / "golden" / "dev.json"))
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    assert "node pool gke-gpu-pool: unchanged" in proc.stderr


@pytest.mark.parametrize("content, reason", [(None, "not found"), ("[]", "no resources list"), ("{", "Expecting")])
def test_compare_with_something_that_is_not_a_plan_is_one_line_and_exit_2(tmp_path, content, reason):
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content)
    proc = run_cli("--stack", "dev", "--compare", str(path))
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and reason in proc.stderr and "--compare" in proc.stderr, (
        proc.stderr
    )


def test_the_text_plan_says_which_config_keys_replace_each_node_pool():
    text = plan_mod.render_tree(stack_plan("dev"))
    assert "Node pools are REPLACED, deleted first" in text
    gpu_line = next(line for line in text.splitlines() if line.startswith("  gke-gpu-pool: "))
    assert "gpuPool.provisioning" in gpu_line and "gpuPool.compactPlacement" in gpu_line, gpu_line


def test_the_text_plan_shows_the_json_goodput_and_bills_the_gpu_nodes_from_when_the_pending_workers_bring_them():
    plan = stack_plan("b200")
    text, doc = plan_mod.render_tree(plan), plan_mod.plan_document(plan)
    lines = text.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("Goodput (first run")))
    assert f"{doc['goodput']['fraction']:.1%} of paid GPU time in kept steps" in lines[head], lines[head]
    buckets = doc["goodput"]["buckets"]
    for bucket, line in zip(buckets, lines[head + 1 : head + 1 + len(buckets)], strict=True):
        assert line.split()[:3] == [bucket["name"], f"{bucket['minutes']:.1f}", "min"], line
        assert line.endswith(f"${bucket['usd']:,.2f}"), line
    rate = lines[head + 1 + len(buckets)]
    assert f"at {doc['goodput']['preemptionRate']['perNodeDay']:g} per spot node-day" in rate and "assumed" in rate
    first_run = next(line for line in lines if line.startswith("First run"))
    created = doc["estimates"]["deployTime"]["gpuNodes"]["createdAtMinute"]
    # Just in time (gpuPool.justInTime, the default): from the timer's start of the placeholders.
    assert f"GPU nodes billed from minute {created:.1f}, when the timer starts the placeholders" in first_run
    assert "pool's readiness" not in text


def test_a_stack_without_a_goodput_model_prints_no_goodput_block():
    plan = stack_plan("autopilot")
    assert plan_mod.plan_document(plan)["goodput"] is None
    text = plan_mod.render_tree(plan)
    assert "Goodput (first run" not in text and "\n\n\n" not in text


# ---------------------------------------------------------------- preview (the first `pulumi preview` of a stack)


@pytest.fixture(scope="module")
def previews():
    from infra.stack_file import read_stack_file, stack_path, with_required_secrets

    return {
        stack: plan_mod.run_program(
            stack, *with_required_secrets(stack, *read_stack_file(stack_path(stack, ROOT))), preview=True
        )
        for stack in ALL_STACKS
    }


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_a_preview_with_every_cloud_output_unknown_completes_and_plans_what_the_update_would(previews, stack):
    preview, update = previews[stack], stack_plan(stack)
    assert [r.urn for r in preview.resources] == [r.urn for r in update.resources]
    # The cloud's answers are unknown, as in a real first preview: what the program derives from them too.
    assert preview.outputs["clusterEndpoint"] == "[unknown]" and preview.outputs["lustreMountIp"] == "[unknown]"
    (job,) = [r for r in preview.resources if r.type.endswith("JobSubmission")]
    assert job.inputs["gke_endpoint"] == "[unknown]", job.name


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_a_preview_submits_nothing_and_touches_no_cluster(previews, stack, monkeypatch):
    """What the engine calls of a dynamic provider in a preview: `check` (and `diff` against the state);
    never `create`, which the plugin layer answers itself for a provider without preview support
    (pulumi/pulumi sdk/go/common/resource/plugin/provider_plugin.go Create, `if req.Preview`)."""
    import socket

    from infra.lustre_guard import LustreGuardProvider
    from tools.mocks import UNKNOWN, plain
    from workloads import hook, submit

    def refuse(*_a, **_k):
        raise AssertionError("a preview reached for the network")

    for target, attr in (
        (socket, "create_connection"),
        (submit, "connect"),
        (submit, "submit_attempt"),
        (submit, "stop"),
        (hook.JobSubmissionProvider, "create"),
        (LustreGuardProvider, "create"),
    ):
        monkeypatch.setattr(target, attr, refuse)
    update = {r.urn: r for r in stack_plan(stack).resources}
    dynamic = [r for r in previews[stack].resources if r.type.startswith("pulumi-python:dynamic")]
    assert len(dynamic) >= 2, [r.type for r in dynamic]
    for r in dynamic:
        provider = hook.JobSubmissionProvider() if r.type.endswith("JobSubmission") else LustreGuardProvider()
        news = {k: (UNKNOWN if v == "[unknown]" else v) for k, v in plain(r.raw_inputs, reveal_secrets=True).items()}
        checked = provider.check({}, news)
        assert not checked.failures, f"{r.name}: {checked.failures}"
        provider.diff("id", update[r.urn].inputs, news)  # a later preview of the live stack


# ---------------------------------------------------------------- run identity (--compare)


RECIPE_LINE = "    recipe: qwen2.5-1.5b-gsm8k\n"


@pytest.mark.parametrize(
    "edits, says",
    [
        # The gate is no part of the job spec: the same run and the same job.
        ({RECIPE_LINE: RECIPE_LINE + "    gate: off\n"}, "run dev-qwen2-5-1-5b-gsm8k-ed6341a2: same run, same job"),
        ({RECIPE_LINE: RECIPE_LINE + "    maxLostMinutes: 24\n"}, "run dev-qwen2-5-1-5b-gsm8k-ed6341a2: same run, new"),
        (
            {RECIPE_LINE: RECIPE_LINE + "    overrides: ['policy.max_total_sequence_length=1024']\n"},
            "run: NEW RUN dev-qwen2-5-1-5b-gsm8k-",
        ),
        (
            {RECIPE_LINE: "    recipe: gemma3-27b-gsm8k\n", "    nodeCount: 1\n": "    nodeCount: 2\n"},
            "run: NEW RUN dev-gemma3-27b-gsm8k-",
        ),
    ],
)
def test_compare_says_whether_an_edit_is_a_new_attempt_of_the_run_or_a_new_run(tmp_path, edits, says):
    before = run_cli("--stack", "dev", "--json")
    assert before.returncode == 0, before.stderr
    (tmp_path / "before.json").write_text(before.stdout)
    assert json.loads(before.stdout)["outputs"]["runId"] == "dev-qwen2-5-1-5b-gsm8k-ed6341a2"
    text = (ROOT / "Pulumi.dev.yaml").read_text()
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    after = run_cli(
        "--stack",
        "dev",
        "--assume-secrets",
        "--config-file",
        str(tmp_path / "Pulumi.dev.yaml"),
        "--compare",
        str(tmp_path / "before.json"),
    )
    assert after.returncode == 0, after.stderr
    assert after.stdout.splitlines()[-1].startswith(says), after.stdout.splitlines()[-1]


# ---------------------------------------------------------------- issue 36: files and streams a user hands the plan


def golden(stack: str = "dev") -> dict:
    return json.loads((ROOT / "tests" / "golden" / f"{stack}.json").read_text())


@pytest.mark.parametrize(
    "doc, reason",
    [
        ([1, 2, 3], "no resources list"),
        ({"resources": [{"type": "gcp:container/nodePool:NodePool"}]}, "resources[0] is not a resource with a name"),
        ({"resources": [{"name": "p", "type": "t", "inputs": "x"}]}, "resources[0] is not a resource"),
        ({"resources": [5]}, "resources[0] is not a resource"),
    ],
)
def test_compare_with_a_document_of_the_wrong_shape_is_one_line(tmp_path, doc, reason):
    path = tmp_path / "before.json"
    path.write_text(json.dumps(doc))
    proc = run_cli("--stack", "dev", "--compare", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith(f"error: --compare {path}: {reason}") and proc.stderr.count("\n") == 1, proc.stderr


def test_compare_with_deep_nesting_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"resources": ' + "[" * 100_000 + "]" * 100_000 + "}")
    proc = run_cli("--stack", "dev", "--compare", str(path))
    assert proc.returncode == 2 and "nested too deeply" in proc.stderr and proc.stderr.count("\n") == 1


def test_compare_with_another_stacks_plan_is_refused_rather_than_judged(tmp_path):
    path = tmp_path / "b200.json"
    path.write_text(json.dumps(golden("b200")))
    proc = run_cli("--stack", "dev", "--compare", str(path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: --compare {path}: a plan of 'nemo-rl-gke' / 'b200', not of nemo-rl-gke / dev; allowed: a plan "
        "document of `python -m infra.plan --json`\n"
    )


def test_compare_with_a_fifo_or_a_device_is_refused_without_reading_it(tmp_path):
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    for path, what in ((fifo, "is a named pipe (FIFO)"), ("/dev/zero", "is a character device")):
        proc = run_cli("--stack", "dev", "--compare", str(path))
        assert (proc.returncode, proc.stdout, proc.stderr) == (
            2,
            "",
            f"error: --compare {path}: {what}; allowed: a plan document of `python -m infra.plan --json`\n",
        )


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_out_as_a_symlink_loop_or_a_dangling_link_is_one_line(tmp_path, kind):
    link = tmp_path / "out"
    link.symlink_to(link if kind == "loop" else tmp_path / "nowhere")
    proc = run_cli("--out", str(link))
    assert (proc.returncode, proc.stdout) == (2, "") and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: --out {link}: ")


@pytest.mark.parametrize("kind", ["dangling link", "read-only file"])
def test_out_with_a_target_it_cannot_write_writes_nothing(tmp_path, kind):
    import os

    out = tmp_path / "out"
    out.mkdir()
    target = out / "namespace-nemo-rl.yaml"
    if kind == "dangling link":
        target.symlink_to(tmp_path / "nowhere")
    else:
        target.write_text("old")
        target.chmod(0o444)
    if kind == "read-only file" and os.access(target, os.W_OK):
        pytest.skip("root writes read-only files")
    proc = run_cli("--out", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "namespace-nemo-rl.yaml" in proc.stderr and "nothing was written" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["namespace-nemo-rl.yaml"]


def test_out_refuses_a_dangling_link_in_it_even_as_root(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "namespace-nemo-rl.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    proc = run_cli("--out", str(out))
    assert proc.returncode == 2 and "is a symbolic link; nothing was written" in proc.stderr, proc.stderr
    assert not (tmp_path / "elsewhere.yaml").exists() and len(list(out.iterdir())) == 1


def test_graph_without_a_directory_writes_into_plan_out_never_the_repository_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    proc = run_cli("--graph")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "plan-out").iterdir()) == ["graph.mmd"]
    proc = run_cli("--graph", str(ROOT))
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: --graph {ROOT}: is the repository root; allowed: a writable directory (created if missing)\n",
    )


class _Stdout:
    """A standard output that fails as a closed pipe or a full disk does."""

    def __init__(self, error: OSError):
        self.error = error

    def write(self, text: str) -> int:
        raise self.error

    def flush(self) -> None:
        raise self.error

    def fileno(self) -> int:
        raise ValueError("not a real file")


def test_a_reader_that_goes_away_ends_the_plan_quietly_and_a_full_disk_is_one_line_exit_3(monkeypatch, capsys):
    from tools import offline_plan as plan

    monkeypatch.setattr(sys, "stdout", _Stdout(BrokenPipeError(32, "Broken pipe")))
    assert plan.main(["--json"]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys, "stdout", _Stdout(OSError(28, "No space left on device")))
    assert plan.main(["--json"]) == 3
    assert capsys.readouterr().err == "error: cannot write to standard output (No space left on device)\n"


def test_the_plan_under_a_closed_pipe_prints_no_traceback():
    proc = subprocess.run(
        f"{sys.executable} -m infra.plan --json | head -1", shell=True, cwd=ROOT, capture_output=True, text=True
    )
    assert proc.stdout == "{\n" and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_an_empty_section_is_said_on_stderr_not_defaulted_silently(tmp_path):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool:\n")
    proc = run_cli("--config-file", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        "note: nemo-rl-gke:gpuPool: empty in the stack file; its defaults apply, as under `pulumi up`\n"
    )


# ---------------------------------------------------------------- issue 46: the goodput model where it holds


def test_goodput_is_not_modelled_when_recovery_is_off_since_nothing_resubmits_or_releases(tmp_path):
    text = (ROOT / "Pulumi.dev.yaml").read_text() + "  nemo-rl-gke:recovery:\n    enabled: false\n"
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    proc = run_cli("--stack", "dev", "--assume-secrets", "--json", "--config-file", str(tmp_path / "Pulumi.dev.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["goodput"] is None
