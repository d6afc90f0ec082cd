"""The GPU flavour catalogue: the facts per flavour, and that adding a flavour is adding one entry."""

import dataclasses
import json

import pytest
from conftest import merged, run_plan

from infra import flavours
from infra.flavours import FLAVOURS, parse_gke_version


# https://cloud.google.com/compute/docs/accelerator-optimized-machines (A4, A3 Ultra).
@pytest.mark.parametrize(
    "name,machine,accelerator,tuner,min_gke",
    [
        ("b200", "a4-highgpu-8g", "nvidia-b200", "/usr/local/gib/configs/tuner_config_a4.txtpb", "1.32.2-gke.1475000"),
        (
            "h200",
            "a3-ultragpu-8g",
            "nvidia-h200-141gb",
            "/usr/local/gib/configs/tuner_config_a3u.txtpb",
            "1.31.4-gke.1183000",
        ),
    ],
)
def test_each_flavour_holds_the_documented_machine_facts(name, machine, accelerator, tuner, min_gke):
    f = FLAVOURS[name]
    assert (f.machine_type, f.accelerator_type, f.nccl_tuner_config, f.min_gke_version) == (
        machine,
        accelerator,
        tuner,
        min_gke,
    )
    assert (f.gpus_per_node, f.vcpus, f.rdma_nics) == (8, 224, 8), name
    assert f.image_type == "COS_CONTAINERD" and f.boot_disk_type == "hyperdisk-balanced", name


def test_gke_versions_compare_with_prefixes_as_their_lowest_patch():
    assert parse_gke_version("1.33") < parse_gke_version("1.33.2-gke.4780000") < parse_gke_version("1.34")
    assert parse_gke_version("1.31.4-gke.1183000") < parse_gke_version("1.32.2-gke.1475000")
    assert parse_gke_version("1.32.2-gke.1475000") == (1, 32, 2, 1475000)


def test_a_new_flavour_entry_is_all_the_program_needs(monkeypatch):
    b300 = dataclasses.replace(
        FLAVOURS["b200"],
        name="b300",
        machine_type="a4x-testgpu-8g",
        accelerator_type="nvidia-b300",
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_b300.txtpb",
        memory_gib=4096,
    )
    monkeypatch.setitem(flavours.FLAVOURS, "b300", b300)
    # A machine type the zone catalogue (data/zones.yaml) does not know yet, and that no row of the
    # version matrix (data/version_matrix.yaml) covers yet: the stack opts in to both.
    plan = run_plan(
        "dev",
        flavour="b300",
        gpuPool=merged("dev", "gpuPool", {}),
        allowUncataloguedZone=True,
        allowUntestedVersions=True,
    )
    pool = plan.one("gcp:container/nodePool:NodePool", "gpu-pool")
    assert pool.inputs["nodeConfig"]["machineType"] == "a4x-testgpu-8g", pool.name
    assert pool.inputs["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-b300", pool.name
    release = plan.one("kubernetes:helm.sh/v3:Release")
    values = json.dumps(release.inputs["values"])
    assert "tuner_config_b300.txtpb" in values, release.name
    (installer,) = [
        d for d in plan.by_type("kubernetes:apps/v1:DaemonSet") if d.inputs["metadata"]["name"] == "nccl-rdma-installer"
    ]
    assert "nvidia-b300" in json.dumps(installer.inputs["spec"]), installer.name
