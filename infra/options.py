"""Resource options shared by the components (`child_options`)."""

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
    """Options for a child of a component: the caller's `depends_on` copied (Pulumi does not pass a component's
    on to its children, checked under mocks), and `deleted_with` too (the engine inherits it, pulumi/pulumi
    pkg/resource/deploy/source_eval.go `inheritFromParent`, but the offline plan has no engine). The provider
    is inherited from the parent."""
    inherited = _as_resources(opts.depends_on) if opts is not None else []
    if opts is not None and opts.deleted_with is not None:
        extra.setdefault("deleted_with", opts.deleted_with)
    return pulumi.ResourceOptions(parent=parent, depends_on=[*inherited, *depends_on], **extra)
