"""What the PreemptionWatcher ships (infra/watcher_deployment.py): its entry module and exactly the
`workloads` modules that imports, computed from the sources, and the gang wait's RBAC in the stacks' plans.
Its Kubernetes objects under mocks and the recovery section's checks are here too; the shipped files run
alone in tests/test_watcher.py."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, stack_plan
from conftest import spec_of as stack_job_spec
from k8s_support import k8s_doc, record, schema_problems

from infra.gate_plan import gate_plan_for_stack
from infra.run_plan import run_plan_for_stack
from infra.watcher_deployment import (
    ARCHIVE_KEY,
    CODE_CONFIG_MAP,
    CODE_DIR,
    CODE_SIZE_LIMIT,
    COMPONENT_TYPE,
    HEARTBEAT,
    RUN_KEY,
    SPEC_KEY,
    WATCHER_ENTRY,
    WATCHER_MODULES,
    archive,
    build_preemption_watcher,
    config_hash,
    shipped_modules,
    watcher_files,
)
from tools.mocks import SIG_KEY
from workloads.job_spec import SECRET_ENV_NAMES


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


def test_a_subpackage_the_watcher_imports_is_shipped_with_its_init_and_only_the_modules_it_imports(tmp_path):
    root = write_tree(
        tmp_path,
        {
            "workloads/__init__.py": "",
            "workloads/sub/__init__.py": "from workloads.sub import x\n",
            "workloads/sub/x.py": "",
            "workloads/sub/unused.py": "",
            "workloads/watcher.py": "import workloads.sub\n",
        },
    )
    shipped = shipped_modules(WATCHER_ENTRY, root)
    assert shipped == ("__init__.py", "sub/__init__.py", "sub/x.py", "watcher.py")


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
    ],
)
def test_a_watcher_that_would_need_what_the_configmap_cannot_ship_is_refused(tmp_path, files, says):
    root = write_tree(tmp_path, {"workloads/__init__.py": "", **files})
    with pytest.raises(ValueError, match=says):
        shipped_modules(WATCHER_ENTRY, root)


def test_the_day_2_cli_and_what_only_it_uses_are_not_shipped_so_editing_them_does_not_roll_the_pod():
    assert "watcher.py" in WATCHER_MODULES and "recovery/owner_loop.py" in WATCHER_MODULES
    assert {"recovery/__init__.py", "recovery/classify.py", "recovery/policy.py", "recovery/state_file.py"} <= set(
        WATCHER_MODULES
    )
    # The watcher owns the run: it gates each attempt, reads the checkpoints and keeps the ledger.
    assert {"run_owner.py", "gate/gate_job.py", "gate/verdict.py", "checkpoints.py", "ledger.py"} <= set(
        WATCHER_MODULES
    )
    # The CLI lived in workloads/__main__.py and was shipped; the dashboard proxy and the hook are the CLI's and
    # the deploy's.
    assert not {"__main__.py", "dashboard.py", "hook.py"} & set(WATCHER_MODULES)
    # It starts the acceptance gate as a Ray job run from the files it ships (`python -m workloads.gate`): the
    # entry module it never imports itself is shipped too.
    assert "gate/__main__.py" in WATCHER_MODULES and "gate/driver.py" in WATCHER_MODULES
    assert set(watcher_files()) == {f"workloads/{m}" for m in WATCHER_MODULES}


def test_the_watcher_imports_the_jobs_data_types_but_never_the_builder_the_recipes_or_the_override_parser():
    # They run only at plan time (workloads/job_types.py): a recipe edit must not roll the watcher's pod.
    assert "job_types.py" in WATCHER_MODULES
    assert not {"job_spec.py", "recipes.py", "overrides.py"} & set(WATCHER_MODULES), WATCHER_MODULES


def test_what_workloads_watcher_imports_in_a_fresh_interpreter_is_among_what_is_shipped():
    import subprocess
    import sys

    probe = (
        "import sys, workloads.watcher; "
        "print(' '.join(m.__file__ for n, m in sys.modules.items() if n.startswith('workloads')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    workloads = ROOT / "workloads"
    loaded = {Path(f).relative_to(workloads).as_posix() for f in done.stdout.splitlines()[-1].split()}
    assert "watcher.py" in loaded and loaded <= set(WATCHER_MODULES), loaded - set(WATCHER_MODULES)


def unzipped(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def code_config_map(stack: str):
    plan = stack_plan(stack)
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == CODE_CONFIG_MAP]
    return plan, cm


def test_the_plan_shows_each_shipped_module_by_name_and_content_hash_and_the_configmap_carries_their_zip():
    plan, cm = code_config_map("b200")
    shown = next(r for r in plan.to_json()["resources"] if r["urn"] == cm.urn)["inputs"]
    entries = unzipped(base64.b64decode(cm.inputs["binaryData"][ARCHIVE_KEY]))
    assert list(entries) == [f"workloads/{m}" for m in WATCHER_MODULES]
    for name in WATCHER_MODULES:
        text = (ROOT / "workloads" / name).read_bytes()
        assert entries[f"workloads/{name}"] == text, name  # the pod runs the text
        assert shown["binaryData"][ARCHIVE_KEY][f"workloads/{name}"] == "sha256:" + hashlib.sha256(text).hexdigest()
    assert shown["data"] == cm.inputs["data"] and set(cm.inputs["data"]) == {SPEC_KEY, RUN_KEY}


def test_the_b200_code_configmap_is_at_most_60_percent_of_the_1_mib_object_limit_s_quarter():
    # 256 KB: where issue 31 set the bound (the modules shipped as text, one key each, were 254 KB); what the
    # API server stores is the data's text and the binaryData's base64.
    _, cm = code_config_map("b200")
    size = sum(map(len, cm.inputs["data"].values())) + sum(map(len, cm.inputs["binaryData"].values()))
    assert size <= 153_600, f"{CODE_CONFIG_MAP}: {size} bytes"


def test_the_archive_is_the_same_bytes_for_the_same_files_whatever_their_order_or_age():
    files = {"workloads/b.py": b"b = 1\n" * 50, "workloads/a.py": b"a = 1\n"}
    blob = archive(files)
    assert blob == archive(dict(reversed(files.items())))
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == ["workloads/a.py", "workloads/b.py"]
    assert {(i.date_time, i.external_attr >> 16, i.compress_type) for i in infos} == {
        ((1980, 1, 1, 0, 0, 0), 0o100644, zipfile.ZIP_DEFLATED)
    }
    assert archive({**files, "workloads/a.py": b"a = 2\n"}) != blob


def test_the_pods_config_hash_follows_the_shipped_text_not_the_zip_bytes():
    plan, cm = code_config_map("dev")
    files = unzipped(base64.b64decode(cm.inputs["binaryData"][ARCHIVE_KEY]))
    pod = plan.one("kubernetes:apps/v1:Deployment", "preemption-watcher-deployment").inputs["spec"]["template"]
    assert pod["metadata"]["annotations"]["nemo-rl-gke/config-hash"] == config_hash(cm.inputs["data"], files)
    edited = {**files, "workloads/watcher.py": files["workloads/watcher.py"] + b"# edit\n"}
    assert config_hash(cm.inputs["data"], edited) != config_hash(cm.inputs["data"], files)
    assert config_hash(cm.inputs["data"], dict(reversed(files.items()))) == config_hash(cm.inputs["data"], files)


def test_the_code_emptydir_holds_the_unpacked_modules_twice_over_with_a_block_per_file():
    limit = int(CODE_SIZE_LIMIT.removesuffix("Mi")) * 2**20
    unpacked = sum(len(text) + 4096 for text in watcher_files().values())
    assert 2 * unpacked <= limit, f"{CODE_SIZE_LIMIT} holds {unpacked} bytes less than twice"


# ----------------------------------------------------------------------------- the gang wait's grants

RBAC = "kubernetes:rbac.authorization.k8s.io/v1"


def test_with_a_gang_wait_the_watchers_account_may_list_pods_get_nodes_and_patch_its_raycluster_only():
    from conftest import stack_plan
    from k8s_support import k8s_doc, schema_problems

    from infra.naming import watcher_node_reader

    plan = stack_plan("b200-ladder")
    (component,) = plan.by_type("nemo-rl-gke:infra:PreemptionWatcher")
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    role, binding = (
        plan.one(f"{RBAC}:Role", "watcher-gang-role"),
        plan.one(f"{RBAC}:RoleBinding", "watcher-gang-role-binding"),
    )
    node_role, node_binding = plan.one(f"{RBAC}:ClusterRole"), plan.one(f"{RBAC}:ClusterRoleBinding")
    sa = plan.one("kubernetes:core/v1:ServiceAccount", "preemption-watcher-sa")
    account = {"kind": "ServiceAccount", "name": sa.inputs["metadata"]["name"], "namespace": "nemo-rl"}
    for reg in (role, binding, node_role, node_binding):
        assert reg.parent == component.urn and reg.options.get("deletedWith") == cluster.urn, reg.name
        assert schema_problems(k8s_doc(reg), reg.name) == []
    assert role.inputs["metadata"]["namespace"] == binding.inputs["metadata"]["namespace"] == "nemo-rl"
    assert k8s_doc(role)["rules"] == [
        # `KubeGangView.worker_pods` lists the group's pods by label selector and never gets one by name.
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
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
def test_without_a_gang_wait_the_watcher_still_lists_pods_and_gets_nodes_for_goodput_and_releases_its_raycluster(
    stack,
):
    """The release at the run's end patches the RayCluster; each attempt's goodput marks read the worker pods
    and their nodes (`workloads.gang_wait.pod_marks`): the same grants as with a gang wait."""
    from conftest import stack_plan
    from k8s_support import k8s_doc

    plan = stack_plan(stack)
    watcher_rbac = [r for r in plan.resources if r.type.startswith(RBAC) and r.name.startswith("preemption-watcher")]
    assert sorted(r.type.rsplit(":", 1)[1] for r in watcher_rbac) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ], stack
    assert k8s_doc(plan.one(f"{RBAC}:Role", "watcher-gang-role"))["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {
            "apiGroups": ["ray.io"],
            "resources": ["rayclusters"],
            "resourceNames": ["nemo-rl"],
            "verbs": ["get", "patch"],
        },
    ], stack
    assert k8s_doc(plan.one(f"{RBAC}:ClusterRole"))["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    ], stack
    watcher = plan.one("kubernetes:apps/v1:Deployment", "preemption-watcher-deployment")
    assert watcher.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert plan.one(f"{RBAC}:ClusterRoleBinding").urn in watcher.dependencies


def test_a_watcher_that_keeps_the_workers_after_the_run_has_no_role_and_no_api_token():
    _, rec = watcher_of("dev", release_workers_after_run=False)
    assert not [r.name for r in rec.resources if r.type.startswith(RBAC)]
    pod = k8s_doc(rec.one("kubernetes:apps/v1:Deployment"))["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False


# ----------------------------------------------------------------------------- the component under mocks


def watcher_of(stack: str = "dev", **recovery):
    from jobctl.stack import load_stack

    cfg = load_stack(stack).config
    if recovery:
        cfg = cfg.model_copy(update={"recovery": cfg.recovery.model_copy(update=recovery)})
    ray = SimpleNamespace(
        namespace=cfg.ray.namespace, cluster_name="nemo-rl", head_service="nemo-rl-head-svc", worker_group="gpu"
    )
    pool = SimpleNamespace(node_count=cfg.gpu_pool.node_count, gpus_per_node=8)

    def build():
        return build_preemption_watcher(
            stack_job_spec(stack, cfg, wandb_key_set=False),
            cfg,
            cfg.recipe.image,
            ray=ray,
            system_pool_name=f"{stack}-system",
            run=run_plan_for_stack(stack, cfg, pool, gate_plan_for_stack(cfg, pool), ray),
            lustre_claim="lustre",
        )

    return cfg, record(build)


def test_the_watcher_objects_are_valid_kubernetes_objects_holding_no_secret():
    cfg, rec = watcher_of()
    (component,) = rec.by_type(COMPONENT_TYPE)
    cm, dep = rec.one("kubernetes:core/v1:ConfigMap"), rec.one("kubernetes:apps/v1:Deployment")
    sa = rec.one("kubernetes:core/v1:ServiceAccount")
    for reg in (cm, dep, sa):
        assert not schema_problems(k8s_doc(reg), reg.name)
        assert reg.parent == component.urn
        assert SIG_KEY not in json.dumps(reg.raw_inputs), f"{reg.name} carries a secret"
    # No secret reaches the pod: no Secret volume or env reference, and a spec without secret variables.
    deployment_text = json.dumps(k8s_doc(dep))
    for word in ("secretRef", "secretKeyRef", '"secret"', "envFrom", *SECRET_ENV_NAMES):
        assert word not in deployment_text, word
    spec_env = json.loads(k8s_doc(cm)["data"][SPEC_KEY])["runtime_env"].get("env_vars", {})
    assert not SECRET_ENV_NAMES & set(spec_env)

    spec = stack_job_spec("dev", cfg, wandb_key_set=False)
    data = k8s_doc(cm)["data"]
    assert json.loads(data[SPEC_KEY]) == spec.to_dict()  # the same job the deploy submits
    assert set(data) == {SPEC_KEY, RUN_KEY} and set(k8s_doc(cm)["binaryData"]) == {ARCHIVE_KEY}
    # The run's plain plan-time values: the checkpoints as the pod sees them, the pool and its price.
    run = json.loads(data[RUN_KEY])
    assert (
        run["checkpoint_dir"] == "/checkpoints/dev/qwen2.5-1.5b-gsm8k/Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    )
    assert spec.entrypoint.count("checkpointing.checkpoint_dir=/lustre" + run["checkpoint_dir"]) == 1  # the job's own
    assert run["node_count"] == 1
    assert run["gate_policy"] == cfg.gate_policy == "warn" and run["gate_plan"]["node_count"] == 1
    assert run["node_hour_usd"] > 0 and run["budget_usd"] is None and run["save_period"] == 1
    assert c_cmd(dep)[c_cmd(dep).index("--run-file") + 1] == f"/config/{RUN_KEY}"
    shipped = unzipped(base64.b64decode(k8s_doc(cm)["binaryData"][ARCHIVE_KEY]))
    assert shipped["workloads/recovery/owner_loop.py"] == (ROOT / "workloads/recovery/owner_loop.py").read_bytes()

    pod = k8s_doc(dep)["spec"]["template"]["spec"]
    assert k8s_doc(dep)["spec"]["replicas"] == 1
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "dev-system"}
    # Its own KSA, not the workload's (which Workload Identity lets write the bucket).
    assert pod["serviceAccountName"] == k8s_doc(sa)["metadata"]["name"] != cfg.ray.service_account, dep.name
    # The pod's token (for the release of the workers at the run's end) and not the KSA's default.
    assert pod["automountServiceAccountToken"] is True and k8s_doc(sa)["automountServiceAccountToken"] is False, sa.name
    assert k8s_doc(sa)["metadata"]["namespace"] == cfg.ray.namespace, sa.name
    assert sa.urn in dep.dependencies, f"{dep.name} does not wait for {sa.name}"
    (c,) = pod["containers"]
    assert c["image"] == cfg.recipe.image.ref
    assert c["command"][:3] == ["python", "-m", "workloads.watcher"]
    assert c["command"][c["command"].index("--address") + 1] == "http://nemo-rl-head-svc.nemo-rl.svc:8265"
    assert c["command"][c["command"].index("--spec-file") + 1] == f"/config/{SPEC_KEY}"
    # Only what a person would type: the dashboard and the files; the policy is run.json's.
    assert c["command"][3:] == [
        "--address",
        "http://nemo-rl-head-svc.nemo-rl.svc:8265",
        "--spec-file",
        f"/config/{SPEC_KEY}",
        "--run-file",
        f"/config/{RUN_KEY}",
        "--heartbeat-file",
        HEARTBEAT,
        "--state-file",
        "/state/dev.json",
    ]
    assert run["recovery"]["max_restarts"] == cfg.recovery.max_restarts
    assert (
        c["securityContext"]["allowPrivilegeEscalation"] is False
        and c["securityContext"]["readOnlyRootFilesystem"] is True
    )
    assert c["resources"]["requests"] == {"cpu": "50m", "memory": "256Mi"}
    assert HEARTBEAT in json.dumps(c["livenessProbe"])
    # It resubmits only once the pool's GPUs are alive in Ray, and (job.submit) brings back a missing job.
    assert run["recovery"]["pool_gpus"] == cfg.gpu_pool.node_count * 8
    assert run["recovery"]["resubmit_missing"] is cfg.job.submit
    # What it saw lives on Lustre (it outlives a head restart), and only its own directory is mounted.
    assert c["command"][c["command"].index("--state-file") + 1] == "/state/dev.json"
    (state,) = [v for v in pod["volumes"] if v["name"] == "state"]
    assert state == {"name": "state", "persistentVolumeClaim": {"claimName": "lustre"}}
    # Of Lustre it sees its own directory and the checkpoints (to read steps and remove dead partial saves).
    mounts = [m for m in c["volumeMounts"] if m["name"] == "state"]
    assert mounts == [
        {"name": "state", "mountPath": "/state", "subPath": ".nemo-rl-gke/watcher"},
        {"name": "state", "mountPath": "/checkpoints", "subPath": "checkpoints"},
    ]
    # The init container unpacks the ConfigMap's zip into the code emptyDir, which the watcher imports from
    # (read-only) and whose `workloads` directory it hands Ray as the gate's py_modules.
    (config,) = [v for v in pod["volumes"] if v["name"] == "config"]
    assert config == {"name": "config", "configMap": {"name": cm.inputs["metadata"].get("name", cm.name)}}
    (code,) = [v for v in pod["volumes"] if v["name"] == "code"]
    assert code == {"name": "code", "emptyDir": {"sizeLimit": CODE_SIZE_LIMIT}}
    (unpack,) = pod["initContainers"]
    assert (unpack["image"], unpack["securityContext"]) == (c["image"], c["securityContext"])
    assert unpack["command"][-2:] == [f"/config/{ARCHIVE_KEY}", CODE_DIR]
    assert {"name": "code", "mountPath": CODE_DIR} in unpack["volumeMounts"]
    assert {"name": "code", "mountPath": CODE_DIR, "readOnly": True} in c["volumeMounts"]
    assert {"name": "PYTHONPATH", "value": CODE_DIR} in c["env"]


def c_cmd(dep) -> list[str]:
    return k8s_doc(dep)["spec"]["template"]["spec"]["containers"][0]["command"]


def test_recovery_can_be_switched_off_and_changes_reach_the_run_file_and_the_liveness_probe():
    _, rec = watcher_of(enabled=False)
    assert rec.result is None and not rec.resources
    _, rec = watcher_of(max_restarts=3, check_interval_seconds=200)
    run = json.loads(k8s_doc(rec.one("kubernetes:core/v1:ConfigMap"))["data"][RUN_KEY])
    assert (run["recovery"]["max_restarts"], run["recovery"]["check_interval_seconds"]) == (3, 200.0)
    (c,) = k8s_doc(rec.one("kubernetes:apps/v1:Deployment"))["spec"]["template"]["spec"]["containers"]
    assert c["livenessProbe"]["initialDelaySeconds"] == 600  # three looks of 200 s, above the 300 s floor


def test_the_recovery_config_is_validated():
    from infra.config import ConfigError, parse

    base = {"project": "my-gcp-project"}
    cfg = parse(dict(base), "dev").recovery
    assert (cfg.enabled, cfg.check_interval_seconds, cfg.max_restarts) == (True, 60, 10)
    with pytest.raises(
        ConfigError, match=r"nemo-rl-gke:recovery\.maxBackoffSeconds: 60 is below recovery\.backoffSeconds"
    ):
        parse({**base, "recovery": {"backoffSeconds": 600, "maxBackoffSeconds": 60}}, "dev")
    with pytest.raises(ConfigError, match=r"nemo-rl-gke:recovery\.checkIntervalSeconds"):
        parse({**base, "recovery": {"checkIntervalSeconds": 1}}, "dev")
