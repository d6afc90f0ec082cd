"""The doctor's version-matrix check (tools/doctor/version_drift.py): the live cluster and the channel's
next versions against the stack's row of data/version_matrix.yaml.
"""

from __future__ import annotations

import pytest
from doctor_fakes import PROJECT, FakeProject, config, container_v1, only, run

from tools.doctor.check_context import FAIL, PASS, WARN, Result


@pytest.fixture
def project():
    return FakeProject()


def live_cluster(master: str, pools: dict[str, str], hold: bool = False) -> container_v1.Cluster:
    from infra.naming import Limit
    from infra.stack_context import StackContext

    exclusions = {}
    if hold:
        exclusions["no-minor-or-node-upgrades"] = container_v1.TimeWindow(
            maintenance_exclusion_options=container_v1.MaintenanceExclusionOptions(scope="NO_MINOR_OR_NODE_UPGRADES")
        )
    return container_v1.Cluster(
        name=StackContext.from_config("dev", config()).name("gke", Limit.GKE_CLUSTER),
        current_master_version=master,
        node_pools=[container_v1.NodePool(name=n, version=v) for n, v in pools.items()],
        maintenance_policy=container_v1.MaintenancePolicy(
            window=container_v1.MaintenanceWindow(maintenance_exclusions=exclusions)
        ),
        addons_config=container_v1.AddonsConfig(
            ray_operator_config=container_v1.RayOperatorConfig(enabled=True),
            lustre_csi_driver_config=container_v1.LustreCsiDriverConfig(enabled=True),
        ),
    )


def test_before_the_cluster_exists_the_channels_default_is_compared_with_the_row(project):
    result = only(project, "version-matrix")
    assert (
        result.status == PASS
        and "would create it on 1.33.5-gke.1162000, inside row standard-gib-v1.1.1" in result.summary
    )
    asked = [kw["name"] for c, m, kw in project.calls if m == "get_cluster"]
    # A regional control plane (the default) lives in the region.
    assert asked == [f"projects/{PROJECT}/locations/us-east1/clusters/{live_cluster('1', {}).name}"]


def test_a_channel_default_outside_the_row_warns_and_pins_the_newest_version_inside(project):
    project.channels["REGULAR"] = ("1.36.1-gke.100", ["1.35.4-gke.900", "1.36.1-gke.100"])
    result = only(project, "version-matrix")
    assert result.status == WARN and "1.36.1-gke.100, outside row standard-gib-v1.1.1" in result.summary
    assert result.fix == "pulumi config set --stack dev --path cluster.minMasterVersion 1.35.4-gke.900"


def test_a_live_cluster_inside_the_row_is_reported_with_its_pools_and_add_ons(project):
    project.cluster = live_cluster("1.34.1-gke.1829001", {"gpu": "1.34.1-gke.1829001", "system": "1.34.1-gke.1829001"})
    found = run(project)
    live, upgrades = found["version-matrix"][0], found["version-upgrades"][0]
    assert live.status == PASS
    assert "control plane 1.34.1-gke.1829001, pool gpu 1.34.1-gke.1829001" in live.summary
    assert "Ray operator, Lustre CSI" in live.summary
    assert upgrades.status == PASS and "stay inside" in upgrades.summary


def test_an_upgrade_that_would_leave_the_row_warns_with_the_exclusion_that_prevents_it(project):
    project.channels["REGULAR"] = ("1.35.4-gke.900", ["1.35.4-gke.900", "1.36.0-gke.1200"])
    project.cluster = live_cluster("1.35.4-gke.900", {"gpu": "1.35.4-gke.900"})
    upgrades = run(project)["version-upgrades"][0]
    assert upgrades.status == WARN
    assert "may upgrade" in upgrades.summary and "1.36.0-gke.1200, outside row standard-gib-v1.1.1" in upgrades.summary
    assert "--add-maintenance-exclusion-scope=no_minor_or_node_upgrades" in upgrades.fix
    assert upgrades.fix.startswith("pulumi up")  # cluster.blockNodeUpgrades is on by default: apply it


def test_the_same_upgrade_held_by_a_no_minor_or_node_upgrades_exclusion_passes(project):
    project.channels["REGULAR"] = ("1.35.4-gke.900", ["1.35.4-gke.900", "1.36.0-gke.1200"])
    project.cluster = live_cluster("1.35.4-gke.900", {"gpu": "1.35.4-gke.900"}, hold=True)
    upgrades = run(project)["version-upgrades"][0]
    assert upgrades.status == PASS and "held by maintenance exclusion no-minor-or-node-upgrades" in upgrades.summary


def test_a_node_pool_already_outside_the_row_warns_naming_it(project):
    project.cluster = live_cluster("1.36.0-gke.1200", {"gpu": "1.35.4-gke.900"})
    live = run(project)["version-matrix"][0]
    assert live.status == WARN and live.summary.startswith("control plane 1.36.0-gke.1200 already outside")


BAD_GKE = "1.33.2-gke.1111000"  # data/version_matrix.yaml knownBad gke-1.33.2-gke.1111000-driver-575-vllm (refuse)


def test_a_live_node_pool_on_a_known_bad_gke_version_fails_though_it_is_inside_the_row(project):
    project.cluster = live_cluster("1.33.5-gke.1162000", {"gpu": BAD_GKE, "system": "1.33.5-gke.1162000"})
    found = run(project)
    assert found["version-matrix"][0].status == PASS  # the row's range holds it
    (bad,) = found["version-known-bad"]
    name = project.cluster.name
    assert bad == Result(
        "version-known-bad",
        FAIL,
        f"pool gpu {BAD_GKE} is a known-bad combination (gke-1.33.2-gke.1111000-driver-575-vllm: "
        "https://github.com/vllm-project/vllm/issues/21979)",
        f"gcloud container clusters upgrade {name} --location us-east1 --node-pool gpu --cluster-version "
        "<a version of row standard-gib-v1.1.1 not known-bad>",
    )


def test_a_control_plane_on_a_known_bad_gke_version_fails_and_clean_versions_pass(project):
    project.cluster = live_cluster(BAD_GKE, {"gpu": "1.33.5-gke.1162000"})
    (bad,) = run(project)["version-known-bad"]
    assert bad.status == FAIL and bad.summary.startswith(f"control plane {BAD_GKE} is a known-bad")
    assert "--master --cluster-version" in bad.fix
    project.cluster = live_cluster("1.33.5-gke.1162000", {"gpu": "1.33.5-gke.1162000"})
    assert run(project)["version-known-bad"] == [
        Result(
            "version-known-bad",
            PASS,
            "no known-bad entry of data/version_matrix.yaml meets control plane 1.33.5-gke.1162000, "
            "pool gpu 1.33.5-gke.1162000",
        )
    ]


def test_a_channel_that_would_create_the_cluster_on_a_known_bad_version_fails_before_it_exists(project):
    project.channels["REGULAR"] = (BAD_GKE, [BAD_GKE, "1.33.5-gke.1162000"])
    (bad,) = run(project)["version-known-bad"]
    assert bad.status == FAIL and bad.summary.startswith(f"new cluster {BAD_GKE} is a known-bad")
    assert bad.fix == "pulumi config set --stack dev --path cluster.minMasterVersion 1.33.5-gke.1162000"


def test_a_stack_that_chooses_gib_v1_1_2_is_compared_with_its_own_row_which_the_line_names_with_its_gib(project):
    gib = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib"
    result = only(project, "version-matrix", config(ray={"ncclInstallerImage": f"{gib}:v1.1.2"}))
    assert result.status == PASS, result
    assert "inside row standard-gib-v1.1.2 (GKE >=1.33.2-gke.1111000, <1.36; gIB v1.1.2)" in result.summary
    assert "; gIB v1.1.1)" in only(project, "version-matrix").summary
