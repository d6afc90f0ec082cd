"""Weights on Lustre before the job, off the critical path (infra/weight_staging.py, workloads/stage_weights.py,
infra/weights_import.py): the Job writes the model into the bucket while Lustre is created, Lustre imports it into the
HF_HOME NeMo-RL reads, the real huggingface_hub resolves the staged layout without downloading, and the model counts
the download where it still happens."""

from __future__ import annotations

import os

import huggingface_hub
import pytest
from conftest import run_plan, stack_plan
from huggingface_hub import file_download
from k8s_support import k8s_doc, schema_problems

from infra import weight_staging
from tools import deploy_time
from workloads import stage_weights

JOB = "kubernetes:batch/v1:Job"
IMPORT = deploy_time.WEIGHTS_IMPORT
MODEL = "Qwen/Qwen2.5-72B-Instruct"
COMMIT = "a" * 40  # huggingface_hub tells a commit from a branch by 40 hex digits


def staging_job(plan):
    (job,) = [r for r in plan.by_type(JOB) if r.inputs["metadata"]["name"] == weight_staging.NAME]
    return job


def the_import(plan):
    (found,) = plan.by_type(IMPORT)
    return found


def env_of(container) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or container.get("containerEnv") or []}


def closure(plan, urn: str) -> set[str]:
    """Every custom resource `urn` waits for, directly or not (the deploy-time model's graph)."""
    graph, seen, todo = deploy_time.waits(plan), set(), [urn]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


# ---------------------------------------------------------------- where the weights go


def test_the_job_writes_into_the_bucket_through_cloud_storage_fuse_as_the_bucket_access_account():
    plan = stack_plan("b200")
    template = staging_job(plan).inputs["spec"]["template"]
    pod = template["spec"]
    (container,) = pod["containers"]
    assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    assert template["metadata"]["annotations"]["gke-gcsfuse/ephemeral-storage-limit"] == "0", "4 GB shards staged"
    (bucket,) = [v for v in pod["volumes"] if v["name"] == "bucket"]
    assert bucket["csi"] == {
        "driver": "gcsfuse.csi.storage.gke.io",
        "volumeAttributes": {"bucketName": "my-gcp-project-b200-artifacts"},
    }
    # The account Workload Identity grants roles/storage.objectUser on the bucket (infra/storage.py).
    assert pod["serviceAccountName"] == "ray"
    assert container["command"][-2:] == [MODEL, "/bucket/hf-hub"]
    assert "snapshot_download" in container["command"][2]
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "b200-system"}, "CPU, on the system pool"
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v], "no Lustre: it does not exist yet"
    assert not schema_problems(k8s_doc(staging_job(plan)), "staging job")


def test_lustre_imports_the_bucket_folder_into_the_hub_cache_of_every_attempt_beside_its_hf_home():
    plan = stack_plan("b200")
    imported = the_import(plan).inputs
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    worker = release.inputs["values"]["worker"]
    (submission,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    # Every attempt is this runtime env (the watcher resubmits the same spec): NeMo-RL's caches are on Lustre.
    env = submission.inputs["runtime_env"]["env_vars"]
    assert env["HF_HOME"] == env_of(worker)["HF_HOME"] == "/lustre/hf-cache"
    # The models' cache is its own folder: the import never meets the links of a cache NeMo-RL filled itself.
    assert env["HF_HUB_CACHE"] == "/lustre/hf-hub"
    # The workers mount the Lustre file system's root at /lustre: its /hf-hub is the job's HF_HUB_CACHE.
    mount = next(m["mountPath"] for m in worker["volumeMounts"] if m["name"] == "lustre")
    assert os.path.join(mount, imported["lustre_path"].lstrip("/")) == env["HF_HUB_CACHE"]
    assert imported["source"] == "gs://my-gcp-project-b200-artifacts/hf-hub/"
    assert imported["model"] == MODEL and imported["model_bytes"] == 145_400_000_000
    assert imported["lustre_mb_per_s"] == pytest.approx(36000 / 1024 * 500)


def test_the_token_is_the_secrets_file_never_an_environment_value():
    plan = run_plan("b200", secret_keys=["nemo-rl-gke:hfToken"], hfToken="hf_value_set_as_secret")
    pod = staging_job(plan).inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert env_of(container)["HF_TOKEN_PATH"] == "/var/run/secrets/nemo-rl/hf-token"
    (secret,) = [v for v in pod["volumes"] if "secret" in v]
    assert secret["secret"]["items"] == [{"key": "hf-token", "path": "hf-token"}], "the token only, not the netrc"
    assert all("valueFrom" not in e and "hf_value" not in e["value"] for e in container["env"])


# ---------------------------------------------------------------- order


def test_the_job_does_not_wait_for_lustre_and_the_ray_release_waits_for_neither_job_nor_import():
    plan = stack_plan("b200")
    job, imported = staging_job(plan), the_import(plan)
    (lustre,) = plan.by_type("gcp:lustre/instance:Instance")
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    assert lustre.urn not in closure(plan, job.urn), "the download runs while Lustre is created"
    assert not {job.urn, imported.urn} & closure(plan, release.urn), "the release starts once Lustre's claim is"


def test_the_import_waits_for_the_job_lustre_and_the_agents_grant_and_the_submission_waits_for_the_import():
    plan = stack_plan("b200")
    job, imported = staging_job(plan), the_import(plan)
    (lustre,) = plan.by_type("gcp:lustre/instance:Instance")
    grants = [
        r.urn
        for r in plan.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if r.name == "lustre-data-agent-bucket-access"
    ]
    assert grants and {job.urn, lustre.urn, *grants} <= set(imported.dependencies)
    (submission,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    assert imported.urn in closure(plan, submission.urn)
    # A wait, not a replacement: a changed model's import does not stop and resubmit a running job.
    assert imported.urn in submission.dependencies
    assert imported.urn not in submission.options["replaceWith"] and job.urn not in submission.options["replaceWith"]
    # A replaced instance keeps its id (a ForceNew input changed) and is empty: the import is replaced with it.
    assert imported.options["replaceWith"] == [lustre.urn]


def test_the_lustre_agent_is_granted_the_bucket_for_the_import_even_without_export_on_destroy():
    plan = run_plan("b200", **{"lustre": {"exportOnDestroy": False}})
    assert [r for r in plan.by_type("gcp:storage/bucketIAMMember:BucketIAMMember") if "agent" in r.name]
    assert plan.by_type(IMPORT)


def test_autopilot_stages_nothing_and_its_first_attempt_download_is_counted_in_the_first_step():
    from tools import estimates

    plan = stack_plan("autopilot")
    assert not [r for r in plan.resources if deploy_time.is_weight_staging(r) or r.type == IMPORT]
    est = estimates.compute(plan)
    run = estimates.first_run(est, plan)
    # gemma-3-27b: 27.4B parameters in bf16 at the assumed 500 MB/s, plus the pod's start, on the GPU nodes' time.
    assert run.download_minutes == pytest.approx(0.25 + 27.4e9 * 2 / 500e6 / 60, abs=0.15)
    assert run.first_step_minutes == pytest.approx(est.deploy.total_minutes + 10.0 + run.download_minutes, abs=0.01)
    b200 = stack_plan("b200")
    assert estimates.first_run(estimates.compute(b200), b200).download_minutes == 0.0, "staged: no download"


# ---------------------------------------------------------------- the staged layout, read by the real library


def fake_snapshot(files: dict[str, bytes]):
    calls = []

    def download(repo_id, revision, local_dir):
        calls.append((repo_id, revision, local_dir))
        for name, body in files.items():
            path = os.path.join(local_dir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(body)
        os.makedirs(os.path.join(local_dir, ".cache", "huggingface", "download"), exist_ok=True)
        return local_dir

    return download, calls


FILES = {"config.json": b'{"model_type": "qwen2"}', "model-00001-of-00002.safetensors": b"w" * 64}


def test_the_first_run_downloads_once_and_every_later_one_finds_the_marker(tmp_path):
    download, calls = fake_snapshot(FILES)
    root = str(tmp_path)
    assert stage_weights.stage(MODEL, root, lambda m: COMMIT, download, say=lambda _: None) is True
    assert stage_weights.stage(MODEL, root, lambda m: COMMIT, download, say=lambda _: None) is False
    snapshot = os.path.join(root, "models--Qwen--Qwen2.5-72B-Instruct", "snapshots", COMMIT)
    assert calls == [(MODEL, COMMIT, snapshot)], "one download, of the resolved commit, into its snapshot"
    assert not os.path.exists(os.path.join(snapshot, ".cache")), "huggingface_hub's bookkeeping is not staged"
    with open(os.path.join(root, "models--Qwen--Qwen2.5-72B-Instruct", "refs", "main")) as f:
        assert f.read() == COMMIT, "read back as is by huggingface_hub: no newline"


def test_a_moved_main_is_staged_again_beside_the_old_commit(tmp_path):
    download, calls = fake_snapshot(FILES)
    root, moved = str(tmp_path), "b" * 40
    stage_weights.stage(MODEL, root, lambda m: COMMIT, download, say=lambda _: None)
    assert stage_weights.stage(MODEL, root, lambda m: moved, download, say=lambda _: None) is True
    assert [c[1] for c in calls] == [COMMIT, moved], "a stack created again over the kept bucket follows main"
    with open(os.path.join(stage_weights.repo_folder(root, MODEL), "refs", "main")) as f:
        assert f.read() == moved


def test_a_failed_download_leaves_no_marker_and_no_ref_so_the_retry_downloads_again(tmp_path):
    def broken(repo_id, revision, local_dir):
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        stage_weights.stage(MODEL, str(tmp_path), lambda m: COMMIT, broken, say=lambda _: None)
    assert not os.path.exists(stage_weights.marker_path(str(tmp_path), MODEL, COMMIT))
    assert not os.path.exists(os.path.join(stage_weights.repo_folder(str(tmp_path), MODEL), "refs", "main"))


@pytest.fixture
def staged(tmp_path, monkeypatch):
    """The staged cache, as Lustre's import leaves it at HF_HUB_CACHE, with every download refused."""
    download, _ = fake_snapshot(FILES)
    stage_weights.stage(MODEL, str(tmp_path), lambda m: COMMIT, download, say=lambda _: None)

    def refuse(*args, **kwargs):
        raise AssertionError("huggingface_hub downloaded a staged file")

    monkeypatch.setattr(file_download, "http_get", refuse)
    monkeypatch.setattr(file_download, "xet_get", refuse, raising=False)
    return str(tmp_path)


def test_offline_huggingface_hub_resolves_every_staged_file_and_the_snapshot(staged):
    # `local_files_only` is the offline branch: refs/main -> snapshots/<commit>/<file>, no network.
    for name, body in FILES.items():
        path = huggingface_hub.hf_hub_download(MODEL, name, cache_dir=staged, local_files_only=True)
        with open(path, "rb") as f:
            assert f.read() == body
    folder = huggingface_hub.snapshot_download(MODEL, cache_dir=staged, local_files_only=True)
    assert sorted(os.listdir(folder)) == sorted(FILES)


def test_online_huggingface_hub_returns_the_staged_file_after_its_metadata_call_without_downloading(
    staged, monkeypatch
):
    asked = []

    def metadata(url, *args, **kwargs):
        asked.append(url)
        return file_download.HfFileMetadata(
            commit_hash=COMMIT, etag="etag-1", location=url, size=len(FILES["config.json"]), xet_file_data=None
        )

    monkeypatch.setattr(file_download, "get_hf_file_metadata", metadata)
    path = huggingface_hub.hf_hub_download(MODEL, "config.json", cache_dir=staged)
    assert asked and path.endswith(os.path.join("snapshots", COMMIT, "config.json"))


def test_a_missing_staged_file_would_be_downloaded_so_the_refusal_is_real(staged, monkeypatch):
    monkeypatch.setattr(
        file_download,
        "get_hf_file_metadata",
        lambda url, *a, **k: file_download.HfFileMetadata(
            commit_hash=COMMIT, etag="etag-2", location=url, size=3, xet_file_data=None
        ),
    )
    with pytest.raises(AssertionError, match="downloaded a staged file"):
        huggingface_hub.hf_hub_download(MODEL, "tokenizer.json", cache_dir=staged)


# ---------------------------------------------------------------- the model


def test_the_download_is_off_the_path_and_the_import_is_counted_at_lustres_throughput():
    est = deploy_time.estimate(stack_plan("b200"))
    names = {s.name for s in est.critical_path}
    assert "weights-job" not in names and "weights-import" not in names
    # 72.7B parameters in bf16 = 145.4 GB at the assumed 500 MB/s, plus the pod's start, once the system pool is up.
    download = deploy_time.staging_typical(staging_job(stack_plan("b200")))
    assert download.minutes == pytest.approx(0.25 + 145.4e9 / 500e6 / 60, abs=0.1) and "assumed" in download.source
    assert 0 <= est.finish_by_name["weights-job"] - download.minutes - est.finish_by_name["gke-system-pool"] < 0.5
    # Lustre's 17,578 MB/s (36000 GiB x 500 MB/s/TiB) below the service's 100 GB/s, plus the operation's minute.
    imported = est.finish_by_name["weights-import"] - est.finish_by_name["lustre-instance"]
    assert imported == pytest.approx(1.0 + 145.4e9 / (36000 / 1024 * 500e6) / 60, abs=0.01)
    assert imported < est.finish_by_name["ray-release"] - est.finish_by_name["lustre-instance"]


def test_import_minutes_take_the_lower_of_the_instance_and_the_service_ceiling():
    assert weight_staging.import_minutes(6e12, 200_000) == pytest.approx(1.0 + 6e12 / 100_000e6 / 60, abs=0.01)
    assert weight_staging.import_minutes(6e12, 5_000) == pytest.approx(1.0 + 6e12 / 5_000e6 / 60, abs=0.01)


def test_the_layout_paths_follow_ray_mount_path():
    assert weight_staging.lustre_folder("/lustre") == "/hf-hub"
    assert weight_staging.lustre_folder("/mnt/data/") == "/hf-hub"
    assert weight_staging.bucket_folder("/lustre") == "hf-hub"


def test_huggingface_hub_reads_the_staged_cache_through_hf_hub_cache_alone_in_a_fresh_process(staged):
    import subprocess
    import sys

    probe = f"import huggingface_hub as h; print(h.hf_hub_download({MODEL!r}, 'config.json'))"
    env = {**os.environ, "HF_HUB_CACHE": staged, "HF_HOME": os.path.join(staged, "elsewhere"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.strip() == os.path.join(
        staged, "models--Qwen--Qwen2.5-72B-Instruct", "snapshots", COMMIT, "config.json"
    )
