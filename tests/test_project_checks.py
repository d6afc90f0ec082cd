"""The doctor's API and IAM checks (tools/doctor/project_checks.py) against faked Google Cloud answers."""

from __future__ import annotations

import pytest
from doctor_fakes import NUMBER, PROJECT, FakeProject, config, only, run

from infra.project_apis import REQUIRED_APIS
from tools.deployer_permissions import required_permissions
from tools.doctor import project_checks
from tools.doctor.check_context import FAIL, PASS, WARN, Result
from tools.doctor.project_checks import CLOUD_QUOTAS_API, ORG_POLICY_API


@pytest.fixture
def project():
    return FakeProject()


def test_an_api_that_is_off_fails_with_the_enable_command_and_skips_its_checks(project, monkeypatch):
    monkeypatch.setattr(project_checks, "manages_apis", lambda cfg: False)  # manageApis: false
    project.enabled -= {"lustre.googleapis.com", "container.googleapis.com"}
    checks = run(project)
    apis = checks["apis"][0]
    assert apis.status == FAIL
    assert "container.googleapis.com" in apis.summary and "lustre.googleapis.com" in apis.summary
    assert apis.fix == f"gcloud services enable container.googleapis.com lustre.googleapis.com --project {PROJECT}"
    for check, api in (("lustre", "lustre.googleapis.com"), ("gke-versions", "container.googleapis.com")):
        (result,) = checks[check]
        assert result.status == WARN and api in result.summary
    assert not any(m in ("list_locations", "get_server_config") for _, m, _ in project.calls)


def test_apis_off_only_warn_when_pulumi_up_enables_them(project, monkeypatch):
    monkeypatch.setattr(project_checks, "manages_apis", lambda cfg: True)
    project.enabled.discard("lustre.googleapis.com")
    assert only(project, "apis").status == WARN


def test_the_org_policy_api_off_skips_only_the_policy_checks(project):
    project.enabled.discard(ORG_POLICY_API)
    checks = run(project)
    assert checks["apis"][0].status == PASS
    assert checks["org-policy"][0].status == WARN


def test_an_api_that_service_usage_leaves_out_of_its_answer_counts_as_off(project):
    # BatchGetServicesResponse.services is "the requested Service states" (google-cloud-service-usage 1.18.0,
    # types/serviceusage.py): nothing promises one per name asked, so a name left out is not taken as on.
    project.unanswered = {"lustre.googleapis.com"}  # enabled in the project, but not in the answer
    checks = run(project, config(manageApis=False))
    enable = f"gcloud services enable lustre.googleapis.com --project {PROJECT}"
    assert checks["apis"] == [Result("apis", FAIL, "off: lustre.googleapis.com", enable)]
    assert checks["lustre"] == [Result("lustre", WARN, "not checked: lustre.googleapis.com is off", enable)]


def test_missing_permissions_fail_with_the_roles_that_grant_them(project):
    project.denied = {"lustre.instances.create", "servicenetworking.services.addPeering"}
    result = only(project, "iam")
    assert result.status == FAIL
    assert "lustre.instances.create" in result.summary and "servicenetworking.services.addPeering" in result.summary
    assert "--role=roles/lustre.admin" in result.fix and "--role=roles/servicenetworking.networksAdmin" in result.fix


def test_every_permission_of_the_stack_is_asked_for(project):
    cfg = config()
    only(project, "iam", cfg)
    asked = {p for c, m, kw in project.calls if m == "test_iam_permissions" for p in kw["request"]["permissions"]}
    assert asked == set(required_permissions(cfg))


def test_the_api_check_asks_in_batches_under_the_project_number_and_its_results_are_whole(project, monkeypatch):
    monkeypatch.setattr(project_checks, "SERVICE_USAGE_BATCH", 5)
    wanted = [*REQUIRED_APIS, ORG_POLICY_API, CLOUD_QUOTAS_API]
    project.enabled -= {wanted[0], wanted[-1]}  # the first batch's first API, and Cloud Quotas (not required)
    result = only(project, "apis", config(manageApis=False))
    requests = [kw for c, m, kw in project.calls if m == "batch_get_services"]
    assert [r["request"]["names"] for r in requests] == [
        [f"projects/{NUMBER}/services/{api}" for api in wanted[i : i + 5]] for i in range(0, len(wanted), 5)
    ]
    assert all(r["request"]["parent"] == f"projects/{NUMBER}" and r["timeout"] == 5 for r in requests)
    enable = f"gcloud services enable {wanted[0]} --project {PROJECT}"
    assert result == Result("apis", FAIL, f"off: {wanted[0]}", enable)
    project.enabled.discard(wanted[1])
    assert only(project, "apis", config(manageApis=False)).summary == f"off: {wanted[0]}, {wanted[1]}"
    project.enabled.discard(wanted[1])
    result = only(project, "apis")
    assert result == Result(
        "apis",
        WARN,
        f"off, and `pulumi up` enables them (project.manageApis): {wanted[0]}, {wanted[1]}; "
        "the checks that need them are skipped until then",
        f"gcloud services enable {wanted[0]} {wanted[1]} --project {PROJECT}",
    )
    project.enabled |= set(wanted)
    assert only(project, "apis") == Result("apis", PASS, f"all {len(REQUIRED_APIS)} APIs the stack uses are enabled")


def test_the_iam_check_asks_in_batches_and_its_failure_is_whole(project, monkeypatch):
    monkeypatch.setattr(project_checks, "TEST_IAM_BATCH", 10)
    needed = required_permissions(config())
    wanted = sorted(needed)
    project.denied = {wanted[0], wanted[-1]}
    result = only(project, "iam")
    requests = [kw for c, m, kw in project.calls if m == "test_iam_permissions"]
    assert [r["request"]["permissions"] for r in requests] == [wanted[i : i + 10] for i in range(0, len(wanted), 10)]
    assert all(r["request"]["resource"] == f"projects/{PROJECT}" and r["timeout"] == 5 for r in requests)
    roles = sorted({needed[wanted[0]], needed[wanted[-1]]})
    assert result == Result(
        "iam",
        FAIL,
        f"missing 2 permission(s): {wanted[0]}, {wanted[-1]}",
        " && ".join(f"gcloud projects add-iam-policy-binding {PROJECT} --member=user:<you> --role={r}" for r in roles),
    )
    project.denied = set()
    assert only(project, "iam") == Result(
        "iam", PASS, f"you hold all {len(wanted)} permissions `pulumi up` and `pulumi destroy` use"
    )


def test_a_streaming_stack_needs_the_container_file_system_api_and_the_doctor_says_so(project):
    """cluster.imageStreaming: GKE Image streaming needs containerfilesystem.googleapis.com, which no resource calls,
    so the doctor names it from the stack's own API list (infra.project_apis.required_apis)."""
    project.enabled.add("artifactregistry.googleapis.com")
    assert "containerfilesystem.googleapis.com" not in project.enabled
    assert only(project, "apis", config(manageApis=False)).status == PASS  # not this stack's
    streaming = config(manageApis=False, cluster={"imageStreaming": True})
    assert only(project, "apis", streaming).summary == "off: containerfilesystem.googleapis.com"
