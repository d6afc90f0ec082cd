"""Resource options shared by the components.

`child_options` is what a component gives its children so that the ordering the caller asked for
(e.g. "after the node pools", "after the Ray release") holds for each child and not only for the
component as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

import pulumi


def _as_resources(depends_on: Any) -> list[pulumi.Resource]:
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    if isinstance(depends_on, Sequence) and not isinstance(depends_on, str):
        if all(isinstance(d, pulumi.Resource) for d in depends_on):
            return list(depends_on)
    raise TypeError(
        "components propagate `depends_on` to each child and need it as a resource or a list of "
        f"resources, not {type(depends_on).__name__}"
    )


def child_options(
    parent: pulumi.Resource,
    opts: Optional[pulumi.ResourceOptions],
    *,
    depends_on: Sequence[pulumi.Resource] = (),
    **extra: Any,
) -> pulumi.ResourceOptions:
    """Options for a child of a component.

    Pulumi does not copy a component's `depends_on` to its children (checked under mocks: a child of
    a component that depends on X registers no dependency on X), so a DaemonSet inside a component
    that "depends on the node pools" could still be created before them. Copying the caller's list to
    each child makes the ordering hold per object, and shows it in the plan.
    The provider is not copied: children inherit it from their parent.
    `deleted_with` is copied: the engine would inherit it from the parent too (pulumi/pulumi
    pkg/resource/deploy/source_eval.go `inheritFromParent`), but the offline plan has no engine, and
    the plan should show on every in-cluster object that destroy leaves it to the cluster.
    """
    inherited = _as_resources(opts.depends_on) if opts is not None else []
    if opts is not None and opts.deleted_with is not None:
        extra.setdefault("deleted_with", opts.deleted_with)
    return pulumi.ResourceOptions(parent=parent, depends_on=[*inherited, *depends_on], **extra)
