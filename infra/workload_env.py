"""The Ray cluster's namespace, service account, secrets and Lustre volume.

Secrets reach pods as files, never environment variables: NeMo-RL copies `os.environ` into the Ray runtime env
(NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py `init_ray`), where Ray stores and shows it; the
environment only says where the files are (`HF_TOKEN_PATH`, `NETRC`). Lustre is a static `Retain` PV, so
deleting it never touches the filesystem
(https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options
from infra.pod_facts import HF_TOKEN_FILE, NETRC_FILE, PVC_NAME, SECRET_FILE_ENV, SECRET_MOUNT_PATH, SECRET_NAME

LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"
WANDB_HOST = "api.wandb.ai"

NAMESPACE_TIMEOUTS = pulumi.CustomTimeouts(delete="20m")  # not forever on an object made by hand in it
# Covers the Ray pods' grace period: the PVC keeps its `pvc-protection` finalizer until they are gone.
VOLUME_TIMEOUTS = pulumi.CustomTimeouts(create="10m", delete="15m")


@dataclass(frozen=True)
class LustreVolume:
    project: str
    zone: str
    instance_id: pulumi.Input[str]
    mount_ip: pulumi.Input[str]
    filesystem: pulumi.Input[str]
    capacity_gib: int

    @classmethod
    def from_lustre(cls, fs: Any, project: str) -> "LustreVolume":
        return cls(project, fs.location, fs.instance_id, fs.mount_ip, fs.filesystem, fs.capacity_gib)

    @property
    def volume_handle(self) -> pulumi.Output[str]:
        # A full resource name is accepted too: only its last segment is the instance id.
        instance = pulumi.Output.from_input(self.instance_id).apply(lambda s: str(s).rsplit("/", 1)[-1])
        return pulumi.Output.concat(self.project, "/", self.zone, "/", instance)

    @property
    def ip(self) -> pulumi.Output[str]:
        return pulumi.Output.from_input(self.mount_ip).apply(lambda s: str(s).partition("@")[0])

    @property
    def capacity(self) -> str:
        return f"{self.capacity_gib}Gi"


def wandb_netrc(api_key: pulumi.Input[str]) -> pulumi.Output[str]:

    def entry(key: str) -> str:
        key = key.strip()
        if not key or any(c.isspace() for c in key):
            # A space or newline would end the netrc token early or add entries of its own.
            raise ValueError("wandbApiKey must be one word without whitespace")
        return f"machine {WANDB_HOST}\n  login user\n  password {key}\n"

    return pulumi.Output.secret(pulumi.Output.from_input(api_key).apply(entry))


@dataclass(frozen=True)
class WorkloadEnvironmentArgs:
    namespace: str
    ksa_name: str
    hf_token: Optional[pulumi.Input[str]]
    wandb_api_key: Optional[pulumi.Input[str]]
    lustre: LustreVolume


class WorkloadEnvironment(pulumi.ComponentResource):
    def __init__(self, name: str, args: WorkloadEnvironmentArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:WorkloadEnvironment", name, None, opts)
        namespace = args.namespace
        self.namespace = namespace
        self.service_account = args.ksa_name
        self.secret_name = SECRET_NAME
        self.pvc_name = PVC_NAME
        # PersistentVolumes are cluster-scoped: the namespace in the name keeps two namespaces apart.
        self.pv_name = f"{namespace}-lustre"
        self._opts = opts

        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": namespace, "labels": dict(MANAGED_LABELS)},
            opts=child_options(self, opts, custom_timeouts=NAMESPACE_TIMEOUTS),
        )
        self.service_account_resource = k8s.core.v1.ServiceAccount(
            f"{name}-service-account",
            # No iam.gke.io/gcp-service-account annotation: IAM is granted to this KSA's own principal.
            metadata={"name": args.ksa_name, "namespace": namespace, "labels": dict(MANAGED_LABELS)},
            opts=child_options(self, opts, depends_on=[self.namespace_resource]),
        )
        secret_keys = self._secret(name, args)
        self._lustre_volume(name, args.lustre)
        self.register_outputs(
            {
                "namespace": self.namespace,
                "serviceAccount": self.service_account,
                "secretName": self.secret_name,
                "secretKeys": secret_keys,
                "secretEnv": self.secret_env,
                "pvcName": self.pvc_name,
                "pvName": self.pv_name,
                "volumeHandle": args.lustre.volume_handle,
            }
        )

    def _secret(self, name: str, args: WorkloadEnvironmentArgs) -> list[str]:
        netrc = wandb_netrc(args.wandb_api_key) if args.wandb_api_key is not None else None
        values = {HF_TOKEN_FILE: args.hf_token, NETRC_FILE: netrc}
        string_data = {key: pulumi.Output.secret(value) for key, value in values.items() if value is not None}
        self.secret_env = {SECRET_FILE_ENV[k]: f"{SECRET_MOUNT_PATH}/{k}" for k in sorted(string_data)}
        metadata = {"name": SECRET_NAME, "namespace": self.namespace, "labels": dict(MANAGED_LABELS)}
        secret_args: dict[str, Any] = {"metadata": metadata, "type": "Opaque"}
        if string_data:
            secret_args["string_data"] = string_data
        self.secret = k8s.core.v1.Secret(
            f"{name}-secret",
            **secret_args,
            opts=child_options(
                self, self._opts, depends_on=[self.namespace_resource], additional_secret_outputs=["data", "stringData"]
            ),
        )
        return sorted(string_data)

    def _lustre_volume(self, name: str, lustre: LustreVolume) -> None:
        labels, namespace, in_namespace = dict(MANAGED_LABELS), self.namespace, [self.namespace_resource]
        self.persistent_volume = k8s.core.v1.PersistentVolume(
            f"{name}-lustre-pv",
            metadata={"name": self.pv_name, "labels": labels},
            spec={
                "capacity": {"storage": lustre.capacity},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "volumeMode": "Filesystem",
                "claimRef": {"namespace": namespace, "name": PVC_NAME},
                "csi": {
                    "driver": LUSTRE_CSI_DRIVER,
                    "volumeHandle": lustre.volume_handle,
                    "volumeAttributes": {"ip": lustre.ip, "filesystem": lustre.filesystem},
                },
            },
            opts=child_options(self, self._opts, depends_on=in_namespace, custom_timeouts=VOLUME_TIMEOUTS),
        )

        self.claim = k8s.core.v1.PersistentVolumeClaim(
            f"{name}-lustre-pvc",
            metadata={"name": PVC_NAME, "namespace": namespace, "labels": labels},
            spec={
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": self.pv_name,
                "resources": {"requests": {"storage": lustre.capacity}},
            },
            opts=child_options(
                self, self._opts, depends_on=[*in_namespace, self.persistent_volume], custom_timeouts=VOLUME_TIMEOUTS
            ),
        )
