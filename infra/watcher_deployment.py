"""The preemption watcher, in the cluster: a Deployment running `python -m workloads.watcher`.

What runs: `workloads/recovery/` (its modules' docstrings have the classifier and the restart policy),
pointed at the Ray dashboard inside the cluster (`http://<head-svc>.<namespace>.svc:8265`), with the
stack's `JobSpec` as JSON. A RayJob cannot do this itself (with `clusterSelector` it refuses
`backoffLimit > 0`: ray-project/kuberay v1.7.0
ray-operator/controllers/ray/utils/validation.go), and a watcher on a laptop stops when the laptop sleeps.

How the code reaches the pod: a ConfigMap holds the `workloads` package files, read from this
repository when the program runs (so the pod runs exactly the code of the deploy), and `spec.json`. It
is mounted read-only at /config, which is on PYTHONPATH. Only the watcher's entry module and the
modules it imports are shipped (`WATCHER_MODULES`, computed from the sources, so an edit elsewhere,
such as the day-2 CLI's help text, does not roll the pod; a subpackage's file under a dotted key,
`config_key`); none imports Pulumi. The ConfigMap is
auto-named: pulumi-kubernetes replaces a ConfigMap whose data changed, the new name lands in the pod
template, and the pod rolls (the data hash is a pod annotation too, to make the reason visible).

Image: the recipe's NeMo-RL image, not a small Python image with `pip install ray`:
- it carries the Ray whose job SDK matches the cluster's Ray exactly (the RayCluster's rayVersion is
  that image's Ray, NVIDIA-NeMo/RL pyproject.toml at the image tag), and `requests`, which the SDK needs;
- nothing is downloaded at start (a pip install on every restart needs PyPI egress through Cloud NAT,
  unpinned transitive versions, and a minute or more), and a preferred pod affinity to the Ray head
  puts the watcher on the node that already pulled the image for the head;
- the cost: the image runs as root. NeMo-RL's Dockerfile (NVIDIA-NeMo/RL docker/Dockerfile) installs
  Python with `uv python install` under /root and builds the venv with `--link-mode symlink` into the
  root-only uv cache, so a non-root user cannot start its `python`. The container is hardened
  otherwise: no privilege escalation, every capability dropped, read-only root filesystem (a small
  emptyDir at /tmp), RuntimeDefault seccomp, and a KSA of its own that no IAM grant names, so the
  GKE metadata server hands it no Google credentials that could reach the bucket.

Kubernetes API: a stack whose watcher releases the workers when the run ends (`recovery.releaseWorkersAfterRun`,
the default: `RunPlan.releases_workers`) or waits for the gang (`gpuPool.capacity`, `RunPlan.gang_wait`) gives
the pod a service-account token, and its KSA exactly what `workloads.gang_wait.KubeGangView` calls
(`gang_rules`): get/patch the one RayCluster (the release); with a gang wait also list pods in the namespace
and get nodes (cluster-scoped: their pool label). With neither the watcher talks only to the Ray dashboard:
no token is mounted and no role exists, so a leaked pod holds nothing of the API.

No secret: the spec carries none (`JobSpec` refuses HF_TOKEN/WANDB_API_KEY in the runtime env; the job
reads them from files the Ray pods mount), and the watcher pod mounts none.
"""

from __future__ import annotations

import hashlib
import json
import modulefinder
import posixpath
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
from infra.run_plan import CHECKPOINTS_MOUNT
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
SPEC_KEY = "spec.json"
RUN_KEY = "run.json"
"""The run's plain plan-time values (`workloads.run_owner.RunPlan`): gate, checkpoint dir, price, budget."""
HEARTBEAT = "/tmp/heartbeat"
STATE_DIR = "/state"
STATE_SUBPATH = ".nemo-rl-gke/watcher"
"""Where on Lustre the watcher keeps what it saw (`workloads.recovery.StateFile`) and the run ledger
(`workloads.ledger`): a subPath of the claim, which the kubelet creates. Besides it the watcher mounts
only the checkpoints (`CHECKPOINTS_MOUNT`), not the HF cache or the logs."""
WATCHER_ENTRY = "workloads.watcher"
"""The module the pod runs (`python -m workloads.watcher`)."""
RAY_JOB_ENTRIES = ("workloads.gate.__main__",)
"""Modules the pod never imports but has Ray run from the `workloads` files it ships as a job's `py_modules`:
the acceptance gate job's entrypoint (`python -m workloads.gate run`, `workloads.gate.gate_job`). Without it
every gate the watcher starts would end at once ("No module named workloads.gate.__main__")."""
RESOURCES = {"requests": {"cpu": "50m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
"""`watch --once` from the ConfigMap files peaked at about 110 MiB RSS here (Python 3.11, Ray 2.60's job
SDK); the limit leaves room for an older Ray's imports. No CPU limit: it idles between looks, and a
throttled import at start would only slow it down."""


def shipped_modules(entry: str = WATCHER_ENTRY, root: Path = ROOT, also: Sequence[str] = ()) -> tuple[str, ...]:
    """The paths, relative to `<root>/workloads` ("watcher.py", "recovery/policy.py"), of `entry` and of
    every module it imports, transitively and lazy imports included (a function-level import runs in the
    pod too), and of the modules `also` (run by Ray from the shipped files) and what they import.

    Found by the standard library's `modulefinder` (it reads the compiled sources, importing nothing)
    with `root` as the only path: the standard library, Ray and requests are the image's and are not
    looked for. A project module outside `workloads` would be missing in the pod, so it is an error.
    """
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


def config_key(module: str) -> str:
    """The ConfigMap key of a shipped module (`shipped_modules`): a key cannot hold `/`, so a subpackage's
    `recovery/policy.py` is `recovery.policy.py` (no module file name holds a dot); the volume's `items`
    put it back at `workloads/recovery/policy.py`."""
    return module.replace("/", ".")


WATCHER_MODULES = shipped_modules(also=RAY_JOB_ENTRIES)
"""What `python -m workloads.watcher` imports, computed from the sources (tests/test_watcher.py runs
exactly these files with Pulumi and `infra` made unimportable)."""


def watcher_files() -> dict[str, str]:
    """The package files the pod needs, keyed by `config_key`."""
    return {config_key(name): (ROOT / "workloads" / name).read_text() for name in WATCHER_MODULES}


CODE_CONFIG_MAP = f"{NAME}-code"
"""The resource name of the ConfigMap that carries the shipped modules, spec.json and run.json (the component
is always `NAME`, `build_preemption_watcher`)."""


def shipped_digests(data: Mapping[str, str]) -> dict[str, str]:
    """The ConfigMap's data as the offline plan (and so each golden plan) shows it: every shipped module by
    name and the SHA-256 of its text, spec.json and run.json whole. The real ConfigMap carries the text; a
    comment edit in a shipped module changes one hash in each plan, not the text of every golden."""
    shipped = {config_key(m) for m in WATCHER_MODULES}
    return {
        key: f"sha256:{hashlib.sha256(text.encode()).hexdigest()}" if key in shipped else text
        for key, text in data.items()
    }


def config_map_data(spec: JobSpec, run: Optional[RunPlan] = None) -> dict[str, str]:
    return {
        **watcher_files(),
        SPEC_KEY: json.dumps(spec.to_dict(), indent=2, sort_keys=True) + "\n",
        RUN_KEY: json.dumps((run or RunPlan()).to_dict(), indent=2, sort_keys=True) + "\n",
    }


def data_hash(data: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def dashboard_address(head_service: str, namespace: str) -> str:
    """The dashboard's in-cluster URL: the head Service's DNS name and KubeRay's dashboard port."""
    return f"http://{head_service}.{namespace}.svc:{DASHBOARD_PORT}"


def ledger_on_lustre(mount_path: str, stack: str) -> str:
    """Where the run ledger is on Lustre as the Ray head mounts it (`python -m jobctl status` reads it there)."""
    from workloads.ledger import ledger_path

    return str(ledger_path(posixpath.join(posixpath.normpath(mount_path), STATE_SUBPATH, f"{stack}.json")))


def state_file(stack: str) -> str:
    """The watcher's state file in its pod (one per stack; a new spec's watcher ignores an old spec's)."""
    return f"{STATE_DIR}/{stack}.json"


def watcher_command(address: str, stack: str) -> list[str]:
    """What a person would type: the dashboard and the files. Everything else, the recovery policy too, is
    in run.json (`RunPlan.recovery`, `infra.run_plan.recovery_values`)."""
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
    *,
    namespace: str,
    image: str,
    service_account: str,
    system_pool_name: Optional[str],
    ray_cluster_name: str,
    head_service: str,
    policy: RecoveryPolicy,
    config_map_name: str,
    config_hash: str,
    stack: str,
    lustre_claim: str,
    api_token: bool = False,
) -> dict[str, Any]:
    """The watcher Deployment (metadata and spec). Pure: no Outputs. `api_token`: mount the KSA's token
    (the gang wait reads the Kubernetes API; module docstring)."""
    probe_script = (
        f"import os,sys,time; sys.exit(time.time() - os.path.getmtime({HEARTBEAT!r}) > {heartbeat_limit(policy)})"
    )
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
                    "serviceAccountName": service_account,
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
                                                "ray.io/cluster": ray_cluster_name,
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
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": watcher_command(dashboard_address(head_service, namespace), stack),
                            "workingDir": CONFIG_DIR,
                            "env": [
                                {"name": "PYTHONPATH", "value": CONFIG_DIR},
                                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                                {"name": "PYTHONUNBUFFERED", "value": "1"},
                                {"name": "HOME", "value": "/tmp"},
                                {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"},
                            ],
                            "resources": RESOURCES,
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "privileged": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "livenessProbe": {
                                "exec": {"command": ["python", "-S", "-c", probe_script]},
                                "initialDelaySeconds": heartbeat_limit(policy),
                                "periodSeconds": 60,
                                "timeoutSeconds": 10,
                                "failureThreshold": 2,
                            },
                            "volumeMounts": [
                                {"name": "code", "mountPath": CONFIG_DIR, "readOnly": True},
                                {"name": "tmp", "mountPath": "/tmp"},
                                {"name": "state", "mountPath": STATE_DIR, "subPath": STATE_SUBPATH},
                                {"name": "state", "mountPath": CHECKPOINTS_MOUNT, "subPath": CHECKPOINTS_DIR},
                            ],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "code",
                            "configMap": {
                                "name": config_map_name,
                                "items": [
                                    *({"key": config_key(f), "path": f"workloads/{f}"} for f in WATCHER_MODULES),
                                    {"key": SPEC_KEY, "path": SPEC_KEY},
                                    {"key": RUN_KEY, "path": RUN_KEY},
                                ],
                            },
                        },
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        # What the watcher saw must outlive a Ray head restarted together with it (the
                        # head forgets its jobs): Lustre keeps it as long as the checkpoints a
                        # resubmission resumes from, and needs no write access to the Kubernetes API (a
                        # ConfigMap would; the gang wait's token, where there is one, only reads and
                        # scales the worker group).
                        {"name": "state", "persistentVolumeClaim": {"claimName": lustre_claim}},
                    ],
                },
            },
        },
    }


def gang_rules(
    ray_cluster: str, gang: bool = True
) -> tuple[list[k8s.rbac.v1.PolicyRuleArgs], list[k8s.rbac.v1.PolicyRuleArgs]]:
    """The RBAC v1 rules of the owner's Kubernetes calls (`workloads.gang_wait.KubeGangView`): the Role's (in
    the namespace) and the ClusterRole's. Plain values, no Outputs.

    Every stack whose watcher releases the workers (`recovery.releaseWorkersAfterRun`) or waits for the gang:
    get and JSON-patch the stack's RayCluster, by name (`KubeGangView.release`, at the run's end or a gang
    timeout). Only with a gang wait (`gang`): list the worker pods in the namespace (by label selector:
    `KubeGangView.worker_pods`, a GET of the collection, which RBAC calls `list`; no pod is read by name, so
    no `get`) and, cluster-wide (nodes are not namespaced), get a node for its pool label (`node_pool`).
    Nothing else: no pod get or deletion, no other RayCluster, no watch, no node list."""
    rule = k8s.rbac.v1.PolicyRuleArgs
    raycluster = rule(
        api_groups=["ray.io"], resources=["rayclusters"], resource_names=[ray_cluster], verbs=["get", "patch"]
    )
    if not gang:
        return [raycluster], []
    return (
        [rule(api_groups=[""], resources=["pods"], verbs=["list"]), raycluster],
        [rule(api_groups=[""], resources=["nodes"], verbs=["get"])],
    )


@dataclass(frozen=True)
class PreemptionWatcherArgs:
    """What `PreemptionWatcher` needs (see `build_preemption_watcher` for each value's source)."""

    spec: JobSpec
    namespace: str
    image: NemoRLImage
    ray_cluster_name: str
    head_service: pulumi.Input[str]
    system_pool_name: Optional[str]
    lustre_claim: str
    run: RunPlan = field(default_factory=RunPlan)
    """The run's plan-time values shipped as run.json: the program's one `RunPlan` (`__main__.py`,
    `infra.run_plan.run_plan_for_stack`), the recovery policy included."""

    @property
    def policy(self) -> RecoveryPolicy:
        """The run plan's recovery policy (the liveness probe's bound is three of its check intervals)."""
        return RecoveryPolicy.from_dict(self.run.recovery)


class PreemptionWatcher(pulumi.ComponentResource):
    """ConfigMap (code + spec), a ServiceAccount and a one-replica Deployment that resubmits the job
    after a preemption; the Role (and with a gang wait the ClusterRole) and bindings its Kubernetes calls need.

    The watcher talks to the Ray dashboard inside the cluster and runs as a KSA of its own: no Workload
    Identity grant names it (the workload KSA may write the bucket). Only with a release or gang wait is an API token
    mounted, for the calls `gang_rules` allows (module docstring).

    Outputs: `deployment_name`, `service_account`, `namespace`, `logs_command` (how to read what it decided).
    """

    config_map: k8s.core.v1.ConfigMap
    service_account_resource: k8s.core.v1.ServiceAccount
    service_account: str
    deployment: k8s.apps.v1.Deployment
    rbac: list[pulumi.CustomResource]
    """The Role and RoleBinding of the release (and with a gang wait the ClusterRole and its binding); empty
    with neither."""
    deployment_name: str
    namespace: str
    logs_command: str

    def __init__(self, name: str, args: PreemptionWatcherArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        data = config_map_data(args.spec, args.run)
        config_hash = data_hash(data)
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
            opts=child_options(self, opts),
        )
        self.rbac = self._rbac(name, args, opts) if args.run.gang_wait or args.run.releases_workers else []
        self.deployment = self._deployment(name, args, config_hash, opts)
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
        """What the gang wait may call (`gang_rules`), granted to the watcher's KSA only. Deleted with the
        cluster like every in-cluster object (`child_options` copies `deleted_with`)."""
        run = args.run
        assert run.ray_cluster and run.ray_namespace
        namespaced, cluster_wide = gang_rules(run.ray_cluster, gang=run.gang_wait)
        rbac = k8s.rbac.v1
        subject = rbac.SubjectArgs(kind="ServiceAccount", name=self.service_account, namespace=args.namespace)
        # Cluster-scoped: named after the namespace, so two stacks' watchers in one cluster do not collide.
        node_reader = watcher_node_reader(args.namespace)
        # The Role lives where the pods and the RayCluster are (the watcher's own namespace: the same one).
        role = rbac.Role(
            f"{name}-gang-role",
            metadata={"name": NAME, "namespace": run.ray_namespace, "labels": labels()},
            rules=namespaced,
            opts=child_options(self, opts),
        )
        role_binding = rbac.RoleBinding(
            f"{name}-gang-role-binding",
            metadata={"name": NAME, "namespace": run.ray_namespace, "labels": labels()},
            role_ref=rbac.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=NAME),
            subjects=[subject],
            opts=child_options(self, opts, depends_on=[role, self.service_account_resource]),
        )
        if not cluster_wide:  # the release alone reads no node
            return [role, role_binding]
        cluster_role = rbac.ClusterRole(
            f"{name}-gang-node-reader",
            metadata={"name": node_reader, "labels": labels()},
            rules=cluster_wide,
            opts=child_options(self, opts),
        )
        cluster_role_binding = rbac.ClusterRoleBinding(
            f"{name}-gang-node-reader-binding",
            metadata={"name": node_reader, "labels": labels()},
            role_ref=rbac.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=node_reader),
            subjects=[subject],
            opts=child_options(self, opts, depends_on=[cluster_role, self.service_account_resource]),
        )
        return [role, role_binding, cluster_role, cluster_role_binding]

    def _deployment(
        self, name: str, args: PreemptionWatcherArgs, config_hash: str, opts: Optional[pulumi.ResourceOptions]
    ) -> k8s.apps.v1.Deployment:
        """The Deployment, built once the head Service's and the ConfigMap's names are known."""

        def build(names: list[str]) -> dict[str, Any]:
            svc, config_map_name = names
            return deployment_manifest(
                namespace=args.namespace,
                image=args.image.ref,
                service_account=self.service_account,
                system_pool_name=args.system_pool_name,
                ray_cluster_name=args.ray_cluster_name,
                head_service=svc,
                policy=args.policy,
                config_map_name=config_map_name,
                config_hash=config_hash,
                stack=args.spec.stack,
                lustre_claim=args.lustre_claim,
                api_token=bool(self.rbac),
            )

        config_map_name = self.config_map.metadata.apply(lambda m: m.name)
        manifest = pulumi.Output.all(args.head_service, config_map_name).apply(build)
        return k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            # With a gang wait, after its grants: the watcher's first look may already call the API.
            opts=child_options(self, opts, depends_on=[self.config_map, self.service_account_resource, *self.rbac]),
        )


def build_preemption_watcher(
    spec: JobSpec,
    cfg: "StackConfig",
    *,
    ray: Any,
    system_pool_name: Optional[str],
    run: RunPlan,
    lustre_claim: str,
    opts: Optional[pulumi.ResourceOptions] = None,
) -> Optional[PreemptionWatcher]:
    """The stack's `PreemptionWatcher`, or None when `recovery.enabled` is false.

    It is deployed whether or not `job.submit` is on: it only ever resubmits a job of the stack's spec
    that someone (the deploy, or `python -m jobctl submit`) submitted, so with nothing submitted it idles.

    Args:
        spec: the stack's job (`infra.training_job.job_spec_for_stack`), the one the deploy submits.
        cfg: the validated stack config (`recovery`, `ray.namespace`, the recipe's image).
        ray: the `RayCluster` component (`cluster_name`, `head_service`, `namespace`, `worker_group`: the
            gang wait's pods and the RayCluster it releases).
        system_pool_name: the CPU pool's name (`infra.placement.system_pool_name`); None on Autopilot.
        run: the program's run plan (`infra.run_plan.run_plan_for_stack`, built once in `__main__.py`), shipped
            as run.json: the recovery policy (the pool's GPUs it waits for), the gate it runs before every
            attempt it submits, the gang wait, prices and checkpoint directory.
        lustre_claim: the Lustre PVC (`WorkloadEnvironment.pvc_name`) that holds the watcher's state.
        opts: the Kubernetes provider, and `depends_on` the Ray release (the watcher is pointless before
            the head exists and is deleted before it).
    """
    if not cfg.recovery.enabled:
        return None
    args = PreemptionWatcherArgs(
        spec,
        namespace=ray.namespace,
        image=cfg.recipe.image,
        ray_cluster_name=ray.cluster_name,
        head_service=ray.head_service,
        system_pool_name=system_pool_name,
        lustre_claim=lustre_claim,
        run=run,
    )
    return PreemptionWatcher(NAME, args, opts)
