"""The preemption watcher, in the cluster: a Deployment running `python -m workloads.watcher` against the Ray
dashboard inside the cluster. A RayJob cannot do this itself (with `clusterSelector` it refuses `backoffLimit > 0`:
ray-project/kuberay v1.7.0 ray-operator/controllers/ray/utils/validation.go), and a laptop sleeps.

The code: an auto-named ConfigMap holds `spec.json`, `run.json` and one zip of the entry module and what it
imports (`WATCHER_MODULES`, so an edit elsewhere does not roll the pod). An init container unpacks it into an
emptyDir on PYTHONPATH, since the gate job ships that `workloads` directory as Ray `py_modules`, which takes a
directory, .py or .whl but no .zip (ray-project/ray python/ray/_private/runtime_env/py_modules.py at ray-2.46.0,
`upload_py_modules_if_needed`). Changed content: a new ConfigMap name and a rolled pod.

The image: the recipe's NeMo-RL image, whose Ray job SDK matches the cluster's (NVIDIA-NeMo/RL pyproject.toml at
the tag), on the Ray head's node that already pulled it. It runs as root (NVIDIA-NeMo/RL docker/Dockerfile installs
Python under /root), so it is hardened otherwise: no privilege escalation or capability, read-only root filesystem,
RuntimeDefault seccomp, a KSA no IAM grant names and an API token only for `gang_rules`. No secret reaches it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import modulefinder
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import (
    MANAGED_LABELS,
    NODE_POOL_LABEL,
    PREEMPTION_WATCHER,
    PREEMPTION_WATCHER_CONTAINER,
    watcher_node_reader,
)
from infra.options import child_options
from infra.pod_facts import DASHBOARD_PORT
from infra.run_plan import CHECKPOINTS_MOUNT, STATE_SUBPATH
from infra.stack_file import ROOT
from workloads.job_types import CHECKPOINTS_DIR, JobSpec
from workloads.recipes import NemoRLImage
from workloads.recovery import RecoveryPolicy
from workloads.run_owner import RunPlan

if TYPE_CHECKING:
    from infra.config import StackConfig

COMPONENT_TYPE = "nemo-rl-gke:infra:PreemptionWatcher"
NAME = PREEMPTION_WATCHER
CONTAINER = PREEMPTION_WATCHER_CONTAINER
CONFIG_DIR = "/config"
CODE_DIR = "/code"  # the unpacked archive: the watcher's PYTHONPATH, read-only there
CODE_SIZE_LIMIT = "2Mi"  # the unpacked modules (about 250 KB), room to grow and the filesystem's block rounding
SPEC_KEY = "spec.json"
RUN_KEY = "run.json"  # `workloads.run_owner.RunPlan`
ARCHIVE_KEY = "workloads.zip"
HEARTBEAT = "/tmp/heartbeat"
STATE_DIR = "/state"  # the watcher's state file and the run ledger, a subPath of the Lustre claim
WATCHER_ENTRY = "workloads.watcher"
RAY_JOB_ENTRIES = ("workloads.gate.__main__",)
"""Modules the pod never imports but has Ray run from the shipped files as a job's `py_modules` (the gate job's
`python -m workloads.gate run`); without them every gate the watcher starts would end at once."""
RESOURCES = {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
"""`watch --once` peaked at about 110 MiB RSS (Python 3.11, Ray 2.60's job SDK); no CPU limit: it idles."""
UNPACK_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
UNPACK_SCRIPT = "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])"
"""The init container's command, standard library only; `extractall` refuses absolute and `..` paths."""
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
ZIP_LEVEL = 9


def shipped_modules(entry: str = WATCHER_ENTRY, root: Path = ROOT, also: Sequence[str] = ()) -> tuple[str, ...]:
    """The paths below `<root>/workloads` of `entry`, the modules `also` and all they import, lazy imports too,
    by `modulefinder` (it imports nothing) with `root` as the only path: the standard library and Ray are the
    image's; a project module outside `workloads` would be missing in the pod."""
    finder = modulefinder.ModuleFinder(path=[str(root)])
    for name in (entry, *also):
        finder.import_hook(name)
    package_dir = root / "workloads"
    names = []
    for name, module in finder.modules.items():
        if module.__file__ is None:  # built into the interpreter (sys, time)
            continue
        path = Path(module.__file__)
        if not path.is_relative_to(package_dir):
            raise ValueError(f"{entry} imports {name}, which is not in workloads/ and so not in the watcher's image")
        names.append(path.relative_to(package_dir).as_posix())
    return tuple(sorted(names))


WATCHER_MODULES = shipped_modules(also=RAY_JOB_ENTRIES)
CODE_CONFIG_MAP = f"{NAME}-code"


def watcher_files() -> dict[str, bytes]:
    """The shipped modules by their path in the archive and in the pod (`workloads/recovery/policy.py`)."""
    return {f"workloads/{name}": (ROOT / "workloads" / name).read_bytes() for name in WATCHER_MODULES}


def archive(files: Mapping[str, bytes]) -> bytes:
    """One zip of `files`, the same bytes for the same files on this zlib: sorted entries, a fixed date,
    permissions and compression level."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=ZIP_DATE)
            info.create_system, info.external_attr = 3, 0o100644 << 16  # Unix, a regular file rw-r--r--
            zf.writestr(info, files[path], compress_type=zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL)
    return out.getvalue()


def archive_digests(blob: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {name: f"sha256:{hashlib.sha256(zf.read(name)).hexdigest()}" for name in zf.namelist()}


def shipped_digests(binary_data: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The ConfigMap's binaryData as the offline plan (and each golden) shows it: the archive as its entries'
    names and SHA-256, so a comment edit in a shipped module changes one hash in each plan."""
    return {key: archive_digests(base64.b64decode(blob)) for key, blob in binary_data.items()}


def config_map_data(spec: JobSpec, run: Optional[RunPlan] = None) -> dict[str, str]:
    """The ConfigMap's plain `data`: the job spec and the run plan."""
    return {
        SPEC_KEY: json.dumps(spec.to_dict(), indent=2, sort_keys=True) + "\n",
        RUN_KEY: json.dumps((run or RunPlan()).to_dict(), indent=2, sort_keys=True) + "\n",
    }


def config_hash(data: Mapping[str, str], files: Mapping[str, bytes]) -> str:
    """Of the uncompressed files, not the zip bytes: another zlib build may compress differently, and that must
    not roll the pod."""
    content = {**data, **{path: text.decode() for path, text in files.items()}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def dashboard_address(head_service: str, namespace: str) -> str:
    return f"http://{head_service}.{namespace}.svc:{DASHBOARD_PORT}"


def state_file(stack: str) -> str:
    """One per stack: a new spec's watcher ignores an old spec's."""
    return f"{STATE_DIR}/{stack}.json"


def watcher_command(address: str, stack: str) -> list[str]:
    """The dashboard and the files; everything else, the recovery policy too, is in run.json."""
    return [
        "python",
        "-m",
        WATCHER_ENTRY,
        "--address",
        address,
        "--spec-file",
        f"{CONFIG_DIR}/{SPEC_KEY}",
        "--run-file",
        f"{CONFIG_DIR}/{RUN_KEY}",
        "--heartbeat-file",
        HEARTBEAT,
        "--state-file",
        state_file(stack),
    ]


def heartbeat_limit(policy: RecoveryPolicy) -> int:
    """Seconds without a look after which the pod is considered hung (a request that never returns)."""
    return int(max(3 * policy.check_interval_seconds, 300))


def labels() -> dict[str, str]:
    return {**MANAGED_LABELS, "app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "preemption-watcher"}


def selector() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": MANAGED_LABELS["app.kubernetes.io/part-of"]}


def deployment_manifest(
    args: PreemptionWatcherArgs, *, head_service: str, config_map_name: str, config_hash: str, api_token: bool
) -> dict[str, Any]:
    """The watcher Deployment (metadata and spec). Pure: no Outputs. `api_token`: mount the KSA's token."""
    namespace, policy, system_pool_name = args.namespace, args.policy, args.system_pool_name
    probe_script = (
        f"import os,sys,time; sys.exit(time.time() - os.path.getmtime({HEARTBEAT!r}) > {heartbeat_limit(policy)})"
    )
    hardened = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    config_mount = {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}
    return {
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels()},
        "spec": {
            "replicas": 1,
            # Never two watchers at once (both would resubmit; the deterministic id makes the second
            # a no-op, but one at a time keeps the log readable).
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector()},
            "template": {
                "metadata": {
                    "labels": labels(),
                    "annotations": {"nemo-rl-gke/config-hash": config_hash},
                },
                "spec": {
                    "serviceAccountName": NAME,
                    # The pod's setting wins over the KSA's (which stays false): the kubelet mounts the
                    # token (a projected, expiring one) at /var/run/secrets/kubernetes.io/serviceaccount.
                    "automountServiceAccountToken": api_token,
                    # The CPU system pool: on-demand nodes, so a preemption never takes the watcher along
                    # (on Autopilot, None: GKE's default general-purpose class, also on-demand).
                    "nodeSelector": {NODE_POOL_LABEL: system_pool_name} if system_pool_name else {},
                    "affinity": {
                        "podAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    # The head's node already holds the (large) image.
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {
                                            "matchLabels": {
                                                "ray.io/cluster": args.ray_cluster_name,
                                                "ray.io/node-type": "head",
                                            }
                                        },
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 10,
                    "initContainers": [
                        {
                            "name": "unpack-code",
                            "image": args.image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python", "-S", "-c", UNPACK_SCRIPT, f"{CONFIG_DIR}/{ARCHIVE_KEY}", CODE_DIR],
                            "resources": UNPACK_RESOURCES,
                            "securityContext": hardened,
                            "volumeMounts": [config_mount, {"name": "code", "mountPath": CODE_DIR}],
                        }
                    ],
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": args.image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": watcher_command(dashboard_address(head_service, namespace), args.spec.stack),
                            # Read-only: Ray packs the gate's py_modules under /tmp (ray-project/ray
                            # dashboard/modules/dashboard_sdk.py at ray-2.46.0, tempfile.TemporaryDirectory).
                            "workingDir": CODE_DIR,
                            "env": [
                                {"name": "PYTHONPATH", "value": CODE_DIR},
                                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                                {"name": "HOME", "value": "/tmp"},
                                {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"},
                            ],
                            "resources": RESOURCES,
                            "securityContext": hardened,
                            "livenessProbe": {
                                "exec": {"command": ["python", "-S", "-c", probe_script]},
                                "initialDelaySeconds": heartbeat_limit(policy),
                                "periodSeconds": 60,
                                "timeoutSeconds": 10,
                                "failureThreshold": 2,
                            },
                            "volumeMounts": [
                                config_mount,
                                {"name": "code", "mountPath": CODE_DIR, "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                                {"name": "state", "mountPath": STATE_DIR, "subPath": STATE_SUBPATH},
                                {"name": "state", "mountPath": CHECKPOINTS_MOUNT, "subPath": CHECKPOINTS_DIR},
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "config", "configMap": {"name": config_map_name}},
                        {"name": "code", "emptyDir": {"sizeLimit": CODE_SIZE_LIMIT}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        # What the watcher saw must outlive a Ray head restarted with it (the head forgets its
                        # jobs): Lustre keeps it as long as the checkpoints, with no write access to the
                        # Kubernetes API (a ConfigMap would need it).
                        {"name": "state", "persistentVolumeClaim": {"claimName": args.lustre_claim}},
                    ],
                },
            },
        },
    }


def gang_rules(ray_cluster: str) -> tuple[list[k8s.rbac.v1.PolicyRuleArgs], list[k8s.rbac.v1.PolicyRuleArgs]]:
    """The RBAC v1 rules of `workloads.gang_wait.KubeGangView`'s calls: the Role's and the ClusterRole's.

    Get and JSON-patch the stack's RayCluster by name (`release`); list the worker pods by label selector
    (`worker_pods`: the gang wait, and each attempt's goodput marks, `pod_marks`; none is read by name, so no
    `get`); get a node for its pool label and registration time (`node_pool`, `node_created`; nodes are
    cluster-scoped). Nothing else."""
    rule = k8s.rbac.v1.PolicyRuleArgs
    return (
        [
            rule(api_groups=[""], resources=["pods"], verbs=["list"]),
            rule(
                api_groups=["ray.io"], resources=["rayclusters"], resource_names=[ray_cluster], verbs=["get", "patch"]
            ),
        ],
        [rule(api_groups=[""], resources=["nodes"], verbs=["get"])],
    )


@dataclass(frozen=True)
class PreemptionWatcherArgs:
    """What `PreemptionWatcher` needs (`build_preemption_watcher` says where each comes from)."""

    spec: JobSpec
    namespace: str
    image: NemoRLImage
    ray_cluster_name: str
    head_service: pulumi.Input[str]
    system_pool_name: Optional[str]
    lustre_claim: str
    run: RunPlan = field(default_factory=RunPlan)  # the program's one run plan, shipped as run.json

    @property
    def policy(self) -> RecoveryPolicy:
        return RecoveryPolicy.from_dict(self.run.recovery)


class PreemptionWatcher(pulumi.ComponentResource):
    """ConfigMap (code, spec, run plan), a ServiceAccount and a one-replica Deployment that resubmits the job
    after a preemption; with a release or gang wait the Role (and ClusterRole) and bindings of `gang_rules`."""

    config_map: k8s.core.v1.ConfigMap
    service_account_resource: k8s.core.v1.ServiceAccount
    service_account: str
    deployment: k8s.apps.v1.Deployment
    rbac: list[pulumi.CustomResource]
    deployment_name: str
    namespace: str
    logs_command: str

    def __init__(self, name: str, args: PreemptionWatcherArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        data, files = config_map_data(args.spec, args.run), watcher_files()
        super().__init__(COMPONENT_TYPE, name, None, opts)
        namespace, spec, policy = args.namespace, args.spec, args.policy
        self.namespace = namespace
        self.deployment_name = NAME
        self.logs_command = f"kubectl -n {namespace} logs deploy/{NAME} --follow"
        self.service_account = NAME
        self.service_account_resource = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": self.service_account, "namespace": namespace, "labels": labels()},
            automount_service_account_token=False,
            opts=child_options(self, opts),
        )
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-code",
            # No name: auto-named, so changed data means a new ConfigMap and a rolled pod (module doc).
            metadata={"namespace": namespace, "labels": labels()},
            data=data,
            binary_data={ARCHIVE_KEY: base64.b64encode(archive(files)).decode()},
            opts=child_options(self, opts),
        )
        self.rbac = self._rbac(name, args, opts) if args.run.gang_wait or args.run.releases_workers else []
        self.deployment = self._deployment(name, args, config_hash(data, files), opts)
        self.register_outputs(
            {
                "deploymentName": self.deployment_name,
                "serviceAccount": self.service_account,
                "namespace": self.namespace,
                "submissionId": spec.submission_id,
                "logsCommand": self.logs_command,
                "maxRestarts": policy.max_restarts,
            }
        )

    def _rbac(
        self, name: str, args: PreemptionWatcherArgs, opts: Optional[pulumi.ResourceOptions]
    ) -> list[pulumi.CustomResource]:
        """`gang_rules` granted to the watcher's KSA only: the Role where the pods and the RayCluster are, the
        ClusterRole named after the namespace (two stacks' watchers in one cluster do not collide)."""
        run = args.run
        assert run.ray_cluster and run.ray_namespace
        namespaced, cluster_wide = gang_rules(run.ray_cluster)
        rbac = k8s.rbac.v1
        subject = rbac.SubjectArgs(kind="ServiceAccount", name=self.service_account, namespace=args.namespace)
        role_meta = {"name": NAME, "namespace": run.ray_namespace}
        node_reader = {"name": watcher_node_reader(args.namespace)}
        grants = [
            ("gang-role", rbac.Role, rbac.RoleBinding, role_meta, namespaced),
            ("gang-node-reader", rbac.ClusterRole, rbac.ClusterRoleBinding, node_reader, cluster_wide),
        ]
        made: list[pulumi.CustomResource] = []
        for suffix, role_type, binding_type, meta, rules in grants:
            metadata = {**meta, "labels": labels()}
            role = role_type(f"{name}-{suffix}", metadata=metadata, rules=rules, opts=child_options(self, opts))
            binding = binding_type(
                f"{name}-{suffix}-binding",
                metadata=metadata,
                role_ref=rbac.RoleRefArgs(
                    api_group="rbac.authorization.k8s.io", kind=role_type.__name__, name=meta["name"]
                ),
                subjects=[subject],
                opts=child_options(self, opts, depends_on=[role, self.service_account_resource]),
            )
            made += [role, binding]
        return made

    def _deployment(
        self, name: str, args: PreemptionWatcherArgs, config_hash: str, opts: Optional[pulumi.ResourceOptions]
    ) -> k8s.apps.v1.Deployment:
        """The Deployment, built once the head Service's and the ConfigMap's names are known."""

        def build(names: list[str]) -> dict[str, Any]:
            svc, cm_name = names
            return deployment_manifest(
                args, head_service=svc, config_map_name=cm_name, config_hash=config_hash, api_token=bool(self.rbac)
            )

        config_map_name = self.config_map.metadata.apply(lambda m: m.name)
        manifest = pulumi.Output.all(args.head_service, config_map_name).apply(build)
        return k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            # After its grants: the watcher's first look may already call the API.
            opts=child_options(self, opts, depends_on=[self.config_map, self.service_account_resource, *self.rbac]),
        )


def build_preemption_watcher(
    spec: JobSpec,
    cfg: "StackConfig",
    image: NemoRLImage,
    *,
    ray: Any,
    system_pool_name: Optional[str],
    run: RunPlan,
    lustre_claim: str,
    opts: Optional[pulumi.ResourceOptions] = None,
) -> Optional[PreemptionWatcher]:
    """The stack's `PreemptionWatcher`, or None when `recovery.enabled` is false. Deployed whether or not
    `job.submit` is on: it only resubmits a job of the stack's spec that someone submitted. `ray`: the
    `RayCluster` component; `image` the Ray pods' (`infra.image_mirror.nemo_rl_image`); `system_pool_name` None on
    Autopilot; `lustre_claim` holds the watcher's state."""
    if not cfg.recovery.enabled:
        return None
    args = PreemptionWatcherArgs(
        spec,
        namespace=ray.namespace,
        image=image,
        ray_cluster_name=ray.cluster_name,
        head_service=ray.head_service,
        system_pool_name=system_pool_name,
        lustre_claim=lustre_claim,
        run=run,
    )
    return PreemptionWatcher(NAME, args, opts)
