"""The namespace the Ray cluster lives in, and what its pods need from it.

- Namespace and Kubernetes service account (KSA). Workload Identity access to the artifact bucket is
  granted directly to the KSA's principal (`principal://.../subject/ns/<ns>/sa/<ksa>`, see
  infra/storage.py), so the KSA needs no `iam.gke.io/gcp-service-account` annotation and no Google
  service account exists to impersonate.
- A Secret with the Hugging Face token and the W&B key. The values arrive as Pulumi secret Outputs and
  are wrapped again with `Output.secret` (the pulumi-kubernetes Secret also marks `data`/`stringData`
  as secret outputs), so the state and the plan hold only ciphertext / "[secret]".
  Pods get them as files, not environment variables: NeMo-RL starts Ray with
  `runtime_env={"env_vars": dict(os.environ)}` (NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py
  `init_ray`), which would copy a token in the
  environment into the job's runtime env, where Ray stores it and its dashboard shows it. The
  environment carries only where the files are, in the variables the libraries already read:
  `HF_TOKEN_PATH` (huggingface_hub, which vLLM and transformers use) and `NETRC` (the wandb SDK's
  netrc lookup, for host api.wandb.ai). Only on the real cloud: that NeMo-RL's W&B logger logs in
  through that netrc as the wandb SDK does.
- The Managed Lustre instance as a static CSI PersistentVolume plus a PVC bound to it by name.
  Static (storageClassName "") because the instance is created by Pulumi, not by a provisioner;
  `Retain` because deleting the PV must never touch the filesystem (the instance has its own
  lifecycle in infra/storage.py). Fields per the GKE "access existing Managed Lustre instances"
  guide (https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options
from infra.pod_facts import SECRET_MOUNT_PATH

LUSTRE_CSI_DRIVER = "lustre.csi.storage.gke.io"
SECRET_NAME = "nemo-rl-secrets"
PVC_NAME = "lustre"
HF_TOKEN_FILE = "hf-token"
NETRC_FILE = "netrc"
SECRET_FILE_ENV = {HF_TOKEN_FILE: "HF_TOKEN_PATH", NETRC_FILE: "NETRC"}
"""Secret key (a file under SECRET_MOUNT_PATH) -> the variable that points its reader at it."""
WANDB_HOST = "api.wandb.ai"

# A namespace is gone only when everything in it is; a bound keeps `pulumi destroy` from waiting
# forever on an object someone created by hand (e.g. a stuck RayJob). How long a real namespace
# teardown takes can only be measured on the cloud.
NAMESPACE_TIMEOUTS = pulumi.CustomTimeouts(delete="20m")
# The PVC keeps its `kubernetes.io/pvc-protection` finalizer until the last pod using it is gone;
# the Ray pods are deleted first (the release depends on this component), this covers their grace period.
VOLUME_TIMEOUTS = pulumi.CustomTimeouts(create="10m", delete="15m")


@dataclass(frozen=True)
class LustreVolume:
    """What the CSI PersistentVolume needs to know about the Managed Lustre instance."""

    project: str
    zone: str
    instance_id: pulumi.Input[str]
    mount_ip: pulumi.Input[str]
    filesystem: pulumi.Input[str]
    capacity_gib: int

    @classmethod
    def from_lustre(cls, lustre: Any, project: str) -> "LustreVolume":
        """From the `infra.storage.Lustre` component (instance_id, mount_ip, filesystem, capacity_gib, location)."""
        return cls(
            project=project,
            zone=lustre.location,
            instance_id=lustre.instance_id,
            mount_ip=lustre.mount_ip,
            filesystem=lustre.filesystem,
            capacity_gib=lustre.capacity_gib,
        )

    @property
    def volume_handle(self) -> pulumi.Output[str]:
        """`<project>/<zone>/<instanceId>`: how the Lustre CSI driver finds the instance."""
        # A full resource name (projects/../instances/<id>) would also be accepted here: only its
        # last segment is the instance id.
        instance = pulumi.Output.from_input(self.instance_id).apply(lambda s: str(s).rsplit("/", 1)[-1])
        return pulumi.Output.concat(self.project, "/", self.zone, "/", instance)

    @property
    def ip(self) -> pulumi.Output[str]:
        """The mount IP; a whole mount point (`IP@tcp:/fs`) is cut down to its IP."""
        return pulumi.Output.from_input(self.mount_ip).apply(lambda s: str(s).partition("@")[0])

    @property
    def capacity(self) -> str:
        return f"{self.capacity_gib}Gi"


def secret_string_data(values: dict[str, Optional[pulumi.Input[str]]]) -> dict[str, pulumi.Output[str]]:
    """Only the configured keys, each forced secret even if a caller passed a plain Output."""
    return {key: pulumi.Output.secret(value) for key, value in values.items() if value is not None}


def wandb_netrc(api_key: pulumi.Input[str]) -> pulumi.Output[str]:
    """The netrc entry the wandb SDK reads its key from (the form `wandb login` writes); stays secret."""

    def entry(key: str) -> str:
        key = key.strip()
        if not key or any(c.isspace() for c in key):
            # A space or newline would end the netrc token early or add entries of its own.
            raise ValueError("wandbApiKey must be one word without whitespace")
        return f"machine {WANDB_HOST}\n  login user\n  password {key}\n"

    return pulumi.Output.secret(pulumi.Output.from_input(api_key).apply(entry))


def secret_files_env(keys: "list[str] | tuple[str, ...]") -> dict[str, str]:
    """The environment that points each library at its file, for the configured secret keys."""
    return {SECRET_FILE_ENV[k]: f"{SECRET_MOUNT_PATH}/{k}" for k in sorted(keys)}


@dataclass(frozen=True)
class WorkloadEnvironmentArgs:
    """What `WorkloadEnvironment` needs: the Ray namespace and KSA, the secrets (Pulumi secret Outputs,
    None when not configured) and the Lustre instance to expose as a volume."""

    namespace: str
    ksa_name: str
    hf_token: Optional[pulumi.Input[str]]
    wandb_api_key: Optional[pulumi.Input[str]]
    lustre: LustreVolume


class WorkloadEnvironment(pulumi.ComponentResource):
    """Namespace, service account, secrets and the Lustre volume claim of the Ray cluster."""

    namespace: str
    service_account: str
    secret_name: str
    secret_env: dict[str, str]
    """Variables naming the secret files (HF_TOKEN_PATH, NETRC) for the secrets configured; no values."""
    pvc_name: str
    pv_name: str
    namespace_resource: k8s.core.v1.Namespace
    service_account_resource: k8s.core.v1.ServiceAccount
    secret: k8s.core.v1.Secret
    persistent_volume: k8s.core.v1.PersistentVolume
    claim: k8s.core.v1.PersistentVolumeClaim

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
        """The Secret of the configured secrets (files for the pods); returns its keys."""
        string_data = secret_string_data(
            {
                HF_TOKEN_FILE: args.hf_token,
                NETRC_FILE: wandb_netrc(args.wandb_api_key) if args.wandb_api_key is not None else None,
            }
        )
        self.secret_env = secret_files_env(list(string_data))
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
        """The static CSI PersistentVolume of the instance and the claim bound to it by name."""
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
                # Reserves the PV for our claim: no other PVC in the cluster can bind it first.
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
