"""Weights on Lustre before the job, off the critical path: a CPU Job on the system pool fetches the recipe's model
once into the artifacts bucket while Managed Lustre is still being created (workloads/stage_weights.py, through Cloud
Storage FUSE), and Lustre imports the folder into the job's HF_HUB_CACHE once the instance exists
(infra/weights_import.py). The first attempt's NeMo-RL reads the model from Lustre and no attempt downloads it (before
issue 44, the first attempt downloaded it on every paid GPU node's time; then a Lustre-side Job did, after Lustre, on
the critical path).

The import waits for the Job and Lustre; the job submission waits for the import; the Ray release waits for neither,
so the import (about a minute) runs while the release starts and the gate runs. `pulumi up` waits for the Job's
`Complete` (pulumi-kubernetes' batch/v1 Job awaiter, pulumi/pulumi-kubernetes PR #633; `STAGING_TIMEOUT` here).

The bucket stays after `pulumi destroy` (except on `dev`), and with it the staged model: a stack created again imports
it without a download (the marker). A live stack that NeMo-RL's own download already filled: the Job fetches the
model once more into the bucket (CPU, off the path) and the import fills a new folder, `HF_HUB_CACHE`
(workloads/job_types.py `hub_cache`), never NeMo-RL's own `HF_HOME/hub`, which can then be deleted.

The download's time is assumed (`HF_DOWNLOAD_MB_PER_S`): Hugging Face publishes no per-client throughput.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import HF_TOKEN_FILE, SECRET_FILE_ENV, SECRET_MOUNT_PATH, SECRET_NAME
from infra.weights_import import WeightsImportProvider
from workloads import stage_weights
from workloads.job_types import hub_cache, mount_root
from workloads.recipes import NemoRLImage

NAME = "hf-weights"
"""The Job's name and `app.kubernetes.io/component` (the deploy-time model finds it by this)."""
MODEL_ANNOTATION = "nemo-rl-gke/model"
BYTES_ANNOTATION = "nemo-rl-gke/model-bytes"
HF_DOWNLOAD_MB_PER_S = 500.0
"""Assumed: one CPU pod's download from the Hugging Face Hub (parallel file downloads) into the bucket; no published
figure. The Job's log and `pulumi up` show the real time."""
IMPORT_START_MINUTES = 1.0
"""Assumed: Managed Lustre's transfer operation starting, listing and finishing around the bytes themselves."""
IMPORT_MAX_MB_PER_S = 100_000.0
"""Managed Lustre's import ceiling, "up to 100 GBps" for files over 32 MB, below the instance's own maximum
(https://cloud.google.com/managed-lustre/docs/transfer-data, "Performance")."""
STAGING_TIMEOUT = pulumi.CustomTimeouts(create="90m", update="90m")
"""Room for a slow download: 145 GB at 30 MB/s is 81 minutes."""
RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
SOURCE = Path(stage_weights.__file__).read_text()
BUCKET_MOUNT = "/bucket"
GCSFUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
# The sidecar the Cloud Storage FUSE CSI driver injects into a pod with `gke-gcsfuse/volumes: "true"`; "0" lifts its
# default limits on Standard (gcsfuse stages each written file on local disk; the model's shards are ~4 GB each):
# GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/mutatingwebhook.go annotation names, issue 61 for "0".
GCSFUSE_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}


def model_bytes(params_billion: float) -> int:
    """The bf16 safetensors of the model: 2 bytes per parameter (tokenizer and configs are megabytes)."""
    return int(params_billion * 1e9 * 2)


def download_minutes(nbytes: float, mb_per_s: float = HF_DOWNLOAD_MB_PER_S) -> float:
    """Minutes of the first download at the assumed rate (0.25 of them the pod's start)."""
    return round(0.25 + nbytes / 1e6 / mb_per_s / 60, 1)


def import_minutes(nbytes: float, lustre_mb_per_s: float) -> float:
    """Minutes of Lustre's import of the staged model: the instance's throughput, capped at the service's ceiling."""
    rate = min(lustre_mb_per_s, IMPORT_MAX_MB_PER_S)
    return round(IMPORT_START_MINUTES + nbytes / 1e6 / rate / 60, 2)


def lustre_folder(mount_path: str) -> str:
    """HF_HUB_CACHE as a path inside the Lustre file system (the Ray pods mount its root at `ray.mountPath`)."""
    return "/" + posixpath.relpath(hub_cache(mount_path), mount_root(mount_path))


def bucket_folder(mount_path: str) -> str:
    """The staged cache's folder in the bucket: Lustre's folder name, so the import is a plain copy."""
    return lustre_folder(mount_path).strip("/")


@dataclass(frozen=True)
class WeightStagingArgs:
    image: NemoRLImage
    namespace: str
    model: str
    params_billion: float
    mount_path: str  # `ray.mountPath`: where the Ray pods mount Lustre
    token: bool  # the Secret holds an HF token
    system_pool: Optional[str]
    bucket: str  # the artifacts bucket's name (known before it exists)
    ksa: str  # the workload service account: Workload Identity's object access to the bucket
    lustre_mb_per_s: float = 0.0  # the instance's maximum throughput: the import's time in the model


def staging_job(args: WeightStagingArgs) -> dict[str, Any]:
    """The Job (a camelCase object). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": NAME}
    # HF_HOME of the download itself (its xet chunk cache, locks): scratch, not the staged cache.
    env = [{"name": "HF_HOME", "value": "/tmp/hf-home"}, {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}]
    mounts = [{"name": "bucket", "mountPath": BUCKET_MOUNT}]
    volumes: list[dict[str, Any]] = [
        {"name": "bucket", "csi": {"driver": GCSFUSE_DRIVER, "volumeAttributes": {"bucketName": args.bucket}}}
    ]
    if args.token:
        path = f"{SECRET_MOUNT_PATH}/{HF_TOKEN_FILE}"
        env.append({"name": SECRET_FILE_ENV[HF_TOKEN_FILE], "value": path})
        mounts.append({"name": "secrets", "mountPath": SECRET_MOUNT_PATH, "readOnly": True})
        # Only the token: the W&B netrc is none of its business.
        volumes.append(
            {
                "name": "secrets",
                "secret": {"secretName": SECRET_NAME, "items": [{"key": HF_TOKEN_FILE, "path": HF_TOKEN_FILE}]},
            }
        )
    root = posixpath.join(BUCKET_MOUNT, bucket_folder(args.mount_path))
    return {
        "metadata": {
            "name": NAME,
            "namespace": args.namespace,
            "labels": {**labels, **MANAGED_LABELS},
            "annotations": {
                MODEL_ANNOTATION: args.model,
                BYTES_ANNOTATION: str(model_bytes(args.params_billion)),
            },
        },
        "spec": {
            "backoffLimit": 4,  # a dropped connection: snapshot_download resumes what it has
            "template": {
                "metadata": {"labels": dict(labels), "annotations": dict(GCSFUSE_ANNOTATIONS)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "serviceAccountName": args.ksa,
                    "nodeSelector": {NODE_POOL_LABEL: args.system_pool} if args.system_pool else {},
                    # The FUSE sidecar authenticates through the GKE metadata server (Workload Identity), not with
                    # the pod's Kubernetes API token [verify on the cloud: the Job's log].
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "stage",
                            "image": args.image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python", "-c", SOURCE, args.model, root],
                            "env": env,
                            "volumeMounts": mounts,
                            "resources": RESOURCES,
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


class WeightsImport(pulumi.dynamic.Resource, module="nemo-rl-gke", name="WeightsImport"):
    instance_name: pulumi.Output[str]

    def __init__(self, name: str, props: dict, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(WeightsImportProvider(), name, {**props, "instance_name": None}, opts)


class WeightStaging(pulumi.ComponentResource):
    """`opts.depends_on`: what the Job needs in the cluster (its namespace, account and Secret, the node pools);
    `lustre` (`infra.storage.Lustre`) and `import_after` (the Lustre service agent's bucket grant) are the import's.
    `imported` is what the job submission waits for."""

    def __init__(
        self,
        name: str,
        args: WeightStagingArgs,
        lustre: Any,
        import_after: Sequence[pulumi.Resource] = (),
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> None:
        super().__init__("nemo-rl-gke:infra:WeightStaging", name, None, opts)
        job = staging_job(args)
        # A changed pod template (another model, this release's bucket mount) replaces the Job: deleted first, its
        # name being fixed (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go Diff, `deleteBeforeReplace`
        # for a named, not auto-named object).
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=job["metadata"],
            spec=job["spec"],
            opts=child_options(self, opts, custom_timeouts=STAGING_TIMEOUT),
        )
        folder = lustre_folder(args.mount_path)
        self.imported = WeightsImport(
            f"{name}-import",
            {
                "project": lustre.instance.project,
                "zone": lustre.location,
                "instance_id": lustre.instance_id,
                "source": f"gs://{args.bucket}/{bucket_folder(args.mount_path)}/",
                "lustre_path": folder,
                "model": args.model,
                "model_bytes": model_bytes(args.params_billion),
                "lustre_mb_per_s": args.lustre_mb_per_s,
            },
            pulumi.ResourceOptions(
                parent=self,
                depends_on=[self.job, lustre.instance, *import_after],
                # A replaced instance (its id kept, a ForceNew input changed) is empty: import again into it.
                replace_with=[lustre.instance],
                deleted_with=lustre.instance,
            ),
        )
        self.register_outputs({"model": args.model, "hubCache": hub_cache(args.mount_path), "lustreFolder": folder})
