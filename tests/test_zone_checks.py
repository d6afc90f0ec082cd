"""The doctor's zone, Managed Lustre and capacity-ladder checks (tools/doctor/zone_checks.py) against
faked Google Cloud answers.
"""

from __future__ import annotations

import pytest
from doctor_fakes import (
    B200,
    NUMBER,
    PREEMPTIBLE_FAMILY,
    PROJECT,
    FakeProject,
    b200_reservation,
    compute_v1,
    config,
    family_entry,
    family_quota_of,
    only,
    run,
)

from tools.doctor.check_context import FAIL, PASS, WARN, Result
from tools.doctor.quota_checks import LADDER_ELSEWHERE


@pytest.fixture
def project():
    return FakeProject()


def test_a_zone_without_the_machine_type_fails(project):
    project.machine_types.discard("a4-highgpu-8g")
    result = only(project, "zone")
    assert result.status == FAIL and "a4-highgpu-8g" in result.summary


def test_a_zone_without_the_system_pools_machine_type_fails(project):
    project.machine_types.discard("n2-highmem-16")
    result = only(project, "zone")
    assert result.status == FAIL and "cluster.systemPool.machineType" in result.summary


def test_a_zone_without_the_roce_profile_fails(project):
    project.profiles.clear()
    result = only(project, "zone")
    assert result.status == FAIL and "us-east1-b-vpc-roce" in result.summary


def test_the_zone_check_asks_for_both_machine_types_and_the_roce_profile_in_the_stacks_zone_and_passes_whole(project):
    assert only(project, "zone") == Result(
        "zone",
        PASS,
        "us-east1-b offers a4-highgpu-8g, n2-highmem-16 and the us-east1-b-vpc-roce network profile",
    )
    asked = [(c, kw) for c, m, kw in project.calls if c in ("machine_types", "network_profiles")]
    assert asked == [
        ("machine_types", {"project": PROJECT, "zone": "us-east1-b", "machine_type": "a4-highgpu-8g", "timeout": 5}),
        ("machine_types", {"project": PROJECT, "zone": "us-east1-b", "machine_type": "n2-highmem-16", "timeout": 5}),
        ("network_profiles", {"project": PROJECT, "network_profile": "us-east1-b-vpc-roce", "timeout": 5}),
    ]


def zone_fix(machine):
    return (
        f"gcloud compute machine-types list --filter=name={machine} --project {PROJECT}"
        "  # then: pulumi config set --stack dev region <region> && pulumi config set --stack dev zone <a zone listed>"
    )


def test_a_zone_without_the_flavours_machine_type_fails_whole_and_asks_no_further(project):
    project.machine_types.discard("a4-highgpu-8g")
    assert only(project, "zone") == Result(
        "zone", FAIL, "us-east1-b does not offer a4-highgpu-8g (flavour b200)", zone_fix("a4-highgpu-8g")
    )
    assert [kw["machine_type"] for c, m, kw in project.calls if c == "machine_types"] == ["a4-highgpu-8g"]
    assert not any(c == "network_profiles" for c, _, _ in project.calls)


def test_a_zone_without_the_system_pools_machine_type_fails_whole(project):
    project.machine_types.discard("n2-highmem-16")
    assert only(project, "zone") == Result(
        "zone",
        FAIL,
        "us-east1-b does not offer n2-highmem-16 (cluster.systemPool.machineType)",
        zone_fix("n2-highmem-16"),
    )
    assert not any(c == "network_profiles" for c, _, _ in project.calls)


def test_a_zone_without_the_roce_profile_fails_whole(project):
    project.profiles.clear()
    assert only(project, "zone") == Result(
        "zone",
        FAIL,
        "us-east1-b has no RoCE network profile us-east1-b-vpc-roce for the RDMA VPC",
        f"gcloud compute network-profiles list --project {PROJECT}"
        " # then pulumi config set --stack dev zone <a zone with a -vpc-roce profile>",
    )


def test_the_zone_check_reads_the_h200_flavour_and_its_zone(project):
    project.machine_types = {"a3-ultragpu-8g", "n2-highmem-16"}
    project.profiles = {"europe-west1-b-vpc-roce"}
    cfg = config(flavour="h200", region="europe-west1", zone="europe-west1-b")
    assert only(project, "zone", cfg) == Result(
        "zone",
        PASS,
        "europe-west1-b offers a3-ultragpu-8g, n2-highmem-16 and the europe-west1-b-vpc-roce network profile",
    )


def test_lustre_not_offered_in_the_zone_fails_and_names_a_zone_that_is(project):
    project.lustre_zones = ["us-east1-c", "us-central1-a"]
    result = only(project, "lustre")
    assert result.status == FAIL and result.fix == "pulumi config set --stack dev zone us-east1-c"


def test_lustre_at_its_instance_limit_fails(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(20)]
    assert only(project, "lustre").status == FAIL


def test_an_existing_lustre_instance_of_the_same_id_warns(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-b/instances/dev-lustre"]
    assert only(project, "lustre").status == WARN


def test_lustre_offered_in_the_zone_with_room_passes_whole_and_asks_the_project(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(19)]
    assert only(project, "lustre") == Result("lustre", PASS, "offered in us-east1-b; 19 of 20 instances in use")
    asked = [(m, kw) for c, m, kw in project.calls if c == "lustre"]
    assert asked == [
        ("list_locations", {"request": {"name": f"projects/{PROJECT}", "page_size": 1000}, "timeout": 5}),
        ("list_instances", {"parent": f"projects/{PROJECT}/locations/-", "timeout": 5}),
    ]


def test_lustre_not_offered_in_the_zone_names_the_first_offered_zone_of_the_region(project):
    project.lustre_zones = ["us-east1-d", "us-central1-a", "us-east1-c"]
    assert only(project, "lustre") == Result(
        "lustre",
        FAIL,
        "Managed Lustre is not offered in us-east1-b",
        "pulumi config set --stack dev zone us-east1-c",
    )
    assert not any(m == "list_instances" for _, m, _ in project.calls)


def test_lustre_offered_only_outside_the_region_lists_where_it_is(project):
    # us-east10 is another region, though its name starts with "us-east1".
    project.lustre_zones = ["us-east10-a", "europe-west4-a"]
    assert only(project, "lustre") == Result(
        "lustre",
        FAIL,
        "Managed Lustre is not offered in us-east1-b",
        "choose a region and zone where Managed Lustre is offered: europe-west4-a, us-east10-a",
    )
    project.lustre_zones = []
    assert only(project, "lustre").fix == "choose a region and zone where Managed Lustre is offered: none listed"


def test_lustre_at_its_instance_limit_fails_whole(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(20)]
    assert only(project, "lustre") == Result(
        "lustre",
        FAIL,
        "the project already has 20 Managed Lustre instances (limit 20)",
        f"gcloud lustre instances list --location=- --project {PROJECT}  # delete one",
    )


def test_an_existing_lustre_instance_of_the_same_id_in_the_zone_warns_whole_and_elsewhere_does_not(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/dev-lustre"]
    assert only(project, "lustre").status == PASS
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-b/instances/dev-lustre"] * 20
    assert only(project, "lustre") == Result(
        "lustre",
        WARN,
        "instance dev-lustre already exists in us-east1-b: fine if this stack created it, otherwise `pulumi up` "
        "fails to create it",
        "pulumi config set --stack dev --path lustre.instanceId <another id>",
    )


def ladder_config(*rungs, nodes=2):
    return config(gpuPool={"nodeCount": nodes, "capacity": {"ladder": list(rungs)}})


def test_every_rung_of_the_ladder_is_checked_against_its_own_quota_or_reservation(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (16.0, 8.0)  # 8 free: spot and flex-start cannot hold 2 nodes
    project.quotas["NVIDIA_B200_GPUS"] = (32.0, 0.0)
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=4, in_use=3)  # 1 free of the 2 needed
    cfg = ladder_config({"reservation": "my-a4-block"}, "flexStart", "spot", "onDemand")
    results = run(project, cfg)["capacity-ladder"]
    assert [(r.summary.split(":")[0], r.status) for r in results] == [
        ("rung 1 reservation my-a4-block", FAIL),
        ("rung 2 flexStart", FAIL),
        ("rung 3 spot", FAIL),
        ("rung 4 onDemand", PASS),
    ]
    assert "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16" in results[1].summary
    assert "NVIDIA_B200_GPUS in us-east1: 32 free of 32" in results[3].summary
    assert "1 of 4" in results[0].summary and "--vm-count 5" in results[0].fix
    # The single-pool checks defer to the ladder's instead of checking `provisioning`'s default.
    assert only(project, "gpu-quota", cfg) == Result("gpu-quota", PASS, LADDER_ELSEWHERE)
    assert only(project, "reservation", cfg) == Result("reservation", PASS, LADDER_ELSEWHERE)


def test_a_rungs_missing_reservation_fails_naming_the_rung(project):
    results = run(project, ladder_config({"reservation": "gone"}, "spot"))["capacity-ladder"]
    assert (
        results[0].status == FAIL
        and results[0].summary == "rung 1 reservation gone: no reservation 'gone' in us-east1-b"
    )
    assert results[1].status == PASS


def test_a_one_rung_stack_leaves_quota_to_the_single_pool_checks(project):
    (result,) = run(project)["capacity-ladder"]
    assert result.status == PASS and "one rung" in result.summary


def quota_fix(quota_id, value, dims="--dimensions=region=us-east1 "):
    return (
        f"gcloud beta quotas preferences create --service=compute.googleapis.com --quota-id={quota_id} "
        f"--preferred-value={value} {dims}--project={PROJECT} --email=<you>"
    )


def test_every_rung_of_the_ladder_results_whole_and_each_asks_its_own_reservation_or_region(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (16.0, 8.0)
    project.quotas["NVIDIA_B200_GPUS"] = (32.0, 0.0)
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=4, in_use=3)
    cfg = ladder_config({"reservation": "my-a4-block"}, "flexStart", "spot", "onDemand")
    spot_fix = quota_fix("PREEMPTIBLE-NVIDIA-B200-GPUS-per-project-region", 24)
    assert run(project, cfg)["capacity-ladder"] == [
        Result(
            "capacity-ladder",
            FAIL,
            "rung 1 reservation my-a4-block: my-a4-block in us-east1-b: 1 of 4 a4-highgpu-8g free; the pool needs 2",
            f"gcloud compute reservations update my-a4-block --zone us-east1-b --vm-count 5 --project {PROJECT}"
            "  # or lower gpuPool.nodeCount to 1",
        ),
        Result(
            "capacity-ladder",
            FAIL,
            "rung 2 flexStart: PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16; 2 x a4-highgpu-8g need 16",
            spot_fix,
        ),
        Result(
            "capacity-ladder",
            FAIL,
            "rung 3 spot: PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16; 2 x a4-highgpu-8g need 16",
            spot_fix,
        ),
        Result(
            "capacity-ladder",
            PASS,
            "rung 4 onDemand: NVIDIA_B200_GPUS in us-east1: 32 free of 32; 2 x a4-highgpu-8g need 16",
        ),
    ]
    asked = [(c, kw) for c, m, kw in project.calls if c in ("reservations", "regions")]
    region = ("regions", {"project": PROJECT, "region": "us-east1", "timeout": 5})
    # The single-pool gpu-quota and reservation checks defer to the ladder's: only the rungs ask.
    assert asked == [
        ("reservations", {"project": PROJECT, "zone": "us-east1-b", "reservation": "my-a4-block", "timeout": 5}),
        region,
        region,
        region,
    ]


def test_a_rung_with_room_passes_whole_and_one_read_from_cloud_quotas_is_named_as_its_rung(project):
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=4, in_use=2)
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 8, ["us-east1"])
    )
    results = run(project, ladder_config({"reservation": "my-a4-block"}, "spot"))["capacity-ladder"]
    assert results == [
        Result(
            "capacity-ladder",
            PASS,
            "rung 1 reservation my-a4-block: my-a4-block in us-east1-b: 2 of 4 a4-highgpu-8g free; the pool needs 2",
        ),
        Result(
            "capacity-ladder",
            FAIL,
            f"rung 2 spot: {PREEMPTIBLE_FAMILY} (region=us-east1, gpu_family=NVIDIA_B200): limit 8; "
            "2 x a4-highgpu-8g need 16 (usage not shown here)",
            quota_fix(PREEMPTIBLE_FAMILY, 16, "--dimensions=gpu_family=NVIDIA_B200,region=us-east1 "),
        ),
    ]


def test_a_rungs_missing_reservation_fails_whole_naming_the_rung(project):
    results = run(project, ladder_config({"reservation": "gone"}, "spot"))["capacity-ladder"]
    assert results[0] == Result(
        "capacity-ladder",
        FAIL,
        "rung 1 reservation gone: no reservation 'gone' in us-east1-b",
        f"gcloud compute reservations list --project {PROJECT}  # then set gpuPool.reservationName and zone to one "
        "listed",
    )


def test_a_one_rung_stack_passes_the_ladder_check_whole_and_asks_nothing_for_it(project):
    assert run(project)["capacity-ladder"] == [
        Result("capacity-ladder", PASS, "one rung: the gpu-quota and reservation checks cover it")
    ]
    assert only(project, "gpu-quota").summary.startswith("PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: ")


# ---------------------------------------------------------------- image cache (gpuPool.imageCacheDiskImage)


def cached(disk_image="global/images/nemo-rl-cache"):
    return config(gpuPool={"nodeCount": 2, "provisioning": "spot", "imageCacheDiskImage": disk_image})


def image(name="nemo-rl-cache", status="READY", architecture="X86_64", locations=("us",)):
    return compute_v1.Image(name=name, status=status, architecture=architecture, storage_locations=list(locations))


def test_an_unset_image_cache_passes_without_asking_for_any_image(project):
    assert only(project, "image-cache") == Result(
        "image-cache", PASS, "none set (gpuPool.imageCacheDiskImage): nothing to check"
    )
    assert not [c for c in project.calls if c[0] == "images"]


def test_a_ready_x86_image_stored_in_the_regions_multi_region_passes_and_is_asked_in_the_stacks_project(project):
    project.images[(PROJECT, "nemo-rl-cache")] = image()
    result = only(project, "image-cache", cached())
    assert result.status == PASS, result
    assert "READY" in result.summary and "a4-highgpu-8g in us-east1-b" in result.summary
    asked = [(c, kw) for c, m, kw in project.calls if c == "images"]
    assert asked == [("images", {"project": PROJECT, "image": "nemo-rl-cache", "timeout": 5})]


OTHER = "projects/images-host-1/global/images/nemo-rl-cache"
# The cluster project's service agents GKE's "different project" steps grant read on the image project.
GKE_AGENT = f"serviceAccount:service-{NUMBER}@container-engine-robot.iam.gserviceaccount.com"
GCE_AGENT = f"serviceAccount:service-{NUMBER}@compute-system.iam.gserviceaccount.com"


def grant(project, key, *members, role="roles/compute.imageUser"):
    project.iam.setdefault(key, {}).setdefault(role, []).extend(members)


def test_an_image_of_another_project_that_grants_the_service_agents_read_is_asked_in_that_project(project):
    project.images[("images-host-1", "nemo-rl-cache")] = image(locations=("us-east1",))
    grant(project, "projects/images-host-1", GKE_AGENT, GCE_AGENT)
    result = only(project, "image-cache", cached(OTHER))
    assert result.status == PASS and "(images-host-1)" in result.summary, result
    asked = {(c, m) for c, m, kw in project.calls if kw.get("project") == "images-host-1" or "resource" in kw}
    assert asked == {("images", "get"), ("projects", "get_iam_policy"), ("images", "get_iam_policy")}


def test_an_image_of_another_project_without_the_service_agents_read_fails_with_the_commands_that_grant_it(project):
    project.images[("images-host-1", "nemo-rl-cache")] = image(locations=("us-east1",))
    result = only(project, "image-cache", cached(OTHER))
    assert result.status == FAIL, result
    assert result.summary == (
        "disk image nemo-rl-cache is in project images-host-1, which does not grant "
        f"{GKE_AGENT.split(':')[1]}, {GCE_AGENT.split(':')[1]} roles/compute.imageUser"
    )
    for agent in (GKE_AGENT, GCE_AGENT):
        command = (
            f"gcloud projects add-iam-policy-binding images-host-1 --member={agent} --role=roles/compute.imageUser "
            "--condition=None"
        )
        assert command in result.fix, result.fix


def test_a_grant_on_the_image_itself_counts_and_only_the_agent_still_missing_is_named(project):
    project.images[("images-host-1", "nemo-rl-cache")] = image(locations=("us-east1",))
    grant(project, ("images-host-1", "nemo-rl-cache"), GKE_AGENT)
    result = only(project, "image-cache", cached(OTHER))
    assert result.status == FAIL and GCE_AGENT in result.fix and GKE_AGENT not in result.fix, result
    grant(project, "projects/images-host-1", GCE_AGENT, role="roles/editor")
    assert only(project, "image-cache", cached(OTHER)).status == PASS


def test_a_conditional_grant_does_not_count_as_read_on_the_image(project):
    project.images[("images-host-1", "nemo-rl-cache")] = image(locations=("us-east1",))
    project.iam["projects/images-host-1"] = {"roles/compute.imageUser": [GKE_AGENT, GCE_AGENT]}
    assert only(project, "image-cache", cached(OTHER)).status == PASS
    # The fakes' bindings carry no condition; a policy with one is read by the same helper.
    from tools.doctor.zone_checks import _readers

    conditional = compute_v1.Policy(
        bindings=[
            compute_v1.Binding(
                role="roles/compute.imageUser", members=[GKE_AGENT], condition=compute_v1.Expr(expression="false")
            )
        ]
    )
    assert _readers(conditional) == set()


def test_unreadable_iam_policies_of_the_image_project_warn_with_the_grant_commands(project):
    project.images[("images-host-1", "nemo-rl-cache")] = image(locations=("us-east1",))
    project.unreadable |= {"projects/images-host-1", ("images-host-1", "nemo-rl-cache")}
    result = only(project, "image-cache", cached(OTHER))
    assert result.status == WARN and "could not read its project and image IAM policy" in result.summary, result
    assert "gcloud projects add-iam-policy-binding images-host-1" in result.fix


def test_an_image_of_the_stacks_own_project_asks_no_iam_policy(project):
    project.images[(PROJECT, "nemo-rl-cache")] = image()
    assert only(project, "image-cache", cached()).status == PASS
    assert not [c for c in project.calls if c[1] == "get_iam_policy"]


def test_a_missing_image_fails_naming_it_its_project_and_how_to_build_or_unset_it(project):
    result = only(project, "image-cache", cached())
    assert result.status == FAIL
    assert result.summary == f"disk image nemo-rl-cache not found in project {PROJECT}"
    assert "gke-disk-image-builder" in result.fix
    assert "pulumi config rm --path gpuPool.imageCacheDiskImage" in result.fix


@pytest.mark.parametrize("status", ["PENDING", "FAILED", "DELETING"])
def test_an_image_that_is_not_ready_fails_with_its_status(project, status):
    project.images[(PROJECT, "nemo-rl-cache")] = image(status=status)
    result = only(project, "image-cache", cached())
    assert result.status == FAIL and f"is {status}, not READY" in result.summary, result


def test_an_arm_image_fails_for_the_x86_gpu_machine(project):
    project.images[(PROJECT, "nemo-rl-cache")] = image(architecture="ARM64")
    result = only(project, "image-cache", cached())
    assert result.status == FAIL and "ARM64" in result.summary and "x86_64" in result.summary, result


def test_an_image_without_an_architecture_is_usable(project):
    project.images[(PROJECT, "nemo-rl-cache")] = image(architecture="")
    assert only(project, "image-cache", cached()).status == PASS


def test_an_image_stored_far_from_the_stacks_region_warns_and_says_how_to_store_it_there(project):
    project.images[(PROJECT, "nemo-rl-cache")] = image(locations=("eu",))
    result = only(project, "image-cache", cached())
    assert result.status == WARN and "stored in eu, not in or near us-east1" in result.summary, result
    assert "--storage-location=us-east1" in result.fix


# ---------------------------------------------------------------- placement (gpuPool.compactPlacement)


def test_no_compact_placement_passes_without_asking_anything(project):
    assert only(project, "placement") == Result(
        "placement", PASS, "gpuPool.compactPlacement off: no placement policy asked for"
    )


@pytest.mark.parametrize(
    ("flavour", "zone", "machine"),
    [("b200", "us-east1-b", "a4-highgpu-8g"), ("h200", "us-central1-b", "a3-ultragpu-8g")],
)
def test_compact_placement_on_a4_or_a3_ultra_warns_that_compute_engine_places_their_migs_with_workload_policies(
    project, flavour, zone, machine
):
    pool = {"nodeCount": 2, "provisioning": "spot", "compactPlacement": True}
    cfg = config(flavour=flavour, region=zone[:-2], zone=zone, gpuPool=pool)
    result = only(project, "placement", cfg)
    assert result.status == WARN, result
    assert f"COMPACT placement policy on {machine}" in result.summary and "workload policies" in result.summary
    assert "placement-policy-and-workload-policy" in result.summary
    assert result.fix.startswith("pulumi config set --stack dev --path gpuPool.compactPlacement false")
