"""Keep a run's results when Lustre goes: the dynamic provider of `infra.storage.LustreDataGuard`.

Pulumi deletes the guard before the instance and the bucket; its `delete` exports the results directories
(`workloads.job_spec.results_dirs()`) to `gs://<bucket>/lustre-export/<dir>/` one at a time and raises on any
failure, so the instance and bucket stay. `create` imports `lustre.importFrom`. Not a `before_delete` hook: a
plain `pulumi destroy` does not run the program (https://www.pulumi.com/docs/iac/concepts/options/hooks/),
while a pickled provider runs; it holds no state, only this module path. Tests replace `make_client`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from typing import Any, Callable, Optional

from google.auth.exceptions import GoogleAuthError
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

EXPORT_PREFIX = "lustre-export"
TRANSFER_TIMEOUT_SECONDS = 6 * 3600  # the destroy gives up; the transfer itself continues
# A transfer is refused (ABORTED) while another one runs on the instance: wait for it this long.
BUSY_RETRY_SECONDS = 30.0
BUSY_MAX_WAIT_SECONDS = 1800.0
PROP_KEYS = ("project", "zone", "instance_id", "bucket", "dirs", "export_on_destroy", "import_from")

_sleep: Callable[[float], None] = time.sleep
_monotonic: Callable[[], float] = time.monotonic


class TransferError(RuntimeError):
    pass


def instance_name(props: dict[str, Any]) -> str:
    return f"projects/{props['project']}/locations/{props['zone']}/instances/{props['instance_id']}"


def lustre_path(directory: str) -> str:
    clean = directory.strip("/")
    if not clean or ".." in clean.split("/"):
        raise ValueError(f"invalid Lustre directory {directory!r}")
    return f"/{clean}"


def export_root(bucket: str) -> str:
    return f"gs://{bucket}/{EXPORT_PREFIX}/"


def export_uri(bucket: str, directory: str) -> str:
    # The API wants the trailing slash.
    return f"{export_root(bucket)}{lustre_path(directory).lstrip('/')}/"


def make_client(project: str) -> Any:
    """The quota project lets `gcloud auth application-default login` credentials work as they are. The Google
    client libraries are imported where a transfer runs: lustre_v1 alone takes over a second, on every plan."""
    from google.cloud import lustre_v1

    return lustre_v1.LustreClient(client_options={"quota_project_id": project})


def credentials_problem(err: BaseException) -> str:
    first = (str(err).splitlines() or [""])[0][:200]
    return (
        f"no usable Google credentials ({type(err).__name__}: {first}); run `gcloud auth application-default login` "
        "(Application Default Credentials, the identity `pulumi` uses)"
    )


def _failed_objects(operation: Any) -> tuple[int, list[str]]:
    meta = getattr(getattr(operation, "metadata", None), "operation_metadata", None)
    if meta is None:
        return 0, []
    failed = int(getattr(getattr(meta, "counters", None), "objects_failed_count", 0) or 0)
    samples: list[str] = []
    for summary in getattr(meta, "error_summaries", None) or []:
        for entry in getattr(summary, "error_log_entries", None) or []:
            details = "; ".join(getattr(entry, "error_details", None) or [])
            samples.append(f"{getattr(entry, 'uri', '?')}: {details}".rstrip(": "))
    return failed, samples[:5]


def transfer(start: Callable[[], Any], what: str, timeout: float) -> None:
    """Starts the operation, waiting out another transfer on the instance (ABORTED), then waits for it."""
    from google.api_core import exceptions as errors

    deadline = _monotonic() + BUSY_MAX_WAIT_SECONDS
    while True:
        try:
            operation = start()
            break
        except errors.Aborted as err:
            if _monotonic() + BUSY_RETRY_SECONDS > deadline:
                raise TransferError(
                    f"{what}: another transfer kept the instance busy for {BUSY_MAX_WAIT_SECONDS / 60:.0f} min ({err})"
                ) from err
            _sleep(BUSY_RETRY_SECONDS)
    op_name = getattr(getattr(operation, "operation", None), "name", "") or "the transfer operation"
    try:
        operation.result(timeout=timeout)
    except concurrent.futures.TimeoutError as err:
        raise TransferError(
            f"{what}: still running after {timeout / 60:.0f} min ({op_name} continues in the background; "
            "transfers are incremental, so running the command again after it ends is quick)"
        ) from err
    except errors.GoogleAPICallError as err:
        raise TransferError(f"{what}: {op_name} failed: {err}") from err
    failed, samples = _failed_objects(operation)
    if failed:
        detail = f"; e.g. {' | '.join(samples)}" if samples else ""
        raise TransferError(f"{what}: {failed} object(s) could not be copied ({op_name}){detail}")


def export_results(client: Any, props: dict[str, Any], timeout: float = TRANSFER_TIMEOUT_SECONDS) -> list[str]:
    """An instance deleted outside Pulumi has nothing left to export: not an error."""
    from google.api_core import exceptions as errors
    from google.cloud import lustre_v1 as lustre

    name = instance_name(props)
    try:
        client.get_instance(name=name)
    except errors.NotFound:
        return []
    except errors.GoogleAPICallError as err:
        raise TransferError(_refusal(name, props, f"reading Lustre instance {name}: {err}", [])) from err
    done: list[str] = []
    for directory in props["dirs"]:
        source, destination = lustre_path(directory), export_uri(props["bucket"], directory)
        what = f"exporting {source} of Lustre instance {name} to {destination}"
        request = lustre.ExportDataRequest(
            name=name, lustre_path=lustre.LustrePath(path=source), gcs_path=lustre.GcsPath(uri=destination)
        )
        try:
            transfer(functools.partial(client.export_data, request=request), what, timeout)
        except TransferError as err:
            raise TransferError(_refusal(name, props, str(err), done)) from err.__cause__
        except errors.GoogleAPICallError as err:
            raise TransferError(_refusal(name, props, f"{what}: {err}", done)) from err
        done.append(destination)
    return done


def _refusal(name: str, props: dict[str, Any], reason: str, done: list[str]) -> str:
    exported = f" Already exported: {', '.join(done)}." if done else ""
    return (
        f"Lustre instance {name} was NOT deleted, and neither was bucket {props['bucket']}: {reason}.{exported} "
        "Fix the cause (for example: the Managed Lustre service agent needs roles/storage.objectUser on the "
        "bucket; a directory that does not exist cannot be exported) and run `pulumi destroy` again: transfers "
        "are incremental. To delete the instance WITHOUT exporting, run `pulumi config set --path "
        "lustre.exportOnDestroy false`, then `pulumi up`, then `pulumi destroy`."
    )


def import_folder(
    client: Any, name: str, source: str, destination: str, what: str, advice: str, timeout: float
) -> None:
    """Imports the gs:// folder `source` into `destination` of the instance `name` and waits; a failure is one
    TransferError that ends with `advice`. Both imports use it: `lustre.importFrom` (here) and the staged weights
    (infra/weights_import.py)."""
    from google.api_core import exceptions as errors
    from google.cloud import lustre_v1 as lustre

    request = lustre.ImportDataRequest(
        name=name, gcs_path=lustre.GcsPath(uri=source), lustre_path=lustre.LustrePath(path=destination)
    )
    try:
        transfer(lambda: client.import_data(request=request), what, timeout)
    except (TransferError, errors.GoogleAPICallError) as err:
        raise TransferError(f"{err}. {advice}") from err


def import_results(client: Any, props: dict[str, Any], timeout: float = TRANSFER_TIMEOUT_SECONDS) -> str:
    name, source = instance_name(props), props["import_from"]
    import_folder(
        client,
        name,
        source,
        "/",
        f"importing {source} into / of Lustre instance {name}",
        f"The instance exists; fix the cause (the Managed Lustre service agent needs read access to {source}) and "
        "run `pulumi up` again (imports are incremental), or remove lustre.importFrom.",
        timeout,
    )
    return source


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    out = {k: props[k] for k in PROP_KEYS if k in props}
    out["dirs"] = [str(d) for d in out.get("dirs") or []]
    out["export_on_destroy"] = bool(out.get("export_on_destroy"))
    out["import_from"] = str(out.get("import_from") or "")
    return out


def _outputs(props: dict[str, Any], imported_from: str) -> dict[str, Any]:
    inputs = _inputs(props)
    return {
        **inputs,
        "instance_name": instance_name(inputs),
        "export_root": export_root(inputs["bucket"]),
        "imported_from": imported_from,
    }


class LustreGuardProvider(ResourceProvider):
    serialize_as_secret_always = False  # nothing secret in the provider or the props

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = _inputs(props)
        imported = ""
        if inputs["import_from"]:
            try:
                imported = import_results(make_client(inputs["project"]), inputs)
            except GoogleAuthError as err:
                raise TransferError(
                    f"importing {inputs['import_from']} into Lustre instance {instance_name(inputs)}: "
                    f"{credentials_problem(err)}. "
                    "The instance exists; run `pulumi up` again once credentials work, or remove lustre.importFrom."
                ) from None
        outs = _outputs(inputs, imported)
        return CreateResult(id_=outs["instance_name"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        old, new = _inputs(olds), _inputs(news)
        moved = [k for k in ("project", "zone", "instance_id") if old.get(k) != new.get(k)]
        changed = bool(moved) or any(old.get(k) != new.get(k) for k in PROP_KEYS)
        return DiffResult(changes=changed, replaces=moved, delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=_outputs(news, str(olds.get("imported_from") or "")))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        inputs = _inputs(props)
        if not inputs["export_on_destroy"]:
            return
        try:
            export_results(make_client(inputs["project"]), inputs)
        except GoogleAuthError as err:
            raise TransferError(_refusal(instance_name(inputs), inputs, credentials_problem(err), [])) from None

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)


def guard_props(*, dirs: tuple[str, ...], import_from: Optional[str], **props: Any) -> dict[str, Any]:
    """The dynamic resource's props: project, zone, instance_id and bucket (Outputs allowed), export_on_destroy."""
    for d in dirs:
        lustre_path(d)
    return {**props, "dirs": list(dirs), "import_from": import_from or ""}
