"""Checkpoints survive `pulumi destroy`: the Lustre guard exports before the instance goes.

The provider is driven directly with a fake Managed Lustre client injected at the API boundary
(`infra.lustre_guard.make_client`); requests, operations, metadata and errors are the real
google-cloud-lustre / google-api-core types. The component is checked in the offline plans.
"""

from __future__ import annotations

import concurrent.futures
import pickle
from types import SimpleNamespace
from typing import Any

import dill
import pytest
from conftest import STACKS, merged, run_plan, stack_plan
from google.api_core import exceptions
from lazy_modules import LazyModule

from infra import lustre_guard
from infra.config import ConfigError
from infra.lustre_guard import LustreGuardProvider, TransferError
from workloads.job_types import checkpoint_dir, log_dir, results_dirs

GUARD = "pulumi-python:dynamic/nemo-rl-gke:LustreGuard"
LUSTRE = "gcp:lustre/instance:Instance"
BUCKET = "gcp:storage/bucket:Bucket"
IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
AGENT = "gcp:projects/serviceIdentity:ServiceIdentity"

# Imported by the first test that uses it (tests/lazy_modules.py).
lustre_v1 = LazyModule("google.cloud.lustre_v1")

INSTANCE = "projects/my-gcp-project/locations/us-east1-b/instances/b200-lustre"
PROPS = {
    "project": "my-gcp-project",
    "zone": "us-east1-b",
    "instance_id": "b200-lustre",
    "bucket": "my-gcp-project-b200-artifacts",
    "dirs": ["checkpoints", "logs"],
    "export_on_destroy": True,
    "import_from": "",
    "__provider": "serialized",
}


class FakeOperation:
    """A google.api_core.operation.Operation as far as the guard uses it."""

    def __init__(self, *, error: Exception | None = None, timeout: bool = False, failed: int = 0, samples=()):
        self.operation = SimpleNamespace(name="projects/my-gcp-project/locations/us-east1-b/operations/op-42")
        self._error, self._timeout = error, timeout
        entries = [lustre_v1.ErrorLogEntry(uri=uri, error_details=[detail]) for uri, detail in samples]
        self.metadata = lustre_v1.ExportDataMetadata(
            operation_metadata=lustre_v1.TransferOperationMetadata(
                counters=lustre_v1.TransferCounters(objects_copied_count=10, objects_failed_count=failed),
                error_summaries=[lustre_v1.ErrorSummary(error_count=failed, error_log_entries=entries)]
                if entries
                else [],
            )
        )
        self.waited_with: float | None = None

    def result(self, timeout: float | None = None) -> Any:
        self.waited_with = timeout
        if self._timeout:
            raise concurrent.futures.TimeoutError()
        if self._error is not None:
            raise self._error
        return lustre_v1.ExportDataResponse()


class FakeLustreClient:
    """Records every call; `outcomes` are what successive transfer calls return or raise."""

    def __init__(self, *outcomes: Any, missing: bool = False):
        self.outcomes = list(outcomes)
        self.missing = missing
        self.calls: list[tuple[str, Any]] = []

    def get_instance(self, *, name: str) -> Any:
        self.calls.append(("get_instance", name))
        if self.missing:
            raise exceptions.NotFound(f"Resource '{name}' was not found")
        return lustre_v1.Instance(name=name)

    def _transfer(self, kind: str, request: Any) -> Any:
        self.calls.append((kind, request))
        outcome = self.outcomes.pop(0) if self.outcomes else FakeOperation()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def export_data(self, *, request: lustre_v1.ExportDataRequest) -> Any:
        assert isinstance(request, lustre_v1.ExportDataRequest)
        return self._transfer("export_data", request)

    def import_data(self, *, request: lustre_v1.ImportDataRequest) -> Any:
        assert isinstance(request, lustre_v1.ImportDataRequest)
        return self._transfer("import_data", request)

    def transfers(self) -> list[tuple[str, Any]]:
        return [(k, r) for k, r in self.calls if k != "get_instance"]


@pytest.fixture
def fake(monkeypatch):
    """Install a fake client factory; `fake(client)` returns the projects it was asked for."""
    projects: list[str] = []

    def install(client: FakeLustreClient) -> list[str]:
        def factory(project: str) -> FakeLustreClient:
            projects.append(project)
            return client

        monkeypatch.setattr(lustre_guard, "make_client", factory)
        return projects

    monkeypatch.setattr(lustre_guard, "_sleep", lambda seconds: None)
    return install


def no_client(project: str):
    raise AssertionError(f"the Lustre API was called (project {project})")


# ---------------------------------------------------------------- delete: export


def test_delete_exports_checkpoints_then_logs_of_the_instance_to_the_bucket_and_waits_for_each(fake):
    ops = [FakeOperation(), FakeOperation()]
    client = FakeLustreClient(*ops)
    projects = fake(client)
    LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    assert projects == ["my-gcp-project"]
    exports = client.transfers()
    assert [k for k, _ in exports] == ["export_data", "export_data"]
    assert [(r.name, r.lustre_path.path, r.gcs_path.uri) for _, r in exports] == [
        (INSTANCE, "/checkpoints", "gs://my-gcp-project-b200-artifacts/lustre-export/checkpoints/"),
        (INSTANCE, "/logs", "gs://my-gcp-project-b200-artifacts/lustre-export/logs/"),
    ]
    assert all(op.waited_with == lustre_guard.TRANSFER_TIMEOUT_SECONDS for op in ops), "an export was not waited for"


def test_the_exported_directories_are_where_the_job_writes_on_lustre():
    mount = "/lustre"
    assert checkpoint_dir(mount, "b200", "r").startswith(f"{mount}/{results_dirs()[0]}/")
    assert log_dir(mount, "b200", "r").startswith(f"{mount}/{results_dirs()[1]}/")
    assert [lustre_guard.lustre_path(d) for d in results_dirs()] == ["/checkpoints", "/logs"]


def test_delete_refuses_with_a_clear_message_when_an_export_fails(fake):
    failure = exceptions.PermissionDenied(
        "service-123@gcp-sa-lustre.iam.gserviceaccount.com lacks storage.objects.create"
    )
    client = FakeLustreClient(FakeOperation(error=failure))
    fake(client)
    with pytest.raises(TransferError) as info:
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    msg = str(info.value)
    assert f"Lustre instance {INSTANCE} was NOT deleted" in msg
    assert "bucket my-gcp-project-b200-artifacts" in msg
    assert "/checkpoints" in msg and "gs://my-gcp-project-b200-artifacts/lustre-export/checkpoints/" in msg
    assert "lacks storage.objects.create" in msg and "operations/op-42" in msg
    assert "run `pulumi destroy` again" in msg
    assert "pulumi config set --path lustre.exportOnDestroy false" in msg
    assert len(client.transfers()) == 1, "the next directory was exported after a failure"


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """The credentials boundary, and nothing else: no key file, no ADC file, no gcloud config."""
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))


def test_export_without_credentials_refuses_in_one_actionable_line_and_keeps_the_instance(no_credentials):
    # The real client factory and provider: the google-cloud-lustre client finds no credentials.
    with pytest.raises(TransferError) as info:
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    msg = str(info.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"Lustre instance {INSTANCE} was NOT deleted"), msg  # the guard stays, so does the instance
    assert "DefaultCredentialsError" in msg and "run `gcloud auth application-default login`" in msg, msg
    assert "pulumi config set --path lustre.exportOnDestroy false" in msg, msg
    assert info.value.__cause__ is None and info.value.__suppress_context__, "no chained google-auth traceback"


def test_import_without_credentials_fails_the_create_in_one_line(no_credentials):
    with pytest.raises(TransferError) as info:
        LustreGuardProvider().create({**PROPS, "import_from": "gs://old-bucket/lustre-export/"})
    msg = str(info.value)
    assert "\n" not in msg and "gs://old-bucket/lustre-export/" in msg and "application-default login" in msg, msg


def test_a_failure_after_the_first_directory_says_what_was_already_exported(fake):
    fake(FakeLustreClient(FakeOperation(), FakeOperation(error=exceptions.InternalServerError("boom"))))
    with pytest.raises(
        TransferError, match=r"Already exported: gs://my-gcp-project-b200-artifacts/lustre-export/checkpoints/\."
    ):
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))


def test_objects_that_could_not_be_copied_fail_the_export(fake):
    op = FakeOperation(failed=2, samples=[("/checkpoints/b200/r/step_4/model.pt", "file changed during transfer")])
    fake(FakeLustreClient(op))
    with pytest.raises(TransferError) as info:
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    assert "2 object(s) could not be copied" in str(info.value)
    assert "step_4/model.pt: file changed during transfer" in str(info.value)


def test_an_export_the_api_refuses_to_start_refuses_the_delete(fake):
    fake(FakeLustreClient(exceptions.InvalidArgument("lustre_path /checkpoints does not exist")))
    with pytest.raises(TransferError, match=r"was NOT deleted.*lustre_path /checkpoints does not exist"):
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))


def test_an_export_still_running_at_the_deadline_refuses_the_delete(fake):
    fake(FakeLustreClient(FakeOperation(timeout=True)))
    with pytest.raises(TransferError, match=r"still running after 360 min .*continues in the background"):
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))


def test_a_busy_instance_is_waited_for_before_exporting(fake, monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr(lustre_guard, "_sleep", slept.append)
    client = FakeLustreClient(exceptions.Aborted("unable to queue the operation"), FakeOperation(), FakeOperation())
    fake(client)
    LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    assert slept == [lustre_guard.BUSY_RETRY_SECONDS]
    assert [r.lustre_path.path for _, r in client.transfers()] == ["/checkpoints", "/checkpoints", "/logs"]


def test_an_instance_busy_for_too_long_refuses_the_delete(fake, monkeypatch):
    clock = iter(range(0, 10**6, 600))
    monkeypatch.setattr(lustre_guard, "_monotonic", lambda: float(next(clock)))
    fake(FakeLustreClient(*[exceptions.Aborted("unable to queue the operation")] * 10))
    with pytest.raises(TransferError, match="another transfer kept the instance busy for 30 min"):
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))


def test_delete_skips_the_export_when_the_switch_is_off(monkeypatch):
    monkeypatch.setattr(lustre_guard, "make_client", no_client)
    LustreGuardProvider().delete(INSTANCE, {**PROPS, "export_on_destroy": False})


def test_an_instance_that_is_already_gone_has_nothing_to_export(fake):
    client = FakeLustreClient(missing=True)
    fake(client)
    LustreGuardProvider().delete(INSTANCE, dict(PROPS))
    assert client.calls == [("get_instance", INSTANCE)]


def test_an_instance_that_cannot_be_read_refuses_the_delete(fake):
    class Denied(FakeLustreClient):
        def get_instance(self, *, name):
            raise exceptions.PermissionDenied("lustre.instances.get denied")

    fake(Denied())
    with pytest.raises(TransferError, match=r"was NOT deleted.*lustre.instances.get denied"):
        LustreGuardProvider().delete(INSTANCE, dict(PROPS))


# ---------------------------------------------------------------- create: import


def test_create_imports_the_configured_folder_into_the_filesystem_root_and_waits(fake):
    op = FakeOperation()
    client = FakeLustreClient(op)
    fake(client)
    source = "gs://my-gcp-project-old-artifacts/lustre-export/"
    result = LustreGuardProvider().create({**PROPS, "import_from": source})
    [(kind, request)] = client.transfers()
    assert kind == "import_data"
    assert (request.name, request.gcs_path.uri, request.lustre_path.path) == (INSTANCE, source, "/")
    assert op.waited_with == lustre_guard.TRANSFER_TIMEOUT_SECONDS
    assert result.id == INSTANCE
    assert result.outs["imported_from"] == source and "__provider" not in result.outs
    assert result.outs["export_root"] == "gs://my-gcp-project-b200-artifacts/lustre-export/"


def test_create_without_an_import_calls_no_api(monkeypatch):
    monkeypatch.setattr(lustre_guard, "make_client", no_client)
    result = LustreGuardProvider().create(dict(PROPS))
    assert result.id == INSTANCE and result.outs["imported_from"] == ""


def test_a_failed_import_fails_the_create_with_what_to_do(fake):
    fake(FakeLustreClient(FakeOperation(error=exceptions.NotFound("gs://gone/lustre-export/ not found"))))
    with pytest.raises(TransferError) as info:
        LustreGuardProvider().create({**PROPS, "import_from": "gs://gone/lustre-export/"})
    msg = str(info.value)
    assert f"importing gs://gone/lustre-export/ into / of Lustre instance {INSTANCE}" in msg
    assert "run `pulumi up` again" in msg and "remove lustre.importFrom" in msg


# ---------------------------------------------------------------- diff, update, pickling


def test_another_instance_replaces_the_guard_deleting_the_old_one_first():
    provider = LustreGuardProvider()
    diff = provider.diff(INSTANCE, dict(PROPS), {**PROPS, "instance_id": "b200-lustre-2"})
    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (True, ["instance_id"], True)
    switched = provider.diff(INSTANCE, dict(PROPS), {**PROPS, "export_on_destroy": False})
    assert (switched.changes, switched.replaces) == (True, [])
    assert provider.diff(INSTANCE, dict(PROPS), dict(PROPS)).changes is False


def test_an_update_stores_the_new_switch_and_never_imports(monkeypatch):
    monkeypatch.setattr(lustre_guard, "make_client", no_client)
    olds = {**PROPS, "imported_from": "gs://a/b/"}
    news = {**PROPS, "export_on_destroy": False, "import_from": "gs://other/x/"}
    outs = LustreGuardProvider().update(INSTANCE, olds, news).outs
    assert outs["export_on_destroy"] is False and outs["imported_from"] == "gs://a/b/"


def test_the_provider_pickles_by_reference_and_carries_no_state():
    blob = dill.dumps(LustreGuardProvider(), protocol=pickle.DEFAULT_PROTOCOL, recurse=True)
    assert b"infra.lustre_guard" in blob and b"LustreGuardProvider" in blob
    assert len(blob) < 200
    assert isinstance(dill.loads(blob), LustreGuardProvider)
    assert LustreGuardProvider.serialize_as_secret_always is False


def test_the_client_factory_bills_the_stack_project(monkeypatch):
    made: dict[str, Any] = {}
    monkeypatch.setattr("google.cloud.lustre_v1.LustreClient", lambda **kwargs: made.update(kwargs) or "client")
    assert lustre_guard.make_client("my-gcp-project") == "client"
    assert made == {"client_options": {"quota_project_id": "my-gcp-project"}}


# ---------------------------------------------------------------- the component in the plans


@pytest.mark.parametrize("stack, export", [("dev", False), ("b200", True), ("h200", True)])
def test_the_guard_carries_the_stack_instance_bucket_directories_and_switch(stack, export):
    plan = stack_plan(stack)
    guard, instance, bucket = plan.one(GUARD), plan.one(LUSTRE), plan.one(BUCKET)
    assert guard.inputs["instance_id"] == instance.inputs["instanceId"], guard.name
    assert guard.inputs["zone"] == instance.inputs["location"] and guard.inputs["project"] == "my-gcp-project", (
        guard.name
    )
    assert guard.inputs["bucket"] == bucket.inputs["name"], guard.name
    assert guard.inputs["dirs"] == list(results_dirs()), guard.name
    assert guard.inputs["export_on_destroy"] is export and guard.inputs["import_from"] == "", guard.name
    assert plan.outputs["lustreExportUri"] == f"gs://{bucket.inputs['name']}/lustre-export/"


@pytest.mark.parametrize("stack", STACKS)
def test_the_guard_depends_on_the_instance_and_the_bucket_so_destroy_deletes_it_first(stack):
    plan = stack_plan(stack)
    guard, instance, bucket = plan.one(GUARD), plan.one(LUSTRE), plan.one(BUCKET)
    assert instance.urn in guard.dependencies, f"{guard.name} does not wait for {instance.name}"
    assert bucket.urn in guard.dependencies, f"{guard.name} does not wait for {bucket.name}"
    assert guard.options["replaceWith"] == [instance.urn], guard.name
    assert guard.options["deleteBeforeReplace"] is True, guard.name
    assert instance.options["deleteBeforeReplace"] is True, instance.name


@pytest.mark.parametrize("stack", ("b200", "h200"))
def test_the_lustre_service_agent_may_write_the_bucket_before_the_guard_exists(stack):
    plan = stack_plan(stack)
    guard, bucket, agent = plan.one(GUARD), plan.one(BUCKET), plan.one(AGENT)
    grant = plan.one(IAM_MEMBER, "-agent-bucket-access")
    assert agent.inputs["service"] == "lustre.googleapis.com", agent.name
    assert grant.inputs == {
        "bucket": bucket.inputs["name"],
        "role": "roles/storage.objectUser",
        "member": "serviceAccount:service-123456789012@gcp-sa-lustre.iam.gserviceaccount.com",
    }, grant.name
    assert grant.urn in guard.dependencies, f"{guard.name} does not wait for {grant.name}"


def test_a_scratch_stack_that_neither_exports_nor_imports_grants_the_agent_only_for_the_staged_weights():
    plan = stack_plan("dev")
    grants = [m.name for m in plan.by_type(IAM_MEMBER)]
    assert grants == ["artifacts-object-user", "lustre-data-agent-bucket-access"], "the weights' import reads it"
    assert plan.one(GUARD).inputs["export_on_destroy"] is False


def test_autopilot_without_export_or_import_grants_the_agent_nothing():
    plan = run_plan("autopilot", secret_keys=["nemo-rl-gke:hfToken"], hfToken="hf_x", lustre={"exportOnDestroy": False})
    assert plan.by_type(AGENT) == [] and [m.name for m in plan.by_type(IAM_MEMBER)] == ["artifacts-object-user"]


def test_import_from_another_bucket_lets_the_agent_read_that_bucket_only():
    source = "gs://my-gcp-project-old-artifacts/lustre-export/"
    plan = run_plan("b200", lustre=merged("b200", "lustre", {"importFrom": source}))
    guard, read = plan.one(GUARD), plan.one(IAM_MEMBER, "-agent-import-access")
    assert guard.inputs["import_from"] == source, guard.name
    assert (read.inputs["bucket"], read.inputs["role"]) == (
        "my-gcp-project-old-artifacts",
        "roles/storage.objectViewer",
    ), read.name
    assert read.urn in guard.dependencies, f"{guard.name} does not wait for {read.name}"


def test_import_from_the_stack_own_bucket_needs_no_extra_grant():
    source = "gs://my-gcp-project-b200-artifacts/lustre-export/"
    plan = run_plan("b200", lustre=merged("b200", "lustre", {"importFrom": source}))
    assert sorted(m.name for m in plan.by_type(IAM_MEMBER)) == [
        "artifacts-object-user",
        "lustre-data-agent-bucket-access",
    ]


@pytest.mark.parametrize("uri", ["gs://bucket/path", "s3://bucket/path/", "gs://B/", "gs://bucket/a b/"])
def test_import_from_must_be_a_gs_folder_ending_in_a_slash(uri):
    with pytest.raises(ConfigError, match=r"nemo-rl-gke:lustre\.importFrom: .* is not allowed"):
        run_plan("b200", lustre=merged("b200", "lustre", {"importFrom": uri}))


def test_deleting_the_bucket_the_export_goes_to_is_refused():
    with pytest.raises(ConfigError) as info:
        run_plan("b200", storage={"deleteBucketOnDestroy": True})
    assert str(info.value) == (
        "nemo-rl-gke:storage.deleteBucketOnDestroy: true would delete the bucket right after lustre.exportOnDestroy "
        "exported the checkpoints into it; allowed: false, or set lustre.exportOnDestroy: false as well"
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_ray_release_waits_for_the_guard_so_no_job_races_an_import_or_an_export(stack):
    # Created after the guard (an import lands before a job could start at step 0); deleted before
    # it (the export starts once the job has ended and the release is gone).
    plan = stack_plan(stack)
    guard = plan.one(GUARD)
    release = plan.one("kubernetes:helm.sh/v3:Release")
    assert guard.urn in release.dependencies, f"{release.name} does not wait for {guard.name}"
