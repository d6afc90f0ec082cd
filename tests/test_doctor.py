"""The preflight doctor against faked Google Cloud answers (no network).

The fakes answer with the client libraries' own message types (compute_v1.Region, container_v1.ServerConfig,
...), so a misspelt field fails here, and every call the doctor makes is bound against the real client
method's signature (`test_every_call_is_one_the_real_client_accepts`).
"""

from __future__ import annotations

import inspect
import io
import json

import pytest
from google.api_core import exceptions as gexc
from google.auth.exceptions import RefreshError
from lazy_modules import LazyModule

from infra.config import parse
from infra.project_apis import REQUIRED_APIS
from infra.storage import artifact_bucket_name
from tools import doctor
from tools.deployer_permissions import required_permissions

# The client libraries, imported by the first test that uses them (tests/lazy_modules.py).
cloudquotas_v1 = LazyModule("google.cloud.cloudquotas_v1")
compute_v1 = LazyModule("google.cloud.compute_v1")
container_v1 = LazyModule("google.cloud.container_v1")
lustre_v1 = LazyModule("google.cloud.lustre_v1")
orgpolicy_v2 = LazyModule("google.cloud.orgpolicy_v2")
resourcemanager_v3 = LazyModule("google.cloud.resourcemanager_v3")
service_usage_v1 = LazyModule("google.cloud.service_usage_v1")
storage = LazyModule("google.cloud.storage")
locations_pb2 = LazyModule("google.cloud.location.locations_pb2")
iam_policy_pb2 = LazyModule("google.iam.v1.iam_policy_pb2")

PROJECT = "my-gcp-project"
NUMBER = "123456789012"
PRINCIPAL = (
    f"principal://iam.googleapis.com/projects/{NUMBER}/locations/global/workloadIdentityPools/"
    f"{PROJECT}.svc.id.goog/subject/ns/nemo-rl/sa/ray"
)
Rule = LazyModule("google.cloud.orgpolicy_v2", "PolicySpec.PolicyRule")


def config(**overrides):
    raw = {
        "project": PROJECT,
        "region": "us-east1",
        "zone": "us-east1-b",
        "flavour": "b200",
        "gpuPool": {"nodeCount": 2, "provisioning": "spot"},
    }
    raw.update(overrides)
    return parse(raw, "dev")


def policy(*rules):
    return orgpolicy_v2.Policy(spec=orgpolicy_v2.PolicySpec(rules=list(rules)))


class FakeProject:
    """One Google Cloud project as the doctor's clients see it; healthy until a test changes it."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []
        self.errors: dict[str, BaseException] = {}
        self.number = NUMBER
        self.enabled = set(REQUIRED_APIS) | {doctor.ORG_POLICY_API}
        self.unanswered: set[str] = set()  # APIs Service Usage's answer leaves out (asked, but not in the answer)
        self.quotas = {
            "PREEMPTIBLE_NVIDIA_B200_GPUS": (64.0, 0.0),
            "NVIDIA_B200_GPUS": (64.0, 0.0),
            "PREEMPTIBLE_NVIDIA_H200_GPUS": (64.0, 0.0),
            "NVIDIA_H200_GPUS": (64.0, 0.0),
            "CPUS": (24.0, 2.0),
        }
        self.machine_types = {"a4-highgpu-8g", "a3-ultragpu-8g", "n2-highmem-16", "n2-standard-8"}
        self.profiles = {"us-east1-b-vpc-roce"}
        self.reservations: dict[str, compute_v1.Reservation] = {}
        self.networks: dict[str, compute_v1.Network] = {}
        self.addresses: list[compute_v1.Address] = []
        self.subnetworks: list[compute_v1.Subnetwork] = []
        self.channels = {
            "REGULAR": ("1.33.5-gke.1162000", ["1.33.5-gke.1162000", "1.34.1-gke.1829001"]),
            "RAPID": ("1.34.1-gke.1829001", ["1.34.1-gke.1829001"]),
        }
        self.lustre_zones = ["us-east1-b", "us-east1-c", "us-central1-a"]
        self.lustre_instances: list[str] = []
        self.denied: set[str] = set()
        self.buckets: dict[str, object] = {}
        self.policies: dict[str, orgpolicy_v2.Policy] = {}
        self.quota_infos: dict[str, cloudquotas_v1.QuotaInfo] = {}
        self.global_quotas = {"GPUS_ALL_REGIONS": (64.0, 0.0), "CPUS_ALL_REGIONS": (2400.0, 16.0)}
        self.cluster: "container_v1.Cluster | None" = None  # no cluster yet (the doctor runs before `pulumi up`)

    def record(self, client: str, method: str, **kwargs):
        self.calls.append((client, method, kwargs))
        if method in self.errors:
            raise self.errors[method]

    def clients(self) -> doctor.Clients:
        return doctor.Clients(**{name: cls(self) for name, cls in FAKES.items()})


class _Fake:
    def __init__(self, project: FakeProject):
        self.p = project


class Projects(_Fake):
    def get_project(self, request=None, *, name=None, timeout=None):
        self.p.record("projects", "get_project", name=name, timeout=timeout)
        if name != f"projects/{PROJECT}":
            raise gexc.Forbidden("no")
        return resourcemanager_v3.Project(name=f"projects/{self.p.number}", project_id=PROJECT)

    def test_iam_permissions(self, request=None, *, timeout=None):
        self.p.record("projects", "test_iam_permissions", request=request, timeout=timeout)
        assert len(request["permissions"]) <= doctor.TEST_IAM_BATCH
        return iam_policy_pb2.TestIamPermissionsResponse(
            permissions=[p for p in request["permissions"] if p not in self.p.denied]
        )


class ServiceUsage(_Fake):
    def batch_get_services(self, request=None, *, timeout=None):
        self.p.record("service_usage", "batch_get_services", request=request, timeout=timeout)
        assert len(request["names"]) <= doctor.SERVICE_USAGE_BATCH
        state = service_usage_v1.State
        return service_usage_v1.BatchGetServicesResponse(
            services=[
                service_usage_v1.Service(
                    name=n, state=state.ENABLED if n.rsplit("/", 1)[-1] in self.p.enabled else state.DISABLED
                )
                for n in request["names"]
                if n.rsplit("/", 1)[-1] not in self.p.unanswered
            ]
        )


class Regions(_Fake):
    def get(self, request=None, *, project=None, region=None, timeout=None):
        self.p.record("regions", "get", project=project, region=region, timeout=timeout)
        return compute_v1.Region(
            name=region,
            quotas=[compute_v1.Quota(metric=m, limit=lim, usage=use) for m, (lim, use) in self.p.quotas.items()],
        )


class MachineTypes(_Fake):
    def get(self, request=None, *, project=None, zone=None, machine_type=None, timeout=None):
        self.p.record("machine_types", "get", project=project, zone=zone, machine_type=machine_type, timeout=timeout)
        if machine_type not in self.p.machine_types:
            raise gexc.NotFound("no such machine type")
        return compute_v1.MachineType(name=machine_type, zone=zone)


class NetworkProfiles(_Fake):
    def get(self, request=None, *, project=None, network_profile=None, timeout=None):
        self.p.record("network_profiles", "get", project=project, network_profile=network_profile, timeout=timeout)
        if network_profile not in self.p.profiles:
            raise gexc.NotFound("no such profile")
        return compute_v1.NetworkProfile(name=network_profile)


class Reservations(_Fake):
    def get(self, request=None, *, project=None, zone=None, reservation=None, timeout=None):
        self.p.record("reservations", "get", project=project, zone=zone, reservation=reservation, timeout=timeout)
        found = self.p.reservations.get(reservation)
        if found is None or not found.zone.endswith(zone):
            raise gexc.NotFound("no such reservation")
        return found

    def list(self, request=None, *, project=None, zone=None, timeout=None):
        self.p.record("reservations", "list", project=project, zone=zone, timeout=timeout)
        return iter(r for r in self.p.reservations.values() if r.zone.endswith(zone))


class Networks(_Fake):
    def get(self, request=None, *, project=None, network=None, timeout=None):
        self.p.record("networks", "get", project=project, network=network, timeout=timeout)
        if network not in self.p.networks:
            raise gexc.NotFound("no such network")
        return self.p.networks[network]


class GlobalAddresses(_Fake):
    def list(self, request=None, *, project=None, timeout=None):
        self.p.record("global_addresses", "list", project=project, timeout=timeout)
        return iter(self.p.addresses)


class Subnetworks(_Fake):
    def aggregated_list(self, request=None, *, project=None, timeout=None):
        self.p.record("subnetworks", "aggregated_list", project=project, timeout=timeout)
        by_region: dict[str, list] = {}
        for s in self.p.subnetworks:
            by_region.setdefault(f"regions/{s.region}", []).append(s)
        return iter([(k, compute_v1.SubnetworksScopedList(subnetworks=v)) for k, v in by_region.items()])


class Clusters(_Fake):
    def get_server_config(self, request=None, *, name=None, timeout=None):
        self.p.record("clusters", "get_server_config", name=name, timeout=timeout)
        Channel = container_v1.ReleaseChannel.Channel
        return container_v1.ServerConfig(
            channels=[
                container_v1.ServerConfig.ReleaseChannelConfig(channel=Channel[c], default_version=d, valid_versions=v)
                for c, (d, v) in self.p.channels.items()
            ]
        )

    def get_cluster(self, request=None, *, name=None, timeout=None):
        self.p.record("clusters", "get_cluster", name=name, timeout=timeout)
        if self.p.cluster is None or name.rsplit("/", 1)[-1] != self.p.cluster.name:
            raise gexc.NotFound(f"cluster {name} not found")
        return self.p.cluster


class Lustre(_Fake):
    def list_locations(self, request=None, *, timeout=None):
        self.p.record("lustre", "list_locations", request=request, timeout=timeout)
        return locations_pb2.ListLocationsResponse(
            locations=[locations_pb2.Location(location_id=z) for z in self.p.lustre_zones]
        )

    def list_instances(self, request=None, *, parent=None, timeout=None):
        self.p.record("lustre", "list_instances", parent=parent, timeout=timeout)
        return iter(lustre_v1.Instance(name=n) for n in self.p.lustre_instances)


class Storage(_Fake):
    def lookup_bucket(self, bucket_name, timeout=None):
        self.p.record("storage", "lookup_bucket", bucket_name=bucket_name, timeout=timeout)
        owner = self.p.buckets.get(bucket_name)
        if owner is None:
            return None
        if owner == "forbidden":
            raise gexc.Forbidden("caller does not have storage.buckets.get access")
        bucket = storage.Bucket(client=None, name=bucket_name)
        bucket._set_properties({"name": bucket_name, "projectNumber": owner})
        return bucket


class OrgPolicy(_Fake):
    def get_effective_policy(self, request=None, *, name=None, timeout=None):
        self.p.record("org_policy", "get_effective_policy", name=name, timeout=timeout)
        return self.p.policies.get(name.rsplit("/", 1)[-1], orgpolicy_v2.Policy(name=name))


class Quotas(_Fake):
    def get_quota_info(self, request=None, *, name=None, timeout=None):
        self.p.record("quotas", "get_quota_info", name=name, timeout=timeout)
        assert name.startswith(f"projects/{PROJECT}/locations/global/services/compute.googleapis.com/quotaInfos/")
        info = self.p.quota_infos.get(name.rsplit("/", 1)[-1])
        if info is None:
            raise gexc.NotFound("no such quota")
        return info


class ComputeProjects(_Fake):
    def get(self, request=None, *, project=None, timeout=None):
        self.p.record("compute_projects", "get", project=project, timeout=timeout)
        return compute_v1.Project(
            name=project,
            quotas=[compute_v1.Quota(metric=m, limit=lim, usage=use) for m, (lim, use) in self.p.global_quotas.items()],
        )


FAKES = {
    "projects": Projects,
    "service_usage": ServiceUsage,
    "regions": Regions,
    "machine_types": MachineTypes,
    "network_profiles": NetworkProfiles,
    "reservations": Reservations,
    "networks": Networks,
    "global_addresses": GlobalAddresses,
    "subnetworks": Subnetworks,
    "clusters": Clusters,
    "lustre": Lustre,
    "storage": Storage,
    "org_policy": OrgPolicy,
    "quotas": Quotas,
    "compute_projects": ComputeProjects,
}


def real_clients() -> dict[str, type]:
    """The client class each fake stands for, by the doctor's client name."""
    return {
        "projects": resourcemanager_v3.ProjectsClient,
        "service_usage": service_usage_v1.ServiceUsageClient,
        "regions": compute_v1.RegionsClient,
        "machine_types": compute_v1.MachineTypesClient,
        "network_profiles": compute_v1.NetworkProfilesClient,
        "reservations": compute_v1.ReservationsClient,
        "networks": compute_v1.NetworksClient,
        "global_addresses": compute_v1.GlobalAddressesClient,
        "subnetworks": compute_v1.SubnetworksClient,
        "clusters": container_v1.ClusterManagerClient,
        "lustre": lustre_v1.LustreClient,
        "storage": storage.Client,
        "org_policy": orgpolicy_v2.OrgPolicyClient,
        "quotas": cloudquotas_v1.CloudQuotasClient,
        "compute_projects": compute_v1.ProjectsClient,
    }


@pytest.fixture
def project():
    return FakeProject()


def run(project: FakeProject, cfg=None) -> dict[str, list[doctor.Result]]:
    results = doctor.run_checks("dev", cfg or config(), project.clients(), timeout=5)
    by_check: dict[str, list[doctor.Result]] = {}
    for r in results:
        by_check.setdefault(r.check, []).append(r)
    return by_check


def only(project, check, cfg=None) -> doctor.Result:
    found = run(project, cfg)[check]
    assert len(found) == 1, found
    return found[0]


# ----------------------------------------------------------------------------- the whole report


def test_a_healthy_project_passes_every_check(project):
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert [r.check for r in results][:2] == ["project", "apis"]
    assert {r.check for r in results} == {"project", "apis", *(name for name, _, _ in doctor.CHECKS)}
    bad = [r for r in results if r.status != doctor.PASS]
    assert not bad, bad


def test_every_call_is_one_the_real_client_accepts(project):
    cfg = config(
        gpuPool={"nodeCount": 1, "provisioning": "reservation", "reservationName": "b200-res"},
        network={"useDefaultNetwork": True},
    )
    project.networks["default"] = compute_v1.Network(name="default")
    doctor.run_checks("dev", cfg, project.clients(), timeout=5)
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]  # asks Cloud Quotas
    doctor.run_checks("dev", config(), project.clients(), timeout=5)
    called = {(client, method) for client, method, _ in project.calls}
    assert {c for c, _ in called} == set(FAKES), "every client is exercised"
    for client, method, kwargs in project.calls:
        real = getattr(real_clients()[client], method)
        try:
            inspect.signature(real).bind(None, **kwargs)
        except TypeError as err:
            real_class = real_clients()[client].__name__
            pytest.fail(f"{client}.{method}({', '.join(kwargs)}) does not fit {real_class}.{method}: {err}")


def test_no_route_to_google_fails_instead_of_passing_nothing(project):
    project.errors["get_project"] = gexc.ServiceUnavailable("failed to connect to all addresses")
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [("project", doctor.FAIL)]
    assert "ServiceUnavailable" in results[0].summary


def test_the_project_that_cannot_be_seen_fails_alone(project):
    results = doctor.run_checks("dev", config(project="other-project"), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [("project", doctor.FAIL)]
    assert "gcloud projects describe other-project" in results[0].fix


def test_refused_credentials_are_a_credentials_error(project):
    project.errors["get_project"] = RefreshError("invalid_grant: Token has been expired or revoked.")
    with pytest.raises(doctor.NoCredentials, match="gcloud auth application-default login"):
        doctor.run_checks("dev", config(), project.clients(), timeout=5)


def test_a_check_whose_call_is_denied_warns_instead_of_crashing(project):
    project.errors["get_server_config"] = gexc.PermissionDenied("container.clusters.getServerConfig denied")
    result = only(project, "gke-versions")
    assert result.status == doctor.WARN and "permission denied" in result.summary


def test_a_check_that_does_not_answer_in_time_warns(project, monkeypatch):
    project.errors["lookup_bucket"] = gexc.DeadlineExceeded("deadline")
    result = only(project, "bucket")
    assert result.status == doctor.WARN and "no answer within 5s" in result.summary


def test_the_project_is_named_by_its_number_before_anything_else_is_asked(project):
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert results[0] == doctor.Result("project", doctor.PASS, f"{PROJECT} is project number {NUMBER}")
    assert project.calls[0] == ("projects", "get_project", {"name": f"projects/{PROJECT}", "timeout": 5})


@pytest.mark.parametrize("error", [gexc.NotFound("no"), gexc.Forbidden("no"), gexc.PermissionDenied("no")])
def test_a_project_that_is_missing_or_hidden_fails_whole_with_how_to_look(project, error):
    project.errors["get_project"] = error
    assert doctor.run_checks("dev", config(), project.clients(), timeout=5) == [
        doctor.Result(
            "project",
            doctor.FAIL,
            f"project {PROJECT} does not exist or you cannot see it",
            f"gcloud projects describe {PROJECT}  # fix nemo-rl-gke:project, or ask for roles/browser on it",
        )
    ]
    assert len(project.calls) == 1


def test_a_project_that_cannot_be_asked_fails_whole_naming_the_error(project):
    project.errors["get_project"] = gexc.ServiceUnavailable("failed to connect to all addresses\nretrying")
    assert doctor.run_checks("dev", config(), project.clients(), timeout=5) == [
        doctor.Result(
            "project",
            doctor.FAIL,
            f"could not ask for project {PROJECT}: ServiceUnavailable (failed to connect to all addresses)",
        )
    ]


def test_refused_credentials_are_the_no_credentials_message_with_the_refusal(project):
    project.errors["get_project"] = RefreshError("invalid_grant: Token has been expired or revoked.")
    with pytest.raises(doctor.NoCredentials) as raised:
        doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert str(raised.value) == doctor.NO_CREDENTIALS.format(
        reason="refused: invalid_grant: Token has been expired or revoked."
    )


def test_an_api_check_that_cannot_ask_warns_and_every_other_check_still_runs(project):
    project.errors["batch_get_services"] = gexc.PermissionDenied("serviceusage.services.get denied")
    checks = run(project)
    assert checks["apis"] == [
        doctor.Result("apis", doctor.WARN, "not checked: permission denied (serviceusage.services.get denied)")
    ]
    assert checks["zone"][0].status == doctor.PASS and checks["lustre"][0].status == doctor.PASS
    project.errors["batch_get_services"] = gexc.DeadlineExceeded("deadline")
    assert run(project)["apis"] == [doctor.Result("apis", doctor.WARN, "not checked: no answer within 5s")]


def test_an_api_that_is_off_skips_every_check_that_calls_it_whole(project):
    project.enabled.discard("compute.googleapis.com")
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    skipped = [r for r in results if r.summary == "not checked: compute.googleapis.com is off"]
    enable = f"gcloud services enable compute.googleapis.com --project {PROJECT}"
    assert skipped == [
        doctor.Result(name, doctor.WARN, "not checked: compute.googleapis.com is off", enable)
        for name, _, needs in doctor.CHECKS
        if "compute.googleapis.com" in needs
    ]
    assert len(skipped) == 6
    assert not any(c in ("regions", "machine_types", "reservations", "compute_projects") for c, _, _ in project.calls)


def fake_checks(monkeypatch, *checks):
    """Replace the doctor's checks by `(name, function, apis)` triples."""
    monkeypatch.setattr(doctor, "CHECKS", tuple(checks))


def test_the_checks_run_at_once_in_the_doctors_threads_and_report_in_their_order_whatever_ends_first(
    project, monkeypatch
):
    import threading

    names = [f"c{i}" for i in range(len(doctor.CHECKS))]
    together = threading.Barrier(len(names), timeout=5)  # passes only when every check runs at the same time
    threads = {}
    ended = []
    lock = threading.Lock()

    def check_named(name):
        def check(ctx):
            together.wait()
            threads[name] = threading.current_thread().name
            # The last check ends first.
            while True:
                with lock:
                    if len(ended) == len(names) - 1 - names.index(name):
                        ended.append(name)
                        break
            assert ctx.timeout == 5 and ctx.project_number == NUMBER and ctx.stack == "dev"
            if name == "c1":
                return [doctor.Result(name, doctor.PASS, "one"), doctor.Result(name, doctor.FAIL, "two", "fix two")]
            return doctor.Result(name, doctor.PASS, f"{name} done")

        return check

    fake_checks(monkeypatch, *((n, check_named(n), ()) for n in names))
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert [r.check for r in results[2:]] == ["c0", "c1", "c1", *names[2:]]
    assert results[3:5] == [doctor.Result("c1", doctor.PASS, "one"), doctor.Result("c1", doctor.FAIL, "two", "fix two")]
    assert results[2] == doctor.Result("c0", doctor.PASS, "c0 done")
    assert ended == names[::-1]
    assert all(t.startswith("doctor_") for t in threads.values()) and len(set(threads.values())) == len(names)


def test_a_check_that_needs_several_apis_that_are_off_names_them_all_and_the_rest_run(project, monkeypatch):
    project.enabled -= {"lustre.googleapis.com", "storage.googleapis.com"}
    fake_checks(
        monkeypatch,
        (
            "both",
            lambda ctx: pytest.fail("skipped checks are not called"),
            ("lustre.googleapis.com", "storage.googleapis.com"),
        ),
        ("other", lambda ctx: doctor.Result("other", doctor.PASS, "ran"), ("compute.googleapis.com",)),
    )
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert results[2:] == [
        doctor.Result(
            "both",
            doctor.WARN,
            "not checked: lustre.googleapis.com, storage.googleapis.com is off",
            f"gcloud services enable lustre.googleapis.com storage.googleapis.com --project {PROJECT}",
        ),
        doctor.Result("other", doctor.PASS, "ran"),
    ]


def test_every_check_skipped_still_reports_each(project, monkeypatch):
    project.enabled.discard("lustre.googleapis.com")
    fake_checks(monkeypatch, ("l", lambda ctx: pytest.fail("skipped"), ("lustre.googleapis.com",)))
    results = doctor.run_checks("dev", config(), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [
        ("project", doctor.PASS),
        ("apis", doctor.WARN),
        ("l", doctor.WARN),
    ]


def raising(exc):
    def check(ctx):
        raise exc

    return check


def test_a_check_that_raises_warns_with_the_first_line_of_why_never_a_traceback(project, monkeypatch):
    errors = {
        "forbidden": gexc.Forbidden("caller lacks storage.buckets.get\nmore"),
        "denied": gexc.PermissionDenied("  \n container.clusters.get denied\nmore"),
        "deadline": gexc.DeadlineExceeded("deadline"),
        "timeout": TimeoutError("slow"),
        "google": gexc.InternalServerError("backend error\ndetails"),
        "other": ValueError("bad value\nsecond line"),
        "blank": ValueError(" \n "),
        "bare": KeyError(),
    }
    fake_checks(monkeypatch, *((name, raising(exc), ()) for name, exc in errors.items()))
    results = doctor.run_checks("dev", config(), project.clients(), timeout=7)
    assert results[2:] == [
        doctor.Result("forbidden", doctor.WARN, "not checked: permission denied (caller lacks storage.buckets.get)"),
        doctor.Result("denied", doctor.WARN, "not checked: permission denied (container.clusters.get denied)"),
        doctor.Result("deadline", doctor.WARN, "not checked: no answer within 7s"),
        doctor.Result("timeout", doctor.WARN, "not checked: no answer within 7s"),
        doctor.Result("google", doctor.WARN, "not checked: InternalServerError (backend error)"),
        doctor.Result("other", doctor.WARN, "not checked: ValueError: bad value"),
        doctor.Result("blank", doctor.WARN, "not checked: ValueError: ValueError"),
        doctor.Result("bare", doctor.WARN, "not checked: KeyError: KeyError"),
    ]


class Clock:
    """`time` for the doctor: `monotonic` answers the times given, then the last one."""

    def __init__(self, *times):
        self.times = list(times)

    def monotonic(self):
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


def test_the_checks_share_one_deadline_of_four_calls_and_five_seconds(project, monkeypatch):
    import concurrent.futures

    waits = []

    def wait(fs, timeout=None, return_when=None):
        waits.append((timeout, return_when))
        return concurrent.futures.wait(fs, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(doctor, "wait", wait)
    monkeypatch.setattr(doctor, "time", Clock(1000.0, 1003.0, 1010.0, 1044.0))
    fake_checks(
        monkeypatch,
        ("a", lambda ctx: doctor.Result("a", doctor.PASS, "a"), ()),
        ("b", lambda ctx: doctor.Result("b", doctor.PASS, "b"), ()),
    )
    doctor.run_checks("dev", config(), project.clients(), timeout=7)
    # The deadline is 1000 + 4 x 7 + 5 = 1033: 30 s left at the first wait, then 23, then none.
    assert waits[0] == (30.0, concurrent.futures.FIRST_COMPLETED)
    assert [w[0] for w in waits] in ([30.0], [30.0, 23.0])


def test_a_wait_past_the_deadline_asks_for_no_time_at_all(project, monkeypatch):
    import concurrent.futures

    waits = []

    def wait(fs, timeout=None, return_when=None):
        waits.append(timeout)
        return concurrent.futures.wait(fs, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(doctor, "wait", wait)
    monkeypatch.setattr(doctor, "time", Clock(1000.0, 1044.0))
    fake_checks(monkeypatch, ("a", lambda ctx: doctor.Result("a", doctor.PASS, "a"), ()))
    results = doctor.run_checks("dev", config(), project.clients(), timeout=7)
    assert waits[0] == 0.0
    assert results[2].check == "a"


def test_checks_that_do_not_end_by_the_deadline_warn_and_those_that_did_are_kept(project, monkeypatch):
    import threading

    release = threading.Event()

    def slow(ctx):
        release.wait(10)
        return doctor.Result("slow", doctor.PASS, "late")

    fake_checks(
        monkeypatch,
        ("slow", slow, ()),
        ("quick", lambda ctx: doctor.Result("quick", doctor.PASS, "in time", "pulumi config set zone z"), ()),
        ("slower", slow, ()),
    )
    # The deadline is set at 1000; the first wait ends with the quick check, the next is past the deadline.
    monkeypatch.setattr(doctor, "time", Clock(1000.0, 1000.0, 2000.0))
    started = __import__("time").monotonic()
    try:
        results = doctor.run_checks("dev", config(), project.clients(), timeout=0.1)
    finally:
        release.set()
    assert __import__("time").monotonic() - started < 5, "the doctor does not wait for checks past the deadline"
    assert results[2:] == [
        doctor.Result("slow", doctor.WARN, "not checked: no answer within 0.1s"),
        doctor.Result("quick", doctor.PASS, "in time", "pulumi config set --stack dev zone z"),
        doctor.Result("slower", doctor.WARN, "not checked: no answer within 0.1s"),
    ]


# ----------------------------------------------------------------------------- apis


def test_an_api_that_is_off_fails_with_the_enable_command_and_skips_its_checks(project, monkeypatch):
    monkeypatch.setattr(doctor, "manages_apis", lambda cfg: False)  # manageApis: false
    project.enabled -= {"lustre.googleapis.com", "container.googleapis.com"}
    checks = run(project)
    apis = checks["apis"][0]
    assert apis.status == doctor.FAIL
    assert "container.googleapis.com" in apis.summary and "lustre.googleapis.com" in apis.summary
    assert apis.fix == f"gcloud services enable container.googleapis.com lustre.googleapis.com --project {PROJECT}"
    for check, api in (("lustre", "lustre.googleapis.com"), ("gke-versions", "container.googleapis.com")):
        (result,) = checks[check]
        assert result.status == doctor.WARN and api in result.summary
    assert not any(m in ("list_locations", "get_server_config") for _, m, _ in project.calls)


def test_apis_off_only_warn_when_pulumi_up_enables_them(project, monkeypatch):
    monkeypatch.setattr(doctor, "manages_apis", lambda cfg: True)
    project.enabled.discard("lustre.googleapis.com")
    assert only(project, "apis").status == doctor.WARN


def test_the_org_policy_api_off_skips_only_the_policy_checks(project):
    project.enabled.discard(doctor.ORG_POLICY_API)
    checks = run(project)
    assert checks["apis"][0].status == doctor.PASS
    assert checks["org-policy"][0].status == doctor.WARN


def test_an_api_that_service_usage_leaves_out_of_its_answer_counts_as_off(project):
    # BatchGetServicesResponse.services is "the requested Service states" (google-cloud-service-usage 1.18.0,
    # types/serviceusage.py): nothing promises one per name asked, so a name left out is not taken as on.
    project.unanswered = {"lustre.googleapis.com"}  # enabled in the project, but not in the answer
    checks = run(project, config(manageApis=False))
    enable = f"gcloud services enable lustre.googleapis.com --project {PROJECT}"
    assert checks["apis"] == [doctor.Result("apis", doctor.FAIL, "off: lustre.googleapis.com", enable)]
    assert checks["lustre"] == [
        doctor.Result("lustre", doctor.WARN, "not checked: lustre.googleapis.com is off", enable)
    ]


# ----------------------------------------------------------------------------- zone


def test_a_zone_without_the_machine_type_fails(project):
    project.machine_types.discard("a4-highgpu-8g")
    result = only(project, "zone")
    assert result.status == doctor.FAIL and "a4-highgpu-8g" in result.summary


def test_a_zone_without_the_system_pools_machine_type_fails(project):
    project.machine_types.discard("n2-highmem-16")
    result = only(project, "zone")
    assert result.status == doctor.FAIL and "cluster.systemPool.machineType" in result.summary


def test_a_zone_without_the_roce_profile_fails(project):
    project.profiles.clear()
    result = only(project, "zone")
    assert result.status == doctor.FAIL and "us-east1-b-vpc-roce" in result.summary


def test_the_zone_check_asks_for_both_machine_types_and_the_roce_profile_in_the_stacks_zone_and_passes_whole(project):
    assert only(project, "zone") == doctor.Result(
        "zone",
        doctor.PASS,
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
    assert only(project, "zone") == doctor.Result(
        "zone", doctor.FAIL, "us-east1-b does not offer a4-highgpu-8g (flavour b200)", zone_fix("a4-highgpu-8g")
    )
    assert [kw["machine_type"] for c, m, kw in project.calls if c == "machine_types"] == ["a4-highgpu-8g"]
    assert not any(c == "network_profiles" for c, _, _ in project.calls)


def test_a_zone_without_the_system_pools_machine_type_fails_whole(project):
    project.machine_types.discard("n2-highmem-16")
    assert only(project, "zone") == doctor.Result(
        "zone",
        doctor.FAIL,
        "us-east1-b does not offer n2-highmem-16 (cluster.systemPool.machineType)",
        zone_fix("n2-highmem-16"),
    )
    assert not any(c == "network_profiles" for c, _, _ in project.calls)


def test_a_zone_without_the_roce_profile_fails_whole(project):
    project.profiles.clear()
    assert only(project, "zone") == doctor.Result(
        "zone",
        doctor.FAIL,
        "us-east1-b has no RoCE network profile us-east1-b-vpc-roce for the RDMA VPC",
        f"gcloud compute network-profiles list --project {PROJECT}"
        " # then pulumi config set --stack dev zone <a zone with a -vpc-roce profile>",
    )


def test_the_zone_check_reads_the_h200_flavour_and_its_zone(project):
    project.machine_types = {"a3-ultragpu-8g", "n2-highmem-16"}
    project.profiles = {"europe-west1-b-vpc-roce"}
    cfg = config(flavour="h200", region="europe-west1", zone="europe-west1-b")
    assert only(project, "zone", cfg) == doctor.Result(
        "zone",
        doctor.PASS,
        "europe-west1-b offers a3-ultragpu-8g, n2-highmem-16 and the europe-west1-b-vpc-roce network profile",
    )


# ----------------------------------------------------------------------------- gpu quota


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
    assert result.status == doctor.FAIL
    assert metric in result.summary and "8 free of 16" in result.summary and "need 16" in result.summary
    assert f"--quota-id={metric.replace('_', '-')}-per-project-region --preferred-value=24 " in result.fix
    project.quotas[metric] = (24.0, 8.0)
    assert only(project, "gpu-quota", cfg).status == doctor.PASS


def test_h200_reads_the_h200_metric(project):
    project.quotas["PREEMPTIBLE_NVIDIA_H200_GPUS"] = (8.0, 0.0)
    result = only(project, "gpu-quota", config(flavour="h200", region="europe-west1", zone="europe-west1-b"))
    assert result.status == doctor.FAIL and "PREEMPTIBLE_NVIDIA_H200_GPUS" in result.summary


def test_a_gpu_quota_neither_the_region_nor_cloud_quotas_knows_warns(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    result = only(project, "gpu-quota")
    assert result.status == doctor.WARN and "gpu_family NVIDIA_B200" in result.summary


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
    project.quota_infos[doctor.GPU_FAMILY_QUOTA] = family_quota(
        doctor.GPU_FAMILY_QUOTA,
        ({"region": "us-east1", "gpu_family": "NVIDIA_H100"}, 64),  # another family: ignored
        ({"region": "us-central1", "gpu_family": "NVIDIA_B200"}, 64),  # another region: ignored
        ({"region": "us-east1", "gpu_family": "NVIDIA_B200"}, 8),
    )
    result = only(project, "gpu-quota", cfg)
    assert result.status == doctor.FAIL and "limit 8" in result.summary and "need 16" in result.summary
    assert (
        f"--quota-id={doctor.GPU_FAMILY_QUOTA} --preferred-value=16 --dimensions=gpu_family=NVIDIA_B200,region=us-east1"
        in result.fix
    )
    project.quota_infos[doctor.GPU_FAMILY_QUOTA] = family_quota(
        doctor.GPU_FAMILY_QUOTA, ({"region": "us-east1", "gpu_family": "NVIDIA_B200"}, 16)
    )
    assert only(project, "gpu-quota", cfg).status == doctor.PASS


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
    assert result.status == doctor.FAIL and "limit 0" in result.summary
    assert "--dimensions=region=us-east1 " in result.fix


def family_entry(dims, value, locations):
    return cloudquotas_v1.DimensionsInfo(
        dimensions=dims, details=cloudquotas_v1.QuotaDetails(value=value), applicable_locations=locations
    )


def family_quota_of(quota_id, *entries):
    return cloudquotas_v1.QuotaInfo(
        quota_id=quota_id, dimensions=["region", "gpu_family"], dimensions_infos=list(entries)
    )


PREEMPTIBLE_FAMILY = "PREEMPTIBLE-" + doctor.GPU_FAMILY_QUOTA
B200 = {"gpu_family": "NVIDIA_B200"}


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
        doctor.WARN,
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
    project.quota_infos[doctor.GPU_FAMILY_QUOTA] = family_quota_of(  # on-demand: not what spot VMs use
        doctor.GPU_FAMILY_QUOTA, family_entry({"region": "us-east1", **B200}, 0, ["us-east1"])
    )
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY, family_entry({"region": "us-east1", **B200}, 16, ["us-east1"])
    )
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        doctor.PASS,
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
        result.status == doctor.FAIL
        and result.summary.startswith(f"{PREEMPTIBLE_FAMILY} (")
        and "limit 8;" in result.summary
    )


def test_cloud_quotas_that_cannot_be_read_warn_with_the_reason_and_how_to_look(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.errors["get_quota_info"] = gexc.PermissionDenied("caller lacks cloudquotas.quotas.get")
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        doctor.WARN,
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
    assert result.status == doctor.FAIL and "limit 0;" in result.summary, result


def test_a_family_wide_default_that_applies_globally_is_the_limit_when_no_regional_entry_exists(project):
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]
    project.quota_infos[PREEMPTIBLE_FAMILY] = family_quota_of(
        PREEMPTIBLE_FAMILY,
        family_entry(dict(B200), 64, ["us-central1"]),  # family-wide, for another location
        family_entry({"region": "europe-west1", **B200}, 0, []),  # another region, no locations
        family_entry(dict(B200), 8, ["global"]),
    )
    result = only(project, "gpu-quota")
    assert result.status == doctor.FAIL and "limit 8;" in result.summary, result


def test_the_regional_gpu_quota_is_read_from_the_stacks_region_and_a_shortfall_is_requested_there(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (64.0, 50.0)
    result = only(project, "gpu-quota")
    assert (result.status, result.summary) == (
        doctor.FAIL,
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
        doctor.PASS,
        "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 16 free of 64; 2 x a4-highgpu-8g need 16",
    ), result


def test_the_minimum_gke_version_is_the_highest_floor_and_names_what_sets_it():
    assert doctor.minimum_gke_version(config()) == ("1.33.2-gke.4655000", "Lustre on port 988")
    assert doctor.minimum_gke_version(config(lustre={"legacyPort": True})) == (
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
    assert doctor.minimum_gke_version(config()) == ("1.33.10-gke.100", "flavour b200")


# ----------------------------------------------------------------------------- project-wide quotas


def global_results(project, cfg=None) -> dict[str, doctor.Result]:
    return {r.summary.split(":", 1)[0]: r for r in run(project, cfg)["global-quota"]}


def test_a_project_wide_gpu_quota_of_zero_fails_whatever_the_region_grants(project):
    project.global_quotas["GPUS_ALL_REGIONS"] = (0.0, 0.0)  # the region grants 64 (FakeProject.quotas)
    result = global_results(project)["GPUS_ALL_REGIONS"]
    assert result.status == doctor.FAIL and "needs 16" in result.summary
    assert result.summary.endswith("); a project-wide 0 overrides every regional grant"), result.summary
    assert result.fix.startswith(
        "gcloud beta quotas preferences create --service=compute.googleapis.com "
        "--quota-id=GPUS-ALL-REGIONS-per-project --preferred-value=16 --project=my-gcp-project"
    )
    assert only(project, "gpu-quota").status == doctor.PASS  # the regional check alone would have passed


def test_project_wide_cpus_count_the_gpu_nodes_and_the_system_pool_with_its_surge_node(project):
    cfg = config(gpuPool={"nodeCount": 1, "provisioning": "spot"})
    need = 224 + (1 + 1) * 16  # a4-highgpu-8g has 224 vCPUs; one n2-highmem-16 system node plus one surge node
    project.global_quotas["CPUS_ALL_REGIONS"] = (need + 15.0, 16.0)
    result = global_results(project, cfg)["CPUS_ALL_REGIONS"]
    assert result.status == doctor.FAIL and f"needs {need}" in result.summary
    assert f"--preferred-value={need + 16} " in result.fix
    project.global_quotas["CPUS_ALL_REGIONS"] = (need + 16.0, 16.0)
    assert global_results(project, cfg)["CPUS_ALL_REGIONS"].status == doctor.PASS


def test_a_reserved_gpu_pool_takes_no_project_wide_gpus(project):
    project.global_quotas["GPUS_ALL_REGIONS"] = (0.0, 0.0)
    project.reservations["r"] = reservation(count=2)
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    assert global_results(project, cfg)["GPUS_ALL_REGIONS"].status == doctor.PASS


def test_project_wide_needs_count_what_each_cluster_takes_and_say_what_was_counted():
    assert doctor.global_quota_needs(config()) == (
        16,
        2 * 224 + (1 + 1) * 16,
        "2 x a4-highgpu-8g, 1 + 1 surge x n2-highmem-16",
    )
    reserved = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    assert doctor.global_quota_needs(reserved) == (
        0,
        32,
        "the GPU pool's in its reservation, 1 + 1 surge x n2-highmem-16",
    )
    # Autopilot has no system pool; a machine type whose vCPUs are not known here is said, not guessed.
    assert doctor.global_quota_needs(config(cluster={"mode": "autopilot"})) == (16, 448, "2 x a4-highgpu-8g")
    assert doctor.global_quota_needs(
        config(cluster={"systemPool": {"machineType": "c3-standard-22", "allowUncataloguedMachineType": True}})
    ) == (16, 448, "2 x a4-highgpu-8g, not the system pool (c3-standard-22: vCPUs not known here)")


def test_an_unlisted_project_wide_gpu_quota_warns_with_how_to_look_and_the_cpus_are_still_checked(project):
    del project.global_quotas["GPUS_ALL_REGIONS"]
    results = run(project)["global-quota"]
    assert [r.status for r in results] == [doctor.WARN, doctor.PASS], results
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
    assert cpus.status == doctor.WARN and "lists no CPUS_ALL_REGIONS quota" in cpus.summary


def test_a_reservation_needs_no_gpu_quota(project):
    project.quotas.clear()
    project.reservations["r"] = reservation(count=2)
    cfg = config(gpuPool={"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"})
    result = only(project, "gpu-quota", cfg)
    assert (result.status, result.summary) == (
        doctor.PASS,
        "a reservation brings its own quota (see the reservation check)",
    )


# ----------------------------------------------------------------------------- reservation


def reservation(count=4, in_use=0, machine="a4-highgpu-8g", zone="us-east1-b", status="READY"):
    return compute_v1.Reservation(
        name="r",
        zone=f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}",
        status=status,
        specific_reservation=compute_v1.AllocationSpecificSKUReservation(
            count=count,
            in_use_count=in_use,
            instance_properties=compute_v1.AllocationSpecificSKUAllocationReservedInstanceProperties(
                machine_type=machine
            ),
        ),
    )


RESERVED = {"gpuPool": {"nodeCount": 2, "provisioning": "reservation", "reservationName": "r"}}


def test_a_reservation_with_room_for_the_pool_passes(project):
    project.reservations["r"] = reservation(count=4, in_use=2)
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == doctor.PASS and "2 of 4" in result.summary


def test_a_missing_reservation_fails(project):
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == doctor.FAIL and "no reservation 'r' in us-east1-b" in result.summary
    assert result.fix == (
        "gcloud compute reservations list --project my-gcp-project  "
        "# then set gpuPool.reservationName and zone to one listed"
    )
    asked = [kw for c, m, kw in project.calls if (c, m) == ("reservations", "get")]
    assert asked == [{"project": "my-gcp-project", "zone": "us-east1-b", "reservation": "r", "timeout": 5}]


def test_a_reservation_in_another_zone_fails(project):
    project.reservations["r"] = reservation(zone="us-east1-c")
    assert only(project, "reservation", config(**RESERVED)).status == doctor.FAIL


def test_a_reservation_of_another_machine_type_fails(project):
    project.reservations["r"] = reservation(machine="a3-ultragpu-8g")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        doctor.FAIL,
        "r reserves a3-ultragpu-8g, not a4-highgpu-8g (flavour b200)",
    )
    assert (
        result.fix
        == "pulumi config set --stack dev --path gpuPool.reservationName <a reservation of a4-highgpu-8g in us-east1-b>"
    )


def test_a_reservation_naming_its_machine_type_by_url_is_of_that_machine_type(project):
    project.reservations["r"] = reservation(machine=f"projects/{PROJECT}/zones/us-east1-b/machineTypes/a4-highgpu-8g")
    assert only(project, "reservation", config(**RESERVED)).status == doctor.PASS


def test_a_reservation_of_neither_a_machine_type_nor_a_template_fails(project):
    project.reservations["r"] = reservation(machine="")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        doctor.FAIL,
        "r reserves no specific machine type, not a4-highgpu-8g (flavour b200)",
    )


def test_a_reservation_without_room_fails_with_the_resize_command(project):
    project.reservations["r"] = reservation(count=4, in_use=3)
    result = only(project, "reservation", config(**RESERVED))
    assert result.status == doctor.FAIL and "1 of 4" in result.summary
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
        doctor.WARN,
        (
            "r reserves VMs of instance template a4-template: make sure it is a4-highgpu-8g; 2 reserved, 0 in use, "
            "the pool needs 2"
        ),
    ), result


def test_a_reservation_that_is_not_ready_warns(project):
    project.reservations["r"] = reservation(status="CREATING")
    result = only(project, "reservation", config(**RESERVED))
    assert (result.status, result.summary) == (
        doctor.WARN,
        "r in us-east1-b: 4 of 4 a4-highgpu-8g free; the pool needs 2; status CREATING, not READY",
    )


def test_no_reservation_is_asked_for_without_one(project):
    result = only(project, "reservation")
    assert (result.status, result.summary) == (doctor.PASS, "none used (gpuPool.provisioning: spot)")
    assert not any(c == "reservations" for c, _, _ in project.calls)


# ----------------------------------------------------------------------------- lustre


def test_lustre_not_offered_in_the_zone_fails_and_names_a_zone_that_is(project):
    project.lustre_zones = ["us-east1-c", "us-central1-a"]
    result = only(project, "lustre")
    assert result.status == doctor.FAIL and result.fix == "pulumi config set --stack dev zone us-east1-c"


def test_lustre_at_its_instance_limit_fails(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(20)]
    assert only(project, "lustre").status == doctor.FAIL


def test_an_existing_lustre_instance_of_the_same_id_warns(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-b/instances/dev-lustre"]
    assert only(project, "lustre").status == doctor.WARN


def test_lustre_offered_in_the_zone_with_room_passes_whole_and_asks_the_project(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(19)]
    assert only(project, "lustre") == doctor.Result(
        "lustre", doctor.PASS, "offered in us-east1-b; 19 of 20 instances in use"
    )
    asked = [(m, kw) for c, m, kw in project.calls if c == "lustre"]
    assert asked == [
        ("list_locations", {"request": {"name": f"projects/{PROJECT}", "page_size": 1000}, "timeout": 5}),
        ("list_instances", {"parent": f"projects/{PROJECT}/locations/-", "timeout": 5}),
    ]


def test_lustre_not_offered_in_the_zone_names_the_first_offered_zone_of_the_region(project):
    project.lustre_zones = ["us-east1-d", "us-central1-a", "us-east1-c"]
    assert only(project, "lustre") == doctor.Result(
        "lustre",
        doctor.FAIL,
        "Managed Lustre is not offered in us-east1-b",
        "pulumi config set --stack dev zone us-east1-c",
    )
    assert not any(m == "list_instances" for _, m, _ in project.calls)


def test_lustre_offered_only_outside_the_region_lists_where_it_is(project):
    # us-east10 is another region, though its name starts with "us-east1".
    project.lustre_zones = ["us-east10-a", "europe-west4-a"]
    assert only(project, "lustre") == doctor.Result(
        "lustre",
        doctor.FAIL,
        "Managed Lustre is not offered in us-east1-b",
        "choose a region and zone where Managed Lustre is offered: europe-west4-a, us-east10-a",
    )
    project.lustre_zones = []
    assert only(project, "lustre").fix == "choose a region and zone where Managed Lustre is offered: none listed"


def test_lustre_at_its_instance_limit_fails_whole(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/i{n}" for n in range(20)]
    assert only(project, "lustre") == doctor.Result(
        "lustre",
        doctor.FAIL,
        "the project already has 20 Managed Lustre instances (limit 20)",
        f"gcloud lustre instances list --location=- --project {PROJECT}  # delete one",
    )


def test_an_existing_lustre_instance_of_the_same_id_in_the_zone_warns_whole_and_elsewhere_does_not(project):
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-c/instances/dev-lustre"]
    assert only(project, "lustre").status == doctor.PASS
    project.lustre_instances = [f"projects/{PROJECT}/locations/us-east1-b/instances/dev-lustre"] * 20
    assert only(project, "lustre") == doctor.Result(
        "lustre",
        doctor.WARN,
        "instance dev-lustre already exists in us-east1-b: fine if this stack created it, otherwise `pulumi up` "
        "fails to create it",
        "pulumi config set --stack dev --path lustre.instanceId <another id>",
    )


# ----------------------------------------------------------------------------- iam


def test_missing_permissions_fail_with_the_roles_that_grant_them(project):
    project.denied = {"lustre.instances.create", "servicenetworking.services.addPeering"}
    result = only(project, "iam")
    assert result.status == doctor.FAIL
    assert "lustre.instances.create" in result.summary and "servicenetworking.services.addPeering" in result.summary
    assert "--role=roles/lustre.admin" in result.fix and "--role=roles/servicenetworking.networksAdmin" in result.fix


def test_every_permission_of_the_stack_is_asked_for(project):
    cfg = config()
    only(project, "iam", cfg)
    asked = {p for c, m, kw in project.calls if m == "test_iam_permissions" for p in kw["request"]["permissions"]}
    assert asked == set(required_permissions(cfg))


# ----------------------------------------------------------------------------- gke versions


def test_a_channel_default_below_the_flavours_minimum_fails_and_names_a_version_that_fits(project):
    project.channels["REGULAR"] = ("1.32.1-gke.100", ["1.32.1-gke.100", "1.33.3-gke.1000"])
    result = only(project, "gke-versions")
    assert result.status == doctor.FAIL and "1.32.1-gke.100" in result.summary
    assert result.fix == "pulumi config set --stack dev --path cluster.minMasterVersion 1.33.3-gke.1000"


def test_a_channel_with_nothing_new_enough_points_to_a_channel_that_has_it(project):
    project.channels["REGULAR"] = ("1.32.1-gke.100", ["1.32.1-gke.100"])
    result = only(project, "gke-versions")
    assert (
        result.status == doctor.FAIL
        and result.fix == "pulumi config set --stack dev --path cluster.releaseChannel RAPID"
    )


def test_the_legacy_lustre_port_lowers_the_minimum_to_the_lustre_csi_drivers_not_below(project):
    # 1.33.2-gke.2000000: past the Lustre CSI driver's minimum (1.33.2-gke.1111000), before port 988.
    project.channels["REGULAR"] = ("1.33.2-gke.2000000", ["1.33.2-gke.2000000"])
    assert only(project, "gke-versions").status == doctor.FAIL
    assert only(project, "gke-versions", config(lustre={"legacyPort": True})).status == doctor.PASS


def test_the_legacy_lustre_port_still_needs_the_lustre_csi_drivers_minimum(project):
    # 1.32.3 is past B200's minimum (1.32.2-gke.1475000) but before the CSI driver's 1.33.2-gke.1111000.
    project.channels["REGULAR"] = ("1.32.3-gke.100", ["1.32.3-gke.100"])
    result = only(project, "gke-versions", config(lustre={"legacyPort": True}))
    assert result.status == doctor.FAIL and "1.33.2-gke.1111000 (the Managed Lustre CSI driver)" in result.summary


def test_a_min_master_version_the_channel_does_not_offer_fails(project):
    cfg = config(cluster={"minMasterVersion": "1.35.0"})
    result = only(project, "gke-versions", cfg)
    assert result.status == doctor.FAIL and "1.35.0" in result.summary
    assert only(project, "gke-versions", config(cluster={"minMasterVersion": "1.34"})).status == doctor.PASS


# ----------------------------------------------------------------------------- bucket


BUCKET = artifact_bucket_name(PROJECT, "dev")


def test_a_bucket_name_someone_else_owns_fails(project):
    project.buckets[BUCKET] = "forbidden"
    result = only(project, "bucket")
    assert result.status == doctor.FAIL and BUCKET in result.summary and "namePrefix" in result.fix


def test_a_bucket_in_another_readable_project_fails(project):
    project.buckets[BUCKET] = "999"
    assert only(project, "bucket").status == doctor.FAIL


def test_a_bucket_kept_by_an_earlier_destroy_fails_unless_adopted(project):
    project.buckets[BUCKET] = NUMBER
    result = only(project, "bucket")
    assert (
        result.status == doctor.FAIL
        and result.fix == "pulumi config set --stack dev --path storage.adoptExistingBucket true"
    )
    assert only(project, "bucket", config(storage={"adoptExistingBucket": True})).status == doctor.PASS


RENAME = "pulumi config set --stack dev namePrefix <another prefix>  # the bucket is <project>-<namePrefix>-artifacts"


def test_the_bucket_results_name_the_bucket_and_its_owner_whole(project):
    assert only(project, "bucket") == doctor.Result("bucket", doctor.PASS, f"gs://{BUCKET} is free")
    assert [kw["bucket_name"] for c, m, kw in project.calls if m == "lookup_bucket"] == [BUCKET]
    project.buckets[BUCKET] = "forbidden"
    assert only(project, "bucket") == doctor.Result(
        "bucket", doctor.FAIL, f"gs://{BUCKET} exists and belongs to someone else", RENAME
    )
    project.buckets[BUCKET] = "999"
    assert only(project, "bucket") == doctor.Result(
        "bucket", doctor.FAIL, f"gs://{BUCKET} exists in another project (999)", RENAME
    )
    project.buckets[BUCKET] = NUMBER
    assert only(project, "bucket") == doctor.Result(
        "bucket",
        doctor.FAIL,
        f"gs://{BUCKET} already exists in this project (kept by an earlier `pulumi destroy`?)",
        "pulumi config set --stack dev --path storage.adoptExistingBucket true",
    )
    assert only(project, "bucket", config(storage={"adoptExistingBucket": True})) == doctor.Result(
        "bucket", doctor.PASS, f"gs://{BUCKET} exists in this project; storage.adoptExistingBucket takes it over"
    )


# ----------------------------------------------------------------------------- psa


DEFAULT_NET = {"network": {"useDefaultNetwork": True}}


def test_a_leftover_vpc_of_the_stacks_name_warns(project):
    project.networks["dev-vpc"] = compute_v1.Network(name="dev-vpc")
    assert only(project, "psa").status == doctor.WARN


def test_the_default_vpc_missing_fails(project):
    assert only(project, "psa", config(**DEFAULT_NET)).status == doctor.FAIL


def test_an_existing_service_networking_peering_on_the_default_vpc_fails(project):
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == doctor.FAIL and "useDefaultNetwork false" in result.fix


def test_a_psa_range_overlapping_a_peering_range_fails(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.addresses = [
        compute_v1.Address(
            name="google-managed",
            purpose="VPC_PEERING",
            address="10.16.2.0",
            prefix_length=24,
            network=f"projects/{PROJECT}/global/networks/default",
        )
    ]
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == doctor.FAIL and "google-managed" in result.summary


def test_a_psa_range_overlapping_a_subnet_fails_and_a_free_one_passes(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.subnetworks = [
        compute_v1.Subnetwork(
            name="default",
            region="europe-west4",
            ip_cidr_range="10.164.0.0/20",
            network=f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/default",
            secondary_ip_ranges=[compute_v1.SubnetworkSecondaryRange(range_name="x", ip_cidr_range="10.16.0.0/16")],
        )
    ]
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == doctor.FAIL and "10.16.0.0/16" in result.summary
    free = config(network={"useDefaultNetwork": True, "psaCidr": "10.20.0.0/22"})
    assert only(project, "psa", free).status == doctor.PASS


FREE_RANGE = "pulumi config set --stack dev --path network.psaCidr <a free /22>"
DEFAULT_VPC = f"projects/{PROJECT}/global/networks/default"


def test_the_stacks_own_vpc_results_whole(project):
    assert only(project, "psa") == doctor.Result(
        "psa", doctor.PASS, "the stack creates VPC dev-vpc: no peering or range there yet (10.16.0.0/22 is free)"
    )
    assert [kw["network"] for c, m, kw in project.calls if c == "networks"] == ["dev-vpc"]
    project.networks["dev-vpc"] = compute_v1.Network(name="dev-vpc")
    assert only(project, "psa") == doctor.Result(
        "psa",
        doctor.WARN,
        "VPC dev-vpc already exists: fine if this stack created it, otherwise `pulumi up` fails to create it",
        "pulumi config set --stack dev namePrefix <another prefix>",
    )


def test_the_default_vpc_results_whole(project):
    assert only(project, "psa", config(**DEFAULT_NET)) == doctor.Result(
        "psa",
        doctor.FAIL,
        "network.useDefaultNetwork is true but the project has no 'default' VPC",
        "pulumi config set --stack dev --path network.useDefaultNetwork false",
    )
    assert [kw["network"] for c, m, kw in project.calls if c == "networks"] == ["default"]
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == doctor.Result(
        "psa",
        doctor.FAIL,
        "the default VPC already has a Service Networking peering (servicenetworking-googleapis-com, e.g. Cloud "
        "SQL's); creating the stack's fails",
        "pulumi config set --stack dev --path network.useDefaultNetwork false  # a VPC of the stack's own",
    )
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="peer-to-hub", network="x")]
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == doctor.Result(
        "psa", doctor.PASS, "10.16.0.0/22 overlaps no subnet or peering range of the default VPC"
    )


def test_only_peering_ranges_of_the_default_vpc_count_and_the_first_overlap_is_named(project):
    project.networks["default"] = compute_v1.Network(name="default")

    def address(name, purpose="VPC_PEERING", network=DEFAULT_VPC):
        # Host bits set: the check reads the range leniently, as the API may echo the address given.
        return compute_v1.Address(name=name, purpose=purpose, address="10.16.2.7", prefix_length=23, network=network)

    project.addresses = [
        address("a-nat-ip", purpose="NAT_AUTO"),
        address("on-another-vpc", network=f"projects/{PROJECT}/global/networks/other"),
    ]
    assert only(project, "psa", config(**DEFAULT_NET)).status == doctor.PASS
    project.addresses.append(address("google-managed"))
    project.addresses.append(address("second"))
    assert only(project, "psa", config(**DEFAULT_NET)) == doctor.Result(
        "psa",
        doctor.FAIL,
        "network.psaCidr 10.16.0.0/22 overlaps the peering range google-managed (10.16.2.0/23)",
        FREE_RANGE,
    )


def test_only_subnets_of_the_default_vpc_count_and_an_ipv6_only_subnet_is_skipped(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.subnetworks = [
        compute_v1.Subnetwork(
            name="elsewhere",
            region="us-east1",
            ip_cidr_range="10.16.0.0/20",
            network=f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/other",
        ),
        compute_v1.Subnetwork(
            name="v6-only", region="us-east1", network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}"
        ),
    ]
    assert only(project, "psa", config(**DEFAULT_NET)).status == doctor.PASS
    project.subnetworks.append(
        compute_v1.Subnetwork(
            name="primary",
            region="us-east1",
            ip_cidr_range="10.16.3.9/24",
            network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}",
        )
    )
    project.subnetworks.append(
        compute_v1.Subnetwork(
            name="later",
            region="us-east1",
            ip_cidr_range="10.16.0.0/24",
            network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}",
        )
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == doctor.Result(
        "psa", doctor.FAIL, "network.psaCidr 10.16.0.0/22 overlaps subnet primary (10.16.3.9/24)", FREE_RANGE
    )


# ----------------------------------------------------------------------------- org policy


def by_constraint(project, cfg=None) -> dict[str, doctor.Result]:
    return {r.summary.split(":", 1)[0]: r for r in run(project, cfg)["org-policy"]}


def test_domain_restricted_sharing_that_omits_the_pool_fails(project):
    project.policies["iam.allowedPolicyMemberDomains"] = policy(
        Rule(values=Rule.StringValues(allowed_values=["C01abc"]))
    )
    result = by_constraint(project)["iam.allowedPolicyMemberDomains"]
    assert result.status == doctor.FAIL and PRINCIPAL in result.summary
    assert "gcloud org-policies reset iam.allowedPolicyMemberDomains" in result.fix


def test_domain_restricted_sharing_that_allows_the_pool_passes(project):
    project.policies["iam.allowedPolicyMemberDomains"] = policy(
        Rule(
            values=Rule.StringValues(
                allowed_values=[
                    "C01abc",
                    f"principalSet://iam.googleapis.com/projects/{NUMBER}/locations/global/workloadIdentityPools/{PROJECT}.svc.id.goog/*",
                ]
            )
        )
    )
    assert by_constraint(project)["iam.allowedPolicyMemberDomains"].status == doctor.PASS


def test_the_managed_member_constraint_is_read_from_its_parameters(project):
    project.policies["iam.managed.allowedPolicyMembers"] = policy(
        Rule(enforce=True, parameters={"allowedMemberSubjects": ["user:a@example.com"], "allowedPrincipalSets": []})
    )
    assert by_constraint(project)["iam.managed.allowedPolicyMembers"].status == doctor.FAIL
    project.policies["iam.managed.allowedPolicyMembers"] = policy(
        Rule(enforce=True, parameters={"allowedMemberSubjects": [PRINCIPAL]})
    )
    assert by_constraint(project)["iam.managed.allowedPolicyMembers"].status == doctor.PASS


def test_service_account_creation_disabled_fails(project):
    project.policies["iam.disableServiceAccountCreation"] = policy(Rule(enforce=True))
    assert by_constraint(project)["iam.disableServiceAccountCreation"].status == doctor.FAIL


@pytest.mark.parametrize(
    "allowed, status",
    [
        (["in:us-east1-locations"], doctor.PASS),
        (["in:us-locations"], doctor.WARN),
        (["in:europe-west4-locations"], doctor.WARN),
        (["europe-west4"], doctor.FAIL),
    ],
)
def test_resource_locations(project, allowed, status):
    project.policies["gcp.resourceLocations"] = policy(Rule(values=Rule.StringValues(allowed_values=allowed)))
    assert by_constraint(project)["gcp.resourceLocations"].status == status


RESET = "gcloud org-policies reset {} --project my-gcp-project  # needs roles/orgpolicy.policyAdmin"
POOL_SET = (
    f"principalSet://iam.googleapis.com/projects/{NUMBER}/locations/global/workloadIdentityPools/"
    f"{PROJECT}.svc.id.goog/*"
)


def test_unrestricted_policies_pass_whole_and_each_constraint_is_read_once(project):
    assert run(project)["org-policy"] == [
        doctor.Result(
            "org-policy",
            doctor.PASS,
            "iam.allowedPolicyMemberDomains: lets the bucket grant name the Workload Identity principal",
        ),
        doctor.Result("org-policy", doctor.PASS, "iam.managed.allowedPolicyMembers: not enforced"),
        doctor.Result("org-policy", doctor.PASS, "iam.disableServiceAccountCreation: not enforced"),
        doctor.Result("org-policy", doctor.PASS, "gcp.resourceLocations: allows us-east1"),
    ]
    assert [kw["name"] for c, m, kw in project.calls if c == "org_policy"] == [
        f"projects/{PROJECT}/policies/{c}"
        for c in (
            "iam.allowedPolicyMemberDomains",
            "iam.managed.allowedPolicyMembers",
            "iam.disableServiceAccountCreation",
            "gcp.resourceLocations",
        )
    ]


def test_domain_restricted_sharing_results_whole(project):
    name = "iam.allowedPolicyMemberDomains"
    project.policies[name] = policy(
        Rule(values=Rule.StringValues(allowed_values=["C01abc"])),
        Rule(values=Rule.StringValues(allowed_values=["C02def"])),
    )
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy",
        doctor.FAIL,
        f"{name}: domain-restricted sharing (allowed: C01abc, C02def) refuses the bucket grant to {PRINCIPAL}",
        RESET.format(name),
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc"])), Rule(deny_all=True))
    assert by_constraint(project)[name].summary == (
        f"{name}: domain-restricted sharing (allowed: none) refuses the bucket grant to {PRINCIPAL}"
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc"])), Rule(allow_all=True))
    assert by_constraint(project)[name].status == doctor.PASS
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc", POOL_SET])))
    assert by_constraint(project)[name].status == doctor.PASS


def test_the_managed_member_constraint_results_whole(project):
    name = "iam.managed.allowedPolicyMembers"
    refusing = {"allowedMemberSubjects": ["user:a@example.com"], "allowedPrincipalSets": ["principalSet://x/*"]}
    project.policies[name] = policy(Rule(enforce=False, parameters=refusing))
    assert by_constraint(project)[name] == doctor.Result("org-policy", doctor.PASS, f"{name}: not enforced")
    project.policies[name] = policy(Rule(enforce=False, parameters=refusing), Rule(enforce=True, parameters=refusing))
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy", doctor.FAIL, f"{name}: refuses the bucket grant to {PRINCIPAL}", RESET.format(name)
    )
    project.policies[name] = policy(Rule(enforce=True, parameters={"allowedPrincipalSets": [POOL_SET]}))
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy", doctor.PASS, f"{name}: allows the Workload Identity principal"
    )
    project.policies[name] = policy(Rule(enforce=True))  # enforced with no parameters: nobody is allowed
    assert by_constraint(project)[name].status == doctor.FAIL


def test_service_account_creation_disabled_fails_whole(project):
    name = "iam.disableServiceAccountCreation"
    project.policies[name] = policy(Rule(enforce=False), Rule(enforce=True))
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy",
        doctor.FAIL,
        f"{name}: enforced: the stack creates the GKE node service account",
        RESET.format(name),
    )


@pytest.mark.parametrize("allowed", [["us-east1"], ["us-east1-b"], ["in:us-east1-b-locations"]])
def test_resource_locations_that_name_the_region_or_zone_pass(project, allowed):
    project.policies["gcp.resourceLocations"] = policy(Rule(values=Rule.StringValues(allowed_values=allowed)))
    assert by_constraint(project)["gcp.resourceLocations"].status == doctor.PASS


def test_resource_locations_results_whole(project):
    name = "gcp.resourceLocations"
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["europe-west4", "in:us-locations"])))
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy",
        doctor.WARN,
        f"{name}: allows only europe-west4, in:us-locations: make sure that includes us-east1-b",
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["europe-west4", "asia-east1"])))
    assert by_constraint(project)[name] == doctor.Result(
        "org-policy",
        doctor.FAIL,
        f"{name}: allows only europe-west4, asia-east1, not us-east1",
        "pulumi config set --stack dev region <an allowed region> && pulumi config set --stack dev zone <a zone in it>",
    )


# ----------------------------------------------------------------------------- the command


def cli(project, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main(["--stack", "dev", *argv], out=out, err=err, connect=lambda p: project.clients())
    return code, out.getvalue(), err.getvalue()


def test_the_command_prints_one_line_per_check_and_exits_0_when_nothing_fails(project):
    project.quotas.pop("PREEMPTIBLE_NVIDIA_B200_GPUS")  # a warning does not fail the run
    code, out, err = cli(project)
    assert code == doctor.EXIT_OK and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("doctor: stack dev, project my-gcp-project")
    assert any(line.split()[:2] == ["warn", "gpu-quota"] for line in lines)
    assert lines[-1] == "0 failed, 1 warning(s), 17 passed"


def test_a_failure_prints_its_fix_and_exits_1(project, monkeypatch):
    monkeypatch.setattr(doctor, "manages_apis", lambda cfg: False)  # manageApis: false: an API off fails
    project.enabled.discard("lustre.googleapis.com")
    code, out, _ = cli(project)
    assert code == doctor.EXIT_FAILED
    assert f"fix: gcloud services enable lustre.googleapis.com --project {PROJECT}" in out


def test_json_output(project, monkeypatch):
    monkeypatch.setattr(doctor, "manages_apis", lambda cfg: False)  # manageApis: false: an API off fails
    project.enabled.discard("lustre.googleapis.com")
    code, out, _ = cli(project, "--json")
    doc = json.loads(out)
    assert code == doctor.EXIT_FAILED and doc["ok"] is False and doc["stack"] == "dev"
    apis = next(c for c in doc["checks"] if c["check"] == "apis")
    assert apis == {
        "check": "apis",
        "status": "fail",
        "summary": "off: lustre.googleapis.com",
        "fix": f"gcloud services enable lustre.googleapis.com --project {PROJECT}",
    }


def test_missing_credentials_are_one_line_and_exit_3(monkeypatch, tmp_path):
    # A named credentials file that does not exist stops google.auth.default before any metadata-server probe.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main(["--stack", "dev"], out=out, err=err)
    assert code == doctor.EXIT_NO_CREDENTIALS and out.getvalue() == ""
    message = err.getvalue()
    assert message.startswith("error: no usable Application Default Credentials (File ") and "none.json" in message
    assert "gcloud auth application-default login" in message and message.count("\n") == 1


def test_an_unknown_stack_is_one_line_and_exit_2(project):
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main(["--stack", "nope"], out=out, err=err, connect=lambda p: pytest.fail("no stack, no cloud"))
    assert code == doctor.EXIT_USAGE and err.getvalue().count("\n") == 1 and "Pulumi.nope.yaml" in err.getvalue()


def test_the_doc_describes_every_check():
    from pathlib import Path

    doc = (Path(doctor.__file__).resolve().parent.parent / "docs" / "doctor.md").read_text()
    for name in ("project", "apis", *(name for name, _, _ in doctor.CHECKS)):
        assert f"\n| {name} |" in doc, f"docs/doctor.md has no row for the {name} check"


@pytest.mark.parametrize(
    ("flag", "allowed"),
    [
        (["--timeout", "0"], "allowed: a number of seconds above 0, at most 600"),
        (["--timeout", "601"], "allowed: a number of seconds above 0, at most 600"),
        (["--timeout", "soon"], "allowed: a number of seconds above 0, at most 600"),
        (["--stack", "../dev"], "is not a Pulumi stack name; allowed: 1-100 letters, digits, '-', '_' or '.'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_a_bad_flag_is_one_line_naming_what_is_allowed_and_exit_2(flag, allowed):
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main(flag, out=out, err=err, connect=lambda p: pytest.fail("bad flags, no cloud"))
    assert code == doctor.EXIT_USAGE and err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: ")
    assert allowed in err.getvalue() and not out.getvalue()


def test_the_longest_timeout_is_accepted():
    assert doctor.parser().parse_args(["--timeout", "600"]).timeout == 600


def test_the_command_reads_sys_argv_asks_the_stacks_project_with_its_timeout_and_prints_to_stdout(
    project, monkeypatch, capsys
):
    monkeypatch.setattr("sys.argv", ["doctor", "--stack", "dev", "--timeout", "7"])
    asked = []
    code = doctor.main(connect=lambda p: asked.append(p) or project.clients())
    out, err = capsys.readouterr()
    assert (code, err, asked) == (doctor.EXIT_OK, "", [PROJECT])
    assert out.startswith("doctor: stack dev, project my-gcp-project, us-east1 / us-east1-b\n  pass  project ")
    assert out.endswith("\n0 failed, 0 warning(s), 18 passed\n")
    assert {kw["timeout"] for _, _, kw in project.calls} == {7}


def test_the_command_without_flags_checks_the_default_stack_with_the_default_timeout(project, monkeypatch):
    seen = []
    monkeypatch.setattr(doctor, "run_checks", lambda stack, cfg, clients, timeout: seen.append((stack, timeout)) or [])
    monkeypatch.setattr(doctor, "render_text", lambda stack, cfg, results: f"report of {stack}")
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main([], out=out, err=err, connect=lambda p: project.clients()) == doctor.EXIT_OK
    assert seen == [(doctor.DEFAULT_STACK, doctor.DEFAULT_TIMEOUT)]
    assert (out.getvalue(), err.getvalue()) == (f"report of {doctor.DEFAULT_STACK}\n", "")


def test_the_text_report_aligns_the_checks_and_prints_fixes_only_of_what_did_not_pass():
    results = [
        doctor.Result("project", doctor.PASS, "fine", "not printed"),
        doctor.Result("gpu-quota", doctor.WARN, "careful", "look"),
        doctor.Result("zone", doctor.FAIL, "broken", "repair"),
        doctor.Result("zone", doctor.FAIL, "also broken"),
    ]
    assert doctor.render_text("dev", config(), results) == (
        "doctor: stack dev, project my-gcp-project, us-east1 / us-east1-b\n"
        "  pass  project    fine\n"
        "  warn  gpu-quota  careful\n"
        "                   fix: look\n"
        "  fail  zone       broken\n"
        "                   fix: repair\n"
        "  fail  zone       also broken\n"
        "2 failed, 1 warning(s), 1 passed"
    )


def test_the_json_report_is_the_results_whole_and_ok_only_without_a_failure():
    results = [doctor.Result("project", doctor.PASS, "fine"), doctor.Result("zone", doctor.WARN, "careful", "look")]
    text = doctor.render_json("dev", config(), results)
    assert text.splitlines()[:3] == ["{", '  "stack": "dev",', '  "project": "my-gcp-project",']
    assert json.loads(text) == {
        "stack": "dev",
        "project": PROJECT,
        "ok": True,
        "checks": [
            {"check": "project", "status": "pass", "summary": "fine", "fix": None},
            {"check": "zone", "status": "warn", "summary": "careful", "fix": "look"},
        ],
    }
    failed = [*results, doctor.Result("zone", doctor.FAIL, "broken")]
    assert json.loads(doctor.render_json("dev", config(), failed))["ok"] is False


def test_a_run_that_cannot_check_prints_a_json_error_document_naming_the_stack_once_known():
    assert doctor.error_json(None, 2, "bad flag").splitlines()[:2] == ["{", '  "stack": null,']
    assert json.loads(doctor.error_json("dev", 3, "no credentials")) == {
        "stack": "dev",
        "ok": False,
        "exitCode": 3,
        "error": "no credentials",
        "checks": [],
    }
    out, err = io.StringIO(), io.StringIO()
    doctor.main(["--json", "--bogus"], out=out, err=err, connect=lambda p: pytest.fail("bad flags, no cloud"))
    assert json.loads(out.getvalue())["stack"] is None
    out = io.StringIO()
    doctor.main(["--json", "--stack", "nope"], out=out, err=err, connect=lambda p: pytest.fail("no stack"))
    assert json.loads(out.getvalue())["stack"] == "nope"


def test_a_stack_the_program_refuses_is_one_line_and_exit_2(monkeypatch):
    def refuse(name):
        raise doctor.ConfigError("gpuPool.nodeCount: must be 1 or more\nzone: not in region us-east1")

    monkeypatch.setattr(doctor, "load_stack", refuse)
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main(["--stack", "dev"], out=out, err=err, connect=lambda p: pytest.fail("no stack, no cloud"))
    assert (code, out.getvalue()) == (doctor.EXIT_USAGE, "")
    assert err.getvalue() == "error: gpuPool.nodeCount: must be 1 or more; zone: not in region us-east1\n"


def test_no_credentials_at_connect_is_one_line_and_exit_3_and_json_gets_its_document(project):
    def no_credentials(p):
        raise doctor.NoCredentials("no usable Application Default Credentials (test)")

    out, err = io.StringIO(), io.StringIO()
    assert doctor.main(["--stack", "dev"], out=out, err=err, connect=no_credentials) == doctor.EXIT_NO_CREDENTIALS
    assert (out.getvalue(), err.getvalue()) == ("", "error: no usable Application Default Credentials (test)\n")
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main(["--stack", "dev", "--json"], out=out, err=err, connect=no_credentials) == 3
    assert json.loads(out.getvalue()) == json.loads(
        doctor.error_json("dev", 3, "no usable Application Default Credentials (test)")
    )


def test_leftovers_runs_the_leftover_audit_instead_of_the_checks(project, monkeypatch):
    seen = []
    out, err = io.StringIO(), io.StringIO()

    def connect(p):
        return None

    def audit(stack, cfg, args, to, fail, connect_with):
        seen.append((stack, cfg.project, args.leftovers, args.json, args.timeout, to is out, connect_with is connect))
        return fail(3, "the audit could not search")

    monkeypatch.setattr(doctor, "leftovers_main", audit)
    monkeypatch.setattr(doctor, "run_checks", lambda *a, **k: pytest.fail("no checks with --leftovers"))
    assert doctor.main(["--stack", "dev", "--leftovers", "--json"], out=out, err=err, connect=connect) == 3
    assert seen == [("dev", PROJECT, True, True, doctor.DEFAULT_TIMEOUT, True, True)]
    # The audit's failures go through the command's own one line (and JSON document).
    assert err.getvalue() == "error: the audit could not search\n"
    assert json.loads(out.getvalue()) == json.loads(doctor.error_json("dev", 3, "the audit could not search"))


def test_the_flags_help_says_what_each_does_and_its_default():
    p = doctor.parser()
    assert p.prog == "python -m tools.doctor"
    assert p.description == "Check the stack's Google Cloud project before `pulumi up` (read-only)."
    assert {a.dest: a.help for a in p._actions} == {
        "help": "show this help message and exit",
        "stack": "stack name (Pulumi.<stack>.yaml); default dev",
        "json": "print the results as JSON",
        "leftovers": "after `pulumi destroy`: list what of the stack is still in the project (exit 1 when anything is)",
        "timeout": "seconds per API call (the run ends within 4x that); default 20",
    }
    assert p.parse_args([]).json is False and p.parse_args([]).leftovers is False


# ----------------------------------------------------------------------------- version matrix (tools/version_drift.py)


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
        result.status == doctor.PASS
        and "would create it on 1.33.5-gke.1162000, inside row standard-gib-v1.1.1" in result.summary
    )
    asked = [kw["name"] for c, m, kw in project.calls if m == "get_cluster"]
    # A regional control plane (the default) lives in the region.
    assert asked == [f"projects/{PROJECT}/locations/us-east1/clusters/{live_cluster('1', {}).name}"]


def test_a_channel_default_outside_the_row_warns_and_pins_the_newest_version_inside(project):
    project.channels["REGULAR"] = ("1.36.1-gke.100", ["1.35.4-gke.900", "1.36.1-gke.100"])
    result = only(project, "version-matrix")
    assert result.status == doctor.WARN and "1.36.1-gke.100, outside row standard-gib-v1.1.1" in result.summary
    assert result.fix == "pulumi config set --stack dev --path cluster.minMasterVersion 1.35.4-gke.900"


def test_a_live_cluster_inside_the_row_is_reported_with_its_pools_and_add_ons(project):
    project.cluster = live_cluster("1.34.1-gke.1829001", {"gpu": "1.34.1-gke.1829001", "system": "1.34.1-gke.1829001"})
    found = run(project)
    live, upgrades = found["version-matrix"][0], found["version-upgrades"][0]
    assert live.status == doctor.PASS
    assert "control plane 1.34.1-gke.1829001, pool gpu 1.34.1-gke.1829001" in live.summary
    assert "Ray operator, Lustre CSI" in live.summary
    assert upgrades.status == doctor.PASS and "stay inside" in upgrades.summary


def test_an_upgrade_that_would_leave_the_row_warns_with_the_exclusion_that_prevents_it(project):
    project.channels["REGULAR"] = ("1.35.4-gke.900", ["1.35.4-gke.900", "1.36.0-gke.1200"])
    project.cluster = live_cluster("1.35.4-gke.900", {"gpu": "1.35.4-gke.900"})
    upgrades = run(project)["version-upgrades"][0]
    assert upgrades.status == doctor.WARN
    assert "may upgrade" in upgrades.summary and "1.36.0-gke.1200, outside row standard-gib-v1.1.1" in upgrades.summary
    assert "--add-maintenance-exclusion-scope=no_minor_or_node_upgrades" in upgrades.fix
    assert upgrades.fix.startswith("pulumi up")  # cluster.blockNodeUpgrades is on by default: apply it


def test_the_same_upgrade_held_by_a_no_minor_or_node_upgrades_exclusion_passes(project):
    project.channels["REGULAR"] = ("1.35.4-gke.900", ["1.35.4-gke.900", "1.36.0-gke.1200"])
    project.cluster = live_cluster("1.35.4-gke.900", {"gpu": "1.35.4-gke.900"}, hold=True)
    upgrades = run(project)["version-upgrades"][0]
    assert (
        upgrades.status == doctor.PASS and "held by maintenance exclusion no-minor-or-node-upgrades" in upgrades.summary
    )


def test_a_node_pool_already_outside_the_row_warns_naming_it(project):
    project.cluster = live_cluster("1.36.0-gke.1200", {"gpu": "1.35.4-gke.900"})
    live = run(project)["version-matrix"][0]
    assert live.status == doctor.WARN and live.summary.startswith("control plane 1.36.0-gke.1200 already outside")


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--stack", "nope", "--json"], 2, "stack file Pulumi.nope.yaml not found"),
        (["--json", "--stack", "../dev"], 2, "is not a Pulumi stack name"),
        (["--json", "--timeout", "0"], 2, "allowed: a number of seconds above 0"),
        (["--json", "--leftovers", "--stack", "nope"], 2, "Pulumi.nope.yaml"),
    ],
)
def test_json_that_cannot_run_prints_a_json_error_document_and_the_same_line_on_stderr(argv, code, says):
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main(argv, out=out, err=err, connect=lambda p: pytest.fail("nothing to check, no cloud")) == code
    doc = json.loads(out.getvalue())
    assert doc["ok"] is False and doc["exitCode"] == code and doc["checks"] == [] and says in doc["error"], doc
    assert err.getvalue() == f"error: {doc['error']}\n"


def test_json_without_credentials_is_a_json_error_document_with_exit_3(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main(["--stack", "dev", "--json"], out=out, err=err) == doctor.EXIT_NO_CREDENTIALS
    doc = json.loads(out.getvalue())
    assert (doc["stack"], doc["exitCode"]) == ("dev", 3) and "gcloud auth application-default login" in doc["error"]


# ----------------------------------------------------------------------------- capacity ladder


def ladder_config(*rungs, nodes=2):
    return config(gpuPool={"nodeCount": nodes, "capacity": {"ladder": list(rungs)}})


def b200_reservation(name, count, in_use=0):
    return compute_v1.Reservation(
        name=name,
        zone="zones/us-east1-b",
        status="READY",
        specific_reservation=compute_v1.AllocationSpecificSKUReservation(
            count=count,
            in_use_count=in_use,
            instance_properties=compute_v1.AllocationSpecificSKUAllocationReservedInstanceProperties(
                machine_type="a4-highgpu-8g"
            ),
        ),
    )


def test_every_rung_of_the_ladder_is_checked_against_its_own_quota_or_reservation(project):
    project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"] = (16.0, 8.0)  # 8 free: spot and flex-start cannot hold 2 nodes
    project.quotas["NVIDIA_B200_GPUS"] = (32.0, 0.0)
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=4, in_use=3)  # 1 free of the 2 needed
    cfg = ladder_config({"reservation": "my-a4-block"}, "flexStart", "spot", "onDemand")
    results = run(project, cfg)["capacity-ladder"]
    assert [(r.summary.split(":")[0], r.status) for r in results] == [
        ("rung 1 reservation my-a4-block", doctor.FAIL),
        ("rung 2 flexStart", doctor.FAIL),
        ("rung 3 spot", doctor.FAIL),
        ("rung 4 onDemand", doctor.PASS),
    ]
    assert "PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16" in results[1].summary
    assert "NVIDIA_B200_GPUS in us-east1: 32 free of 32" in results[3].summary
    assert "1 of 4" in results[0].summary and "--vm-count 5" in results[0].fix
    # The single-pool checks defer to the ladder's instead of checking `provisioning`'s default.
    assert only(project, "gpu-quota", cfg) == doctor.Result("gpu-quota", doctor.PASS, doctor.LADDER_ELSEWHERE)
    assert only(project, "reservation", cfg) == doctor.Result("reservation", doctor.PASS, doctor.LADDER_ELSEWHERE)


def test_a_rungs_missing_reservation_fails_naming_the_rung(project):
    results = run(project, ladder_config({"reservation": "gone"}, "spot"))["capacity-ladder"]
    assert (
        results[0].status == doctor.FAIL
        and results[0].summary == "rung 1 reservation gone: no reservation 'gone' in us-east1-b"
    )
    assert results[1].status == doctor.PASS


def test_a_one_rung_stack_leaves_quota_to_the_single_pool_checks(project):
    (result,) = run(project)["capacity-ladder"]
    assert result.status == doctor.PASS and "one rung" in result.summary


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
        doctor.Result(
            "capacity-ladder",
            doctor.FAIL,
            "rung 1 reservation my-a4-block: my-a4-block in us-east1-b: 1 of 4 a4-highgpu-8g free; the pool needs 2",
            f"gcloud compute reservations update my-a4-block --zone us-east1-b --vm-count 5 --project {PROJECT}"
            "  # or lower gpuPool.nodeCount to 1",
        ),
        doctor.Result(
            "capacity-ladder",
            doctor.FAIL,
            "rung 2 flexStart: PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16; 2 x a4-highgpu-8g need 16",
            spot_fix,
        ),
        doctor.Result(
            "capacity-ladder",
            doctor.FAIL,
            "rung 3 spot: PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: 8 free of 16; 2 x a4-highgpu-8g need 16",
            spot_fix,
        ),
        doctor.Result(
            "capacity-ladder",
            doctor.PASS,
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
        doctor.Result(
            "capacity-ladder",
            doctor.PASS,
            "rung 1 reservation my-a4-block: my-a4-block in us-east1-b: 2 of 4 a4-highgpu-8g free; the pool needs 2",
        ),
        doctor.Result(
            "capacity-ladder",
            doctor.FAIL,
            f"rung 2 spot: {PREEMPTIBLE_FAMILY} (region=us-east1, gpu_family=NVIDIA_B200): limit 8; "
            "2 x a4-highgpu-8g need 16 (usage not shown here)",
            quota_fix(PREEMPTIBLE_FAMILY, 16, "--dimensions=gpu_family=NVIDIA_B200,region=us-east1 "),
        ),
    ]


def test_a_rungs_missing_reservation_fails_whole_naming_the_rung(project):
    results = run(project, ladder_config({"reservation": "gone"}, "spot"))["capacity-ladder"]
    assert results[0] == doctor.Result(
        "capacity-ladder",
        doctor.FAIL,
        "rung 1 reservation gone: no reservation 'gone' in us-east1-b",
        f"gcloud compute reservations list --project {PROJECT}  # then set gpuPool.reservationName and zone to one "
        "listed",
    )


def test_a_one_rung_stack_passes_the_ladder_check_whole_and_asks_nothing_for_it(project):
    assert run(project)["capacity-ladder"] == [
        doctor.Result("capacity-ladder", doctor.PASS, "one rung: the gpu-quota and reservation checks cover it")
    ]
    assert only(project, "gpu-quota").summary.startswith("PREEMPTIBLE_NVIDIA_B200_GPUS in us-east1: ")


def test_a_ladder_with_flex_start_needs_the_flex_start_gke_version(monkeypatch):
    # Today's flex-start floor (1.32.2) is below the Lustre CSI driver's (1.33.2); a higher one must win.
    monkeypatch.setattr(doctor, "FLEX_START_MIN_GKE", "1.99.0-gke.1")
    kw = dict(flavour="h200", region="europe-west1", zone="europe-west1-b", lustre={"legacyPort": True})
    h200 = config(**kw, gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "flexStart"]}})
    assert doctor.minimum_gke_version(h200) == ("1.99.0-gke.1", "flex-start GPUs")
    spot_only = config(**kw, gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "onDemand"]}})
    assert doctor.minimum_gke_version(spot_only)[1] != "flex-start GPUs"


def test_a_ladder_needs_the_custom_compute_class_gke_version_and_names_it(monkeypatch):
    # Today's ComputeClass floor (1.30.3) is below the Lustre CSI driver's (1.33.2); a higher one must win.
    monkeypatch.setattr(doctor, "CUSTOM_COMPUTE_CLASS_MIN_GKE", "1.99.0-gke.1")
    ladder = config(gpuPool={"nodeCount": 2, "capacity": {"ladder": ["spot", "onDemand"]}})
    assert doctor.minimum_gke_version(ladder) == ("1.99.0-gke.1", "the capacity ladder's custom ComputeClass")
    assert doctor.minimum_gke_version(config()) == ("1.33.2-gke.4655000", "Lustre on port 988")


def test_the_bucket_psa_and_org_policy_calls_name_the_project_and_carry_the_timeout(project):
    project.networks["default"] = compute_v1.Network(name="default")
    doctor.run_checks("dev", config(), project.clients(), timeout=5)
    doctor.run_checks("dev", config(**DEFAULT_NET), project.clients(), timeout=5)
    clients = {"storage", "networks", "global_addresses", "subnetworks", "org_policy"}
    calls = [(c, kw) for c, m, kw in project.calls if c in clients]
    assert {c for c, _ in calls} == clients
    for client, kwargs in calls:
        assert kwargs["timeout"] == 5, f"{client}: {kwargs}"
        if "project" in kwargs or client in {"networks", "global_addresses", "subnetworks"}:
            assert kwargs["project"] == PROJECT, f"{client}: {kwargs}"


def test_the_api_check_asks_in_batches_under_the_project_number_and_its_results_are_whole(project, monkeypatch):
    monkeypatch.setattr(doctor, "SERVICE_USAGE_BATCH", 5)
    wanted = [*REQUIRED_APIS, doctor.ORG_POLICY_API, doctor.CLOUD_QUOTAS_API]
    project.enabled -= {wanted[0], wanted[-1]}  # the first batch's first API, and Cloud Quotas (not required)
    result = only(project, "apis", config(manageApis=False))
    requests = [kw for c, m, kw in project.calls if m == "batch_get_services"]
    assert [r["request"]["names"] for r in requests] == [
        [f"projects/{NUMBER}/services/{api}" for api in wanted[i : i + 5]] for i in range(0, len(wanted), 5)
    ]
    assert all(r["request"]["parent"] == f"projects/{NUMBER}" and r["timeout"] == 5 for r in requests)
    enable = f"gcloud services enable {wanted[0]} --project {PROJECT}"
    assert result == doctor.Result("apis", doctor.FAIL, f"off: {wanted[0]}", enable)
    project.enabled.discard(wanted[1])
    assert only(project, "apis", config(manageApis=False)).summary == f"off: {wanted[0]}, {wanted[1]}"
    project.enabled.discard(wanted[1])
    result = only(project, "apis")
    assert result == doctor.Result(
        "apis",
        doctor.WARN,
        f"off, and `pulumi up` enables them (project.manageApis): {wanted[0]}, {wanted[1]}; "
        "the checks that need them are skipped until then",
        f"gcloud services enable {wanted[0]} {wanted[1]} --project {PROJECT}",
    )
    project.enabled |= set(wanted)
    assert only(project, "apis") == doctor.Result(
        "apis", doctor.PASS, f"all {len(REQUIRED_APIS)} APIs the stack uses are enabled"
    )


def test_the_iam_check_asks_in_batches_and_its_failure_is_whole(project, monkeypatch):
    monkeypatch.setattr(doctor, "TEST_IAM_BATCH", 10)
    needed = required_permissions(config())
    wanted = sorted(needed)
    project.denied = {wanted[0], wanted[-1]}
    result = only(project, "iam")
    requests = [kw for c, m, kw in project.calls if m == "test_iam_permissions"]
    assert [r["request"]["permissions"] for r in requests] == [wanted[i : i + 10] for i in range(0, len(wanted), 10)]
    assert all(r["request"]["resource"] == f"projects/{PROJECT}" and r["timeout"] == 5 for r in requests)
    roles = sorted({needed[wanted[0]], needed[wanted[-1]]})
    assert result == doctor.Result(
        "iam",
        doctor.FAIL,
        f"missing 2 permission(s): {wanted[0]}, {wanted[-1]}",
        " && ".join(f"gcloud projects add-iam-policy-binding {PROJECT} --member=user:<you> --role={r}" for r in roles),
    )
    project.denied = set()
    assert only(project, "iam") == doctor.Result(
        "iam", doctor.PASS, f"you hold all {len(wanted)} permissions `pulumi up` and `pulumi destroy` use"
    )
