"""The doctor's zone checks: machines and the RoCE profile, Managed Lustre, each ladder rung, the image cache, the GPU
pool's placement."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

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
# A disk image of another project: GKE's page (kubernetes-engine/docs/how-to/data-container-image-preloading, its
# steps for a disk image in a different project) has the cluster project's service agents granted read on the image
# project. Only the page's overview is readable in the docs corpus here; the two members are the service agents
# issue 45 reports those steps name: GKE's and Compute Engine's. roles/compute.imageUser is the predefined role that
# carries compute.images.useReadOnly; the broader roles below carry it too. Verify the members on the page.
IMAGE_READ_ROLE = "roles/compute.imageUser"
IMAGE_READER_ROLES = frozenset({IMAGE_READ_ROLE, "roles/compute.admin", "roles/editor", "roles/owner"})


def image_service_agents(project_number: str) -> tuple[str, ...]:
    """The cluster project's service agents that must read a disk image of another project."""
    return (
        f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com",
        f"serviceAccount:service-{project_number}@compute-system.iam.gserviceaccount.com",
    )


def grant_image_read(image_project: str, members: Any) -> str:
    """The commands that grant `members` read on every image of `image_project` (as GKE's steps do)."""
    return " && ".join(
        f"gcloud projects add-iam-policy-binding {image_project} --member={m} --role={IMAGE_READ_ROLE} --condition=None"
        for m in members
    )


def _readers(policy: Any) -> set[str]:
    """Members an IAM policy (resourcemanager's policy_pb2 or compute's Policy) grants image read, unconditionally."""
    return {
        m
        for b in policy.bindings
        if b.role in IMAGE_READER_ROLES and not (b.condition and b.condition.expression)
        for m in b.members
    }


def _image_access(ctx: Context, project: str, name: str) -> Optional[Result]:
    """None when the image is the stack project's or both service agents may read it; else why not."""
    if project == ctx.project:
        return None
    agents = image_service_agents(ctx.project_number)
    seen: set[str] = set()
    unread = []
    reads = (
        ("project", lambda: ctx.clients.projects.get_iam_policy(resource=f"projects/{project}", timeout=ctx.timeout)),
        ("image", lambda: ctx.clients.images.get_iam_policy(project=project, resource=name, timeout=ctx.timeout)),
    )
    for what, read in reads:
        try:
            seen |= _readers(read())
        except (gexc.Forbidden, gexc.PermissionDenied, gexc.NotFound):
            unread.append(what)
    missing = [a for a in agents if a not in seen]
    if not missing:
        return None
    who = ", ".join(m.split(":", 1)[1] for m in missing)
    fix = grant_image_read(project, missing) + f"  # or use a disk image of {ctx.project}, or {UNSET_IMAGE_CACHE}"
    if unread:
        return warning(
            f"disk image {name} is in project {project}: could not read its {' and '.join(unread)} IAM policy to see "
            f"whether {who} may use it (GKE creates the nodes' secondary boot disks as them)",
            fix,
        )
    return failed(f"disk image {name} is in project {project}, which does not grant {who} {IMAGE_READ_ROLE}", fix)


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
    access = _image_access(ctx, project, name)
    if access is not None:
        return access
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


# Compute Engine's placement for the GPU machines (docs.cloud.google.com/ai-hypercomputer/docs/placement-policy-and-
# workload-policy, "Compare compact placement policies and workload policies"): compact placement policies are for
# standalone instances, bulk-created instances and MIGs of general-purpose GPUs; workload policies for MIGs of
# clustered GPUs (spot or reservations: A4X, A4, A3 Ultra, A3 Mega, A3 High 8 GPUs; Flex-start: A4, A3 Ultra). A GKE
# node pool is a MIG. The program sends `placementPolicy: {type: COMPACT}` (GKE NodePool.PlacementPolicy: `type`
# COMPACT, optional `policyName` of a resource policy in the pool's project and region; pulumi-gcp 10.2.0
# container.NodePoolPlacementPolicyArgs). The provider has the workload policy (compute.ResourcePolicy
# `workload_policy`: `type` HIGH_THROUGHPUT, `max_topology_distance` BLOCK/CLUSTER/SUBBLOCK), but no GKE page read
# here says a node pool accepts one as its `policyName`, so the program creates none and the doctor says so.
WORKLOAD_POLICY_MACHINES = ("a4-highgpu-", "a3-ultragpu-", "a3-megagpu-", "a3-highgpu-8g", "a4x-")
UNSET_COMPACT = "pulumi config set --path gpuPool.compactPlacement false"


def check_placement(ctx: Context) -> Result:
    """`gpuPool.compactPlacement` on a machine whose MIGs Compute Engine places with workload policies: a warning."""
    machine = ctx.cfg.flavour_spec.machine_type
    if not ctx.cfg.gpu_pool.compact_placement:
        return passed("gpuPool.compactPlacement off: no placement policy asked for")
    if not machine.startswith(WORKLOAD_POLICY_MACHINES):
        return passed(f"gpuPool.compactPlacement: a COMPACT placement policy on {machine}")
    return warning(
        f"gpuPool.compactPlacement asks GKE for a COMPACT placement policy on {machine}, but Compute Engine places "
        "MIGs of this machine with workload policies (HIGH_THROUGHPUT), not compact placement policies "
        "(ai-hypercomputer/docs/placement-policy-and-workload-policy); whether GKE honours COMPACT on this pool is "
        "known only on a real cluster",
        f"{UNSET_COMPACT}  # or keep it and compare the nodes' hosts after `pulumi up`: gcloud compute instances "
        f"describe <node> --zone {ctx.cfg.zone} --format='value(resourceStatus.physicalHost)'",
    )
