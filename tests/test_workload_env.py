"""WorkloadEnvironment: namespace, service account, secret and the static Lustre volume."""

from __future__ import annotations

import json

import pulumi
import pytest
from conftest import run_plan, stack_plan
from k8s_support import CTX, k8s_doc, record, schema_problems

from infra.workload_env import LustreVolume, WorkloadEnvironment, WorkloadEnvironmentArgs
from tools.mocks import SECRET_SIG, SIG_KEY

PLANTED_HF = "hf_PLANTED-4d1c9e0b-secret-never-in-plaintext"
PLANTED_WANDB = "wandb-PLANTED-77f2a3-secret"
WANDB_NETRC = f"machine api.wandb.ai\n  login user\n  password {PLANTED_WANDB}\n"
KINDS = ("Namespace", "ServiceAccount", "Secret", "PersistentVolume", "PersistentVolumeClaim")


def lustre(**overrides) -> LustreVolume:
    args = dict(
        project=CTX.project,
        zone=CTX.zone,
        instance_id="t-lustre",
        mount_ip="10.16.0.2",
        filesystem="lustrefs",
        capacity_gib=18000,
    )
    args.update(overrides)
    return LustreVolume(**args)


def environment(hf=PLANTED_HF, wandb=PLANTED_WANDB, volume=None):
    def build():
        return WorkloadEnvironment(
            "workload",
            WorkloadEnvironmentArgs(
                "nemo-rl",
                "ray",
                pulumi.Output.secret(hf) if hf is not None else None,
                pulumi.Output.secret(wandb) if wandb is not None else None,
                volume or lustre(),
            ),
        )

    return record(build)


def obj(rec, kind: str) -> dict:
    return k8s_doc(rec.one(f"kubernetes:core/v1:{kind}"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_object_is_valid_for_the_kubernetes_api(kind):
    rec = environment()
    reg = rec.one(f"kubernetes:core/v1:{kind}")
    assert not schema_problems(k8s_doc(reg), reg.name)


def test_the_persistent_volume_is_the_lustre_instance_through_the_gke_csi_driver():
    pv = obj(environment(), "PersistentVolume")
    spec = pv["spec"]
    assert spec["csi"] == {
        "driver": "lustre.csi.storage.gke.io",
        "volumeHandle": "test-project/us-east1-b/t-lustre",
        "volumeAttributes": {"ip": "10.16.0.2", "filesystem": "lustrefs"},
    }
    assert spec["capacity"] == {"storage": "18000Gi"}, "capacity must be the instance size"
    assert spec["accessModes"] == ["ReadWriteMany"]
    assert spec["storageClassName"] == "", "a static PV must not be picked up by a provisioner"
    assert spec["persistentVolumeReclaimPolicy"] == "Retain", "deleting the PV must never touch the filesystem"


def test_the_claim_and_the_volume_are_bound_to_each_other_by_name():
    rec = environment()
    pv, pvc = obj(rec, "PersistentVolume"), obj(rec, "PersistentVolumeClaim")
    assert pv["spec"]["claimRef"] == {"namespace": pvc["metadata"]["namespace"], "name": pvc["metadata"]["name"]}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pvc["spec"]["storageClassName"] == "" and pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"]
    claim = rec.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert rec.one("kubernetes:core/v1:PersistentVolume").urn in claim.dependencies, (
        f"{claim.name} must wait for its PV"
    )


def test_a_full_instance_name_and_a_whole_mount_point_are_cut_down_to_what_the_driver_expects():
    volume = lustre(instance_id="projects/p/locations/z/instances/t-lustre", mount_ip="10.16.0.2@tcp:/lustrefs")
    spec = obj(environment(volume=volume), "PersistentVolume")["spec"]["csi"]
    assert spec["volumeHandle"] == "test-project/us-east1-b/t-lustre"
    assert spec["volumeAttributes"]["ip"] == "10.16.0.2"


def test_the_service_account_needs_no_google_service_account_annotation():
    sa = obj(environment(), "ServiceAccount")
    assert sa["metadata"]["name"] == "ray" and sa["metadata"]["namespace"] == "nemo-rl"
    assert "iam.gke.io/gcp-service-account" not in (sa["metadata"].get("annotations") or {})


def test_the_secret_holds_both_keys_and_reaches_the_engine_only_as_a_secret():
    rec = environment()
    reg = rec.one("kubernetes:core/v1:Secret")
    assert reg.inputs["type"] == "Opaque"
    assert reg.inputs["stringData"] == "[secret]"
    raw = reg.raw_inputs["stringData"]
    assert raw[SIG_KEY] == SECRET_SIG, f"{reg.name}: stringData is not marked secret"
    assert raw["value"] == {"hf-token": PLANTED_HF, "netrc": WANDB_NETRC}


def test_the_wandb_key_becomes_the_netrc_entry_the_wandb_sdk_reads(tmp_path):
    import netrc

    path = tmp_path / "netrc"
    path.write_text(environment().one("kubernetes:core/v1:Secret").raw_inputs["stringData"]["value"]["netrc"])
    login, _account, password = netrc.netrc(str(path)).authenticators("api.wandb.ai")
    assert (login, password) == ("user", PLANTED_WANDB)


def test_only_configured_secrets_become_files_and_only_their_paths_reach_the_environment():
    rec = environment(wandb=None)
    assert rec.one("kubernetes:core/v1:Secret").raw_inputs["stringData"]["value"] == {"hf-token": PLANTED_HF}
    outputs = rec.outputs_of("nemo-rl-gke:infra:WorkloadEnvironment")
    assert outputs["secretKeys"] == ["hf-token"]
    assert outputs["secretEnv"] == {"HF_TOKEN_PATH": "/var/run/secrets/nemo-rl/hf-token"}
    assert "stringData" not in environment(hf=None, wandb=None).one("kubernetes:core/v1:Secret").inputs


def test_no_planted_secret_appears_in_any_recorded_input_or_output():
    rec = environment()
    text = json.dumps([r.inputs for r in rec.resources]) + json.dumps(rec.component_outputs)
    for planted in (PLANTED_HF, PLANTED_WANDB):
        assert planted not in text


def test_namespaced_objects_wait_for_the_namespace_and_carry_the_component_name():
    rec = environment()
    ns = rec.one("kubernetes:core/v1:Namespace")
    (component,) = rec.by_type("nemo-rl-gke:infra:WorkloadEnvironment")
    for kind in KINDS[1:]:
        reg = rec.one(f"kubernetes:core/v1:{kind}")
        assert ns.urn in reg.dependencies, f"{reg.name} does not wait for the namespace"
        assert reg.parent == component.urn and reg.name.startswith("workload-"), reg.name


def test_the_component_publishes_names_for_the_ray_cluster():
    published = environment().outputs_of("nemo-rl-gke:infra:WorkloadEnvironment")
    assert published["namespace"] == "nemo-rl" and published["serviceAccount"] == "ray"
    assert published["secretName"] == "nemo-rl-secrets" and published["pvcName"] == "lustre"
    assert published["volumeHandle"] == "test-project/us-east1-b/t-lustre"


# ---------------------------------------------------------------- whole program


def test_the_stack_pv_mounts_the_stacks_lustre_instance_at_its_configured_size():
    plan = stack_plan("h200")
    (pv,) = plan.by_type("kubernetes:core/v1:PersistentVolume")
    (component,) = plan.by_type("nemo-rl-gke:infra:Lustre")
    lustre_out = plan.component_outputs[component.urn]
    csi = pv.inputs["spec"]["csi"]
    assert csi["volumeHandle"] == lustre_out["volumeHandle"], pv.name
    assert csi["volumeAttributes"] == {"ip": lustre_out["mountIp"], "filesystem": lustre_out["filesystem"]}, pv.name
    assert pv.inputs["spec"]["capacity"]["storage"] == f"{lustre_out['capacityGib']}Gi" == "18000Gi"


def test_the_namespace_and_service_account_are_the_ones_the_bucket_grants_access_to():
    plan = stack_plan("h200")
    sa = plan.one("kubernetes:core/v1:ServiceAccount", "workload-service-account")
    meta = sa.inputs["metadata"]
    members = [m.inputs["member"] for m in plan.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")]
    principals = [m for m in members if m.startswith("principal://")]
    assert principals and all(p.endswith(f"/subject/ns/{meta['namespace']}/sa/{meta['name']}") for p in principals), (
        f"{sa.name}: bucket grants {principals}"
    )


def test_a_stacks_secrets_never_appear_in_plaintext_anywhere_in_the_plan():
    keys = ["nemo-rl-gke:hfToken", "nemo-rl-gke:wandbApiKey"]
    plan = run_plan("h200", secret_keys=keys, hfToken=PLANTED_HF, wandbApiKey=PLANTED_WANDB)
    text = json.dumps(plan.to_json())
    for planted in (PLANTED_HF, PLANTED_WANDB):
        assert planted not in text
        leaking = [r.name for r in plan.resources if planted in json.dumps(r.inputs)]
        assert not leaking, f"plaintext secret in {leaking}"
    (secret,) = plan.by_type("kubernetes:core/v1:Secret")
    raw = secret.raw_inputs["stringData"]
    assert raw[SIG_KEY] == SECRET_SIG and raw["value"] == {"hf-token": PLANTED_HF, "netrc": WANDB_NETRC}
    # The only place the value travels is that secret-marked field.
    others = [r.name for r in plan.resources if r is not secret and planted_in_raw(r.raw_inputs)]
    assert not others, f"secret values sent to {others}"


def planted_in_raw(raw) -> bool:
    return PLANTED_HF in json.dumps(raw) or PLANTED_WANDB in json.dumps(raw)


def test_the_environment_is_created_after_and_deleted_before_the_node_pools():
    plan = stack_plan("h200")
    pools = [p.urn for p in plan.by_type("gcp:container/nodePool:NodePool")]
    for kind in KINDS:
        (reg,) = [r for r in plan.by_type(f"kubernetes:core/v1:{kind}") if r.name.startswith("workload-")]
        missing = [p for p in pools if p not in reg.dependencies]
        assert not missing, f"{reg.name} does not depend on {missing}"
