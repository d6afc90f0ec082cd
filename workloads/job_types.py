"""The job's data types, the ones that travel into the cluster: `JobSpec` (what a submission sends to Ray),
its Ray metadata keys, `JobBuildError`, the spec hash, submission and run ids, and the Lustre paths a run
writes to.

Apart from the builder (`workloads.job_spec.build_job`), the recipes and the override parser, which run only
at plan time: the watcher, the job-submission provider and the day-2 CLI read a spec without importing them,
so the watcher's ConfigMap ships this module and not the builder (infra/watcher_deployment.py).

A run and its attempts: the run id (`run_id_for`) names what the checkpoints continue; the spec hash names one
spec of it. Keyed by the spec hash, because each spec is a new attempt that must reach Ray: the submission id
(Ray refuses a second job under one id), the hook's replacement of the submission, the jobs the watcher calls
its own, its state file and restart count (an edit deployed by a person is a new attempt with the automatic
restarts counted afresh), and the stop of the stack's other specs before a new one starts (two specs of one
run would write one checkpoint directory). Keyed by the run id: the checkpoint directory (through its key),
the ledger (spend, budget and attempts across every spec of the run), the `runId` output and the plan's
`--compare`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Mapping

SECRET_ENV_NAMES = frozenset({"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"})
"""Environment variables that carry credentials: they come from the pod, never the runtime env."""

META_STACK = "nemo-rl-gke/stack"
META_RECIPE = "nemo-rl-gke/recipe"
META_SPEC_HASH = "nemo-rl-gke/spec-hash"
META_RUN_ID = "nemo-rl-gke/run-id"
META_ATTEMPT = "nemo-rl-gke/attempt"
"""Ray job metadata keys; `workloads.submit` finds a stack's jobs by them."""

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_ID_SLUG_MAX = 80
"""Submission ids appear in URL paths, actor names and log file names: keep them short and plain."""

CHECKPOINTS_DIR = "checkpoints"
LOGS_DIR = "logs"


class JobBuildError(ValueError):
    """The job cannot be built for this stack; the message names what to change.

    `key` is the stack config key (camelCase path below the namespace) the user has to change, so the
    Pulumi program can report it like any other config error before creating a resource.
    """

    def __init__(self, message: str, key: str = "job.overrides"):
        super().__init__(message)
        self.key = key


def run_id_for(stack: str, recipe: str, checkpoint_key: str) -> str:
    """The run's identity: `<stack>-<recipe>-<first 8 hex of SHA-256 of the checkpoint key>`.

    A run is what its checkpoints can continue: the stack, the recipe and the checkpoint key (model,
    sequence length, training layout: `workloads.job_spec.checkpoint_key`). A spec edit that keeps the three
    (steps, W&B, the gate, `job.maxLostMinutes`) is a new attempt of the same run and resumes from its last
    complete checkpoint; one that changes any of them is a new run. The key is hashed, not spelled, because
    a model name makes it long; the checkpoint directory spells it."""
    return f"{_slug(stack, recipe)}-{hashlib.sha256(checkpoint_key.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class JobSpec:
    """Everything a submission sends to Ray. Build it with `workloads.job_spec.build_job` or `JobSpec.create`.

    `spec_hash` is the SHA-256 of the entrypoint and runtime env; `submission_id` is
    `<stack>-<recipe>-<first 8 hex of spec_hash>` with anything outside `[A-Za-z0-9_-]` turned
    into `-`, so the same spec always gets the same id and any change gets a new one. `run_id` (in the
    metadata) names the run the spec is an attempt of (`run_id_for`); several specs may share it.
    """

    entrypoint: str
    runtime_env: dict[str, Any]
    submission_id: str
    metadata: dict[str, str]
    spec_hash: str

    @classmethod
    def create(
        cls, *, stack: str, recipe: str, entrypoint: str, runtime_env: Mapping[str, Any], run_id: str = ""
    ) -> "JobSpec":
        """A spec for any entrypoint (tests use short commands); computes hash, id and metadata. Without
        `run_id` the spec is a run of its own (its submission id)."""
        env = copy.deepcopy(dict(runtime_env))
        leaked = sorted(SECRET_ENV_NAMES & set((env.get("env_vars") or {})))
        if leaked:
            raise JobBuildError(
                f"runtime env sets {', '.join(leaked)}: secrets reach the job from the pod's Kubernetes "
                "Secret, never through the Ray runtime env (it is stored and shown by the dashboard)"
            )
        digest = spec_hash(entrypoint, env)
        submission_id = submission_id_for(stack, recipe, digest)
        return cls(
            entrypoint=entrypoint,
            runtime_env=env,
            submission_id=submission_id,
            metadata={
                META_STACK: stack,
                META_RECIPE: recipe,
                META_SPEC_HASH: digest,
                META_RUN_ID: run_id or submission_id,
            },
            spec_hash=digest,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JobSpec":
        """Rebuild a spec from `to_dict()` output (e.g. dynamic-provider props), checking its hash."""
        spec = cls(
            entrypoint=str(data["entrypoint"]),
            runtime_env=copy.deepcopy(dict(data["runtime_env"])),
            submission_id=str(data["submission_id"]),
            metadata={str(k): str(v) for k, v in dict(data["metadata"]).items()},
            spec_hash=str(data["spec_hash"]),
        )
        if spec_hash(spec.entrypoint, spec.runtime_env) != spec.spec_hash:
            raise JobBuildError(
                f"job spec {spec.submission_id}: spec_hash does not match its entrypoint and runtime env"
            )
        return spec

    def to_dict(self) -> dict[str, Any]:
        return {
            "entrypoint": self.entrypoint,
            "runtime_env": copy.deepcopy(self.runtime_env),
            "submission_id": self.submission_id,
            "metadata": dict(self.metadata),
            "spec_hash": self.spec_hash,
        }

    @property
    def stack(self) -> str:
        return self.metadata[META_STACK]

    @property
    def recipe(self) -> str:
        return self.metadata[META_RECIPE]

    @property
    def run_id(self) -> str:
        """The run this spec is an attempt of; a spec pickled before run ids existed is a run of its own."""
        return self.metadata.get(META_RUN_ID) or self.submission_id


def spec_hash(entrypoint: str, runtime_env: Mapping[str, Any]) -> str:
    """SHA-256 (hex) over the entrypoint and the runtime env in canonical JSON."""
    doc = json.dumps({"entrypoint": entrypoint, "runtime_env": runtime_env}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


def _slug(stack: str, recipe: str) -> str:
    return _ID_UNSAFE.sub("-", f"{stack}-{recipe}").strip("-")[:_ID_SLUG_MAX].rstrip("-") or "job"


def submission_id_for(stack: str, recipe: str, digest: str) -> str:
    return f"{_slug(stack, recipe)}-{digest[:8]}"


def results_dirs() -> tuple[str, ...]:
    """The top-level directories on Lustre (relative to the mount path, i.e. to the filesystem root)
    that hold what a run produces: checkpoints and logs. `infra.lustre_guard` exports exactly these to
    the bucket before `pulumi destroy` deletes Lustre; the HF cache is not among them (re-downloadable).
    """
    return (CHECKPOINTS_DIR, LOGS_DIR)


def run_checkpoint_subdir(stack: str, recipe: str, key: str = "") -> str:
    """A run's checkpoints below `<mount>/checkpoints` (the job's mount) or the watcher's `/checkpoints`:
    per stack, recipe and checkpoint key. The one computation of the path; both sides join it to their root."""
    return posixpath.join(stack, recipe, *([key] if key else []))


def checkpoint_dir(mount_path: str, stack: str, recipe: str, key: str = "") -> str:
    """Checkpoints on Lustre, per stack, recipe and `checkpoint_key`: resubmitting the same job resumes from here."""
    return posixpath.join(mount_root(mount_path), CHECKPOINTS_DIR, run_checkpoint_subdir(stack, recipe, key))


def legacy_checkpoint_dir(mount_path: str, stack: str, recipe: str) -> str:
    """Where releases up to 5971cc4 kept a run's checkpoints (`checkpoints/<stack>/<recipe>`, no key:
    `git show 5971cc4:workloads/job_spec.py`): the job adopts the `step_*` found there once."""
    return checkpoint_dir(mount_path, stack, recipe)


def log_dir(mount_path: str, stack: str, recipe: str) -> str:
    """NeMo-RL's `logger.log_dir` (it adds exp_<N> per run; TensorBoard and W&B files go below)."""
    return posixpath.join(mount_root(mount_path), LOGS_DIR, stack, recipe)


def hf_home(mount_path: str) -> str:
    """The Hugging Face cache on Lustre, shared by every node and kept across runs."""
    return posixpath.join(mount_root(mount_path), "hf-cache")


def mount_root(mount_path: str) -> str:
    if not mount_path.startswith("/"):
        raise JobBuildError(f"mount path {mount_path!r} must be absolute", key="ray.mountPath")
    return posixpath.normpath(mount_path)
