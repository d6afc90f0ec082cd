"""The staged weights into Lustre: the dynamic provider of `infra.weight_staging.WeightStaging`'s import.

The staging Job writes the model into `gs://<bucket>/<prefix>/` while Lustre is being created; once the instance
exists this imports that folder into the Lustre directory that is the job's HF_HUB_CACHE, with Managed Lustre's own
transfer (ImportData; "up to 100 GBps for files over 32 MB, bounded by the instance's maximum throughput, capacity x
performance tier": https://cloud.google.com/managed-lustre/docs/transfer-data, "Performance"). Incremental: a file
already there is not copied again, so a later `pulumi up` or a changed model costs a listing and the new files.

`create` and `update` import; `delete` does nothing (the files go with the instance). Pickled by module path into
every stack's state (tests/test_dynamic_provider_paths.py): keep this path.
"""

from __future__ import annotations

from typing import Any

from google.auth.exceptions import GoogleAuthError
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from infra import lustre_guard
from infra.lustre_guard import TransferError, credentials_problem, instance_name

IMPORT_TIMEOUT_SECONDS = 3600.0
PROP_KEYS = ("project", "zone", "instance_id", "source", "lustre_path", "model")
# Not inputs of the transfer: what the deploy-time model reads (tools/deploy_time.py), changed without an import.
INFO_KEYS = ("model_bytes", "lustre_mb_per_s")


def import_weights(client: Any, props: dict[str, Any], timeout: float = IMPORT_TIMEOUT_SECONDS) -> None:
    name = instance_name(props)
    lustre_guard.import_folder(
        client,
        name,
        props["source"],
        props["lustre_path"],
        f"importing the staged {props['model']} ({props['source']}) into {props['lustre_path']} of Lustre {name}",
        "Nothing is lost: the weights stay in the bucket. Fix the cause (the Managed Lustre service agent needs "
        "roles/storage.objectUser on the bucket) and run `pulumi up` again (imports are incremental); until then the "
        "first attempt would download the model itself.",
        timeout,
    )


class WeightsImportProvider(ResourceProvider):
    serialize_as_secret_always = False  # nothing secret in the provider or the props

    def _import(self, props: dict[str, Any]) -> dict[str, Any]:
        inputs = {k: props[k] for k in (*PROP_KEYS, *INFO_KEYS) if k in props}
        try:
            import_weights(lustre_guard.make_client(inputs["project"]), inputs)
        except GoogleAuthError as err:
            raise TransferError(f"importing {inputs['source']} into Lustre: {credentials_problem(err)}") from None
        return {**inputs, "instance_name": instance_name(inputs)}

    def create(self, props: dict[str, Any]) -> CreateResult:
        outs = self._import(props)
        return CreateResult(id_=f"{outs['instance_name']}:{outs['lustre_path']}", outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = [k for k in PROP_KEYS if olds.get(k) != news.get(k)]
        # Another instance or folder is another import; both leave nothing to delete.
        moved = [k for k in ("project", "zone", "instance_id", "lustre_path") if k in changed]
        return DiffResult(changes=bool(changed), replaces=moved, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=self._import(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        return None

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)
