"""nemo-rl-gke: load the stack config, build the components, export what users need next."""

import pulumi

from infra import config as stack_config
from infra import project_apis as api
from infra import storage
from infra.cluster_mode import cluster_mode
from infra.compute_class import GpuComputeClass, GpuComputeClassArgs
from infra.gate_plan import gate_plan_for_stack
from infra.gke_networks import GkeNetworkObjects, GkeNetworkObjectsArgs
from infra.image_mirror import ImageMirror, ImageMirrorArgs, nemo_rl_image
from infra.image_prepull import ImagePrePullArgs, gpu_warmup
from infra.kube_provider import KubernetesAccess, KubernetesAccessArgs
from infra.lustre_catalogue import lustre_aggregate_mb_s
from infra.network import Networking, NetworkingArgs
from infra.observability import build_dashboard
from infra.placement import gpu_pool_facts, system_pool_name
from infra.project_apis import ProjectApis, ProjectApisArgs
from infra.ray_cluster import RayCluster, RayClusterArgs, ray_target_for
from infra.run_plan import run_plan_for_stack
from infra.stack_context import StackContext
from infra.training_job import build_training_job, job_spec_for_stack
from infra.watcher_deployment import build_preemption_watcher
from infra.weight_staging import WeightStaging, WeightStagingArgs
from infra.workload_env import LustreVolume, WorkloadEnvironment, WorkloadEnvironmentArgs
from workloads.job_types import results_dirs

settings = stack_config.load()
cfg = settings.config
ctx = StackContext.from_config(settings.stack, cfg)
flavour = cfg.flavour_spec
# `standard`: node pools this program creates; `autopilot`: GKE makes nodes for the pods (docs/autopilot.md).
# The one choice between them (infra/cluster_mode.py): the cluster, the NCCL installer, the pre-pull, the Ray values.
mode = cluster_mode(cfg)
pulumi.export("flavour", cfg.flavour)

# ---------------------------------------------------------------- Plan-time facts
# Decided once, before any resource (a job that cannot be built is a config error naming the key), and handed
# whole to every component that needs them: the deploy and the watcher get the very same spec and run plan.
gpu_pool = gpu_pool_facts(ctx, cfg)
system_pool = system_pool_name(ctx, cfg)
worker_fit = cfg.worker_fit
gate_plan = gate_plan_for_stack(cfg, gpu_pool)
ray_target = ray_target_for(cfg.ray)
run_plan = run_plan_for_stack(settings.stack, cfg, gpu_pool, gate_plan, ray_target)
job_spec = job_spec_for_stack(settings.stack, cfg, wandb_key_set=settings.wandb_key_set, pool=gpu_pool, run=run_plan)
# The NeMo-RL image as every pod names it: nvcr.io, or the stack's Artifact Registry mirror (cluster.imageStreaming).
image = nemo_rl_image(ctx, cfg)

# ---------------------------------------------------------------- Google Cloud
# Each component waits for the APIs its resources call (manageApis: false leaves them to the project's owner).
apis = ProjectApis("apis", ProjectApisArgs(ctx, manage=cfg.manage_apis, apis=api.required_apis(cfg)))
# Lustre and the cluster share only the network: they are created in parallel.
network = Networking(
    "network",
    NetworkingArgs(ctx, cfg.network, flavour, storage.lustre_port(cfg.lustre_needs_legacy_port)),
    opts=apis.wait_for(api.COMPUTE, api.SERVICE_NETWORKING),
)
lustre = storage.Lustre(
    "lustre",
    storage.LustreArgs(ctx, cfg.lustre, cfg.lustre_instance_id, network.primary_network, network.psa_connection),
    opts=apis.wait_for(api.LUSTRE),
)
cluster = mode.cluster(
    "gke",
    ctx,
    network,
    gpu_pool=gpu_pool,
    system_pool_name=system_pool,
    opts=apis.wait_for(api.CONTAINER, api.IAM, api.RESOURCE_MANAGER),
)
# Kept on destroy unless storage.deleteBucketOnDestroy.
artifacts = storage.ArtifactBucket(
    "artifacts",
    storage.ArtifactBucketArgs(
        ctx,
        cfg.ray.namespace,
        cfg.ray.service_account,
        workload_pool=cluster.workload_pool,
        delete_on_destroy=cfg.storage.delete_bucket_on_destroy,
        adopt_existing=cfg.storage.adopt_existing_bucket,
    ),
    opts=apis.wait_for(api.STORAGE, api.RESOURCE_MANAGER),
)
# Deleted before Lustre and the bucket: exports first (lustre.exportOnDestroy); imports lustre.importFrom.
lustre_data = storage.LustreDataGuard(
    "lustre-data",
    storage.LustreDataGuardArgs(ctx, cfg.lustre, lustre, artifacts, results_dirs(), weights_import=not mode.autopilot),
    opts=apis.wait_for(api.LUSTRE, api.STORAGE, api.SERVICE_USAGE),
)

# Only with cluster.imageStreaming: the remote repository of nvcr.io the pods pull through (infra/image_mirror.py).
mirror = (
    ImageMirror("image-mirror", ImageMirrorArgs(ctx), opts=apis.wait_for(api.ARTIFACT_REGISTRY))
    if cfg.cluster.image_streaming
    else None
)

pulumi.export("clusterName", cluster.name)
# Where API clients connect, and the IP endpoint's CA: public by nature, every API client is shown both.
pulumi.export("clusterEndpoint", cluster.endpoint)
pulumi.export("controlPlaneAccess", cluster.control_plane_access)
if cluster.ca_certificate is not None:
    pulumi.export("clusterCaCertificate", pulumi.Output.unsecret(cluster.ca_certificate))
pulumi.export("clusterLocation", cluster.location)
pulumi.export("kubectlCredentialsCommand", cluster.credentials_command)
pulumi.export("lustreInstanceId", lustre.instance_id)
pulumi.export("lustreMountIp", lustre.mount_ip)
pulumi.export("bucketName", artifacts.bucket_name)
pulumi.export("lustreExportUri", lustre_data.export_uri)
pulumi.export("nodeServiceAccount", cluster.node_service_account.email)
pulumi.export("networkName", network.primary_network_name)
pulumi.export("gvnicNetworkName", network.gvnic_network_name)
pulumi.export("rdmaNetworkName", network.rdma_network_name)

# ---------------------------------------------------------------- Kubernetes
# One provider (gke-gcloud-auth-plugin). Objects on the nodes are created after, and deleted before, the node
# pools. All are `deleted_with` the cluster, so a destroy finishes when the cluster is already gone: the engine
# skips their deletes (pulumi/pulumi pkg/resource/deploy/step.go DeleteStep.Apply, `isDeletedWith`), which
# pulumi-kubernetes alone cannot do for a Helm release (pulumi/pulumi-kubernetes provider.go Delete, issue 2675).
# None makes anything that outlives the cluster (tests/test_security.py); the job submission is the exception.
kube = KubernetesAccess(
    "kube", KubernetesAccessArgs(ctx, cluster.name, cluster.endpoint, cluster.ca_certificate, location=cluster.location)
)
on_nodes = pulumi.ResourceOptions(
    provider=kube.provider, depends_on=list(cluster.node_pools), deleted_with=cluster.cluster
)
# The capacity ladder (gpuPool.capacity with two or more rungs): GKE's autoscaler walks the class's pools.
compute_class = (
    GpuComputeClass(
        "gpu-ladder",
        GpuComputeClassArgs(
            gpu_pool.compute_class,
            tuple(p.name for p in gpu_pool.rung_pools),
            tuple(p.rung for p in gpu_pool.rung_pools),
        ),
        opts=on_nodes,
    )
    if gpu_pool.compute_class
    else None
)
# The parameter sets name the NIC subnets: created after them.
gke_networks = GkeNetworkObjects(
    "gke-networks",
    GkeNetworkObjectsArgs(gpu_pool.nics),
    opts=pulumi.ResourceOptions(provider=kube.provider, depends_on=network.nic_subnets, deleted_with=cluster.cluster),
)
nccl = mode.nccl_installer("nccl", cfg.ray.nccl_installer_image, [gpu_pool.accelerator_type], opts=on_nodes)
workload = WorkloadEnvironment(
    "workload",
    WorkloadEnvironmentArgs(
        cfg.ray.namespace,
        cfg.ray.service_account,
        settings.secrets.hf_token,
        settings.secrets.wandb_api_key,
        LustreVolume.from_lustre(lustre, ctx.project),
    ),
    opts=on_nodes,
)
# The recipe's model into the bucket once, on CPU, while Lustre is created; Lustre imports it into the HF cache before
# the job is submitted (infra/weight_staging.py). Not on Autopilot: its pod's sidecar and disk limits are unverified.
weights = (
    WeightStaging(
        "weights",
        WeightStagingArgs(
            image,
            cfg.ray.namespace,
            cfg.recipe.model,
            cfg.recipe.model_params_billion,
            cfg.ray.mount_path,
            token=settings.secrets.hf_token is not None,
            system_pool=system_pool,
            bucket=artifacts.bucket_cloud_name,
            ksa=cfg.ray.service_account,
            lustre_mb_per_s=lustre_aggregate_mb_s(cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput),
        ),
        lustre,
        import_after=lustre_data.grants,
        # Not the workload component as a whole: its Lustre claim waits for the instance.
        opts=pulumi.ResourceOptions(
            provider=kube.provider,
            depends_on=[
                *cluster.node_pools,
                workload.namespace_resource,
                workload.service_account_resource,
                workload.secret,
                artifacts,
            ],
            deleted_with=cluster.cluster,
        ),
    )
    if not mode.autopilot
    else None
)
# The image lands on every node while Lustre is still being created (not waiting for its volume). None on Autopilot.
prepull = mode.image_prepull(
    "image-prepull",
    ImagePrePullArgs(
        image,
        cfg.ray.namespace,
        cluster.node_pool_names,
        gpu_pool.taints,
        # gpuPool.warmMinutes, or the just-in-time placeholders and their timer (infra/jit_gpu_nodes.py).
        warm=gpu_warmup(cfg, gpu_pool, system_pool, ray_target.cluster_name),
    ),
    opts=pulumi.ResourceOptions(
        provider=kube.provider,
        depends_on=[*cluster.node_pools, workload.namespace_resource, *([mirror] if mirror else [])],
        deleted_with=cluster.cluster,
    ),
)
ray_cluster = RayCluster(
    "ray",
    RayClusterArgs(
        cluster_name=ray_target.cluster_name,
        ray=cfg.ray,
        image=image,
        environment=workload,
        networks=gke_networks,
        gpu_pool=gpu_pool,
        worker=worker_fit,
        system_pool_name=system_pool,
        adapt_values=mode.adapt_ray_values,
    ),
    # After the data guard: an import lands before a job can start at step 0, and on destroy the export starts
    # once the job has ended. After the image pre-pull: the pods start warm.
    opts=pulumi.ResourceOptions(
        provider=kube.provider,
        depends_on=[
            *cluster.node_pools,
            nccl,
            lustre_data,
            *(r for r in (prepull, compute_class, mirror) if r is not None),
        ],
        deleted_with=cluster.cluster,
    ),
)

pulumi.export("rayClusterName", ray_cluster.cluster_name)
pulumi.export("rayNamespace", ray_cluster.namespace)
pulumi.export("rayHeadService", ray_cluster.head_service)
pulumi.export("rayDashboardPort", ray_cluster.dashboard_port)
pulumi.export("rayDashboardProxyPath", ray_cluster.dashboard_proxy_path)
pulumi.export("rayWorkerGroup", ray_cluster.worker_group)

# ---------------------------------------------------------------- The job
# The run the spec is an attempt of: a spec edit that keeps it resumes from its checkpoints.
pulumi.export("runId", job_spec.run_id)
job = build_training_job(
    job_spec,
    run_plan,
    cfg,
    endpoint=cluster.endpoint,
    ca_certificate=cluster.ca_certificate,
    head_service=ray_cluster.head_service,
    ray_cluster_name=ray_cluster.cluster_name,
    # Submitted after the release, stopped before it or a pool goes, and replaced with them.
    ray_release=ray_cluster.release,
    node_pools=cluster.node_pools,
    # A wait only (no replacement): a changed model's import does not resubmit a running job.
    opts=pulumi.ResourceOptions(depends_on=[weights.imported]) if weights else None,
)
if job is not None:
    pulumi.export("jobId", job.submission_id)
    pulumi.export("jobStatus", job.status)
    # busbw GB/s, Lustre GB/s, seconds of the acceptance gate run before the submission (job.gate).
    pulumi.export("acceptanceGate", job.gate_result)
    pulumi.export("jobLogsCommand", job.logs_command)
    pulumi.export("rayDashboardCommand", job.dashboard_command)

# ---------------------------------------------------------------- Day 2
# Resubmits the job after a spot preemption (recovery.enabled); deleted before the Ray release.
watcher = build_preemption_watcher(
    job_spec,
    cfg,
    image,
    ray=ray_cluster,
    system_pool_name=system_pool,
    run=run_plan,  # the watcher owns the run from here and gates every attempt (workloads/run_owner.py)
    lustre_claim=workload.pvc_name,
    opts=pulumi.ResourceOptions(provider=kube.provider, depends_on=[ray_cluster.release], deleted_with=cluster.cluster),
)
if watcher is not None:
    pulumi.export("preemptionWatcherLogsCommand", watcher.logs_command)
monitoring = build_dashboard(
    ctx, cluster=cluster, lustre=lustre, ray=ray_cluster, opts=apis.wait_for(api.MONITORING, api.LOGGING)
)
pulumi.export("monitoringDashboard", monitoring.display_name)
pulumi.export("monitoringConsoleUrl", monitoring.console_url)
