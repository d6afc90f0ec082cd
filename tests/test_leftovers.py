"""The leftover audit (`python -m tools.doctor --leftovers`) against a faked Cloud Asset Inventory.

The fake answers with the client library's own message type (asset_v1.ResourceSearchResult) and
applies the two queries the audit sends the way the service documents them (`labels.app:<value>`:
the label has that value; an empty query: every resource of the asset types asked for); every call
is bound against the real client method's signature.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json

import pytest
from google.api_core import exceptions as gexc
from lazy_modules import LazyModule

from infra.config import parse
from tools import leftovers
from tools.doctor import doctor_command
from tools.doctor.doctor_command import EXIT_FAILED, EXIT_NO_CREDENTIALS, EXIT_OK
from tools.doctor.google_clients import Clients

# Imported by the first test that uses them (tests/lazy_modules.py).
asset_v1 = LazyModule("google.cloud.asset_v1")
compute_v1 = LazyModule("google.cloud.compute_v1")

PROJECT = "my-gcp-project"
OURS = {"managed-by": "pulumi", "app": "nemo-rl-gke", "stack": "dev"}


def config(**overrides):
    raw = {
        "project": PROJECT,
        "region": "us-east1",
        "zone": "us-east1-b",
        "flavour": "b200",
        "gpuPool": {"nodeCount": 1, "provisioning": "spot"},
    }
    raw.update(overrides)
    return parse(raw, "dev")


def asset(asset_type, path, location="global", labels=None):
    assert asset_type not in NOT_SEARCHABLE, f"the search never returns {asset_type}"
    service = asset_type.split("/", 1)[0]
    return asset_v1.ResourceSearchResult(
        name=f"//{service}/{path}",
        asset_type=asset_type,
        project="projects/123",
        location=location,
        labels=labels or {},
    )


class FakeCloud:
    """A project's assets and VPCs as the audit's two clients see them."""

    def __init__(self):
        self.assets: list[asset_v1.ResourceSearchResult] = []
        self.networks: dict[str, compute_v1.Network] = {}
        self.calls: list[tuple[type, str, dict]] = []
        self.error: BaseException | None = None

    def clients(self) -> Clients:
        plain = {f.name: None for f in dataclasses.fields(Clients)}
        return Clients(**{**plain, "assets": Assets(self), "networks": Networks(self)})


NOT_SEARCHABLE = {
    "compute.googleapis.com/GlobalAddress",
    "compute.googleapis.com/GlobalForwardingRule",
    "compute.googleapis.com/RegionBackendService",
    "compute.googleapis.com/RegionDisk",
}
"""Types the Cloud Asset Inventory asset-types page marks "not available in the analysis and search APIs"
(https://cloud.google.com/asset-inventory/docs/asset-types, Compute Engine); the search indexes them under
`Address`, `ForwardingRule`, `BackendService` and `Disk`, a global one with location `global`."""


class Assets:
    def __init__(self, cloud):
        self.c = cloud

    def search_all_resources(self, request=None, *, scope=None, query=None, asset_types=None, timeout=None):
        self.c.calls.append(
            (
                asset_v1.AssetServiceClient,
                "search_all_resources",
                {"scope": scope, "query": query, "asset_types": asset_types, "timeout": timeout},
            )
        )
        if self.c.error:
            raise self.c.error
        unsupported = sorted(set(asset_types or ()) & NOT_SEARCHABLE)
        if unsupported:
            # SearchAllResourcesRequest.asset_types (google-cloud-asset 4.5.0, types/asset_service.py): a type
            # the search does not support fails the whole request with INVALID_ARGUMENT.
            raise gexc.InvalidArgument(f"asset type {unsupported[0]} is not supported")
        assert scope == f"projects/{PROJECT}"
        if query:
            key, _, value = query.partition(":")
            assert key.startswith("labels."), query
            return iter(a for a in self.c.assets if a.labels.get(key[len("labels.") :]) == value)
        assert asset_types, "an empty query lists only the asset types asked for"
        return iter(a for a in self.c.assets if a.asset_type in asset_types)


class Networks:
    def __init__(self, cloud):
        self.c = cloud

    def get(self, request=None, *, project=None, network=None, timeout=None):
        self.c.calls.append(
            (compute_v1.NetworksClient, "get", {"project": project, "network": network, "timeout": timeout})
        )
        if network not in self.c.networks:
            raise gexc.NotFound("no such network")
        return self.c.networks[network]


STACKS = ["dev", "dev-2", "prod"]
"""The stack files beside the audited one (`Pulumi.dev-2.yaml` makes `dev-2-vpc` another stack's)."""


@pytest.fixture
def cloud(monkeypatch):
    from infra import stack_file

    monkeypatch.setattr(stack_file, "available_stacks", lambda root=None: STACKS)
    c = FakeCloud()
    # Not the stack's: another stack beside it (Pulumi.dev-2.yaml), another stack's labels, unrelated names.
    c.assets += [
        asset("compute.googleapis.com/Network", f"projects/{PROJECT}/global/networks/dev-2-vpc"),
        asset(
            "lustre.googleapis.com/Instance",
            f"projects/{PROJECT}/locations/us-east1-b/instances/dev-lustre-old",
            "us-east1-b",
            {**OURS, "stack": "prod"},
        ),
        asset("compute.googleapis.com/Network", f"projects/{PROJECT}/global/networks/default"),
        asset(
            "compute.googleapis.com/Disk",
            f"projects/{PROJECT}/zones/us-east1-b/disks/pvc-9",
            "us-east1-b",
            {"goog-k8s-cluster-name": "prod-gke"},
        ),
    ]
    return c


def audit(cloud, cfg=None):
    return leftovers.audit("dev", cfg or config(), Assets(cloud), Networks(cloud), 5, STACKS)


def test_after_a_clean_destroy_nothing_is_listed_and_the_command_exits_0(cloud):
    assert audit(cloud) == []
    code, out, err = cli(cloud)
    assert code == EXIT_OK and err == ""
    assert out == f"leftovers: stack dev, project {PROJECT}: nothing of the stack is left\n"


def leave_a_half_destroyed_stack(cloud):
    p = f"projects/{PROJECT}"
    cloud.assets += [
        asset("compute.googleapis.com/Network", f"{p}/global/networks/dev-vpc"),
        asset("compute.googleapis.com/Subnetwork", f"{p}/regions/us-east1/subnetworks/dev-rdma-subnet-0", "us-east1"),
        asset("compute.googleapis.com/Firewall", f"{p}/global/firewalls/dev-allow-lustre"),
        asset("compute.googleapis.com/Firewall", f"{p}/global/firewalls/gke-dev-gke-1a2b3c4d-all"),  # GKE's own
        asset(
            "compute.googleapis.com/Address",
            f"{p}/global/addresses/dev-psa-range",
            labels={**OURS, "component": "network"},
        ),
        asset("compute.googleapis.com/Router", f"{p}/regions/us-east1/routers/dev-router", "us-east1"),
        asset(
            "compute.googleapis.com/Disk",
            f"{p}/zones/us-east1-b/disks/pvc-1234",
            "us-east1-b",
            {"goog-k8s-cluster-name": "dev-gke"},
        ),
        asset(
            "compute.googleapis.com/ForwardingRule",
            f"{p}/regions/us-east1/forwardingRules/a1b2c3",
            "us-east1",
            {"goog-k8s-cluster-name": "dev-gke"},
        ),
        asset(
            "compute.googleapis.com/NetworkEndpointGroup",
            f"{p}/zones/us-east1-b/networkEndpointGroups/k8s1-abc-ray-8265",
            "us-east1-b",
            {"goog-k8s-cluster-name": "dev-gke"},
        ),
        asset(
            "lustre.googleapis.com/Instance",
            f"{p}/locations/us-east1-b/instances/dev-lustre",
            "us-east1-b",
            {**OURS, "component": "lustre"},
        ),
        asset("storage.googleapis.com/Bucket", f"{PROJECT}-dev-artifacts", "us-east1"),
        asset(
            "container.googleapis.com/NodePool",
            f"{p}/locations/us-east1-b/clusters/dev-gke/nodePools/dev-gpu",
            "us-east1-b",
        ),
    ]
    cloud.networks["dev-vpc"] = compute_v1.Network(
        name="dev-vpc", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )


def test_a_half_destroyed_stack_lists_every_remaining_resource_in_removal_order(cloud):
    leave_a_half_destroyed_stack(cloud)
    found = audit(cloud)
    assert [(f.asset_type.rsplit("/", 1)[-1], f.name) for f in found] == [
        ("Instance", "dev-lustre"),
        ("NodePool", "dev-gpu"),
        ("ForwardingRule", "a1b2c3"),
        ("NetworkEndpointGroup", "k8s1-abc-ray-8265"),
        ("Disk", "pvc-1234"),
        ("Bucket", f"{PROJECT}-dev-artifacts"),
        ("Peering", "dev-vpc"),
        ("Address", "dev-psa-range"),
        ("Router", "dev-router"),
        ("Firewall", "dev-allow-lustre"),
        ("Firewall", "gke-dev-gke-1a2b3c4d-all"),
        ("Subnetwork", "dev-rdma-subnet-0"),
        ("Network", "dev-vpc"),
    ]
    by_name = {f.name: f for f in found}
    assert (
        by_name["dev-lustre"].command
        == f"gcloud lustre instances delete dev-lustre --location us-east1-b --project {PROJECT}"
    )
    assert by_name["dev-lustre"].why == "labels"
    assert by_name["dev-gpu"].command == (
        f"gcloud container node-pools delete dev-gpu --cluster dev-gke --location us-east1-b --project {PROJECT}"
    )
    assert by_name["pvc-1234"].command == f"gcloud compute disks delete pvc-1234 --zone us-east1-b --project {PROJECT}"
    assert by_name["pvc-1234"].why == "created by cluster dev-gke"
    assert by_name["k8s1-abc-ray-8265"].command.startswith(
        "gcloud compute network-endpoint-groups delete k8s1-abc-ray-8265 --zone us-east1-b"
    )
    assert (
        by_name["dev-psa-range"].command
        == f"gcloud compute addresses delete dev-psa-range --global --project {PROJECT}"
    )
    assert by_name["dev-router"].command.startswith(
        f"gcloud compute routers delete dev-router --region us-east1 --project {PROJECT}"
    )
    assert by_name[f"{PROJECT}-dev-artifacts"].command.startswith(
        f"gcloud storage rm --recursive gs://{PROJECT}-dev-artifacts"
    )
    peering = next(f for f in found if f.asset_type == leftovers.PEERING)
    assert peering.command.startswith(
        f"gcloud services vpc-peerings delete --service=servicenetworking.googleapis.com "
        f"--network=dev-vpc --project {PROJECT}"
    )


def test_the_command_prints_each_leftover_with_its_removal_command_and_exits_1(cloud):
    leave_a_half_destroyed_stack(cloud)
    code, out, err = cli(cloud)
    assert code == EXIT_FAILED and err == ""
    lines = out.splitlines()
    assert lines[0] == f"leftovers: stack dev, project {PROJECT}: 13 resource(s) remain, in the order to remove them"
    at = lines.index("  lustre.googleapis.com/Instance dev-lustre (us-east1-b): by labels")
    assert lines[at + 1] == f"    gcloud lustre instances delete dev-lustre --location us-east1-b --project {PROJECT}"
    code, out, _ = cli(cloud, "--json")
    doc = json.loads(out)
    assert code == EXIT_FAILED and doc["clean"] is False and len(doc["leftovers"]) == 13


def test_a_peering_on_the_default_vpc_is_listed_as_possibly_the_stacks(cloud):
    cloud.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )
    (found,) = audit(cloud, config(network={"useDefaultNetwork": True}))
    assert found.asset_type == leftovers.PEERING and found.name == "default" and "before it" in found.why


def test_a_name_prefix_other_than_the_stack_name_is_what_is_matched(cloud):
    cloud.assets.append(asset("compute.googleapis.com/Network", f"projects/{PROJECT}/global/networks/team-a-vpc"))
    cloud.assets.append(asset("compute.googleapis.com/Network", f"projects/{PROJECT}/global/networks/dev-vpc"))
    found = audit(cloud, config(namePrefix="team-a"))
    assert [f.name for f in found] == ["team-a-vpc"]


def test_every_call_is_one_the_real_client_accepts(cloud):
    leave_a_half_destroyed_stack(cloud)
    audit(cloud)
    assert {(c, m) for c, m, _ in cloud.calls} == {
        (asset_v1.AssetServiceClient, "search_all_resources"),
        (compute_v1.NetworksClient, "get"),
    }
    for client, method, kwargs in cloud.calls:
        inspect.signature(getattr(client, method)).bind(None, **kwargs)


def test_every_type_searched_is_one_the_audit_can_remove():
    for asset_type in leftovers.BY_NAME:
        assert not leftovers.removal_command(asset_type, "x", "us-east1", PROJECT).startswith("no removal command"), (
            asset_type
        )
    assert leftovers.removal_command("compute.googleapis.com/Snapshot", "x", "global", PROJECT).startswith(
        "no removal command"
    )


# ----------------------------------------------------------------------------- the command


def cli(cloud, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(
        ["--leftovers", "--stack", "dev", *argv], out=out, err=err, connect=lambda p: cloud.clients()
    )
    return code, out.getvalue(), err.getvalue()


def test_an_asset_api_that_refuses_is_one_line_and_exit_3(cloud):
    cloud.error = gexc.PermissionDenied("Cloud Asset API has not been used in project 123 before or it is disabled")
    code, out, err = cli(cloud)
    assert code == EXIT_NO_CREDENTIALS and out == "" and err.count("\n") == 1
    assert "gcloud services enable cloudasset.googleapis.com --project my-gcp-project" in err


def test_missing_credentials_are_one_line_and_exit_3(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(["--leftovers", "--stack", "dev"], out=out, err=err)
    assert code == EXIT_NO_CREDENTIALS and out.getvalue() == ""
    assert err.getvalue().count("\n") == 1 and "gcloud auth application-default login" in err.getvalue()


def test_the_name_search_asks_only_for_types_the_search_supports_and_a_global_address_is_deleted_with_global(cloud):
    assert not set(leftovers.BY_NAME) & NOT_SEARCHABLE
    p = f"projects/{PROJECT}"
    cloud.assets += [
        asset("compute.googleapis.com/Address", f"{p}/global/addresses/dev-psa-range"),  # no labels: found by name
        asset("compute.googleapis.com/Address", f"{p}/regions/us-east1/addresses/dev-nat-ip", "us-east1"),
        asset("compute.googleapis.com/ForwardingRule", f"{p}/global/forwardingRules/dev-fr"),
        asset("compute.googleapis.com/BackendService", f"{p}/regions/us-east1/backendServices/dev-bs", "us-east1"),
        asset("compute.googleapis.com/Disk", f"{p}/regions/us-east1/disks/dev-rd", "us-east1"),
    ]
    commands = {f.name: f.command for f in audit(cloud)}
    assert commands == {
        "dev-psa-range": f"gcloud compute addresses delete dev-psa-range --global --project {PROJECT}",
        "dev-nat-ip": f"gcloud compute addresses delete dev-nat-ip --region us-east1 --project {PROJECT}",
        "dev-fr": f"gcloud compute forwarding-rules delete dev-fr --global --project {PROJECT}",
        "dev-bs": f"gcloud compute backend-services delete dev-bs --region us-east1 --project {PROJECT}",
        "dev-rd": f"gcloud compute disks delete dev-rd --region us-east1 --project {PROJECT}",
    }


def test_a_token_but_no_route_to_google_is_one_line_and_exit_3(cloud):
    # The gRPC search retries UNAVAILABLE until the bounded retry's deadline (tools/doctor/google_clients.bounded).
    cloud.error = gexc.RetryError("Timeout of 5.0s exceeded", cause=gexc.ServiceUnavailable("failed to connect"))
    code, out, err = cli(cloud)
    assert (code, out) == (EXIT_NO_CREDENTIALS, "") and err.count("\n") == 1, err
    assert "could not reach Google Cloud for project my-gcp-project" in err
