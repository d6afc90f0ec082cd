"""Secrets proven secret: with planted HF and W&B values in the stack config, no byte of either
reaches the plan JSON, the --out manifests, the Helm values, the job's runtime env or entrypoint,
the stack outputs, component outputs, the CLI output or the program's logs. The only place a
planted value may travel is inside a Pulumi secret envelope (to the Kubernetes Secret)."""

import io
import json
import logging

import pytest
import yaml
from conftest import ALL_STACKS, merged, run_plan

from tools.mocks import SECRET_SIG, SIG_KEY
from tools.offline_plan import render_tree
from tools.plan_output import kubernetes_manifests

HF = "hf_PLANTEDtokenValue0123456789abcdef"
WANDB = "wandb-PLANTED-key-9f8e7d6c5b4a"
PLANTED = (HF, WANDB)


@pytest.fixture(scope="module", params=ALL_STACKS)
def planted_plan(request):
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Capture(level=logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        plan = run_plan(
            request.param,
            secret_keys=["nemo-rl-gke:hfToken", "nemo-rl-gke:wandbApiKey"],
            hfToken=HF,
            wandbApiKey=WANDB,
            job=merged(request.param, "job", {"wandbProject": "nemo-rl-gke"}),
        )
    finally:
        root.removeHandler(handler)
    return plan, records


def leaks(text: str) -> list[str]:
    return [p for p in PLANTED if p in text]


def test_no_planted_secret_in_the_plan_json(planted_plan):
    plan, _ = planted_plan
    assert not leaks(json.dumps(plan.to_json()))


def test_no_planted_secret_in_the_plan_tree_output(planted_plan):
    plan, _ = planted_plan
    assert not leaks(render_tree(plan))


def test_no_planted_secret_in_the_out_manifests_or_helm_values(planted_plan):
    plan, _ = planted_plan
    files = kubernetes_manifests(plan)
    assert any(name.startswith("helm-values-") for name in files)
    for name, doc in files.items():
        assert not leaks(yaml.safe_dump(doc)), name


def test_no_planted_secret_in_stack_or_component_outputs(planted_plan):
    plan, _ = planted_plan
    assert not leaks(json.dumps(plan.outputs))
    assert not leaks(json.dumps(plan.component_outputs))


def test_no_planted_secret_in_the_programs_log_messages(planted_plan):
    _, records = planted_plan
    assert not leaks("\n".join(records))


def test_planted_secrets_travel_only_inside_secret_envelopes_to_the_kubernetes_secret(planted_plan):
    plan, _ = planted_plan
    carriers = []

    def walk(value, inside_secret, resource):
        if isinstance(value, dict):
            secret = value.get(SIG_KEY) == SECRET_SIG
            for v in value.values():
                walk(v, inside_secret or secret, resource)
        elif isinstance(value, list):
            for v in value:
                walk(v, inside_secret, resource)
        elif isinstance(value, str) and leaks(value):
            assert inside_secret, (
                f"{resource.name} ({resource.type}) carries a planted secret outside a secret envelope"
            )
            carriers.append(resource)

    for r in plan.resources:
        walk(r.raw_inputs, False, r)
    assert {r.type for r in carriers} == {"kubernetes:core/v1:Secret"}, [r.name for r in carriers]


def test_the_job_runtime_env_and_entrypoint_hold_no_secret(planted_plan):
    plan, _ = planted_plan
    jobs = [r for r in plan.resources if r.type.startswith("pulumi-python:dynamic") and "submission" in r.name]
    assert len(jobs) == 1, [r.name for r in plan.resources if r.type.startswith("pulumi-python")]
    inputs = jobs[0].inputs
    env = json.dumps(inputs.get("runtime_env"))
    assert not leaks(env) and not leaks(inputs["entrypoint"])
    for name in ("HF_TOKEN", "WANDB_API_KEY"):
        assert name not in env, f"{name} must come from the pod's Secret, not the runtime env"
    assert "logger.wandb_enabled=true" in inputs["entrypoint"]


def test_the_cli_dry_run_prints_no_secret_even_with_the_tokens_in_the_users_environment(monkeypatch):
    # The CLI never decrypts the stack's secrets; the way a token could still reach its output (and
    # the runtime env it submits) is the user's own shell exporting it.
    from jobctl.cli import main

    monkeypatch.setenv("HF_TOKEN", HF)
    monkeypatch.setenv("WANDB_API_KEY", WANDB)
    out, err = io.StringIO(), io.StringIO()
    assert main(["submit", "--stack", "h200", "--dry-run"], out=out, err=err) == 0
    assert "runtime env" in out.getvalue().lower() or "runtime_env" in out.getvalue(), out.getvalue()[:500]
    assert not leaks(out.getvalue() + err.getvalue())
    assert "HF_TOKEN" not in out.getvalue()


def test_the_ray_pods_environment_holds_no_secret_so_nemo_rl_cannot_copy_one_into_the_runtime_env(planted_plan):
    # NeMo-RL starts Ray with runtime_env={"env_vars": dict(os.environ)} (NVIDIA-NeMo/RL
    # nemo_rl/distributed/virtual_cluster.py `init_ray`): whatever is in
    # the pod environment ends up stored in Ray and shown by its dashboard.
    plan, _ = planted_plan
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    for group in ("head", "worker"):
        values = release.inputs["values"][group]
        assert not values.get("envFrom"), f"{release.name}: {group} takes a Secret as environment"
        env = values["containerEnv"]
        assert not [e for e in env if "valueFrom" in e], f"{release.name}: {group} env reads a Secret"
        names = {e["name"] for e in env}
        assert not names & {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"}, (release.name, group)
        assert {"HF_TOKEN_PATH", "NETRC"} <= names, f"{release.name}: {group} is not told where the token files are"
