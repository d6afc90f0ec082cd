"""NcclRdmaInstaller: the gIB plugin installer DaemonSet, validated as a Kubernetes apps/v1 object."""

from __future__ import annotations

import pytest
from conftest import STACKS, stack_plan
from k8s_support import k8s_doc, record, schema_problems

from infra.config import RayConfig
from infra.flavours import FLAVOURS
from infra.nccl import HOST_GIB_DIR, HOST_NVIDIA_LIB_DIR, NcclRdmaInstaller, NcclRdmaInstallerArgs

IMAGE = RayConfig().nccl_installer_image
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
ALL_ACCELERATORS = sorted(f.accelerator_type for f in FLAVOURS.values())


def installer(image=IMAGE, accelerators=None):
    accelerators = ALL_ACCELERATORS if accelerators is None else accelerators
    rec = record(lambda: NcclRdmaInstaller("nccl", NcclRdmaInstallerArgs(image, tuple(accelerators))))
    return rec, k8s_doc(rec.one(DAEMONSET))


def tolerates(tolerations, taint) -> bool:
    """Kubernetes' matching rule for one taint against a list of tolerations."""
    for tol in tolerations:
        if tol.get("key") not in (None, taint["key"]):
            continue
        if tol.get("effect") not in (None, "", taint["effect"]):
            continue
        if tol.get("operator", "Equal") == "Exists" or tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def test_the_daemonset_is_a_valid_apps_v1_object():
    rec, doc = installer()
    reg = rec.one(DAEMONSET)
    assert not schema_problems(doc, reg.name)


def test_it_is_the_nccl_rdma_installer_in_kube_system_with_the_pinned_image():
    _, doc = installer()
    assert (doc["metadata"]["name"], doc["metadata"]["namespace"]) == ("nccl-rdma-installer", "kube-system")
    spec = doc["spec"]["template"]["spec"]
    images = {c["name"]: c["image"] for c in spec["initContainers"]}
    assert images == {"nccl-rdma-installer": IMAGE}, (
        "one init container, as upstream since bdd28b0f (no martian-log one)"
    )
    assert IMAGE == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    assert all(":" in c["image"] or "@" in c["image"] for c in spec["initContainers"] + spec["containers"])
    assert [c["name"] for c in spec["containers"]] == ["pause"], "after installing, only a pause container runs"


def test_it_runs_only_on_nodes_with_the_given_accelerators():
    _, doc = installer(accelerators=["nvidia-h200-141gb"])
    terms = doc["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "cloud.google.com/gke-accelerator", "operator": "In", "values": ["nvidia-h200-141gb"]}
            ]
        }
    ]


def test_the_installer_writes_the_plugin_into_the_host_directories_the_workers_mount():
    _, doc = installer()
    spec = doc["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert (
        set(host.values())
        == {HOST_GIB_DIR, HOST_NVIDIA_LIB_DIR}
        == {"/home/kubernetes/bin/gib", "/home/kubernetes/bin/nvidia/lib64"}
    )
    (install,) = [c for c in spec["initContainers"] if c["name"] == "nccl-rdma-installer"]
    mounted = {host[m["name"]]: m["mountPath"] for m in install["volumeMounts"]}
    script = install["command"][-1]
    # Upstream's script since 2da1c92f (2026-05-06), line for line: no `--install-nccl`, which would put
    # gIB's own NCCL ahead of the image's on the library path.
    assert script.splitlines() == [
        "set -ex",
        "/scripts/container_entry.sh install",
        f"cp -r /var/lib/gib/lib64/. {mounted[HOST_NVIDIA_LIB_DIR]}",
        f"cp -r /var/lib/gib/. {mounted[HOST_GIB_DIR]}",
        'echo "gIB NCCL plugin installed"',
    ]
    assert "--install-nccl" not in script
    assert install["securityContext"] == {"privileged": True}


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "cloud.google.com/impending-node-termination", "value": "", "effect": "NoSchedule"},
        {"key": "user-workload", "value": "true", "effect": "NoExecute"},
        {"key": "dedicated", "value": "training", "effect": "PreferNoSchedule"},
    ],
)
def test_every_taint_is_tolerated_as_upstream(taint):
    _, doc = installer()
    tolerations = doc["spec"]["template"]["spec"]["tolerations"]
    assert tolerations == [{"operator": "Exists"}]
    assert tolerates(tolerations, taint)


def test_an_image_without_a_tag_or_digest_is_refused():
    with pytest.raises(ValueError, match="pin a version"):
        installer(image="us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib")


def test_the_component_publishes_name_namespace_and_image():
    rec, _ = installer()
    assert rec.outputs_of("nemo-rl-gke:infra:NcclRdmaInstaller") == {
        "name": "nccl-rdma-installer",
        "namespace": "kube-system",
        "image": IMAGE,
    }


# ---------------------------------------------------------------- whole program


def installer_of(plan):
    (ds,) = [d for d in plan.by_type(DAEMONSET) if d.inputs["metadata"]["name"] == "nccl-rdma-installer"]
    return ds


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_installs_for_its_flavour_and_tolerates_its_gpu_pool(stack):
    plan = stack_plan(stack)
    ds = installer_of(plan)
    (gke,) = plan.by_type("nemo-rl-gke:infra:GkeCluster")
    facts = plan.component_outputs[gke.urn]["gpuPoolFacts"]
    spec = ds.inputs["spec"]["template"]["spec"]
    values = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["values"]
    assert values == [facts["acceleratorType"]], f"{ds.name} targets {values}"
    for taint in facts["taints"]:
        assert tolerates(spec["tolerations"], taint), f"{ds.name} does not tolerate {taint}"
    assert not schema_problems({k: v for k, v in ds.inputs.items() if not k.startswith("__")}, ds.name)


def test_the_installer_is_created_after_and_deleted_before_the_node_pools():
    plan = stack_plan("h200")
    ds = installer_of(plan)
    pools = [p.urn for p in plan.by_type("gcp:container/nodePool:NodePool")]
    assert pools and all(p in ds.dependencies for p in pools), f"{ds.name} dependencies: {ds.dependencies}"


def test_every_standard_matrix_rows_gib_is_installed_with_the_command_its_upstream_manifest_runs():
    # data/version_matrix.yaml records, per gIB tag, what upstream's Standard installer runs (v1.1.2:
    # container-engine-accelerators@2433eeed, PR 609): `container_entry.sh install` without `--install-nccl`.
    from infra.nccl import daemonset_manifest
    from infra.version_matrix import load

    rows = [r for r in load()["rows"] if r["covers"]["modes"] == ["standard"]]
    assert {r["gib"]["tag"] for r in rows} >= {"v1.1.1", "v1.1.2"}
    for row in rows:
        image = f"{row['gib']['image']}:{row['gib']['tag']}"
        script = daemonset_manifest(image, ALL_ACCELERATORS)["spec"]["template"]["spec"]["initContainers"][0]
        assert script["image"] == image
        command = script["command"][-1]
        assert "/scripts/container_entry.sh install\n" in command, row["id"]
        wants_nccl = row["gib"].get("installer", {}).get("installNccl", False)
        assert ("--install-nccl" in command) == wants_nccl and row["nccl"]["from"] == "image", row["id"]
