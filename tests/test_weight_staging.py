"""Weights on Lustre before the job (infra/weight_staging.py, workloads/stage_weights.py): the staging Job sees
Lustre and HF_HOME as NeMo-RL does, reads the token from the Secret's file, downloads once, and the model counts it."""

from __future__ import annotations

import os

import pytest
from conftest import run_plan, stack_plan
from k8s_support import k8s_doc, schema_problems

from infra import weight_staging
from tools import deploy_time
from workloads import stage_weights

JOB = "kubernetes:batch/v1:Job"


def staging_job(plan):
    (job,) = [r for r in plan.by_type(JOB) if r.inputs["metadata"]["name"] == weight_staging.NAME]
    return job


def env_of(container) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or container.get("containerEnv") or []}


def test_the_staging_job_writes_where_nemo_rl_reads_the_lustre_claim_and_hf_home_of_the_workers_and_the_job():
    plan = stack_plan("b200")
    pod = staging_job(plan).inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    worker = release.inputs["values"]["worker"]
    (submission,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    job_env = submission.inputs["runtime_env"]["env_vars"]
    # Every attempt is this runtime env (the watcher resubmits the same spec): NeMo-RL's HF_HOME is on Lustre.
    assert env_of(container)["HF_HOME"] == env_of(worker)["HF_HOME"] == job_env["HF_HOME"] == "/lustre/hf-cache"
    lustre = lambda spec: next(v for v in spec["volumes"] if v["name"] == "lustre")  # noqa: E731
    assert lustre(pod) == lustre(worker) == {"name": "lustre", "persistentVolumeClaim": {"claimName": "lustre"}}
    mount = lambda mounts: next(m["mountPath"] for m in mounts if m["name"] == "lustre")  # noqa: E731
    assert mount(container["volumeMounts"]) == mount(worker["volumeMounts"]) == "/lustre"
    assert container["command"][-1] == "Qwen/Qwen2.5-72B-Instruct" and "snapshot_download" in container["command"][2]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "b200-system"}, "CPU, on the system pool"
    assert not schema_problems(k8s_doc(staging_job(plan)), "staging job")


def test_the_token_is_the_secrets_file_never_an_environment_value():
    plan = run_plan("b200", secret_keys=["nemo-rl-gke:hfToken"], hfToken="hf_value_set_as_secret")
    pod = staging_job(plan).inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert env_of(container)["HF_TOKEN_PATH"] == "/var/run/secrets/nemo-rl/hf-token"
    (secret,) = [v for v in pod["volumes"] if "secret" in v]
    assert secret["secret"]["items"] == [{"key": "hf-token", "path": "hf-token"}], "the token only, not the netrc"
    assert all("valueFrom" not in e and "hf_value" not in e["value"] for e in container["env"])


def test_the_ray_release_waits_for_the_staged_weights_and_the_submission_is_not_replaced_with_them():
    plan = stack_plan("b200")
    job = staging_job(plan)
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    assert job.urn in release.dependencies
    (submission,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    # A wait, not a replacement: a new or changed staging Job (a live stack's upgrade) does not resubmit the job.
    assert job.urn not in submission.options["replaceWith"] and job.urn not in release.options.get("replaceWith", [])


def test_the_first_run_downloads_and_every_later_one_finds_the_marker(tmp_path):
    calls = []

    def download(repo_id, cache_dir):
        calls.append((repo_id, cache_dir))
        os.makedirs(os.path.join(cache_dir, "models--Qwen--Q"), exist_ok=True)
        return os.path.join(cache_dir, "models--Qwen--Q")

    home = str(tmp_path)
    assert stage_weights.stage("Qwen/Q", home, download, say=lambda _: None) is True
    assert stage_weights.stage("Qwen/Q", home, download, say=lambda _: None) is False
    assert calls == [("Qwen/Q", os.path.join(home, "hub"))], "one download, into HF_HOME/hub where NeMo-RL looks"
    assert os.path.exists(stage_weights.marker_path(home, "Qwen/Q"))


def test_a_failed_download_leaves_no_marker_so_the_retry_downloads_again(tmp_path):
    def broken(repo_id, cache_dir):
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        stage_weights.stage("Qwen/Q", str(tmp_path), broken, say=lambda _: None)
    assert not os.path.exists(stage_weights.marker_path(str(tmp_path), "Qwen/Q"))


def test_the_model_counts_the_download_once_on_the_path_at_an_assumed_rate():
    est = deploy_time.estimate(stack_plan("b200"))
    (step,) = [s for s in est.critical_path if s.name == "weights-job"]
    # 72.7B parameters in bf16 = 145.4 GB at the assumed 500 MB/s, plus the pod's start.
    assert step.minutes == pytest.approx(0.25 + 145.4e9 / 500e6 / 60, abs=0.1)
    assert "assumed" in step.source and "145 GB" in step.basis and "no attempt downloads them" in step.basis


def test_autopilot_stages_nothing_its_staging_pod_would_wait_for_a_node_and_a_whole_pull():
    assert not [r for r in stack_plan("autopilot").resources if deploy_time.is_weight_staging(r)]
