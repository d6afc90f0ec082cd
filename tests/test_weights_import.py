"""Lustre's import of the staged weights (infra/weights_import.py), driven with the fake Managed Lustre client of
tests/test_lustre_guard.py (real google-cloud-lustre request and operation types)."""

from __future__ import annotations

import pytest
from google.api_core import exceptions
from test_lustre_guard import FakeLustreClient, FakeOperation, fake, no_credentials  # noqa: F401 (fixtures)

from infra.lustre_guard import TransferError
from infra.weights_import import IMPORT_TIMEOUT_SECONDS, WeightsImportProvider

INSTANCE = "projects/my-gcp-project/locations/us-east1-b/instances/b200-lustre"
PROPS = {
    "project": "my-gcp-project",
    "zone": "us-east1-b",
    "instance_id": "b200-lustre",
    "source": "gs://my-gcp-project-b200-artifacts/hf-hub/",
    "lustre_path": "/hf-hub",
    "model": "Qwen/Qwen2.5-72B-Instruct",
    "model_bytes": 145_400_000_000,
    "lustre_mb_per_s": 17578.125,
    "__provider": "serialized",
}


def test_create_imports_the_bucket_folder_into_the_hub_cache_folder_and_waits_for_it(fake):  # noqa: F811
    op = FakeOperation()
    client = FakeLustreClient(op)
    assert fake(client) == []
    result = WeightsImportProvider().create(dict(PROPS))
    ((kind, request),) = client.transfers()
    assert kind == "import_data"
    assert (request.name, request.gcs_path.uri, request.lustre_path.path) == (
        INSTANCE,
        "gs://my-gcp-project-b200-artifacts/hf-hub/",
        "/hf-hub",
    )
    assert op.waited_with == IMPORT_TIMEOUT_SECONDS, "the submission would start before the weights are there"
    assert result.id == f"{INSTANCE}:/hf-hub" and "__provider" not in result.outs


def test_another_model_imports_again_in_place_and_another_instance_replaces(fake):  # noqa: F811
    provider = WeightsImportProvider()
    same = provider.diff("id", dict(PROPS), {**PROPS, "lustre_mb_per_s": 1.0})
    assert not same.changes, "a figure the model reads is no reason to import"
    model = provider.diff("id", dict(PROPS), {**PROPS, "model": "google/gemma-3-27b-it"})
    assert model.changes and not model.replaces
    moved = provider.diff("id", dict(PROPS), {**PROPS, "instance_id": "b200-lustre-2"})
    assert moved.replaces == ["instance_id"]
    client = FakeLustreClient(FakeOperation())
    fake(client)
    provider.update("id", dict(PROPS), {**PROPS, "model": "google/gemma-3-27b-it"})
    assert [k for k, _ in client.transfers()] == ["import_data"]


def test_delete_leaves_the_files_to_the_instance_and_calls_nothing(monkeypatch):
    from infra import lustre_guard

    monkeypatch.setattr(lustre_guard, "make_client", lambda p: pytest.fail("the Lustre API was called"))
    WeightsImportProvider().delete("id", dict(PROPS))


def test_a_failed_import_says_the_weights_are_safe_and_what_to_grant(fake):  # noqa: F811
    denied = exceptions.PermissionDenied("service-1@gcp-sa-lustre.iam.gserviceaccount.com lacks storage.objects.get")
    fake(FakeLustreClient(FakeOperation(error=denied)))
    with pytest.raises(TransferError) as info:
        WeightsImportProvider().create(dict(PROPS))
    msg = str(info.value)
    assert "lacks storage.objects.get" in msg and "roles/storage.objectUser" in msg
    assert "weights stay in the bucket" in msg and "run `pulumi up` again" in msg


def test_an_import_without_credentials_fails_in_one_line(no_credentials):  # noqa: F811
    with pytest.raises(TransferError) as info:
        WeightsImportProvider().create(dict(PROPS))
    msg = str(info.value)
    assert "\n" not in msg and "hf-hub" in msg and "application-default login" in msg, msg
