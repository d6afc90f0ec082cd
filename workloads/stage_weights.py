"""Fetch the recipe's model (weights, tokenizer, configs) once into the artifacts bucket while Managed Lustre is still
being created; Lustre then imports the folder into its Hugging Face cache (infra/weights_import.py). infra/
weight_staging.py runs this as a CPU Job (`python -c`, in the NeMo-RL image, which has `huggingface_hub`) with the
bucket mounted by Cloud Storage FUSE.

The layout is a Hugging Face hub cache (`HF_HUB_CACHE`) without symlinks: `models--<org>--<name>/refs/main` holds the
commit and
`snapshots/<commit>/` the files themselves. The usual cache's `snapshots -> blobs` links would survive neither the
bucket nor Lustre's import; huggingface_hub returns a file found at `snapshots/<commit>/<path>` before any download,
online after its metadata call or offline through `refs/<revision>` (huggingface_hub v0.34.4 and v1.14.0,
src/huggingface_hub/file_download.py `_hf_hub_download_to_cache_dir`: "pointer already exists -> immediate return";
the versions NeMo-RL v0.4.0 and v0.7.0 lock in uv.lock). tests/test_weight_staging.py resolves this layout with the
real library, with every download refused.

Idempotent: a marker per model and commit (`.staged/<org>--<name>@<commit>.done`) is written last; with it the Job
ends at once (a replaced Job, a stack created again over the kept bucket while the Hub's `main` has not moved).
Without it `snapshot_download(local_dir=...)` fetches what the folder lacks. The Hub's `main` moving later, under a
live stack, is not followed: NeMo-RL's online lookup then downloads the new commit itself, as before issue 44.

The token: `HF_TOKEN_PATH` names the Secret's file (infra/workload_env.py), read by huggingface_hub itself; never an
environment variable (a gated model without a token already fails at plan time).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Callable


def repo_folder(root: str, model: str) -> str:
    """The model's folder in the hub cache `root` (HF_HUB_CACHE): `models--<org>--<name>`."""
    return os.path.join(root, "models--" + model.replace("/", "--"))


def marker_path(root: str, model: str, commit: str) -> str:
    return os.path.join(root, ".staged", f"{model.replace('/', '--')}@{commit}.done")


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)  # whole or absent: a rename (atomic on a hierarchical-namespace bucket)


def stage(
    model: str,
    root: str,
    resolve: Callable[[str], str],
    download: Callable[..., Any],
    say: Callable[[str], Any] = print,
) -> bool:
    """Put `model` in the hub cache `root` unless its marker exists; True when it downloaded. `resolve` gives the
    commit of the model's `main`; `download(repo_id=, revision=, local_dir=)` is `snapshot_download`."""
    commit = resolve(model)
    marker = marker_path(root, model, commit)
    if os.path.exists(marker):
        say(f"{model}: {commit} staged already ({marker})")
        return False
    folder = repo_folder(root, model)
    snapshot = os.path.join(folder, "snapshots", commit)
    download(repo_id=model, revision=commit, local_dir=snapshot)
    # huggingface_hub's own bookkeeping of a local_dir download; no reader wants it on Lustre.
    shutil.rmtree(os.path.join(snapshot, ".cache"), ignore_errors=True)
    _write(os.path.join(folder, "refs", "main"), commit)  # read back as is: no newline
    _write(marker, f"{snapshot}\n")  # last: the files are all there
    say(f"{model}: staged {commit} in {snapshot}")
    return True


def main(argv: list[str]) -> int:
    from huggingface_hub import HfApi, snapshot_download

    model, root = argv
    stage(model, root, lambda m: HfApi().model_info(m).sha, snapshot_download)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
