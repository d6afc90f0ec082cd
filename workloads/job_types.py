"""The job's data types that travel into the cluster: `JobSpec`, its Ray metadata keys, `JobBuildError`,
the spec hash, submission and run ids, and the Lustre paths a run writes to.

The run id names what the checkpoints continue (checkpoint dir, ledger, `runId`); the spec hash names one
spec, each a new attempt (submission id, the watcher's jobs, state file and restart count).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import posixpath
import re
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
"""Submission ids appear in URL paths, actor names and log file names."""

CHECKPOINTS_DIR = "checkpoints"
LOGS_DIR = "logs"


class JobBuildError(ValueError):
    """The job cannot be built for this stack; `key` is the config key to change."""

    def __init__(self, message: str, key: str = "job.overrides"):
        super().__init__(message)
        self.key = key


def run_id_for(stack: str, recipe: str, checkpoint_key: str) -> str:
    """`<stack>-<recipe>-<8 hex of SHA-256 of the checkpoint key>`: a spec edit that keeps the three is a new
    attempt of the same run and resumes from its checkpoints."""
    return f"{_slug(stack, recipe)}-{hashlib.sha256(checkpoint_key.encode()).hexdigest()[:8]}"


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """Everything a submission sends to Ray (`workloads.job_spec.build_job` or `create`). `submission_id` is
    `<stack>-<recipe>-<8 hex of spec_hash>`: the same spec always gets the same id."""

    entrypoint: str
    runtime_env: dict[str, Any]
    submission_id: str
    metadata: dict[str, str]
    spec_hash: str

    @classmethod
    def create(
        cls, *, stack: str, recipe: str, entrypoint: str, runtime_env: Mapping[str, Any], run_id: str = ""
    ) -> "JobSpec":
        """A spec for any entrypoint; without `run_id` it is a run of its own."""
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
        """Rebuild a spec from `to_dict()` output, checking its hash."""
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
        return dataclasses.asdict(self)

    @property
    def stack(self) -> str:
        return self.metadata[META_STACK]

    @property
    def recipe(self) -> str:
        return self.metadata[META_RECIPE]

    @property
    def run_id(self) -> str:
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
    """The Lustre directories a run produces, which `infra.lustre_guard` exports before destroy."""
    return (CHECKPOINTS_DIR, LOGS_DIR)


def run_checkpoint_subdir(stack: str, recipe: str, key: str = "") -> str:
    """A run's checkpoints below the checkpoints root: the one computation of the path."""
    return posixpath.join(stack, recipe, *([key] if key else []))


def checkpoint_dir(mount_path: str, stack: str, recipe: str, key: str = "") -> str:
    return posixpath.join(mount_root(mount_path), CHECKPOINTS_DIR, run_checkpoint_subdir(stack, recipe, key))


def legacy_checkpoint_dir(mount_path: str, stack: str, recipe: str) -> str:
    """Where releases up to 5971cc4 kept checkpoints (`git show 5971cc4:workloads/job_spec.py`)."""
    return checkpoint_dir(mount_path, stack, recipe)


def log_dir(mount_path: str, stack: str, recipe: str) -> str:
    """NeMo-RL's `logger.log_dir`."""
    return posixpath.join(mount_root(mount_path), LOGS_DIR, stack, recipe)


def hf_home(mount_path: str) -> str:
    return posixpath.join(mount_root(mount_path), "hf-cache")


def hub_cache(mount_path: str) -> str:
    """`HF_HUB_CACHE`, the models' cache: the staged weights Lustre imports (infra/weight_staging.py). Its own
    folder beside `HF_HOME`: the import never meets the symlinked cache NeMo-RL filled itself before issue 44
    (`HF_HOME/hub`), and huggingface_hub reads it in place of `HF_HOME/hub` (huggingface_hub constants.py
    `HF_HUB_CACHE`, v0.34.4 and v1.14.0)."""
    return posixpath.join(mount_root(mount_path), "hf-hub")


STARTUP_CACHE_DIR = "cache"


def startup_caches(mount_path: str) -> dict[str, str]:
    """What NeMo-RL, vLLM and Triton build at start-up, kept on Lustre so a resume on fresh pods finds it; only
    settings the pinned images read (sources and measurements: docs/deploy.md "Start-up caches on Lustre").

    - `VLLM_CACHE_ROOT` (vllm/envs.py): the torch.compile cache. NeMo-RL v0.7.0 appends `_<seed>` per engine (the
      layout's, the same on every attempt: nemo_rl/models/generation/vllm/vllm_worker.py); v0.4.0 ... v0.6.0 ignore
      it. CUDA graphs are captured in memory on every start, never saved.
    - `TRITON_CACHE_DIR` (triton runtime/cache.py, knobs.py): content-hashed entries renamed into place, safe to
      share across nodes.
    - `NRL_MEGATRON_CHECKPOINT_DIR`: the HF -> Megatron conversion (nemo_rl/models/policy/utils.py), at the
      `$HF_HOME/nemo_rl` NeMo-RL already falls back to, so earlier conversions are still found.

    Not `TORCHINDUCTOR_CACHE_DIR`: its temporary file names are unique per host only (torch/_inductor/codecache.py
    `write_atomic`), and every rank of every pod would write the same entries."""
    root = posixpath.join(mount_root(mount_path), STARTUP_CACHE_DIR)
    return {
        "VLLM_CACHE_ROOT": posixpath.join(root, "vllm", "engine"),
        "TRITON_CACHE_DIR": posixpath.join(root, "triton"),
        "NRL_MEGATRON_CHECKPOINT_DIR": posixpath.join(hf_home(mount_path), "nemo_rl"),
    }


def mount_root(mount_path: str) -> str:
    if not mount_path.startswith("/"):
        raise JobBuildError(f"mount path {mount_path!r} must be absolute", key="ray.mountPath")
    return posixpath.normpath(mount_path)
