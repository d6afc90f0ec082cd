"""Keep a run's results when Lustre goes: export them to GCS before the instance is deleted.

The Pulumi dynamic provider of `infra.storage.LustreDataGuard`, a resource that exists only in the
Pulumi state. It depends on the Lustre instance and on the artifacts bucket, so Pulumi deletes it
*before* either of them; its `delete` exports the directories that hold what a run produced
(`workloads.job_spec.results_dirs()`: `checkpoints/` and `logs/`, relative to the filesystem root, which
the Ray pods mount at `ray.mountPath`) with the Managed Lustre export API and waits for every
transfer to finish. If an export fails, `delete` raises: Pulumi records the failure, keeps this
resource in the state and does not delete the instance or the bucket, which still depend on it.

Why a dynamic resource and not a `before_delete` resource hook: a hook is part of the program, and
a plain `pulumi destroy` does not run the program, so it skips the hook (it runs only with
`pulumi destroy --run-program`,
https://www.pulumi.com/docs/iac/concepts/options/hooks/). A dynamic provider is pickled into the
state with the resource and runs on a plain `pulumi destroy`. The pickle holds a reference to
`LustreGuardProvider` in this importable module (never code from `__main__`), and no state: every
value comes from the resource's props, which Pulumi keeps in the state. So a changed switch takes
effect on `pulumi destroy` only after a `pulumi up` has stored it.

Lifecycle:
    create  when `import_from` is set, import that Cloud Storage prefix into the filesystem root
            (`lustre.importFrom`, a new stack resuming from an earlier stack's export) and wait
    diff    a different instance replaces the guard, old one deleted first (so the old instance is
            exported before it goes); any other change (switches, bucket) is an update
    update  store the new props; never imports again (import is a create-time step)
    delete  when `export_on_destroy`, export each results directory to
            `gs://<bucket>/lustre-export/<dir>/` one after another (one transfer per instance at a
            time), wait for each; raise `TransferError` on any failure
    read    the props as stored (nothing to read back: the guard has no cloud object of its own)

The only Google API this module calls is the Lustre client from `make_client` (Application Default
Credentials, as gcloud and the gcp provider use). Tests replace `make_client` with a fake.
The transfers run as the Managed Lustre service agent, which needs `roles/storage.objectUser` on the
bucket (granted by `LustreDataGuard`; managed-lustre docs "Transfer data").
"""

from __future__ import annotations

import concurrent.futures
import functools
import time
from typing import Any, Callable, Optional

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

EXPORT_PREFIX = "lustre-export"
"""Folder of the artifacts bucket that receives the exported directories."""

TRANSFER_TIMEOUT_SECONDS = 6 * 3600
"""How long one transfer may run before the destroy gives up (the transfer itself continues).
Transfers reach up to the instance's throughput (capacity x tier); a few TB take minutes to an hour."""

BUSY_RETRY_SECONDS = 30.0
BUSY_MAX_WAIT_SECONDS = 1800.0
"""A transfer is refused (ABORTED) while another one runs on the instance: wait for it this long."""

PROP_KEYS = ("project", "zone", "instance_id", "bucket", "dirs", "export_on_destroy", "import_from")
"""The guard's inputs. `import_from` is "" when nothing is imported."""

_sleep: Callable[[float], None] = time.sleep
_monotonic: Callable[[], float] = time.monotonic


class TransferError(RuntimeError):
    """A Lustre import or export did not complete; the message says what is kept and what to do."""


def instance_name(project: str, zone: str, instance_id: str) -> str:
    """The API name of an instance: `projects/<p>/locations/<zone>/instances/<id>`."""
    return f"projects/{project}/locations/{zone}/instances/{instance_id}"


def lustre_path(directory: str) -> str:
    """A results directory as a Lustre path: relative to the filesystem root, starting with `/`."""
    clean = directory.strip("/")
    if not clean or ".." in clean.split("/"):
        raise ValueError(f"invalid Lustre directory {directory!r}")
    return f"/{clean}"


def export_root(bucket: str) -> str:
    """`gs://<bucket>/lustre-export/`: where the export lands and what `lustre.importFrom` takes back."""
    return f"gs://{bucket}/{EXPORT_PREFIX}/"


def export_uri(bucket: str, directory: str) -> str:
    """The destination of one directory: `gs://<bucket>/lustre-export/<dir>/` (the API wants the slash)."""
    return f"{export_root(bucket)}{lustre_path(directory).lstrip('/')}/"


def make_client(project: str) -> Any:
    """The Managed Lustre API client (google-cloud-lustre); the one place a real client is created.

    Application Default Credentials; the project is the quota project, so user credentials from
    `gcloud auth application-default login` work without a separate quota-project setting.
    """
    from google.cloud import lustre_v1

    return lustre_v1.LustreClient(client_options={"quota_project_id": project})


def _types() -> Any:
    from google.cloud import lustre_v1

    return lustre_v1


def _api_errors() -> Any:
    from google.api_core import exceptions

    return exceptions


def _auth_errors() -> tuple[type[BaseException], ...]:
    """Credential failures: none found (DefaultCredentialsError), a refresh refused (RefreshError), ..."""
    from google.auth import exceptions

    return (exceptions.GoogleAuthError,)


def _credentials_problem(err: BaseException) -> str:
    """One line: what went wrong with the credentials and the command that fixes it."""
    first = (str(err).splitlines() or [""])[0][:200]
    return (
        f"no usable Google credentials ({type(err).__name__}: {first}); run `gcloud auth application-default login` "
        "(Application Default Credentials, the identity `pulumi` uses)"
    )


def _failed_objects(operation: Any) -> tuple[int, list[str]]:
    """Objects the finished transfer could not copy, and up to five sample errors from its metadata."""
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


def _start(start: Callable[[], Any], what: str) -> Any:
    """Start a transfer, waiting while another transfer holds the instance (ABORTED)."""
    errors = _api_errors()
    deadline = _monotonic() + BUSY_MAX_WAIT_SECONDS
    while True:
        try:
            return start()
        except errors.Aborted as err:
            if _monotonic() + BUSY_RETRY_SECONDS > deadline:
                raise TransferError(
                    f"{what}: another transfer kept the instance busy for {BUSY_MAX_WAIT_SECONDS / 60:.0f} min ({err})"
                ) from err
            _sleep(BUSY_RETRY_SECONDS)


def _wait(operation: Any, what: str, timeout: float) -> None:
    """Wait for a transfer operation; raise `TransferError` unless every object was copied."""
    errors = _api_errors()
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
    """Export each results directory to the bucket, one after another; return the destinations.

    An instance that no longer exists has nothing left to export (it was deleted outside Pulumi):
    that is not an error. Any other failure raises `TransferError` naming the instance, the
    directory, the destination, and how to go on.
    """
    lustre = _types()
    errors = _api_errors()
    name = instance_name(props["project"], props["zone"], props["instance_id"])
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
            operation = _start(functools.partial(client.export_data, request=request), what)
            _wait(operation, what, timeout)
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


def import_results(client: Any, props: dict[str, Any], timeout: float = TRANSFER_TIMEOUT_SECONDS) -> str:
    """Import `import_from` into the filesystem root of the instance and wait; return the source."""
    lustre = _types()
    errors = _api_errors()
    name = instance_name(props["project"], props["zone"], props["instance_id"])
    source = props["import_from"]
    what = f"importing {source} into / of Lustre instance {name}"
    request = lustre.ImportDataRequest(
        name=name, gcs_path=lustre.GcsPath(uri=source), lustre_path=lustre.LustrePath(path="/")
    )
    try:
        operation = _start(lambda: client.import_data(request=request), what)
        _wait(operation, what, timeout)
    except (TransferError, errors.GoogleAPICallError) as err:
        raise TransferError(
            f"{err}. The instance exists; fix the cause (the Managed Lustre service agent needs read access to "
            f"{source}) and run `pulumi up` again (imports are incremental), or remove lustre.importFrom."
        ) from err
    return source


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    """The props without Pulumi's keys (`__provider`) and earlier outputs, normalised."""
    out = {k: props[k] for k in PROP_KEYS if k in props}
    out["dirs"] = [str(d) for d in out.get("dirs") or []]
    out["export_on_destroy"] = bool(out.get("export_on_destroy"))
    out["import_from"] = str(out.get("import_from") or "")
    return out


def _outputs(props: dict[str, Any], imported_from: str) -> dict[str, Any]:
    inputs = _inputs(props)
    return {
        **inputs,
        "instance_name": instance_name(inputs["project"], inputs["zone"], inputs["instance_id"]),
        "export_root": export_root(inputs["bucket"]),
        "imported_from": imported_from,
    }


class LustreGuardProvider(ResourceProvider):
    """Create = optional import, delete = export or refuse (see the module doc)."""

    # The pickled provider holds no value at all; the props carry no secret either.
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = _inputs(props)
        imported = ""
        if inputs["import_from"]:
            try:
                imported = import_results(make_client(inputs["project"]), inputs)
            except _auth_errors() as err:
                raise TransferError(
                    f"importing {inputs['import_from']} into Lustre instance "
                    f"{instance_name(inputs['project'], inputs['zone'], inputs['instance_id'])}: "
                    f"{_credentials_problem(err)}. "
                    "The instance exists; run `pulumi up` again once credentials work, or remove lustre.importFrom."
                ) from None
        outs = _outputs(inputs, imported)
        return CreateResult(id_=outs["instance_name"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        old, new = _inputs(olds), _inputs(news)
        moved = [k for k in ("project", "zone", "instance_id") if old.get(k) != new.get(k)]
        if moved:
            return DiffResult(changes=True, replaces=moved, delete_before_replace=True)
        changed = any(old.get(k) != new.get(k) for k in PROP_KEYS)
        return DiffResult(changes=changed, replaces=[], delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=_outputs(news, str(olds.get("imported_from") or "")))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        inputs = _inputs(props)
        if not inputs["export_on_destroy"]:
            return
        try:
            export_results(make_client(inputs["project"]), inputs)
        except _auth_errors() as err:
            # Without credentials nothing was exported: refuse, so the instance and the bucket stay.
            name = instance_name(inputs["project"], inputs["zone"], inputs["instance_id"])
            raise TransferError(_refusal(name, inputs, _credentials_problem(err), [])) from None

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)


def guard_props(
    *,
    project: str,
    zone: str,
    instance_id: Any,
    bucket: Any,
    dirs: tuple[str, ...],
    export_on_destroy: bool,
    import_from: Optional[str],
) -> dict[str, Any]:
    """The dynamic resource's props (Outputs allowed for `instance_id` and `bucket`)."""
    for d in dirs:
        lustre_path(d)
    return {
        "project": project,
        "zone": zone,
        "instance_id": instance_id,
        "bucket": bucket,
        "dirs": list(dirs),
        "export_on_destroy": export_on_destroy,
        "import_from": import_from or "",
    }
