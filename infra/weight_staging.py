"""Weights on Lustre before the job: a CPU Job on the system pool fetches the recipe's model once into the Hugging
Face cache on Lustre (workloads/stage_weights.py), so the first attempt's NeMo-RL reads it from there and no attempt
downloads it (before, the first attempt downloaded it on every paid GPU node's time, in no figure of the plan).

It mounts Lustre's claim where the Ray pods do (`ray.mountPath`) with the same `HF_HOME`, and the HF token as the
Secret's file (`HF_TOKEN_PATH`, infra/workload_env.py), never an environment variable. `pulumi up` waits for the Job
to complete (pulumi-kubernetes' batch/v1 Job waits for its `Complete` condition and fails on `Failed`: the Job
awaiter of pulumi/pulumi-kubernetes PR #633, its API docs; 10 minutes by default, `STAGING_TIMEOUT` here), and the
Ray release waits for it: the download sits after Lustre on the critical path, on CPU, and the just-in-time GPU nodes
are timed to be ready when it ends (`infra.jit_gpu_nodes.JitTiming.staging_minutes`). A live stack whose cache
NeMo-RL already filled: the Job lists the repository, finds every file, writes its marker; nothing else changes (the
release only gains a wait, which replaces nothing).

The download's time is assumed (`HF_DOWNLOAD_MB_PER_S`): Hugging Face publishes no per-client throughput.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import HF_TOKEN_FILE, PVC_NAME, SECRET_FILE_ENV, SECRET_MOUNT_PATH, SECRET_NAME
from workloads import stage_weights
from workloads.job_types import hf_home
from workloads.recipes import NemoRLImage

NAME = "hf-weights"
"""The Job's name and `app.kubernetes.io/component` (the deploy-time model finds it by this)."""
MODEL_ANNOTATION = "nemo-rl-gke/model"
BYTES_ANNOTATION = "nemo-rl-gke/model-bytes"
HF_DOWNLOAD_MB_PER_S = 500.0
"""Assumed: one CPU pod's download from the Hugging Face Hub (parallel file downloads) into Lustre; no published
figure. The Job's log and `pulumi up` show the real time."""
STAGING_TIMEOUT = pulumi.CustomTimeouts(create="90m", update="90m")
"""Room for a slow download: 145 GB at 30 MB/s is 81 minutes."""
RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
SOURCE = Path(stage_weights.__file__).read_text()


def model_bytes(params_billion: float) -> int:
    """The bf16 safetensors of the model: 2 bytes per parameter (tokenizer and configs are megabytes)."""
    return int(params_billion * 1e9 * 2)


def download_minutes(nbytes: float, mb_per_s: float = HF_DOWNLOAD_MB_PER_S) -> float:
    """Minutes of the first download at the assumed rate (0.25 of them the pod's start)."""
    return round(0.25 + nbytes / 1e6 / mb_per_s / 60, 1)


@dataclass(frozen=True)
class WeightStagingArgs:
    image: NemoRLImage
    namespace: str
    model: str
    params_billion: float
    mount_path: str  # `ray.mountPath`: where the Ray pods mount Lustre
    token: bool  # the Secret holds an HF token
    system_pool: Optional[str]


def staging_job(args: WeightStagingArgs) -> dict[str, Any]:
    """The Job (a camelCase object). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": NAME}
    env = [{"name": "HF_HOME", "value": hf_home(args.mount_path)}, {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"}]
    mounts = [{"name": "lustre", "mountPath": args.mount_path}]
    volumes: list[dict[str, Any]] = [{"name": "lustre", "persistentVolumeClaim": {"claimName": PVC_NAME}}]
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
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "nodeSelector": {NODE_POOL_LABEL: args.system_pool} if args.system_pool else {},
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "stage",
                            "image": args.image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python", "-c", SOURCE, args.model],
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


class WeightStaging(pulumi.ComponentResource):
    """Give it `opts.depends_on` Lustre's claim (and the Secret): it mounts both."""

    def __init__(self, name: str, args: WeightStagingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:WeightStaging", name, None, opts)
        job = staging_job(args)
        self.job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=job["metadata"],
            spec=job["spec"],
            opts=child_options(self, opts, custom_timeouts=STAGING_TIMEOUT),
        )
        self.register_outputs({"model": args.model, "hfHome": hf_home(args.mount_path)})


def staging_minutes(params_billion: float) -> float:
    """The program's figure for the just-in-time timing: the download after Lustre's claim."""
    return download_minutes(model_bytes(params_billion))
