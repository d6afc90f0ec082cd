"""The doctor's zone checks: machines and the RoCE profile, Managed Lustre, each ladder rung, the image cache."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from google.api_core import exceptions as gexc

from infra.config import Provisioning
from infra.network import roce_network_profile
from infra.placement import is_ladder
from tools.doctor.check_context import Context, Result, failed, passed, warning
from tools.doctor.quota_checks import gpu_quota_result, reservation_result

LUSTRE_MAX_INSTANCES = 20  # instances per project (managed-lustre/docs/quotas, "System limits")


def check_zone(ctx: Context) -> Result:
    """The zone sells the flavour's machine type and has the RoCE network profile the RDMA VPC needs."""
    flavour = ctx.cfg.flavour_spec
    zone = ctx.cfg.zone
    system = ctx.cfg.cluster.system_pool.machine_type
    machines = ((flavour.machine_type, f"flavour {flavour.name}"), (system, "cluster.systemPool.machineType"))
    for machine, role in machines:
        try:
            ctx.clients.machine_types.get(project=ctx.project, zone=zone, machine_type=machine, timeout=ctx.timeout)
        except gexc.NotFound:
            return failed(
                f"{zone} does not offer {machine} ({role})",
                f"gcloud compute machine-types list --filter=name={machine} --project {ctx.project}"
                "  # then: pulumi config set region <region> && pulumi config set zone <a zone listed>",
            )
    profile = roce_network_profile(ctx.project, zone).rsplit("/", 1)[-1]
    try:
        ctx.clients.network_profiles.get(project=ctx.project, network_profile=profile, timeout=ctx.timeout)
    except gexc.NotFound:
        return failed(
            f"{zone} has no RoCE network profile {profile} for the RDMA VPC",
            f"gcloud compute network-profiles list --project {ctx.project}"
            " # then pulumi config set zone <a zone with a -vpc-roce profile>",
        )
    return passed(f"{zone} offers {flavour.machine_type}, {system} and the {profile} network profile")


def lustre_zones(clients: Any, project: str, timeout: float) -> list[str]:
    """The zones Managed Lustre is offered to the project in (the capacity finder's too)."""
    request = {"name": f"projects/{project}", "page_size": 1000}
    return sorted(loc.location_id for loc in clients.lustre.list_locations(request=request, timeout=timeout).locations)


def check_lustre(ctx: Context) -> Result:
    """Managed Lustre is offered in the zone and the project has room for one more instance."""
    cfg, zone = ctx.cfg, ctx.cfg.zone
    offered = lustre_zones(ctx.clients, ctx.project, ctx.timeout)
    if zone not in offered:
        nearby = [z for z in offered if z.startswith(cfg.region + "-")]
        anywhere = f"choose a region and zone where Managed Lustre is offered: {', '.join(offered) or 'none listed'}"
        fix = f"pulumi config set zone {nearby[0]}" if nearby else anywhere
        return failed(f"Managed Lustre is not offered in {zone}", fix)
    parent = f"projects/{ctx.project}/locations/-"
    instances = list(ctx.clients.lustre.list_instances(parent=parent, timeout=ctx.timeout))
    ours = f"/locations/{zone}/instances/{cfg.lustre_instance_id}"
    if any(i.name.endswith(ours) for i in instances):
        return warning(
            f"instance {cfg.lustre_instance_id} already exists in {zone}: fine if this stack "
            "created it, otherwise `pulumi up` fails to create it",
            "pulumi config set --path lustre.instanceId <another id>",
        )
    if len(instances) >= LUSTRE_MAX_INSTANCES:
        return failed(
            f"the project already has {len(instances)} Managed Lustre instances (limit {LUSTRE_MAX_INSTANCES})",
            f"gcloud lustre instances list --location=- --project {ctx.project}  # delete one",
        )
    # Only on the real cloud: the capacity quota of the region (the Quotas page, service lustre.googleapis.com).
    return passed(f"offered in {zone}; {len(instances)} of {LUSTRE_MAX_INSTANCES} instances in use")


def check_capacity_ladder(ctx: Context) -> list[Result]:
    """Every rung of `gpuPool.capacity` can supply the whole gang (spot and flex-start each against all of the
    preemptible quota they share)."""
    cfg = ctx.cfg
    if not is_ladder(cfg):
        return [passed("one rung: the gpu-quota and reservation checks cover it")]
    results = []
    for i, rung in enumerate(cfg.gpu_pool.ladder, 1):
        if rung.provisioning is Provisioning.RESERVATION:
            found = reservation_result(ctx, rung.reservation_name or "")
        else:
            found = gpu_quota_result(ctx, rung.provisioning)
        results.append(replace(found, summary=f"rung {i} {rung.label}: {found.summary}"))
    return results


IMAGE_READY = "READY"  # compute_v1.Image.status disks can be made from (READY, PENDING, FAILED, DELETING)
# A region's prefix -> the multi-region of images' `storageLocations`, gke-disk-image-builder's default
# (ai-on-gke/tools@dd19189 gke-disk-image-builder/cli/main.go `--storage-location`).
IMAGE_MULTI_REGIONS = {"us": "us", "europe": "eu", "asia": "asia"}
UNSET_IMAGE_CACHE = "pulumi config rm --path gpuPool.imageCacheDiskImage"


def image_cache_project_and_name(cfg_project: str, disk_image: str) -> tuple[str, str]:
    """`gpuPool.imageCacheDiskImage` (infra/config gpu_pool.DISK_IMAGE) as the Images API's `project` and `image`."""
    parts = disk_image.split("/")
    return (parts[1] if parts[0] == "projects" else cfg_project), parts[-1]


def check_image_cache(ctx: Context) -> Result:
    """`gpuPool.imageCacheDiskImage` exists, is READY, x86_64 (or unmarked) and stored in or near the region."""
    disk_image = ctx.cfg.gpu_pool.image_cache_disk_image
    if not disk_image:
        return passed("none set (gpuPool.imageCacheDiskImage): nothing to check")
    project, name = image_cache_project_and_name(ctx.project, disk_image)
    build = "build it with gke-disk-image-builder (docs/deploy.md), or unset it: " + UNSET_IMAGE_CACHE
    try:
        image = ctx.clients.images.get(project=project, image=name, timeout=ctx.timeout)
    except gexc.NotFound:
        return failed(f"disk image {name} not found in project {project}", build)
    machine = ctx.cfg.flavour_spec.machine_type
    if image.status != IMAGE_READY:
        return failed(
            f"disk image {name} is {image.status or 'of unknown status'}, not {IMAGE_READY}: no disk can be made of it",
            f"gcloud compute images describe {name} --project {project}  # wait for READY, or {build}",
        )
    if image.architecture not in ("", "ARCHITECTURE_UNSPECIFIED", "X86_64"):
        return failed(
            f"disk image {name} is for {image.architecture}; {machine} is x86_64",
            f"rebuild it from an x86_64 image: {build}",
        )
    region = ctx.cfg.region
    near = {region, IMAGE_MULTI_REGIONS.get(region.split("-", 1)[0], "")}
    where = list(image.storage_locations)
    if where and not near & set(where):
        return warning(
            f"disk image {name} is stored in {', '.join(where)}, not in or near {region}: each node's disk is "
            "copied from there (slower, and egress may be billed)",
            f"rebuild with gke-disk-image-builder --storage-location={region} (docs/deploy.md)",
        )
    return passed(
        f"disk image {name} ({project}) is READY, {image.architecture or 'no architecture set'}, stored in "
        f"{', '.join(where) or 'its default location'}: usable for {machine} in {ctx.cfg.zone}",
    )
