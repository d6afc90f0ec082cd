"""The doctor's fakes of the Google Cloud clients, shared by the tests of tools/doctor/ and the capacity
finder.

The fakes answer with the client libraries' own message types (compute_v1.Region, container_v1.ServerConfig,
...), so a misspelt field fails in the tests, and every call the doctor makes is bound against the real client
method's signature (tests/test_check_runner.py, `test_every_call_is_one_the_real_client_accepts`).
"""

from __future__ import annotations

from google.api_core import exceptions as gexc
from lazy_modules import LazyModule

from infra.config import parse
from infra.project_apis import REQUIRED_APIS
from tools.doctor import project_checks
from tools.doctor.check_context import Result
from tools.doctor.check_runner import run_checks
from tools.doctor.google_clients import Clients
from tools.doctor.project_checks import ORG_POLICY_API
from tools.doctor.quota_checks import GPU_FAMILY_QUOTA

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

policy_pb2 = LazyModule("google.iam.v1.policy_pb2")

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
        self.enabled = set(REQUIRED_APIS) | {ORG_POLICY_API}
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
        self.images: dict[tuple[str, str], compute_v1.Image] = {}  # (project, name): disk images
        # IAM bindings {role: [members]} of another project ("projects/P") or of an image ((project, name)); a key
        # in `unreadable` answers PermissionDenied.
        self.iam: dict[object, dict[str, list[str]]] = {}
        self.unreadable: set[object] = set()
        self.cluster: "container_v1.Cluster | None" = None  # no cluster yet (the doctor runs before `pulumi up`)

    def record(self, client: str, method: str, **kwargs):
        self.calls.append((client, method, kwargs))
        if method in self.errors:
            raise self.errors[method]

    def clients(self) -> Clients:
        return Clients(**{name: cls(self) for name, cls in FAKES.items()})


class _Fake:
    def __init__(self, project: FakeProject):
        self.p = project


class Projects(_Fake):
    def get_project(self, request=None, *, name=None, timeout=None):
        self.p.record("projects", "get_project", name=name, timeout=timeout)
        if name != f"projects/{PROJECT}":
            raise gexc.Forbidden("no")
        return resourcemanager_v3.Project(name=f"projects/{self.p.number}", project_id=PROJECT)

    def get_iam_policy(self, request=None, *, resource=None, timeout=None):
        self.p.record("projects", "get_iam_policy", resource=resource, timeout=timeout)
        if resource in self.p.unreadable:
            raise gexc.PermissionDenied("resourcemanager.projects.getIamPolicy denied")
        bindings = self.p.iam.get(resource, {})
        return policy_pb2.Policy(bindings=[policy_pb2.Binding(role=r, members=m) for r, m in bindings.items()])

    def test_iam_permissions(self, request=None, *, timeout=None):
        self.p.record("projects", "test_iam_permissions", request=request, timeout=timeout)
        assert len(request["permissions"]) <= project_checks.TEST_IAM_BATCH
        return iam_policy_pb2.TestIamPermissionsResponse(
            permissions=[p for p in request["permissions"] if p not in self.p.denied]
        )


class ServiceUsage(_Fake):
    def batch_get_services(self, request=None, *, timeout=None):
        self.p.record("service_usage", "batch_get_services", request=request, timeout=timeout)
        assert len(request["names"]) <= project_checks.SERVICE_USAGE_BATCH
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


class Images(_Fake):
    def get(self, request=None, *, project=None, image=None, timeout=None):
        self.p.record("images", "get", project=project, image=image, timeout=timeout)
        found = self.p.images.get((project, image))
        if found is None:
            raise gexc.NotFound("no such image")
        return found

    def get_iam_policy(self, request=None, *, project=None, resource=None, timeout=None):
        self.p.record("images", "get_iam_policy", project=project, resource=resource, timeout=timeout)
        if (project, resource) in self.p.unreadable:
            raise gexc.Forbidden("compute.images.getIamPolicy denied")
        bindings = self.p.iam.get((project, resource), {})
        return compute_v1.Policy(bindings=[compute_v1.Binding(role=r, members=m) for r, m in bindings.items()])


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
    "images": Images,
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
        "images": compute_v1.ImagesClient,
    }


def run(project: FakeProject, cfg=None) -> dict[str, list[Result]]:
    results = run_checks("dev", cfg or config(), project.clients(), timeout=5)
    by_check: dict[str, list[Result]] = {}
    for r in results:
        by_check.setdefault(r.check, []).append(r)
    return by_check


def only(project, check, cfg=None) -> Result:
    found = run(project, cfg)[check]
    assert len(found) == 1, found
    return found[0]


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


def family_entry(dims, value, locations):
    return cloudquotas_v1.DimensionsInfo(
        dimensions=dims, details=cloudquotas_v1.QuotaDetails(value=value), applicable_locations=locations
    )


def family_quota_of(quota_id, *entries):
    return cloudquotas_v1.QuotaInfo(
        quota_id=quota_id, dimensions=["region", "gpu_family"], dimensions_infos=list(entries)
    )


PREEMPTIBLE_FAMILY = "PREEMPTIBLE-" + GPU_FAMILY_QUOTA

B200 = {"gpu_family": "NVIDIA_B200"}


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
