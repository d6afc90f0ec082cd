"""The doctor's quota and reservation checks: regional GPU quotas (per model and family), project-wide GPU and CPU
quotas, and the named reservation."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from google.api_core import exceptions as gexc

from infra.config import Provisioning, StackConfig
from infra.machines import machine_shape
from infra.placement import is_ladder, rung_quota_metric
from tools.doctor.check_context import PASS, Context, Result, failed, passed, warning
from tools.doctor.google_clients import first_line
from tools.doctor.project_checks import CLOUD_QUOTAS_API

# Newer GPU families' quota, per `gpu_family` and region (Cloud Quotas docs' QuotaPreference example).
GPU_FAMILY_QUOTA = "GPUS-PER-GPU-FAMILY-per-project-region"
QUOTA_TABLE = "table(quotas.metric,quotas.limit,quotas.usage)"
LADDER_ELSEWHERE = "the capacity ladder's rungs are checked one by one (capacity-ladder)"


def check_gpu_quota(ctx: Context) -> Result:
    """The region's GPU quota of the provisioning model has room for the whole pool."""
    if is_ladder(ctx.cfg):
        return passed(LADDER_ELSEWHERE)
    return gpu_quota_result(ctx, ctx.cfg.gpu_pool.ladder[0].provisioning)


def gpu_quota_result(ctx: Context, provisioning: Provisioning) -> Result:
    """Whether the region's GPU quota of `provisioning` holds the whole gang (GKE may take all from one rung):
    the per-model metric and the GPU family quota both apply (issue 33: a family 0 stops the pool)."""
    cfg = ctx.cfg
    flavour = cfg.flavour_spec
    if provisioning is Provisioning.RESERVATION:
        return passed("a reservation brings its own quota (see the reservation check)")
    need = cfg.gpu_pool.node_count * flavour.gpus_per_node
    # Spot and flex-start count against the preemptible GPU quota (the rung's metric, as the plan's ladder shows).
    metric = rung_quota_metric(flavour.gpu_quota_metric, provisioning) or flavour.gpu_quota_metric
    pool = f"{cfg.gpu_pool.node_count} x {flavour.machine_type} need {need}"
    region = ctx.clients.regions.get(project=ctx.project, region=cfg.region, timeout=ctx.timeout)
    quota = next((q for q in region.quotas if q.metric == metric), None)
    if quota is None:
        return _gpu_family_quota(ctx, metric, need, pool)
    free = quota.limit - quota.usage
    what = f"{metric} in {cfg.region}: {free:g} free of {quota.limit:g}; {pool}"
    if free < need:
        return failed(what, quota_request(ctx, _quota_id(metric), {"region": cfg.region}, int(quota.usage) + need))
    family_id = ("PREEMPTIBLE-" if metric.startswith("PREEMPTIBLE_") else "") + GPU_FAMILY_QUOTA
    try:
        family = _cloud_quota(ctx, [family_id], need, pool)
    except gexc.GoogleAPICallError as exc:
        return warning(
            f"{what}; the GPU family quota {family_id} could not be read ({first_line(exc)})",
            f"gcloud services enable {CLOUD_QUOTAS_API} --project {ctx.project}  # and hold cloudquotas.quotas.get",
        )
    if family is None:
        return passed(what)
    if family.status == PASS:
        return passed(f"{what}; and {family.summary}")
    return failed(f"{what}; but {family.summary}", family.fix)


def _quota_id(metric: str) -> str:
    """PREEMPTIBLE_NVIDIA_H100_GPUS -> PREEMPTIBLE-NVIDIA-H100-GPUS-per-project-region (Cloud Quotas' id)."""
    return metric.replace("_", "-") + "-per-project-region"


def quota_request(ctx: Context, quota_id: str, dimensions: dict[str, str], value: int) -> str:
    dims = ",".join(f"{k}={v}" for k, v in sorted(dimensions.items()))
    return (
        f"gcloud beta quotas preferences create --service=compute.googleapis.com --quota-id={quota_id} "
        f"--preferred-value={value} {f'--dimensions={dims} ' if dims else ''}--project={ctx.project} --email=<you>"
    )


def _gpu_family_quota(ctx: Context, metric: str, need: int, pool: str) -> Result:
    """When the region lists no per-model metric: newer GPU families may be granted only in Cloud Quotas."""
    cfg = ctx.cfg
    family = cfg.flavour_spec.gpu_quota_metric.removesuffix("_GPUS")
    preemptible = metric.startswith("PREEMPTIBLE_")
    candidates = [_quota_id(metric), ("PREEMPTIBLE-" if preemptible else "") + GPU_FAMILY_QUOTA]
    unseen = warning(
        f"{cfg.region} lists no {metric} quota and Cloud Quotas has none of "
        f"{', '.join(candidates)} for gpu_family {family}; {pool}",
        f"gcloud compute regions describe {cfg.region} --project {ctx.project} --format='{QUOTA_TABLE}'",
    )
    try:
        found = _cloud_quota(ctx, candidates, need, pool)
    except gexc.GoogleAPICallError as exc:
        return replace(
            unseen,
            summary=f"{cfg.region} lists no {metric} quota, and Cloud Quotas could not be read "
            f"({first_line(exc)}); {pool}",
        )
    return found or unseen


def _cloud_quota(ctx: Context, quota_ids: list[str], need: int, pool: str) -> Optional[Result]:
    """The first of `quota_ids` with a value for the region and GPU family, its limit against `need` (Cloud Quotas
    has no usage); None when none has one."""
    cfg = ctx.cfg
    family = cfg.flavour_spec.gpu_quota_metric.removesuffix("_GPUS")
    parent = f"projects/{ctx.project}/locations/global/services/compute.googleapis.com/quotaInfos"
    for quota_id in quota_ids:
        try:
            info = ctx.clients.quotas.get_quota_info(name=f"{parent}/{quota_id}", timeout=ctx.timeout)
        except gexc.NotFound:
            continue
        value = _family_value(info, cfg.region, family)
        if value is None:
            continue
        dims = {"region": cfg.region, **({"gpu_family": family} if "gpu_family" in info.dimensions else {})}
        shown = ", ".join(f"{k}={v}" for k, v in dims.items())
        what = f"{quota_id} ({shown}): limit {value}; {pool} (usage not shown here)"
        if value >= need:
            return passed(what)
        return failed(what, quota_request(ctx, quota_id, dims, need))
    return None


def _family_value(info: Any, region: str, family: str) -> Optional[int]:
    """The quota value that applies to the region and GPU family, the most specific entry winning."""

    def applies(entry: Any) -> bool:
        dims, places = dict(entry.dimensions), entry.applicable_locations
        if dims.get("gpu_family", family) != family:
            return False
        return dims["region"] == region if "region" in dims else not places or region in places or "global" in places

    found = [entry for entry in info.dimensions_infos if applies(entry)]
    return int(max(found, key=lambda entry: len(entry.dimensions)).details.value) if found else None


# Project-wide quotas and their Cloud Quotas ids: every VM counts on top of its region's, so a 0 (new projects get
# GPUS_ALL_REGIONS 0) stops the pool (Compute Engine "Allocation quotas"); spot and flex-start assumed to count.
GLOBAL_QUOTAS = {"GPUS_ALL_REGIONS": "GPUS-ALL-REGIONS-per-project", "CPUS_ALL_REGIONS": "CPUS-ALL-REGIONS-per-project"}


def global_quota_needs(cfg: StackConfig) -> tuple[int, int, str]:
    """(GPUs, vCPUs, what was counted) the stack's nodes take project-wide (a reservation's were counted already)."""
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
            describe = f"gcloud compute project-info describe --project {ctx.project} --format='{QUOTA_TABLE}'"
            results.append(
                warning(f"the project lists no {metric} quota; the stack needs {need} ({counted})", describe)
            )
            continue
        free = quota.limit - quota.usage
        what = f"{metric}: {free:g} free of {quota.limit:g}; the stack needs {need} ({counted})"
        if free >= need:
            results.append(passed(what))
            continue
        if quota.limit == 0:
            what += "; a project-wide 0 overrides every regional grant"
        results.append(failed(what, quota_request(ctx, GLOBAL_QUOTAS[metric], {}, int(quota.usage) + need)))
    return results


def check_reservation(ctx: Context) -> Result:
    """The named reservation exists in the zone, holds the flavour's machine type and has room for the pool."""
    pool = ctx.cfg.gpu_pool
    if is_ladder(ctx.cfg):
        return passed(LADDER_ELSEWHERE)
    if pool.provisioning is not Provisioning.RESERVATION:
        return passed(f"none used (gpuPool.provisioning: {pool.provisioning.value})")
    return reservation_result(ctx, pool.reservation_name)


def reservation_result(ctx: Context, name: str) -> Result:
    """The reservation `name` exists in the zone, holds the flavour's machine type and has room for the gang."""
    pool, zone, flavour = ctx.cfg.gpu_pool, ctx.cfg.zone, ctx.cfg.flavour_spec
    try:
        reservation = ctx.clients.reservations.get(
            project=ctx.project, zone=zone, reservation=name, timeout=ctx.timeout
        )
    except gexc.NotFound:
        listed = f"gcloud compute reservations list --project {ctx.project}"
        return failed(
            f"no reservation {name!r} in {zone}", f"{listed}  # then set gpuPool.reservationName and zone to one listed"
        )
    sku = reservation.specific_reservation
    machine, template = sku.instance_properties.machine_type, sku.source_instance_template
    if not machine and template:
        counts = f"{sku.count} reserved, {sku.in_use_count} in use, the pool needs {pool.node_count}"
        which = f"instance template {template.rsplit('/', 1)[-1]}: make sure it is {flavour.machine_type}"
        return warning(f"{name} reserves VMs of {which}; {counts}")
    if machine.rsplit("/", 1)[-1] != flavour.machine_type:
        another = (
            f"pulumi config set --path gpuPool.reservationName <a reservation of {flavour.machine_type} in {zone}>"
        )
        summary = f"{name} reserves {machine or 'no specific machine type'}, not {flavour.machine_type}"
        return failed(f"{summary} (flavour {flavour.name})", another)
    total = sku.count
    free = total - sku.in_use_count
    what = f"{name} in {zone}: {free} of {total} {machine} free; the pool needs {pool.node_count}"
    if free < pool.node_count:
        return failed(
            what,
            f"gcloud compute reservations update {name} --zone {zone} --vm-count "
            f"{total - free + pool.node_count} --project {ctx.project}  # or lower gpuPool.nodeCount to {free}",
        )
    if reservation.status and reservation.status != "READY":
        return warning(f"{what}; status {reservation.status}, not READY")
    return passed(what)
