"""The doctor's GKE version checks (tools/doctor/gke_version_checks.py): the stack's minimum version and
the release channel's offer.
"""

from __future__ import annotations

import pytest
from doctor_fakes import FakeProject, config, only

from tools.doctor import gke_version_checks
from tools.doctor.check_context import FAIL, PASS
from tools.doctor.gke_version_checks import minimum_gke_version


@pytest.fixture
def project():
    return FakeProject()


def test_the_minimum_gke_version_is_the_highest_floor_and_names_what_sets_it():
    assert minimum_gke_version(config()) == ("1.33.2-gke.4655000", "Lustre on port 988")
    assert minimum_gke_version(config(lustre={"legacyPort": True})) == (
        "1.33.2-gke.1111000",
        "the Managed Lustre CSI driver",
    )


def test_the_minimum_gke_version_compares_versions_as_numbers_not_as_text(monkeypatch):
    import dataclasses

    from infra import flavours

    # 1.33.10 is above 1.33.2 though "1.33.10" < "1.33.2" as text.
    monkeypatch.setitem(
        flavours.FLAVOURS, "b200", dataclasses.replace(flavours.FLAVOURS["b200"], min_gke_version="1.33.10-gke.100")
    )
    assert minimum_gke_version(config()) == ("1.33.10-gke.100", "flavour b200")


def test_a_channel_default_below_the_flavours_minimum_fails_and_names_a_version_that_fits(project):
    project.channels["REGULAR"] = ("1.32.1-gke.100", ["1.32.1-gke.100", "1.33.3-gke.1000"])
    result = only(project, "gke-versions")
    assert result.status == FAIL and "1.32.1-gke.100" in result.summary
    assert result.fix == "pulumi config set --stack dev --path cluster.minMasterVersion 1.33.3-gke.1000"


def test_a_channel_with_nothing_new_enough_points_to_a_channel_that_has_it(project):
    project.channels["REGULAR"] = ("1.32.1-gke.100", ["1.32.1-gke.100"])
    result = only(project, "gke-versions")
    assert result.status == FAIL and result.fix == "pulumi config set --stack dev --path cluster.releaseChannel RAPID"


def test_the_legacy_lustre_port_lowers_the_minimum_to_the_lustre_csi_drivers_not_below(project):
    # 1.33.2-gke.2000000: past the Lustre CSI driver's minimum (1.33.2-gke.1111000), before port 988.
    project.channels["REGULAR"] = ("1.33.2-gke.2000000", ["1.33.2-gke.2000000"])
    assert only(project, "gke-versions").status == FAIL
    assert only(project, "gke-versions", config(lustre={"legacyPort": True})).status == PASS


def test_the_legacy_lustre_port_still_needs_the_lustre_csi_drivers_minimum(project):
    # 1.32.3 is past B200's minimum (1.32.2-gke.1475000) but before the CSI driver's 1.33.2-gke.1111000.
    project.channels["REGULAR"] = ("1.32.3-gke.100", ["1.32.3-gke.100"])
    result = only(project, "gke-versions", config(lustre={"legacyPort": True}))
    assert result.status == FAIL and "1.33.2-gke.1111000 (the Managed Lustre CSI driver)" in result.summary


def test_a_min_master_version_the_channel_does_not_offer_fails(project):
    cfg = config(cluster={"minMasterVersion": "1.35.0"})
    result = only(project, "gke-versions", cfg)
    assert result.status == FAIL and "1.35.0" in result.summary
    assert only(project, "gke-versions", config(cluster={"minMasterVersion": "1.34"})).status == PASS


def test_a_ladder_with_flex_start_needs_the_flex_start_gke_version(monkeypatch):
    # Today's flex-start floor (1.32.2) is below the Lustre CSI driver's (1.33.2); a higher one must win.
    monkeypatch.setattr(gke_version_checks, "FLEX_START_MIN_GKE", "1.99.0-gke.1")
    kw = dict(flavour="h200", region="europe-west1", zone="europe-west1-b", lustre={"legacyPort": True})
    h200 = config(**kw, gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "flexStart"]}})
    assert minimum_gke_version(h200) == ("1.99.0-gke.1", "flex-start GPUs")
    spot_only = config(**kw, gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "onDemand"]}})
    assert minimum_gke_version(spot_only)[1] != "flex-start GPUs"


def test_a_ladder_needs_the_custom_compute_class_gke_version_and_names_it(monkeypatch):
    # Today's ComputeClass floor (1.30.3) is below the Lustre CSI driver's (1.33.2); a higher one must win.
    monkeypatch.setattr(gke_version_checks, "CUSTOM_COMPUTE_CLASS_MIN_GKE", "1.99.0-gke.1")
    ladder = config(gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "onDemand"]}})
    assert minimum_gke_version(ladder) == ("1.99.0-gke.1", "the capacity ladder's custom ComputeClass")
    assert minimum_gke_version(config()) == ("1.33.2-gke.4655000", "Lustre on port 988")
