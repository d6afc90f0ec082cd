"""`storage`: the artifacts bucket and what `pulumi destroy` does with it."""

from __future__ import annotations

from infra.config.base import Model
from infra.config.errors import KeyedValueError
from infra.config.lustre import LustreConfig


class StorageConfig(Model):
    """The artifacts bucket, and what `pulumi destroy` does with it."""

    delete_bucket_on_destroy: bool = False
    """Let `pulumi destroy` delete the artifacts bucket with every object in it (exported checkpoints too). Default: the
    bucket and its objects are kept and only removed from the stack."""
    adopt_existing_bucket: bool = False
    """Take over the bucket an earlier `pulumi destroy` of a stack with this name kept, instead of failing to create it
    (Pulumi import; the bucket's settings must match)."""


def check_export_kept(storage: StorageConfig, lustre: LustreConfig) -> None:
    """The bucket that `lustre.exportOnDestroy` exports into is not deleted by the same destroy."""
    if lustre.export_on_destroy and storage.delete_bucket_on_destroy:
        raise KeyedValueError(
            "storage.deleteBucketOnDestroy",
            "true would delete the bucket right after lustre.exportOnDestroy exported the checkpoints into it; "
            "allowed: false, or set lustre.exportOnDestroy: false as well",
        )
