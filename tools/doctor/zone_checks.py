"""The doctor's zone checks: the zone sells the machines and the RoCE profile, Managed Lustre is offered
there with room for an instance, and every rung of the capacity ladder can supply the gang.
"""

from __future__ import annotations

from google.api_core import exceptions as gexc

from infra.config import Provisioning, Rung
from infra.network import roce_network_profile
from infra.placement import is_ladder
from tools.doctor.check_context import FAIL, PASS, WARN, Context, Result
from tools.doctor.quota_checks import (
    gpu_quota_result,
    reservation_result,
)

LUSTRE_MAX_INSTANCES = 20
"""Managed Lustre system limit: instances per project (managed-lustre/docs/quotas, "System limits")."""


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
