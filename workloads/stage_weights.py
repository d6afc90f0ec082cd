"""Fetch the recipe's model (weights, tokenizer, configs) once into the Hugging Face cache on Lustre, before the
first attempt (infra/weight_staging.py runs it as a CPU Job; `python -c`, in the NeMo-RL image, which has
`huggingface_hub`).

Idempotent: a marker per model (`staged/<org>--<name>.done` under HF_HOME) says the snapshot is complete; with it
the Job ends at once (a later `pulumi up`, a replaced Job). Without it `snapshot_download` fetches what the cache
lacks (it skips files already there, so a cache NeMo-RL filled on an earlier release costs one listing) and the
marker is written last. NeMo-RL then finds the files in the same HF_HOME (the Ray pods' env and the job's runtime env,
workloads/job_types.py `hf_home`) and downloads nothing, on this attempt or any later one.

The token: `HF_TOKEN_PATH` names the Secret's file (infra/workload_env.py), read by huggingface_hub itself; never an
environment variable (a gated model without a token already fails at plan time).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable


def marker_path(hf_home: str, model: str) -> str:
    return os.path.join(hf_home, "staged", model.replace("/", "--") + ".done")


def stage(model: str, hf_home: str, download: Callable[..., Any], say: Callable[[str], Any] = print) -> bool:
    """Download `model` into `hf_home` unless its marker exists; True when it downloaded."""
    marker = marker_path(hf_home, model)
    if os.path.exists(marker):
        say(f"{model}: staged already ({marker})")
        return False
    path = download(repo_id=model, cache_dir=os.path.join(hf_home, "hub"))
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker + ".tmp", "w") as f:
        f.write(f"{path}\n")
    os.replace(marker + ".tmp", marker)  # the marker appears whole, after every file
    say(f"{model}: staged in {path}")
    return True


def main(argv: list[str]) -> int:
    from huggingface_hub import snapshot_download

    (model,) = argv
    stage(model, os.environ["HF_HOME"], snapshot_download)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
