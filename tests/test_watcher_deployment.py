"""What the PreemptionWatcher ships (infra/watcher_deployment.py): its entry module and exactly the
`workloads` modules that imports, computed from the sources, and the gang wait's RBAC in the stacks' plans.
Its other Kubernetes objects under mocks are tests/test_preemption.py's; the shipped files run alone in
tests/test_watcher.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from conftest import ROOT, stack_plan

from infra.watcher_deployment import (
    CODE_CONFIG_MAP,
    RUN_KEY,
    SPEC_KEY,
    WATCHER_ENTRY,
    WATCHER_MODULES,
    shipped_modules,
    watcher_files,
)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_watcher_ships_its_entry_module_and_what_it_imports_lazily_too_and_nothing_else(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "workloads/__init__.py": "",
            "workloads/watcher.py": "import json\nfrom workloads import a\n\ndef run():\n    from workloads.b "
            "import f\n",
            "workloads/a.py": "import ray.job_submission\nfrom workloads import c\n",
            "workloads/b.py": "f = 1\n",
            "workloads/c.py": "",
            "workloads/cli_only.py": "from workloads import a\n",
            "jobctl/__init__.py": "",
            "jobctl/cli.py": "from workloads import watcher\n",
        },
    )
    assert shipped_modules(WATCHER_ENTRY, root) == ("__init__.py", "a.py", "b.py", "c.py", "watcher.py")


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (
            {
                "infra/__init__.py": "",
                "infra/config.py": "",
                "workloads/watcher.py": "def f():\n    from infra import config\n",
            },
            "workloads.watcher imports infra, which is not in workloads/",
        ),
        (
            {
                "workloads/sub/__init__.py": "",
                "workloads/sub/x.py": "",
                "workloads/watcher.py": "import workloads.sub.x\n",
            },
            "workloads.watcher imports workloads.sub, in a subpackage of workloads/",
        ),
    ],
)
def test_a_watcher_that_would_need_what_the_configmap_cannot_ship_is_refused(tmp_path, files, says):
    root = write_tree(tmp_path, {"workloads/__init__.py": "", **files})
    with pytest.raises(ValueError, match=says):
        shipped_modules(WATCHER_ENTRY, root)


def test_the_day_2_cli_and_what_only_it_uses_are_not_shipped_so_editing_them_does_not_roll_the_pod():
    assert "watcher.py" in WATCHER_MODULES and "preemption.py" in WATCHER_MODULES
    # The watcher owns the run: it gates each attempt, reads the checkpoints and keeps the ledger.
    assert {"run_owner.py", "acceptance_gate.py", "checkpoints.py", "ledger.py"} <= set(WATCHER_MODULES)
    # The CLI lived in workloads/__main__.py and was shipped; the dashboard proxy and the hook are the CLI's and
    # the deploy's.
    assert not {"__main__.py", "dashboard.py", "hook.py"} & set(WATCHER_MODULES)
    assert set(watcher_files()) == set(WATCHER_MODULES)


def test_the_watcher_imports_the_jobs_data_types_but_never_the_builder_the_recipes_or_the_override_parser():
    # They run only at plan time (workloads/job_types.py): a recipe edit must not roll the watcher's pod.
    assert "job_types.py" in WATCHER_MODULES
    assert not {"job_spec.py", "recipes.py", "overrides.py"} & set(WATCHER_MODULES), WATCHER_MODULES


def test_what_workloads_watcher_imports_in_a_fresh_interpreter_is_among_what_is_shipped():
    import subprocess
    import sys

    probe = "import sys, workloads.watcher; print(' '.join(m for m in sys.modules if m.startswith('workloads')))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    loaded = {f"{m.split('.', 1)[1]}.py" if "." in m else "__init__.py" for m in done.stdout.splitlines()[-1].split()}
    assert "watcher.py" in loaded and loaded <= set(WATCHER_MODULES), loaded - set(WATCHER_MODULES)


def test_the_plan_shows_each_shipped_module_by_name_and_content_hash_and_the_configmap_carries_its_text():
    plan = stack_plan("b200")
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == CODE_CONFIG_MAP]
    shown = next(r for r in plan.to_json()["resources"] if r["urn"] == cm.urn)["inputs"]["data"]
    for name in WATCHER_MODULES:
        text = (ROOT / "workloads" / name).read_text()
        assert cm.inputs["data"][name] == text, name  # the pod runs the text
        assert shown[name] == "sha256:" + hashlib.sha256(text.encode()).hexdigest(), name
    assert shown[SPEC_KEY] == cm.inputs["data"][SPEC_KEY] and shown[RUN_KEY] == cm.inputs["data"][RUN_KEY]
    # What the plan carries of the ConfigMap shrank from the sources (245,914 characters on b200 before) to names
    # and hashes; the real data is the shipped modules' text.
    assert sum(map(len, shown.values())) < 0.05 * sum(map(len, cm.inputs["data"].values()))


# ----------------------------------------------------------------------------- the gang wait's grants

RBAC = "kubernetes:rbac.authorization.k8s.io/v1"


def test_with_a_gang_wait_the_watchers_account_may_read_pods_and_nodes_and_patch_its_raycluster_only():
    from conftest import stack_plan
    from k8s_support import k8s_doc, schema_problems

    from infra.naming import watcher_node_reader

    plan = stack_plan("b200-ladder")
    (component,) = plan.by_type("nemo-rl-gke:infra:PreemptionWatcher")
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    role, binding = plan.one(f"{RBAC}:Role"), plan.one(f"{RBAC}:RoleBinding")
    node_role, node_binding = plan.one(f"{RBAC}:ClusterRole"), plan.one(f"{RBAC}:ClusterRoleBinding")
    sa = plan.one("kubernetes:core/v1:ServiceAccount", "preemption-watcher-sa")
    account = {"kind": "ServiceAccount", "name": sa.inputs["metadata"]["name"], "namespace": "nemo-rl"}
    for reg in (role, binding, node_role, node_binding):
        assert reg.parent == component.urn and reg.options.get("deletedWith") == cluster.urn, reg.name
        assert schema_problems(k8s_doc(reg), reg.name) == []
    assert role.inputs["metadata"]["namespace"] == binding.inputs["metadata"]["namespace"] == "nemo-rl"
    assert k8s_doc(role)["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        # Only the stack's own RayCluster: what the gang wait reads and scales to 0 (`KubeGangView.release`).
        {
            "apiGroups": ["ray.io"],
            "resources": ["rayclusters"],
            "resourceNames": ["nemo-rl"],
            "verbs": ["get", "patch"],
        },
    ]
    assert k8s_doc(node_role)["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert "namespace" not in node_role.inputs["metadata"], "nodes are cluster-scoped"
    assert node_role.inputs["metadata"]["name"] == watcher_node_reader("nemo-rl")
    assert k8s_doc(binding)["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role.inputs["metadata"]["name"],
    }
    assert k8s_doc(node_binding)["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": node_role.inputs["metadata"]["name"],
    }
    assert k8s_doc(binding)["subjects"] == k8s_doc(node_binding)["subjects"] == [account]
    # The pod gets the token now, and starts only after its grants.
    watcher = plan.one("kubernetes:apps/v1:Deployment", "preemption-watcher-deployment")
    assert watcher.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert {role.urn, binding.urn, node_role.urn, node_binding.urn} <= set(watcher.dependencies)


@pytest.mark.parametrize("stack", ["dev", "b200", "h200", "autopilot"])
def test_without_a_gang_wait_the_watcher_has_no_role_and_no_api_token(stack):
    from conftest import stack_plan

    plan = stack_plan(stack)
    assert not [r.name for r in plan.resources if r.type.startswith(RBAC)], stack
    watcher = plan.one("kubernetes:apps/v1:Deployment", "preemption-watcher-deployment")
    assert watcher.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
