"""Preflight doctor: will `pulumi up` of this stack work in its project? Ask the project first.

    python -m tools.doctor [--stack NAME] [--json] [--timeout SECONDS]
    python -m tools.doctor --leftovers [--stack NAME] [--json]   # after `pulumi destroy` (tools/leftovers.py)

The offline plan proves the program is consistent; it cannot see the project. A first `pulumi up`
runs for most of an hour before it meets a missing GPU quota, a reservation of the wrong shape, a
bucket name someone else owns or an organisation policy. The doctor asks the project for those
things with the user's Application Default Credentials and read-only calls, before any resource
exists. Every check prints pass, warn or fail, and a failure prints the command that fixes it.

Exit codes: 0 nothing failed (warnings allowed), 1 a check failed, 2 bad stack file or flag,
3 no usable Application Default Credentials.

Why here (tools/) and not `python -m jobctl doctor`: the doctor needs Google Cloud admin clients
and the deployer's permission list (`tools/deployer_permissions.py`), which the day-2 CLI does not;
it reads the stack through infra (config, flavours, names), as the offline plan does. The Pulumi
program never imports tools/.

Every Google API call goes through `Clients`, built by `connect`; tests hand in fakes there.
Only on the real cloud: the answers themselves (quota values, versions, policies); the calls and the
fields read are those of the pinned client libraries (requirements.txt), checked by the tests.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Optional, TextIO, Union

from google.api_core import exceptions as gexc

from infra.config import LUSTRE_CSI_MIN_GKE, LUSTRE_PORT_988_MIN_GKE, ConfigError, Provisioning, Rung, StackConfig
from infra.flavours import parse_gke_version
from infra.machines import machine_shape
from infra.network import DEFAULT_NETWORK, SERVICE_NETWORKING, roce_network_profile
from infra.placement import CUSTOM_COMPUTE_CLASS_MIN_GKE, FLEX_START_MIN_GKE, is_ladder, rung_quota_metric
from infra.project_apis import REQUIRED_APIS
from infra.stack_context import StackContext
from infra.stack_file import DEFAULT_STACK, StackFileError, load_stack
from infra.storage import artifact_bucket_name, workload_identity_principal
from tools.deployer_permissions import required_permissions
from workloads import cli_args

PASS, WARN, FAIL = "pass", "warn", "fail"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CREDENTIALS = 0, 1, 2, 3
DEFAULT_TIMEOUT = 20.0
MAX_TIMEOUT = 600.0

ORG_POLICY_API = "orgpolicy.googleapis.com"
"""Not needed by `pulumi up`; without it the doctor cannot read the organisation policies."""

CLOUD_QUOTAS_API = "cloudquotas.googleapis.com"
"""Not needed by `pulumi up`; the doctor reads GPU family quotas the region does not list through it."""

GPU_FAMILY_QUOTA = "GPUS-PER-GPU-FAMILY-per-project-region"
"""The Cloud Quotas quota of newer GPU families, one value per `gpu_family` and region (Cloud Quotas docs'
QuotaPreference example; projects report NVIDIA_H100 / NVIDIA_B200 under it)."""

LUSTRE_MAX_INSTANCES = 20
"""Managed Lustre system limit: instances per project (managed-lustre/docs/quotas, "System limits")."""

SERVICE_USAGE_BATCH = 30
"""BatchGetServices takes at most 30 names (google-cloud-service-usage BatchGetServicesRequest.names)."""

TEST_IAM_BATCH = 100
"""Permissions per testIamPermissions call: the stack needs about 40, so today one call."""

NO_CREDENTIALS = (
    "no usable Application Default Credentials ({reason}): run `gcloud auth application-default login` "
    "(or point GOOGLE_APPLICATION_CREDENTIALS at a key file), then run the doctor again"
)


@dataclass(frozen=True)
class Result:
    """One line of the report."""

    check: str
    status: str
    summary: str
    fix: Optional[str] = None


class NoCredentials(Exception):
    """No usable Application Default Credentials; the message is one line."""


@dataclass
class Clients:
    """The Google Cloud clients the doctor calls; the one seam tests replace."""

    projects: Any  # resourcemanager_v3.ProjectsClient
    service_usage: Any  # service_usage_v1.ServiceUsageClient
    regions: Any  # compute_v1.RegionsClient
    machine_types: Any  # compute_v1.MachineTypesClient
    network_profiles: Any  # compute_v1.NetworkProfilesClient
    reservations: Any  # compute_v1.ReservationsClient
    networks: Any  # compute_v1.NetworksClient
    global_addresses: Any  # compute_v1.GlobalAddressesClient
    subnetworks: Any  # compute_v1.SubnetworksClient
    clusters: Any  # container_v1.ClusterManagerClient
    lustre: Any  # lustre_v1.LustreClient
    storage: Any  # storage.Client
    org_policy: Any  # orgpolicy_v2.OrgPolicyClient
    quotas: Any  # cloudquotas_v1.CloudQuotasClient
    compute_projects: Any = None  # compute_v1.ProjectsClient (project-wide quotas)
    assets: Any = None  # asset_v1.AssetServiceClient (the leftover audit, `--leftovers`)


def connect(project: str) -> Clients:
    """Clients on the user's Application Default Credentials; `NoCredentials` when there are none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as err:
        raise NoCredentials(NO_CREDENTIALS.format(reason=_first_line(err))) from None

    from google.cloud import (
        asset_v1,
        cloudquotas_v1,
        compute_v1,
        container_v1,
        lustre_v1,
        orgpolicy_v2,
        resourcemanager_v3,
        service_usage_v1,
        storage,
    )

    c = {"credentials": credentials}
    return Clients(
        projects=resourcemanager_v3.ProjectsClient(**c),
        service_usage=service_usage_v1.ServiceUsageClient(**c),
        regions=compute_v1.RegionsClient(**c),
        machine_types=compute_v1.MachineTypesClient(**c),
        network_profiles=compute_v1.NetworkProfilesClient(**c),
        reservations=compute_v1.ReservationsClient(**c),
        networks=compute_v1.NetworksClient(**c),
        global_addresses=compute_v1.GlobalAddressesClient(**c),
        subnetworks=compute_v1.SubnetworksClient(**c),
        clusters=container_v1.ClusterManagerClient(**c),
        lustre=lustre_v1.LustreClient(**c),
        storage=storage.Client(project=project, credentials=credentials),
        org_policy=orgpolicy_v2.OrgPolicyClient(**c),
        quotas=cloudquotas_v1.CloudQuotasClient(**c),
        compute_projects=compute_v1.ProjectsClient(**c),
        assets=asset_v1.AssetServiceClient(**c),
    )


@dataclass(frozen=True)
class Context:
    """What every check reads: the validated stack, the project's number and the clients."""

    stack: str
    cfg: StackConfig
    names: StackContext
    project_number: str
    clients: Clients
    timeout: float

    @property
    def project(self) -> str:
        return self.cfg.project


# ----------------------------------------------------------------------------- the checks


def manages_apis(cfg: StackConfig) -> bool:
    """Whether `pulumi up` enables the APIs itself (project.manageApis, issue 11)."""
    return bool(getattr(cfg, "manage_apis", False))


def check_apis(ctx: Context) -> tuple[Result, set[str]]:
    """Every API the stack uses is on (or `pulumi up` turns it on). Also returns the APIs that are off,
    so checks that need them say so instead of failing on an error message."""
    wanted = [*REQUIRED_APIS, ORG_POLICY_API, CLOUD_QUOTAS_API]
    parent = f"projects/{ctx.project_number}"
    states: dict[str, bool] = {}
    for i in range(0, len(wanted), SERVICE_USAGE_BATCH):
        response = ctx.clients.service_usage.batch_get_services(
            request={
                "parent": parent,
                "names": [f"{parent}/services/{api}" for api in wanted[i : i + SERVICE_USAGE_BATCH]],
            },
            timeout=ctx.timeout,
        )
        for service in response.services:
            states[service.name.rsplit("/", 1)[-1]] = service.state.name == "ENABLED"
    off = {api for api in wanted if not states.get(api, False)}
    missing = [api for api in REQUIRED_APIS if api in off]
    if not missing:
        return Result("apis", PASS, f"all {len(REQUIRED_APIS)} APIs the stack uses are enabled"), off
    enable = f"gcloud services enable {' '.join(missing)} --project {ctx.project}"
    if manages_apis(ctx.cfg):
        return Result(
            "apis",
            WARN,
            f"off, and `pulumi up` enables them (project.manageApis): {', '.join(missing)}; "
            "the checks that need them are skipped until then",
            enable,
        ), off
    return Result("apis", FAIL, f"off: {', '.join(missing)}", enable), off


def check_zone(ctx: Context) -> Result:
    """The zone sells the flavour's machine type and has the RoCE network profile the RDMA VPC needs."""
    flavour = ctx.cfg.flavour_spec
    zone = ctx.cfg.zone
    system = ctx.cfg.cluster.system_pool.machine_type
    for machine, role in (
        (flavour.machine_type, f"flavour {flavour.name}"),
        (system, "cluster.systemPool.machineType"),
    ):
        try:
            ctx.clients.machine_types.get(project=ctx.project, zone=zone, machine_type=machine, timeout=ctx.timeout)
        except gexc.NotFound:
            return Result(
                "zone",
                FAIL,
                f"{zone} does not offer {machine} ({role})",
                f"gcloud compute machine-types list --filter=name={machine} --project {ctx.project}"
                "  # then: pulumi config set region <region> && pulumi config set zone <a zone listed>",
            )
    profile = roce_network_profile(ctx.project, zone).rsplit("/", 1)[-1]
    try:
        ctx.clients.network_profiles.get(project=ctx.project, network_profile=profile, timeout=ctx.timeout)
    except gexc.NotFound:
        return Result(
            "zone",
            FAIL,
            f"{zone} has no RoCE network profile {profile} for the RDMA VPC",
            f"gcloud compute network-profiles list --project {ctx.project}"
            " # then pulumi config set zone <a zone with a -vpc-roce profile>",
        )
    return Result("zone", PASS, f"{zone} offers {flavour.machine_type}, {system} and the {profile} network profile")


def gpu_quota_metric(flavour_metric: str, provisioning: Provisioning) -> str:
    """Spot and flex-start VMs count against the preemptible GPU quota, on-demand against the standard one
    (`infra.placement.rung_quota_metric`, which the plan's ladder reads too)."""
    return rung_quota_metric(flavour_metric, provisioning) or flavour_metric


LADDER_ELSEWHERE = "the capacity ladder's rungs are checked one by one (capacity-ladder)"


def check_gpu_quota(ctx: Context) -> Result:
    """The region's GPU quota of the provisioning model has room for the whole pool."""
    if is_ladder(ctx.cfg):
        return Result("gpu-quota", PASS, LADDER_ELSEWHERE)
    return gpu_quota_result(ctx, ctx.cfg.gpu_pool.ladder[0].provisioning)


def gpu_quota_result(ctx: Context, provisioning: Provisioning, check: str = "gpu-quota", lead: str = "") -> Result:
    """Whether the region's GPU quota of `provisioning` holds the whole gang (every rung must: GKE may take
    all of it from any one rung)."""
    cfg = ctx.cfg
    flavour = cfg.flavour_spec
    if provisioning is Provisioning.RESERVATION:
        return Result(check, PASS, f"{lead}a reservation brings its own quota (see the reservation check)")
    need = cfg.gpu_pool.node_count * flavour.gpus_per_node
    metric = gpu_quota_metric(flavour.gpu_quota_metric, provisioning)
    pool = f"{cfg.gpu_pool.node_count} x {flavour.machine_type} need {need}"
    region = ctx.clients.regions.get(project=ctx.project, region=cfg.region, timeout=ctx.timeout)
    quota = next((q for q in region.quotas if q.metric == metric), None)
    if quota is None:
        found = _gpu_family_quota(ctx, metric, need, pool, check)
        return replace(found, summary=lead + found.summary)
    free = quota.limit - quota.usage
    what = f"{lead}{metric} in {cfg.region}: {free:g} free of {quota.limit:g}; {pool}"
    if free >= need:
        return Result(check, PASS, what)
    return Result(
        check, FAIL, what, _quota_request(ctx, _quota_id(metric), {"region": cfg.region}, int(quota.usage) + need)
    )


def _quota_id(metric: str) -> str:
    """The Cloud Quotas id of a regional Compute Engine metric: PREEMPTIBLE_NVIDIA_H100_GPUS is
    PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region. Only on the real cloud: that B200/H200 follow it."""
    return metric.replace("_", "-") + "-per-project-region"


def _quota_request(ctx: Context, quota_id: str, dimensions: dict[str, str], value: int) -> str:
    dims = ",".join(f"{k}={v}" for k, v in sorted(dimensions.items()))
    return (
        f"gcloud beta quotas preferences create --service=compute.googleapis.com --quota-id={quota_id} "
        f"--preferred-value={value} {f'--dimensions={dims} ' if dims else ''}--project={ctx.project} --email=<you>"
    )


GLOBAL_QUOTAS = {"GPUS_ALL_REGIONS": "GPUS-ALL-REGIONS-per-project", "CPUS_ALL_REGIONS": "CPUS-ALL-REGIONS-per-project"}
"""Project-wide Compute Engine quotas (compute `projects.get` quotas) and their Cloud Quotas ids. Every
VM counts against them on top of its region's quota, so a 0 here (new projects get GPUS_ALL_REGIONS 0)
stops the pool whatever the region grants (Compute Engine "Allocation quotas": GPU quota, VM quota).
Only on the real cloud: the Cloud Quotas ids, and whether spot and flex-start VMs count (the doctor
assumes they do)."""


def global_quota_needs(cfg: StackConfig) -> tuple[int, int, str]:
    """(GPUs, vCPUs, what was counted) the stack's nodes take from the project-wide quotas. A
    reservation's VMs were counted when it was created, so a reserved GPU pool needs none here."""
    flavour, pool = cfg.flavour_spec, cfg.gpu_pool
    reserved = pool.provisioning is Provisioning.RESERVATION
    gpus = 0 if reserved else pool.node_count * flavour.gpus_per_node
    cpus = 0 if reserved else pool.node_count * flavour.vcpus
    what = ["the GPU pool's in its reservation" if reserved else f"{pool.node_count} x {flavour.machine_type}"]
    if cfg.cluster.mode != "autopilot":
        system = cfg.cluster.system_pool
        shape = machine_shape(system.machine_type)
        if shape is not None:
            # One more system node while GKE surge-upgrades the pool (max surge 1).
            cpus += (system.node_count + 1) * shape[0]
            what.append(f"{system.node_count} + 1 surge x {system.machine_type}")
        else:
            what.append(f"not the system pool ({system.machine_type}: vCPUs not known here)")
    return gpus, cpus, ", ".join(what)


def check_global_quota(ctx: Context) -> list[Result]:
    """GPUS_ALL_REGIONS and CPUS_ALL_REGIONS have room for the stack's nodes."""
    gpus, cpus, counted = global_quota_needs(ctx.cfg)
    project = ctx.clients.compute_projects.get(project=ctx.project, timeout=ctx.timeout)
    quotas = {q.metric: q for q in project.quotas}
    results = []
    for metric, need in (("GPUS_ALL_REGIONS", gpus), ("CPUS_ALL_REGIONS", cpus)):
        quota = quotas.get(metric)
        if quota is None:
            results.append(
                Result(
                    "global-quota",
                    WARN,
                    f"the project lists no {metric} quota; the stack needs {need} ({counted})",
                    f"gcloud compute project-info describe --project {ctx.project} "
                    "--format='table(quotas.metric,quotas.limit,quotas.usage)'",
                )
            )
            continue
        free = quota.limit - quota.usage
        what = f"{metric}: {free:g} free of {quota.limit:g}; the stack needs {need} ({counted})"
        if free >= need:
            results.append(Result("global-quota", PASS, what))
            continue
        if quota.limit == 0:
            what += "; a project-wide 0 overrides every regional grant"
        results.append(
            Result("global-quota", FAIL, what, _quota_request(ctx, GLOBAL_QUOTAS[metric], {}, int(quota.usage) + need))
        )
    return results


def _gpu_family_quota(ctx: Context, metric: str, need: int, pool: str, check: str) -> Result:
    """When the region lists no per-model metric: newer GPU families may be granted only as a Cloud
    Quotas quota with a `gpu_family` dimension. Read the limit there (Cloud Quotas has no usage)."""
    cfg = ctx.cfg
    family = cfg.flavour_spec.gpu_quota_metric.removesuffix("_GPUS")
    preemptible = metric.startswith("PREEMPTIBLE_")
    candidates = [_quota_id(metric), ("PREEMPTIBLE-" if preemptible else "") + GPU_FAMILY_QUOTA]
    parent = f"projects/{ctx.project}/locations/global/services/compute.googleapis.com/quotaInfos"
    unseen = Result(
        check,
        WARN,
        f"{cfg.region} lists no {metric} quota and Cloud Quotas has none of "
        f"{', '.join(candidates)} for gpu_family {family}; {pool}",
        f"gcloud compute regions describe {cfg.region} --project {ctx.project} "
        "--format='table(quotas.metric,quotas.limit,quotas.usage)'",
    )
    for quota_id in candidates:
        try:
            info = ctx.clients.quotas.get_quota_info(name=f"{parent}/{quota_id}", timeout=ctx.timeout)
        except gexc.NotFound:
            continue
        except gexc.GoogleAPICallError as exc:
            return replace(
                unseen,
                summary=f"{cfg.region} lists no {metric} quota, and Cloud Quotas could not be read "
                f"({_first_line(exc)}); {pool}",
            )
        value = _family_value(info, cfg.region, family)
        if value is None:
            continue
        dims = {"region": cfg.region, **({"gpu_family": family} if "gpu_family" in info.dimensions else {})}
        what = (
            f"{quota_id} ({', '.join(f'{k}={v}' for k, v in dims.items())}): limit {value}; {pool} (usage not "
            "shown here)"
        )
        if value >= need:
            return Result(check, PASS, what)
        return Result(check, FAIL, what, _quota_request(ctx, quota_id, dims, need))
    return unseen


def _family_value(info: Any, region: str, family: str) -> Optional[int]:
    """The quota value that applies to the region and GPU family, the most specific entry winning."""
    best: Optional[tuple[int, int]] = None
    for entry in info.dimensions_infos:
        dims = dict(entry.dimensions)
        if dims.get("gpu_family", family) != family:
            continue
        if "region" in dims:
            if dims["region"] != region:
                continue
        elif (
            entry.applicable_locations
            and region not in entry.applicable_locations
            and "global" not in entry.applicable_locations
        ):
            continue
        specificity = len(dims)
        if best is None or specificity > best[0]:
            best = (specificity, int(entry.details.value))
    return None if best is None else best[1]


def check_reservation(ctx: Context) -> Result:
    """The named reservation exists in the zone, holds the flavour's machine type and has room for the pool."""
    cfg = ctx.cfg
    pool = cfg.gpu_pool
    if is_ladder(cfg):
        return Result("reservation", PASS, LADDER_ELSEWHERE)
    if pool.provisioning is not Provisioning.RESERVATION:
        return Result("reservation", PASS, f"none used (gpuPool.provisioning: {pool.provisioning.value})")
    return reservation_result(ctx, pool.reservation_name)


def reservation_result(ctx: Context, name: str, check: str = "reservation", lead: str = "") -> Result:
    """The reservation `name` exists in the zone, holds the flavour's machine type and has room for the gang."""
    found = _reservation_result(ctx, name, check)
    return replace(found, summary=lead + found.summary)


def _reservation_result(ctx: Context, name: str, check: str) -> Result:
    cfg = ctx.cfg
    pool = cfg.gpu_pool
    zone = cfg.zone
    try:
        reservation = ctx.clients.reservations.get(
            project=ctx.project, zone=zone, reservation=name, timeout=ctx.timeout
        )
    except gexc.NotFound:
        return Result(
            check,
            FAIL,
            f"no reservation {name!r} in {zone}",
            f"gcloud compute reservations list --project {ctx.project}  # then set gpuPool.reservationName and zone "
            "to one listed",
        )
    machine = reservation.specific_reservation.instance_properties.machine_type
    template = reservation.specific_reservation.source_instance_template
    if not machine and template:
        return Result(
            check,
            WARN,
            f"{name} reserves VMs of instance template {template.rsplit('/', 1)[-1]}: make "
            f"sure it is {cfg.flavour_spec.machine_type}; {reservation.specific_reservation.count} reserved, "
            f"{reservation.specific_reservation.in_use_count} in use, the pool needs {pool.node_count}",
        )
    if machine.rsplit("/", 1)[-1] != cfg.flavour_spec.machine_type:
        return Result(
            check,
            FAIL,
            f"{name} reserves {machine or 'no specific machine type'}, not "
            f"{cfg.flavour_spec.machine_type} (flavour {cfg.flavour_spec.name})",
            "pulumi config set --path gpuPool.reservationName <a reservation of "
            f"{cfg.flavour_spec.machine_type} in {zone}>",
        )
    total = reservation.specific_reservation.count
    free = total - reservation.specific_reservation.in_use_count
    what = f"{name} in {zone}: {free} of {total} {machine} free; the pool needs {pool.node_count}"
    if free < pool.node_count:
        return Result(
            check,
            FAIL,
            what,
            f"gcloud compute reservations update {name} --zone {zone} --vm-count "
            f"{total - free + pool.node_count} --project {ctx.project}  # or lower gpuPool.nodeCount to {free}",
        )
    if reservation.status and reservation.status != "READY":
        return Result(check, WARN, f"{what}; status {reservation.status}, not READY")
    return Result(check, PASS, what)


def check_capacity_ladder(ctx: Context) -> list[Result]:
    """Every rung of `gpuPool.capacity` can supply the whole gang: its GPU quota, or its reservation's free VMs.
    Spot and flex-start draw on the same preemptible quota, so each is checked against all of it."""
    cfg = ctx.cfg
    if not is_ladder(cfg):
        return [Result("capacity-ladder", PASS, "one rung: the gpu-quota and reservation checks cover it")]
    results = []
    for i, rung in enumerate(cfg.gpu_pool.ladder, 1):
        lead = f"rung {i} {rung.label}: "
        results.append(_rung_result(ctx, rung, lead))
    return results


def _rung_result(ctx: Context, rung: Rung, lead: str) -> Result:
    if rung.provisioning is Provisioning.RESERVATION:
        return reservation_result(ctx, rung.reservation_name or "", "capacity-ladder", lead)
    return gpu_quota_result(ctx, rung.provisioning, "capacity-ladder", lead)


def check_lustre(ctx: Context) -> Result:
    """Managed Lustre is offered in the zone and the project has room for one more instance."""
    cfg = ctx.cfg
    zone = cfg.zone
    response = ctx.clients.lustre.list_locations(
        request={"name": f"projects/{ctx.project}", "page_size": 1000}, timeout=ctx.timeout
    )
    offered = sorted(loc.location_id for loc in response.locations)
    if zone not in offered:
        nearby = [z for z in offered if z.startswith(cfg.region + "-")]
        fix = (
            f"pulumi config set zone {nearby[0]}"
            if nearby
            else f"choose a region and zone where Managed Lustre is offered: {', '.join(offered) or 'none listed'}"
        )
        return Result("lustre", FAIL, f"Managed Lustre is not offered in {zone}", fix)
    instances = list(
        ctx.clients.lustre.list_instances(parent=f"projects/{ctx.project}/locations/-", timeout=ctx.timeout)
    )
    ours = f"/locations/{zone}/instances/{cfg.lustre_instance_id}"
    if any(i.name.endswith(ours) for i in instances):
        return Result(
            "lustre",
            WARN,
            f"instance {cfg.lustre_instance_id} already exists in {zone}: fine if this stack "
            "created it, otherwise `pulumi up` fails to create it",
            "pulumi config set --path lustre.instanceId <another id>",
        )
    if len(instances) >= LUSTRE_MAX_INSTANCES:
        return Result(
            "lustre",
            FAIL,
            f"the project already has {len(instances)} Managed Lustre instances (limit {LUSTRE_MAX_INSTANCES})",
            f"gcloud lustre instances list --location=- --project {ctx.project}  # delete one",
        )
    # Only on the real cloud: the capacity quota of the region (the Quotas page, service lustre.googleapis.com).
    return Result("lustre", PASS, f"offered in {zone}; {len(instances)} of {LUSTRE_MAX_INSTANCES} instances in use")


def check_iam(ctx: Context) -> Result:
    """The deployer (the Application Default Credentials) holds every permission `pulumi up` uses."""
    needed = required_permissions(ctx.cfg)
    wanted = sorted(needed)
    granted: set[str] = set()
    for i in range(0, len(wanted), TEST_IAM_BATCH):
        response = ctx.clients.projects.test_iam_permissions(
            request={"resource": f"projects/{ctx.project}", "permissions": wanted[i : i + TEST_IAM_BATCH]},
            timeout=ctx.timeout,
        )
        granted |= set(response.permissions)
    missing = [p for p in wanted if p not in granted]
    if not missing:
        return Result("iam", PASS, f"you hold all {len(wanted)} permissions `pulumi up` and `pulumi destroy` use")
    roles = sorted({needed[p] for p in missing})
    bind = " && ".join(
        f"gcloud projects add-iam-policy-binding {ctx.project} --member=user:<you> --role={r}" for r in roles
    )
    return Result("iam", FAIL, f"missing {len(missing)} permission(s): {', '.join(missing)}", bind)


def minimum_gke_version(cfg: StackConfig) -> tuple[str, str]:
    """The lowest control-plane version the stack works with, and why."""
    flavour = cfg.flavour_spec
    # The Managed Lustre CSI driver's own floor holds with the legacy port too (infra/config.py, the same
    # three floors for cluster.minMasterVersion).
    needs = [
        (flavour.min_gke_version, f"flavour {flavour.name}"),
        (LUSTRE_CSI_MIN_GKE, "the Managed Lustre CSI driver"),
    ]
    if not cfg.lustre.legacy_port:
        needs.append((LUSTRE_PORT_988_MIN_GKE, "Lustre on port 988"))
    if is_ladder(cfg):
        needs.append((CUSTOM_COMPUTE_CLASS_MIN_GKE, "the capacity ladder's custom ComputeClass"))
    if any(r.provisioning is Provisioning.FLEX_START for r in cfg.gpu_pool.ladder):
        needs.append((FLEX_START_MIN_GKE, "flex-start GPUs"))
    return max(needs, key=lambda n: parse_gke_version(n[0]))


def check_gke_versions(ctx: Context) -> Result:
    """The release channel in the zone offers a version at or above the flavour's (and Lustre's) minimum."""
    cfg = ctx.cfg
    channel_name = cfg.cluster.release_channel
    minimum, why = minimum_gke_version(cfg)
    config = ctx.clients.clusters.get_server_config(
        name=f"projects/{ctx.project}/locations/{cfg.zone}", timeout=ctx.timeout
    )
    channels = {c.channel.name: c for c in config.channels}
    channel = channels.get(channel_name)
    if channel is None:
        return Result(
            "gke-versions",
            FAIL,
            f"{cfg.zone} offers no {channel_name} channel (offered: {', '.join(sorted(channels))})",
            "pulumi config set --path cluster.releaseChannel REGULAR",
        )
    floor = cfg.cluster.min_master_version or minimum
    fits = sorted(
        (v for v in channel.valid_versions if parse_gke_version(v) >= parse_gke_version(floor)), key=parse_gke_version
    )
    if cfg.cluster.min_master_version:
        if fits:
            return Result(
                "gke-versions",
                PASS,
                f"{channel_name} in {cfg.zone} offers {fits[0]} for cluster.minMasterVersion {floor}",
            )
        return Result(
            "gke-versions",
            FAIL,
            f"{channel_name} in {cfg.zone} offers nothing at or above cluster.minMasterVersion "
            f"{floor} (newest {max(channel.valid_versions, key=parse_gke_version, default='none')})",
            _channel_fix(channels, floor),
        )
    default = channel.default_version
    if default and parse_gke_version(default) >= parse_gke_version(minimum):
        return Result(
            "gke-versions", PASS, f"{channel_name} default in {cfg.zone} is {default}, at or above {minimum} ({why})"
        )
    if fits:
        return Result(
            "gke-versions",
            FAIL,
            f"{channel_name} default in {cfg.zone} is {default}, below {minimum} ({why})",
            f"pulumi config set --path cluster.minMasterVersion {fits[0]}",
        )
    return Result(
        "gke-versions",
        FAIL,
        f"{channel_name} in {cfg.zone} offers nothing at or above {minimum} ({why})",
        _channel_fix(channels, minimum),
    )


def check_version_matrix(ctx: Context) -> list[Result]:
    """The live cluster and the channel's next versions against the stack's version-matrix row
    (tools/version_drift.py); results `version-matrix` and `version-upgrades`."""
    from tools.version_drift import check_version_matrix as check

    return [Result(f.check, PASS if f.ok else WARN, f.summary, f.fix) for f in check(ctx)]


def _channel_fix(channels: dict[str, Any], floor: str) -> str:
    for name in ("RAPID", "REGULAR", "STABLE", "EXTENDED"):
        channel = channels.get(name)
        if channel and any(parse_gke_version(v) >= parse_gke_version(floor) for v in channel.valid_versions):
            return f"pulumi config set --path cluster.releaseChannel {name}"
    return f"no channel offers {floor} yet: wait, or pick another zone"


def check_bucket(ctx: Context) -> Result:
    """The artifacts bucket's global name is free, or is this project's bucket the stack may adopt."""
    name = artifact_bucket_name(ctx.project, ctx.names.prefix)
    rename = "pulumi config set namePrefix <another prefix>  # the bucket is <project>-<namePrefix>-artifacts"
    try:
        bucket = ctx.clients.storage.lookup_bucket(name, timeout=ctx.timeout)
    except gexc.Forbidden:
        return Result("bucket", FAIL, f"gs://{name} exists and belongs to someone else", rename)
    if bucket is None:
        return Result("bucket", PASS, f"gs://{name} is free")
    if str(bucket.project_number) != ctx.project_number:
        return Result("bucket", FAIL, f"gs://{name} exists in another project ({bucket.project_number})", rename)
    if ctx.cfg.storage.adopt_existing_bucket:
        return Result("bucket", PASS, f"gs://{name} exists in this project; storage.adoptExistingBucket takes it over")
    return Result(
        "bucket",
        FAIL,
        f"gs://{name} already exists in this project (kept by an earlier `pulumi destroy`?)",
        "pulumi config set --path storage.adoptExistingBucket true",
    )


def check_psa(ctx: Context) -> Result:
    """The Private Service Access range conflicts with nothing already on the cluster's network."""
    cfg = ctx.cfg
    psa = ipaddress.IPv4Network(cfg.network.psa_cidr)
    if not cfg.network.use_default_network:
        vpc = ctx.names.name("vpc")
        try:
            ctx.clients.networks.get(project=ctx.project, network=vpc, timeout=ctx.timeout)
        except gexc.NotFound:
            return Result("psa", PASS, f"the stack creates VPC {vpc}: no peering or range there yet ({psa} is free)")
        return Result(
            "psa",
            WARN,
            f"VPC {vpc} already exists: fine if this stack created it, otherwise `pulumi up` fails to create it",
            "pulumi config set namePrefix <another prefix>",
        )
    try:
        network = ctx.clients.networks.get(project=ctx.project, network=DEFAULT_NETWORK, timeout=ctx.timeout)
    except gexc.NotFound:
        return Result(
            "psa",
            FAIL,
            f"network.useDefaultNetwork is true but the project has no {DEFAULT_NETWORK!r} VPC",
            "pulumi config set --path network.useDefaultNetwork false",
        )
    own = "pulumi config set --path network.useDefaultNetwork false  # a VPC of the stack's own"
    service_peering = SERVICE_NETWORKING.replace(".", "-")
    if any(p.name == service_peering for p in network.peerings):
        # The stack's Service Networking connection would collide with this one (see infra/network.py).
        return Result(
            "psa",
            FAIL,
            f"the {DEFAULT_NETWORK} VPC already has a Service Networking peering "
            f"({service_peering}, e.g. Cloud SQL's); creating the stack's fails",
            own,
        )
    for address in ctx.clients.global_addresses.list(project=ctx.project, timeout=ctx.timeout):
        if address.purpose != "VPC_PEERING" or not address.network.endswith(f"/networks/{DEFAULT_NETWORK}"):
            continue
        taken = ipaddress.IPv4Network(f"{address.address}/{address.prefix_length}", strict=False)
        if taken.overlaps(psa):
            return Result(
                "psa",
                FAIL,
                f"network.psaCidr {psa} overlaps the peering range {address.name} ({taken})",
                "pulumi config set --path network.psaCidr <a free /22>",
            )
    for _, scoped in ctx.clients.subnetworks.aggregated_list(project=ctx.project, timeout=ctx.timeout):
        for subnet in scoped.subnetworks:
            if not subnet.network.endswith(f"/networks/{DEFAULT_NETWORK}"):
                continue
            ranges = [subnet.ip_cidr_range, *(r.ip_cidr_range for r in subnet.secondary_ip_ranges)]
            for cidr in ranges:
                if cidr and ipaddress.IPv4Network(cidr, strict=False).overlaps(psa):
                    return Result(
                        "psa",
                        FAIL,
                        f"network.psaCidr {psa} overlaps subnet {subnet.name} ({cidr})",
                        "pulumi config set --path network.psaCidr <a free /22>",
                    )
    return Result("psa", PASS, f"{psa} overlaps no subnet or peering range of the {DEFAULT_NETWORK} VPC")


def _rules(policy: Any) -> list[Any]:
    return list(policy.spec.rules) if policy and policy.spec else []


def _restricted_values(rules: list[Any]) -> Optional[list[str]]:
    """Allowed values of a list constraint, or None when nothing restricts it."""
    if not rules or any(r.allow_all for r in rules):
        return None
    if any(r.deny_all for r in rules):
        return []
    return [v for r in rules for v in r.values.allowed_values]


def check_org_policies(ctx: Context) -> list[Result]:
    """Organisation policies that would refuse what the stack creates."""
    cfg = ctx.cfg

    def get(constraint: str) -> Any:
        return ctx.clients.org_policy.get_effective_policy(
            name=f"projects/{ctx.project}/policies/{constraint}", timeout=ctx.timeout
        )

    reset = "gcloud org-policies reset {} --project {}  # needs roles/orgpolicy.policyAdmin"
    pool = f"workloadIdentityPools/{ctx.project}.svc.id.goog"
    # Before `pulumi up` no cluster reports its pool yet; it will be `<project>.svc.id.goog`.
    principal = workload_identity_principal(
        project_number=ctx.project_number,
        workload_pool=f"{ctx.project}.svc.id.goog",
        namespace=cfg.ray.namespace,
        ksa=cfg.ray.service_account,
    )
    results = []

    name = "iam.allowedPolicyMemberDomains"
    allowed = _restricted_values(_rules(get("iam.allowedPolicyMemberDomains")))
    if allowed is None or any(pool in v for v in allowed):
        results.append(
            Result("org-policy", PASS, f"{name}: lets the bucket grant name the Workload Identity principal")
        )
    else:
        results.append(
            Result(
                "org-policy",
                FAIL,
                f"{name}: domain-restricted sharing (allowed: {', '.join(allowed) or 'none'}) refuses the "
                f"bucket grant to {principal}",
                reset.format("iam.allowedPolicyMemberDomains", ctx.project),
            )
        )

    name = "iam.managed.allowedPolicyMembers"
    enforced = [r for r in _rules(get("iam.managed.allowedPolicyMembers")) if r.enforce]
    if not enforced:
        results.append(Result("org-policy", PASS, f"{name}: not enforced"))
    else:
        params = {k: list(v) for r in enforced for k, v in (r.parameters or {}).items()}
        subjects, sets = params.get("allowedMemberSubjects", []), params.get("allowedPrincipalSets", [])
        if principal in subjects or any(pool in s for s in sets):
            results.append(Result("org-policy", PASS, f"{name}: allows the Workload Identity principal"))
        else:
            results.append(
                Result(
                    "org-policy",
                    FAIL,
                    f"{name}: refuses the bucket grant to {principal}",
                    reset.format("iam.managed.allowedPolicyMembers", ctx.project),
                )
            )

    name = "iam.disableServiceAccountCreation"
    if any(r.enforce for r in _rules(get("iam.disableServiceAccountCreation"))):
        results.append(
            Result(
                "org-policy",
                FAIL,
                f"{name}: enforced: the stack creates the GKE node service account",
                reset.format("iam.disableServiceAccountCreation", ctx.project),
            )
        )
    else:
        results.append(Result("org-policy", PASS, f"{name}: not enforced"))

    name = "gcp.resourceLocations"
    allowed = _restricted_values(_rules(get("gcp.resourceLocations")))
    places = {cfg.region, cfg.zone, f"in:{cfg.region}-locations", f"in:{cfg.zone}-locations"}
    if allowed is None or places & set(allowed):
        results.append(Result("org-policy", PASS, f"{name}: allows {cfg.region}"))
    elif any(v.startswith("in:") for v in allowed):
        # Value groups (in:us-locations) expand server-side; the doctor cannot resolve them.
        results.append(
            Result("org-policy", WARN, f"{name}: allows only {', '.join(allowed)}: make sure that includes {cfg.zone}")
        )
    else:
        results.append(
            Result(
                "org-policy",
                FAIL,
                f"{name}: allows only {', '.join(allowed)}, not {cfg.region}",
                "pulumi config set region <an allowed region> && pulumi config set zone <a zone in it>",
            )
        )
    return results


# ----------------------------------------------------------------------------- running them

Check = Callable[[Context], Union[Result, list[Result]]]

CHECKS: tuple[tuple[str, Check, tuple[str, ...]], ...] = (
    # (name, check, APIs it calls in the project)
    ("zone", check_zone, ("compute.googleapis.com",)),
    ("gpu-quota", check_gpu_quota, ("compute.googleapis.com",)),
    ("global-quota", check_global_quota, ("compute.googleapis.com",)),
    ("reservation", check_reservation, ("compute.googleapis.com",)),
    ("capacity-ladder", check_capacity_ladder, ("compute.googleapis.com",)),
    ("lustre", check_lustre, ("lustre.googleapis.com",)),
    ("iam", check_iam, ("cloudresourcemanager.googleapis.com",)),
    ("gke-versions", check_gke_versions, ("container.googleapis.com",)),
    ("version-matrix", check_version_matrix, ("container.googleapis.com",)),
    ("bucket", check_bucket, ("storage.googleapis.com",)),
    ("psa", check_psa, ("compute.googleapis.com",)),
    ("org-policy", check_org_policies, (ORG_POLICY_API,)),
)


def _as_warning(name: str, exc: BaseException, timeout: float) -> Result:
    """A check that could not ask: say why, never a traceback."""
    if isinstance(exc, (gexc.Forbidden, gexc.PermissionDenied)):
        return Result(name, WARN, f"not checked: permission denied ({_first_line(exc)})")
    if isinstance(exc, (gexc.DeadlineExceeded, TimeoutError)):
        return Result(name, WARN, f"not checked: no answer within {timeout:g}s")
    if isinstance(exc, gexc.GoogleAPICallError):
        return Result(name, WARN, f"not checked: {type(exc).__name__} ({_first_line(exc)})")
    return Result(name, WARN, f"not checked: {type(exc).__name__}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _project_number(cfg: StackConfig, clients: Clients, timeout: float) -> str:
    project = clients.projects.get_project(name=f"projects/{cfg.project}", timeout=timeout)
    return project.name.rsplit("/", 1)[-1]


def run_checks(stack: str, cfg: StackConfig, clients: Clients, timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
    """Every check, concurrently; the project first (nothing else can be asked without it)."""
    from google.auth.exceptions import RefreshError

    try:
        number = _project_number(cfg, clients, timeout)
    except RefreshError as exc:
        raise NoCredentials(NO_CREDENTIALS.format(reason=f"refused: {_first_line(exc)}")) from None
    except (gexc.NotFound, gexc.Forbidden, gexc.PermissionDenied):
        return [
            Result(
                "project",
                FAIL,
                f"project {cfg.project} does not exist or you cannot see it",
                f"gcloud projects describe {cfg.project}  # fix nemo-rl-gke:project, or ask for roles/browser on it",
            )
        ]
    except Exception as exc:  # e.g. no route to Google: nothing at all could be checked
        return [
            Result(
                "project", FAIL, f"could not ask for project {cfg.project}: {type(exc).__name__} ({_first_line(exc)})"
            )
        ]
    ctx = Context(stack, cfg, StackContext.from_config(stack, cfg), number, clients, timeout)
    results = [Result("project", PASS, f"{cfg.project} is project number {number}")]
    try:
        apis, off = check_apis(ctx)
    except Exception as exc:
        apis, off = _as_warning("apis", exc, timeout), set()
    results.append(apis)

    by_name: dict[str, list[Result]] = {}
    runnable = []
    for name, check, needs in CHECKS:
        skipped = [api for api in needs if api in off]
        if skipped:
            fix = f"gcloud services enable {' '.join(skipped)} --project {cfg.project}"
            by_name[name] = [Result(name, WARN, f"not checked: {', '.join(skipped)} is off", fix)]
        else:
            runnable.append((name, check))
    # A check makes at most four calls in a row (org-policy), each bounded by `timeout`.
    deadline = time.monotonic() + 4 * timeout + 5
    pool = ThreadPoolExecutor(max_workers=len(runnable) or 1, thread_name_prefix="doctor")
    futures: dict[Future, str] = {pool.submit(check, ctx): name for name, check in runnable}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED)
        if not done:
            break
        for future in done:
            name = futures[future]
            try:
                outcome = future.result()
                by_name[name] = outcome if isinstance(outcome, list) else [outcome]
            except Exception as exc:
                by_name[name] = [_as_warning(name, exc, timeout)]
    for future in pending:
        by_name[futures[future]] = [_as_warning(futures[future], TimeoutError(), timeout)]
    pool.shutdown(wait=False, cancel_futures=True)
    for name, _, _ in CHECKS:
        results.extend(by_name[name])
    # Fixes that change the stack's config name the stack, so they are right whichever stack is selected.
    return [
        replace(r, fix=r.fix.replace("pulumi config set ", f"pulumi config set --stack {stack} ")) if r.fix else r
        for r in results
    ]


# ----------------------------------------------------------------------------- output


def render_text(stack: str, cfg: StackConfig, results: list[Result]) -> str:
    lines = [f"doctor: stack {stack}, project {cfg.project}, {cfg.region} / {cfg.zone}"]
    width = max(len(r.check) for r in results)
    for r in results:
        lines.append(f"  {r.status:4}  {r.check:{width}}  {r.summary}")
        if r.fix and r.status != PASS:
            lines.append(f"  {'':4}  {'':{width}}  fix: {r.fix}")
    counts = {s: sum(r.status == s for r in results) for s in (FAIL, WARN, PASS)}
    lines.append(f"{counts[FAIL]} failed, {counts[WARN]} warning(s), {counts[PASS]} passed")
    return "\n".join(lines)


def render_json(stack: str, cfg: StackConfig, results: list[Result]) -> str:
    return json.dumps(
        {
            "stack": stack,
            "project": cfg.project,
            "ok": all(r.status != FAIL for r in results),
            "checks": [asdict(r) for r in results],
        },
        indent=2,
    )


def parser() -> argparse.ArgumentParser:
    p = cli_args.OneLineParser(
        prog="python -m tools.doctor",
        description="Check the stack's Google Cloud project before `pulumi up` (read-only).",
    )
    p.add_argument(
        "--stack",
        type=cli_args.stack_name,
        default=DEFAULT_STACK,
        help=f"stack name (Pulumi.<stack>.yaml); default {DEFAULT_STACK}",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--leftovers",
        action="store_true",
        help="after `pulumi destroy`: list what of the stack is still in the project (exit 1 when anything is)",
    )
    p.add_argument(
        "--timeout",
        type=cli_args.seconds(positive=True, maximum=MAX_TIMEOUT),
        default=DEFAULT_TIMEOUT,
        help=f"seconds per API call (the run ends within 4x that); default {DEFAULT_TIMEOUT:g}",
    )
    return p


def error_json(stack: Optional[str], code: int, message: str) -> str:
    """The `--json` document of a run that could not check anything: what a script reads instead of
    an empty stdout (the line on stderr stays the same)."""
    return json.dumps({"stack": stack, "ok": False, "exitCode": code, "error": message, "checks": []}, indent=2)


def main(
    argv: Optional[list[str]] = None,
    out: Optional[TextIO] = None,
    err: Optional[TextIO] = None,
    connect: Callable[[str], Clients] = connect,
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    # Known before the flags parse, so that a bad flag next to --json still gets its JSON document.
    wants_json = "--json" in argv
    stack_name: Optional[str] = None

    def fail(code: int, message: str) -> int:
        err.write(f"error: {message}\n")
        if wants_json:
            out.write(error_json(stack_name, code, message) + "\n")
        return code

    try:
        args = parser().parse_args(argv)
    except cli_args.UsageError as exc:  # bad flags are one line and exit 2, like every other bad input
        return fail(EXIT_USAGE, str(exc))
    stack_name = args.stack
    try:
        stack = load_stack(args.stack)
    except (StackFileError, ConfigError) as exc:
        return fail(EXIT_USAGE, str(exc).replace(chr(10), "; "))
    if args.leftovers:
        return leftovers_main(stack.name, stack.config, args, out, fail, connect)
    try:
        results = run_checks(stack.name, stack.config, connect(stack.config.project), args.timeout)
    except NoCredentials as exc:
        return fail(EXIT_NO_CREDENTIALS, str(exc))
    out.write((render_json if args.json else render_text)(stack.name, stack.config, results) + "\n")
    return EXIT_FAILED if any(r.status == FAIL for r in results) else EXIT_OK


CLOUD_ASSET_API = "cloudasset.googleapis.com"
"""Not needed by `pulumi up`; the leftover audit searches the project through it."""


def leftovers_main(
    stack: str,
    cfg: StackConfig,
    args: argparse.Namespace,
    out: TextIO,
    fail: Callable[[int, str], int],
    connect: Callable[[str], Clients],
) -> int:
    """`--leftovers`: 0 nothing of the stack is left, 1 something is (each with its removal command),
    3 the project could not be asked (no credentials, the Cloud Asset API off, permission denied)."""
    from google.auth.exceptions import RefreshError

    from infra.stack_file import available_stacks
    from tools import leftovers

    try:
        clients = connect(cfg.project)
        found = leftovers.audit(stack, cfg, clients.assets, clients.networks, args.timeout, available_stacks())
    except NoCredentials as exc:
        return fail(EXIT_NO_CREDENTIALS, str(exc))
    except RefreshError as exc:
        return fail(EXIT_NO_CREDENTIALS, NO_CREDENTIALS.format(reason=f"refused: {_first_line(exc)}"))
    except (gexc.Forbidden, gexc.PermissionDenied) as exc:
        return fail(
            EXIT_NO_CREDENTIALS,
            f"the leftover audit could not search project {cfg.project} ({_first_line(exc)}): "
            f"gcloud services enable {CLOUD_ASSET_API} --project {cfg.project}, and hold "
            "cloudasset.assets.searchAllResources (roles/cloudasset.viewer)",
        )
    except gexc.GoogleAPICallError as exc:
        return fail(
            EXIT_NO_CREDENTIALS,
            f"the leftover audit could not search project {cfg.project}: {type(exc).__name__} ({_first_line(exc)})",
        )
    out.write((leftovers.render_json if args.json else leftovers.render_text)(stack, cfg, found) + "\n")
    return EXIT_FAILED if found else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
