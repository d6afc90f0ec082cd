"""Which node pool edits replace the pool, and whether an edit does: for the offline plan.

A pool is replaced (`deleteBeforeReplace`, infra/cluster.py), with the running job's GPUs, when a
ForceNew input changes. `FORCE_NEW` lists them in the program's camelCase, read from
hashicorp/terraform-provider-google-beta google-beta/services/container/resource_container_node_pool.go
and node_config.go (`schemaNodeConfig`) at 3dc173a3 (v7.45.0, the submodule of pulumi/pulumi-gcp's
main). Terraform's SDK (hashicorp/terraform-plugin-sdk helper/schema/schema.go `diffList` at 9e601691)
forces replacement on a block only when it appears or goes, on a nested field only if that field is
ForceNew: hence SUBTREE (any change replaces) and PRESENCE (only adding or removing the block, e.g.
`placementPolicy`). Unlisted inputs update in place. `python -m infra.plan --compare BEFORE.json` says
which pool an edit replaces and why.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Optional

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"

SUBTREE, PRESENCE = "subtree", "presence"


def _paths(prefix: str, names: str) -> dict[str, str]:
    return dict.fromkeys((prefix + name for name in names.split()), SUBTREE)


FORCE_NEW: dict[str, str] = {
    # resource_container_node_pool.go
    **_paths("", "name namePrefix project cluster location initialNodeCount maxPodsPerNode"),
    "placementPolicy": PRESENCE,
    **_paths("", "placementPolicy.policyName queuedProvisioning"),
    **_paths(
        "networkConfig.",
        "additionalNodeNetworkConfigs additionalPodNetworkConfigs acceleratorNetworkProfile createPodRange podRange "
        "podIpv4CidrBlock subnetwork",
    ),
    # node_config.go schemaNodeConfig (the `nodeConfig` block itself: presence)
    "nodeConfig": PRESENCE,
    **_paths(
        "nodeConfig.",
        "guestAccelerators localSsdCount ephemeralStorageConfig ephemeralStorageLocalSsdConfig "
        "localNvmeSsdBlockConfig secondaryBootDisks metadata minCpuPlatform oauthScopes preemptible spot flexStart "
        "maxRunDuration reservationAffinity serviceAccount shieldedInstanceConfig sandboxConfig bootDiskKmsKey "
        "nodeGroup advancedMachineFeatures soleTenantConfig hostMaintenancePolicy "
        "confidentialNodes.confidentialInstanceType enableConfidentialStorage localSsdEncryptionMode",
    ),
}

CONFIG_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("namePrefix",),
    "project": ("project",),
    "cluster": ("namePrefix",),
    "location": ("region", "zone", "cluster.controlPlaneLocation"),
    # A rung pool's capacity type is its rung of `gpuPool.capacity` (a one-rung ladder is the single pool,
    # whose rung a capacity edit changes in place of the pool). In a longer ladder a rung's kind or
    # reservation names its pool (infra.placement.rung_pool_role): editing it creates a new pool and deletes
    # the old one, which `--compare` shows as such.
    "initialNodeCount": ("gpuPool.capacity", "gpuPool.provisioning"),
    "placementPolicy": ("gpuPool.compactPlacement",),
    "queuedProvisioning": ("gpuPool.capacity", "gpuPool.provisioning"),
    "networkConfig.additionalNodeNetworkConfigs": ("flavour", "namePrefix", "network"),
    "nodeConfig.guestAccelerators": ("flavour", "gpuPool.gpuDriverVersion"),
    "nodeConfig.ephemeralStorageLocalSsdConfig": ("flavour",),
    "nodeConfig.spot": ("gpuPool.capacity", "gpuPool.provisioning"),
    "nodeConfig.flexStart": ("gpuPool.capacity", "gpuPool.provisioning"),
    "nodeConfig.reservationAffinity": ("gpuPool.capacity", "gpuPool.provisioning", "gpuPool.reservationName"),
    "nodeConfig.serviceAccount": ("namePrefix",),
}
"""The stack config keys that set each ForceNew input this program sets (the others it sets, scopes
and Shielded VM settings, are fixed by the program)."""

GPU_POOL_TOGGLES = (
    "nodeConfig.spot",
    "nodeConfig.flexStart",
    "nodeConfig.reservationAffinity",
    "placementPolicy",
    "queuedProvisioning",
    "initialNodeCount",
)
"""ForceNew inputs the program adds to or leaves off the GPU pool by config: changing the key replaces
the pool whether or not this plan sets the input."""


def _get(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _unset(value: Any) -> bool:
    # Optional(+Computed) inputs: absent and the zero value read alike (Terraform's zero values).
    return value is None or value is False or (value is not True and value in (0, "", [], {}))


def replacing_changes(
    old: dict[str, Any], new: dict[str, Any], force_new: Optional[dict[str, str]] = None
) -> list[str]:
    """The ForceNew inputs that differ between two sets of inputs, as `path: old -> new`: a node pool's
    (`FORCE_NEW`), or another type's table of the same form (tools/upgrade_check.py)."""
    found = []
    for path, kind in (FORCE_NEW if force_new is None else force_new).items():
        a, b = _get(old, path), _get(new, path)
        if kind == PRESENCE:
            if _unset(a) != _unset(b):
                found.append(f"{path}: {'set' if not _unset(a) else 'unset'} -> {'set' if not _unset(b) else 'unset'}")
        elif not (_unset(a) and _unset(b)) and a != b:
            found.append(f"{path}: {_short(a)} -> {_short(b)}")
    return found


def _short(value: Any) -> str:
    text = "unset" if _unset(value) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 70 else text[:67] + "..."


def _pools(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in resources if r.get("type") == NODE_POOL_TYPE}


def compare(before: dict[str, Any], after: dict[str, Any]) -> Iterator[str]:
    """One line per node pool of two `--json` plan documents: replaced (and by which inputs), updated
    in place, created, removed or unchanged."""
    old, new = _pools(before.get("resources") or []), _pools(after.get("resources") or [])
    for name in sorted(set(old) | set(new)):
        if name not in old:
            yield f"node pool {name}: created"
            continue
        if name not in new:
            yield f"node pool {name}: deleted (its nodes go)"
            continue
        changes = replacing_changes(old[name].get("inputs") or {}, new[name].get("inputs") or {})
        if changes:
            yield f"node pool {name}: REPLACED, deleted first: every node of the pool is lost ({'; '.join(changes)})"
        elif (old[name].get("inputs") or {}) != (new[name].get("inputs") or {}):
            yield f"node pool {name}: updated in place"
        else:
            yield f"node pool {name}: unchanged"


def config_keys(inputs: dict[str, Any]) -> list[str]:
    """The config keys whose change replaces a pool with these inputs: those of the ForceNew inputs it sets."""
    paths = {path for path in FORCE_NEW if not _unset(_get(inputs, path)) and path != "nodeConfig"}
    if _get(inputs, "nodeConfig.guestAccelerators"):
        paths |= set(GPU_POOL_TOGGLES)
    return sorted({key for path in paths for key in CONFIG_KEYS.get(path, ())})


def summary_lines(plan_resources: list[Any]) -> list[str]:
    """For the text plan: per pool, the config keys whose change replaces it."""
    lines = [f"  {r.name}: {', '.join(config_keys(r.inputs))}" for r in plan_resources if r.type == NODE_POOL_TYPE]
    if not lines:
        return []
    return [
        "Node pools are REPLACED, deleted first (their nodes lost, a running job stopped and resubmitted),",
        "when one of these config keys changes (ForceNew inputs; `--compare BEFORE.json` names what an edit replaces):",
        *lines,
    ]
