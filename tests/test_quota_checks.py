"""The doctor's GPU, project-wide and reservation checks (tools/doctor/quota_checks.py) against faked
Google Cloud answers (Compute Engine regions and projects, Cloud Quotas).
"""

from __future__ import annotations

import pytest
from doctor_fakes import (
    B200,
    PREEMPTIBLE_FAMILY,
    PROJECT,
    FakeProject,
    cloudquotas_v1,
    compute_v1,
    config,
    family_entry,
    family_quota_of,
    only,
    reservation,
    run,
)
from google.api_core import exceptions as gexc

from tools.doctor.check_context import FAIL, PASS, WARN, Result
from tools.doctor.quota_checks import GPU_FAMILY_QUOTA, global_quota_needs


@pytest.fixture
def project():
    return FakeProject()


@pytest.mark.parametrize(
    "provisioning, metric",
    [
        ("spot", "PREEMPTIBLE_NVIDIA_B200_GPUS"),
        ("flexStart", "PREEMPTIBLE_NVIDIA_B200_GPUS"),
        ("onDemand", "NVIDIA_B200_GPUS"),
    ],
)
def test_gpu_quota_is_read_from_the_provisioning_models_metric(project, provisioning, metric):
    extra = {"job": {"submit": False}} if provisioning == "flexStart" else {}
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": provisioning}, **extra)
    project.quotas[metric] = (16.0, 8.0)  # 8 free, 2 nodes need 16
    result = only(project, "gpu-quota", cfg)
    assert result.status == FAIL
    assert metric in result.summary and "8 free of 16" in result.summary and "need 16" in result.summary
    assert f"--quota-id={metric.replace('_', '-')}-per-project-region --preferred-value=24 " in result.fix
    project.quotas[metric] = (24.0, 8.0)
    assert only(project, "gpu-quota", cfg).status == PASS


def test_h200_reads_the_h200_metric(project):
    project.quotas["PREEMPTIBLE_NVIDIA_H200_GPUS"] = (8.0, 0.0)
    result = only(project, "gpu-quota", config(flavour="h200", region="europe-west1", zone="europe-west1-b"))
    assert result.status == FAIL and "PREEMPTIBLE_NVIDIA_H200_GPUS" in result.summary


def test_a_gpu_quota_neither_the_region_nor_cloud_quotas_knows_warns(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    result = only(project, "gpu-quota")
    assert result.status == WARN and "gpu_family NVIDIA_B200" in result.summary


def family_quota(quota_id, *entries):
    return cloudquotas_v1.QuotaInfo(
        quota_id=quota_id,
        dimensions=["region", "gpu_family"],
        dimensions_infos=[
            cloudquotas_v1.DimensionsInfo(
                dimensions=dims,
                details=cloudquotas_v1.QuotaDetails(value=value),
                applicable_locations=[dims.get("region", "us-east1")],
            )
            for dims, value in entries
        ],
    )


def test_an_on_demand_family_quota_is_read_from_cloud_quotas_when_the_region_lists_none(project):
    del project.quotas["NVIDIA_B200_GPUS"]
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": "onDemand"})
    project.quota_infos[GPU_FAMILY_QUOTA] = family_quota(
        GPU_FAMILY_QUOTA,
        ({"region": "us-east1", "gpu_family": "NVIDIA_H100"}, 64),  # another family: ignored
        ({"region": "us-central1", "gpu_family": "NVIDIA_B200"}, 64),  # another region: ignored
        ({"region": "us-east1", "gpu_family": "NVIDIA_B200"}, 8),
    )
    result = only(project, "gpu-quota", cfg)
    assert result.status == FAIL and "limit 8" in result.summary and "need 16" in result.summary
    assert (
        f"--quota-id={GPU_FAMILY_QUOTA} --preferred-value=16 --dimensions=gpu_family=NVIDIA_B200,region=us-east1"
        in result.fix
    )
    project.quota_infos[GPU_FAMILY_QUOTA] = family_quota(
        GPU_FAMILY_QUOTA, ({"region": "us-east1", "gpu_family": "NVIDIA_B200"}, 16)
    )
    assert only(project, "gpu-quota", cfg).status == PASS


def test_a_spot_quota_is_read_from_cloud_quotas_by_its_preemptible_id(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.quota_infos["PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region"] = cloudquotas_v1.QuotaInfo(
        quota_id="PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region",
        dimensions=["region"],
        dimensions_infos=[
            cloudquotas_v1.DimensionsInfo(
                dimensions={},
                details=cloudquotas_v1.QuotaDetails(value=0),
                applicable_locations=["us-east1", "us-central1"],
            )
        ],
    )
    result = only(project, "gpu-quota")
    assert result.status == FAIL and "limit 0" in result.summary
    assert "--dimensions=region=us-east1 " in result.fix


def test_a_gpu_quota_neither_the_region_nor_cloud_quotas_knows_warns_naming_both_ids_asked_and_how_to_look(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    # A family quota whose only entries are for another region and another family applies to nothing.
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY,
        family_entry({"region": "us-central1", **B200}, 64, []),
        family_entry({"gpu_family": "NVIDIA_H100"}, 64, ["global"]),
    )
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        WARN,
        (
            "us-east1 lists no PREEMPTIBLE_NVIDIA_B200_GPUS quota and Cloud Quotas has none of "
            f"PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region, {PREEMPTIBLE_FAMILY} for gpu_family NVIDIA_B200; "
            "2 x a4-highgpu-8g need 16"
        ),
    ), result
    assert result.fix == (
        "gcloud compute regions describe us-east1 --project my-gcp-project "
        "--format='table(quotas.metric,quotas.limit,quotas.usage)'"
    )


def test_a_spot_pool_reads_the_preemptible_family_quota_once_its_model_id_is_not_found(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.quota_infos[GPU_FAMILY_QUOTA] = family_quota_of(  # on-demand: not what spot VMs use
        GPU_FAMILY_QUOTA, family_entry({"region": "us-east1", **B200}, 0, ["us-east1"])
    )
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 16, ["us-east1"])
    )
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        PASS,
        (
            f"{PREEMPTIBLE_FAMILY} (region=us-east1, gpu_family=NVIDIA_B200): limit 16; 2 x a4-highgpu-8g need 16 "
            "(usage not shown here)"
        ),
    ), result
    asked = [(kw["name"].rsplit("/", 1)[-1], kw["timeout"]) for c, m, kw in project.calls if m == "get_quota_info"]
    assert asked == [("PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region", 5), (PREEMPTIBLE_FAMILY, 5)]


def test_a_model_quota_with_no_entry_for_the_region_falls_through_to_the_family_quota(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    model = "PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region"
    project.quota_infos[model] = family_quota_of(model, family_entry({"region": "us-central1"}, 64, ["us-central1"]))
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 8, ["us-east1"])
    )
    result = only(project, "gpu-quota")
    assert (
        result.status == FAIL and result.summary.startswith(f"{PREEMPTIBLE_FAMILY} (") and "limit 8;" in result.summary
    )


def test_cloud_quotas_that_cannot_be_read_warn_with_the_reason_and_how_to_look(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.errors["get_quota_info"] = gexc.PermissionDenied("caller lacks cloudquotas.quotas.get")
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        WARN,
        (
            "us-east1 lists no PREEMPTIBLE_NVIDIA_B200_GPUS quota, and Cloud Quotas could not be read "
            "(caller lacks cloudquotas.quotas.get); 2 x a4-highgpu-8g need 16"
        ),
    ), result
    assert result.fix.startswith("gcloud compute regions describe us-east1 --project my-gcp-project ")


@pytest.mark.parametrize("order", ["regional first", "family-wide first"])
def test_the_regional_entry_of_a_family_quota_wins_over_its_family_wide_default_in_any_order(project, order):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    regional = family_entry({"region": "us-east1", **B200}, 0, ["us-east1"])
    default = family_entry(dict(B200), 64, ["global"])
    entries = [regional, default] if order == "regional first" else [default, regional]
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-central1", **B200}, 64, ["us-central1"]), *entries
    )
    result = only(project, "gpu-quota")
    assert result.status == FAIL and "limit 0;" in result.summary, result


def test_a_family_wide_default_that_applies_globally_is_the_limit_when_no_regional_entry_exists(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY,
        family_entry(dict(B200), 64, ["us-central1"]),  # family-wide, for another location
        family_entry({"region": "europe-west1", **B200}, 0, []),  # another region, no locations
        family_entry(dict(B200), 8, ["global"]),
    )
    result = only(project, "gpu-quota")
    assert result.status == FAIL and "limit 8;" in result.summary, result


def test_the_regional_gpu_quota_is_read_from_the_stacks_region_and_a_shortfall_is_requested_there(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (64.0, 50.0)
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        FAIL,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 14 free of 64; 2 x a4-highgpu-8g need 16",
    ), result
    assert (
        "--quota-id=PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region --preferred-value=66 --dimensions=region=us-east1 "
        in result.fix
    )
    asked = [kw for c, m, kw in project.calls if (c, m) == ("regions", "get")]
    assert asked == [{"project": "my-gcp-project", "region": "us-east1", "timeout": 5}]
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (64.0, 48.0)
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        PASS,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 16 free of 64; 2 x a4-highgpu-8g need 16",
    ), result


def global_results(project, cfg=None) -> dict[str, Result]:
    return {r.summary.split(":", 1)[0]: r for r in run(project, cfg)["global-quota"]}


def test_a_project_wide_gpu_quota_of_zero_fails_whatever_the_region_grants(project):
    project.global_quotas["GPUS_ALL_REGIONS"] = (0.0, 0.0)  # the region grants 64 (FakeProject.quotas)
    result = global_results(project)["GPUS_ALL_REGIONS"]
    assert result.status == FAIL and "needs 16" in result.summary
    assert result.summary.endswith("); a project-wide 0 overrides every regional grant"), result.summary
    assert result.fix.startswith(
        "gcloud beta quotas preferences create --service=compute.googleapis.com "
        "--quota-id=GPUS-ALL-REGIONS-per-project --preferred-value=16 --project=my-gcp-project"
    )
    assert only(project, "gpu-quota").status == PASS  # the regional check alone would have passed


def test_project_wide_cpus_count_the_gpu_nodes_and_the_system_pool_with_its_surge_node(project):
    cfg = config(gpuPool={"nodeCount": 1, "provisioning": "spot"})
    need = 224 + (1 + 1) * 16  # a4-highgpu-8g has 224 vCPUs; one n2-highmem-16 system node plus one surge node
    project.global_quotas["CPUS_ALL_REGIONS"] = (need + 15.0, 16.0)
    result = global_results(project, cfg)["CPUS_ALL_REGIONS"]
    assert result.status == FAIL and f"needs {need}" in result.summary
    assert f"--preferred-value={need + 16} " in result.fix
    project.global_quotas["CPUS_ALL_REGIONS"] = (need + 16.0, 16.0)
    assert global_results(project, cfg)["CPUS_ALL_REGIONS"].status == PASS


def test_a_reserved_gpu_pool_takes_no_project_wide_gpus(project):
    project.global_quotas["GPUS_ALL_REGIONS"] = (0.0, 0.0)
    project.reservations["r"] = reservation(count=2)
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    assert global_results(project, cfg)["GPUS_ALL_REGIONS"].status == PASS


def test_project_wide_needs_count_what_each_cluster_takes_and_say_what_was_counted():
    assert global_quota_needs(config()) == (
        16,
        2 * 224 + (1 + 1) * 16,
        "2 x a4-highgpu-8g, 1 + 1 surge x n2-highmem-16",
    )
    reserved = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    assert global_quota_needs(reserved) == (
        0,
        32,
        "the GPU pool's in its reservation, 1 + 1 surge x n2-highmem-16",
    )
    # Autopilot has no system pool; a machine type whose vCPUs are not known here is said, not guessed.
    assert global_quota_needs(config(cluster={"mode": "autopilot"})) == (16, 448, "2 x a4-highgpu-8g")
    assert global_quota_needs(
        config(cluster={"systemPool": {"machineType": "c3-standard-22", "allowUncataloguedMachineType": True}})
    ) == (16, 448, "2 x a4-highgpu-8g, not the system pool (c3-standard-22: vCPUs not known here)")


def test_an_unlisted_project_wide_gpu_quota_warns_with_how_to_look_and_the_cpus_are_still_checked(project):
    del project.global_quotas["GPUS_ALL_REGIONS"]
    results = run(project)["global-quota"]
    assert [r.status for r in results] == [WARN, PASS], results
    assert results[0].summary.startswith("the project lists no GPUS_ALL_REGIONS quota; the stack needs 16 (")
    assert results[0].fix == (
        "gcloud compute project-info describe --project my-gcp-project "
        "--format='table(quotas.metric,quotas.limit,quotas.usage)'"
    )
    asked = [kw for c, m, kw in project.calls if (c, m) == ("compute_projects", "get")]
    assert asked == [{"project": "my-gcp-project", "timeout": 5}]


def test_a_project_wide_quota_the_project_does_not_list_warns(project):
    del project.global_quotas["CPUS_ALL_REGIONS"]
    (cpus,) = [r for r in run(project)["global-quota"] if "CPUS_ALL_REGIONS" in r.summary]
    assert cpus.status == WARN and "lists no CPUS_ALL_REGIONS quota" in cpus.summary


def test_a_reservation_needs_no_gpu_quota(project):
    project.quotas.clear()
    project.reservations["r"] = reservation(count=2)
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    result = only(project, "gpu-quota", cfg)
    assert (result.status, result.summary) == (
        PASS,
        "a reservation brings its own quota (see the reservation check)",
    )


RESERVED = {"gpuPool": {"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"}}


def test_a_reservation_with_room_for_the_pool_passes(project):
    project.reservations["r"] = reservation(count=4, in_use=2)
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == PASS and "2 of 4" in result.summary


def test_a_missing_reservation_fails(project):
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == FAIL and "no reservation 'r' in us-east1-b" in result.summary
    assert result.fix == (
        "gcloud compute reservations list --project my-gcp-project  "
        "# then set gpuPool.reservationName and zone to one listed"
    )
    asked = [kw for c, m, kw in project.calls if (c, m) == ("reservations", "get")]
    assert asked == [{"project": "my-gcp-project", "zone": "us-east1-b", "reservation": "r", "timeout": 5}]


def test_a_reservation_in_another_zone_fails(project):
    project.reservations["r"] = reservation(zone="us-east1-c")
    assert only(project, "reservation", config(**RESERVED)).status == FAIL


def test_a_reservation_of_another_machine_type_fails(project):
    project.reservations["r"] = reservation(machine="a3-ultragpu-8g")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        FAIL,
        "r reserves a3-ultragpu-8g, not a4-highgpu-8g (flavour b200)",
    )
    assert (
        result.fix
        == "pulumi config set --stack dev --path gpuPool.reservationName <a reservation of a4-highgpu-8g in us-east1-b>"
    )


def test_a_reservation_naming_its_machine_type_by_url_is_of_that_machine_type(project):
    project.reservations["r"] = reservation(machine=f"projects/{PROJECT}/zones/us-east1-b/machineTypes/a4-highgpu-8g")
    assert only(project, "reservation", config(**RESERVED)).status == PASS


def test_a_reservation_of_neither_a_machine_type_nor_a_template_fails(project):
    project.reservations["r"] = reservation(machine="")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        FAIL,
        "r reserves no specific machine type, not a4-highgpu-8g (flavour b200)",
    )


def test_a_reservation_without_room_fails_with_the_resize_command(project):
    project.reservations["r"] = reservation(count=4, in_use=3)
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == FAIL and "1 of 4" in result.summary
    assert "gcloud compute reservations update r --zone us-east1-b --vm-count 5" in result.fix


def test_a_reservation_of_an_instance_template_warns_that_its_machine_type_is_unknown(project):
    project.reservations["r"] = compute_v1.Reservation(
        name="r",
        zone=f"projects/{PROJECT}/zones/us-east1-b",
        status="READY",
        specific_reservation=compute_v1.AllocationSpecificSKUReservation(
            count=2, source_instance_template=f"projects/{PROJECT}/global/instanceTemplates/a4-template"
        ),
    )
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        WARN,
        (
            "r reserves VMs of instance template a4-template: make sure it is a4-highgpu-8g; 2 reserved, 0 in use, "
            "the pool needs 2"
        ),
    ), result


def test_a_reservation_that_is_not_ready_warns(project):
    project.reservations["r"] = reservation(status="CREATING")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        WARN,
        "r in us-east1-b: 4 of 4 a4-highgpu-8g free; the pool needs 2; status CREATING, not READY",
    )


def test_no_reservation_is_asked_for_without_one(project):
    result = only(project, "reservation")
    assert (result.status, result.summary) == (PASS, "none used (gpuPool.provisioning: spot)")
    assert not any(c == "reservations" for c, _, _ in project.calls)


def test_a_gpu_family_quota_of_zero_fails_even_when_the_regions_per_model_quota_has_room(project):
    # Both apply: the per-model regional metric and the Cloud Quotas family quota (issue 33).
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 0, ["us-east1"])
    )
    result = only(project, "gpu-quota")
    assert result == Result(
        "gpu-quota",
        FAIL,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 64 free of 64; 2 x a4-highgpu-8g need 16; but "
        f"{PREEMPTIBLE_FAMILY} (region=us-east1, gpu_family=NVIDIA_B200): limit 0; 2 x a4-highgpu-8g need 16 "
        "(usage not shown here)",
        "gcloud beta quotas preferences create --service=compute.googleapis.com "
        f"--quota-id={PREEMPTIBLE_FAMILY} --preferred-value=16 --dimensions=gpu_family=NVIDIA_B200,region=us-east1 "
        f"--project={PROJECT} --email=<you>",
    )
    asked = [kw["name"].rsplit("/", 1)[-1] for c, m, kw in project.calls if m == "get_quota_info"]
    assert asked == [PREEMPTIBLE_FAMILY], "the per-model id is read from the region, only the family from Cloud Quotas"


def test_a_gpu_family_quota_with_room_beside_the_regions_per_model_quota_passes_naming_both(project):
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 32, ["us-east1"])
    )
    assert only(project, "gpu-quota") == Result(
        "gpu-quota",
        PASS,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 64 free of 64; 2 x a4-highgpu-8g need 16; and "
        f"{PREEMPTIBLE_FAMILY} (region=us-east1, gpu_family=NVIDIA_B200): limit 32; 2 x a4-highgpu-8g need 16 "
        "(usage not shown here)",
    )


def test_a_per_model_shortfall_fails_even_when_the_family_quota_has_room(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (8.0, 0.0)
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 64, ["us-east1"])
    )
    result = only(project, "gpu-quota")
    assert result.status == FAIL and result.summary.startswith("PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free")
    assert "--quota-id=PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region --preferred-value=16" in result.fix


def test_a_family_quota_that_cannot_be_read_beside_a_per_model_quota_with_room_warns_with_the_reason(project):
    project.errors["get_quota_info"] = gexc.PermissionDenied("Cloud Quotas API has not been used")
    assert only(project, "gpu-quota") == Result(
        "gpu-quota",
        WARN,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 64 free of 64; 2 x a4-highgpu-8g need 16; the GPU family quota "
        f"{PREEMPTIBLE_FAMILY} could not be read (Cloud Quotas API has not been used)",
        f"gcloud services enable cloudquotas.googleapis.com --project {PROJECT}  # and hold cloudquotas.quotas.get",
    )
