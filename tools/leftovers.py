"""After `pulumi destroy`: what of the stack is still in the project, and the command that removes each.

    python -m tools.doctor --leftovers --stack NAME [--json]   # docs/doctor.md

Cloud Asset Inventory (`searchAllResources`) is asked for the stack's labels (infra/naming.py), GKE's
`goog-k8s-cluster-name` and the stack's names; the match is exact here: what another stack's prefix or label
explains is not this stack's. Only on the real cloud: which types the search indexes, and its lag after a deletion.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Optional

from infra.config import PROJECT, StackConfig
from infra.naming import Limit
from infra.naming import labels as stack_labels
from infra.network import DEFAULT_NETWORK, SERVICE_NETWORKING
from infra.stack_context import StackContext
from infra.storage import artifact_bucket_name

PEERING = "servicenetworking.googleapis.com/Peering"  # not an Asset Inventory type: the peering on the VPC

# What removes each type, in the order to run them (what holds others first). Only types the search supports
# (https://cloud.google.com/asset-inventory/docs/asset-types: Global*/Region* types come back as the plain type,
# and an unsupported one fails the request, google-cloud-asset 4.5.0), so `{scope}` is --global, --region or
# --zone from the location; `removal_command` adds `--project` before the `  # ` note (not to the bucket).
COMMANDS: dict[str, str] = {
    "lustre.googleapis.com/Instance": "gcloud lustre instances delete {name} --location {location}",
    "container.googleapis.com/Cluster": "gcloud container clusters delete {name} --location {location}",
    "container.googleapis.com/NodePool": "gcloud container node-pools delete {name} --cluster {cluster} --location "
    "{location}",
    "compute.googleapis.com/Instance": "gcloud compute instances delete {name} --zone {location}",
    "compute.googleapis.com/InstanceGroupManager": "gcloud compute instance-groups managed delete {name} {scope}",
    "compute.googleapis.com/ForwardingRule": "gcloud compute forwarding-rules delete {name} {scope}",
    "compute.googleapis.com/TargetPool": "gcloud compute target-pools delete {name} --region {location}",
    "compute.googleapis.com/BackendService": "gcloud compute backend-services delete {name} {scope}",
    "compute.googleapis.com/HealthCheck": "gcloud compute health-checks delete {name} {scope}",
    "compute.googleapis.com/NetworkEndpointGroup": "gcloud compute network-endpoint-groups delete {name} {scope}",
    "compute.googleapis.com/InstanceTemplate": "gcloud compute instance-templates delete {name} {scope}",
    "compute.googleapis.com/Disk": "gcloud compute disks delete {name} {scope}",
    "storage.googleapis.com/Bucket": "gcloud storage rm --recursive gs://{name}  # deletes its objects too: copy "
    "what you keep first",
    PEERING: f"gcloud services vpc-peerings delete --service={SERVICE_NETWORKING} --network={{name}}  # or: gcloud "
    "compute networks peerings delete servicenetworking-googleapis-com --network={name}",
    "compute.googleapis.com/Address": "gcloud compute addresses delete {name} {scope}",
    "compute.googleapis.com/Router": "gcloud compute routers delete {name} --region {location}  # its NAT with it",
    "compute.googleapis.com/Route": "gcloud compute routes delete {name}",
    "compute.googleapis.com/Firewall": "gcloud compute firewall-rules delete {name}",
    "compute.googleapis.com/Subnetwork": "gcloud compute networks subnets delete {name} --region {location}",
    "compute.googleapis.com/Network": "gcloud compute networks delete {name}",
    "iam.googleapis.com/ServiceAccount": "gcloud iam service-accounts delete {name}",
}

BY_NAME: tuple[str, ...] = tuple(t for t in COMMANDS if t != PEERING)  # the types the name search lists

_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")


@dataclass(frozen=True)
class Leftover:
    asset_type: str
    name: str
    location: str
    why: str  # what made it the stack's: its labels, the cluster's labels, or its name
    command: str


@dataclass(frozen=True)
class Marks:
    """What makes a resource the stack's."""

    project: str
    stack_label: str
    prefix: str
    cluster: str
    vpc: str  # whose Service Networking peering is the stack's
    exact: frozenset[str]
    others: tuple[str, ...]  # prefixes of other stacks that start with this one's (`dev-2` beside `dev`)

    @classmethod
    def of(cls, stack: str, cfg: StackConfig, other_stacks: Iterable[str] = ()) -> "Marks":
        ctx = StackContext.from_config(stack, cfg)
        cluster = ctx.name("gke", Limit.GKE_CLUSTER)  # as infra/cluster.py names it
        vpc = DEFAULT_NETWORK if cfg.network.use_default_network else ctx.name("vpc", Limit.COMPUTE)  # infra/network.py
        exact = {artifact_bucket_name(cfg.project, ctx.prefix), cfg.lustre_instance_id, cluster}
        others = tuple(sorted(o for o in other_stacks if o != ctx.prefix and o.startswith(f"{ctx.prefix}-")))
        return cls(cfg.project, stack_labels(stack, "")["stack"], ctx.prefix, cluster, vpc, frozenset(exact), others)

    def why(self, result: Any) -> Optional[str]:
        labels = dict(result.labels)
        if labels.get("app") == PROJECT and "stack" in labels:
            return "labels" if labels["stack"] == self.stack_label else None
        if labels.get("goog-k8s-cluster-name") == self.cluster:
            return f"created by cluster {self.cluster}"
        short = _short_name(result)
        if short in self.exact:
            return "name"
        if short.startswith(f"gke-{self.cluster}-"):
            return f"GKE's name for cluster {self.cluster}"
        if short.startswith(f"{self.prefix}-") and not any(short.startswith(f"{o}-") for o in self.others):
            return "name"
        return None


def _short_name(result: Any) -> str:
    return result.name.rstrip("/").rsplit("/", 1)[-1]


def _scope(location: str) -> str:
    if not location or location == "global":
        return "--global"
    return f"--zone {location}" if _ZONE.match(location) else f"--region {location}"


def removal_command(asset_type: str, name: str, location: str, project: str, cluster: str = "") -> str:
    template = COMMANDS.get(asset_type)
    if template is None:
        return f"no removal command known for {asset_type}: delete {name} in the console (project {project})"
    command, note, why = template.partition("  # ")
    if asset_type != "storage.googleapis.com/Bucket":
        command += " --project {project}"
    values = {"name": name, "location": location, "project": project, "cluster": cluster, "scope": _scope(location)}
    return (command + note + why).format(**values)


def _leftover(result: Any, why: str, project: str) -> Leftover:
    parts, name = result.name.split("/"), _short_name(result)
    cluster = parts[parts.index("clusters") + 1] if "clusters" in parts else ""  # a node pool's
    command = removal_command(result.asset_type, name, result.location, project, cluster)
    return Leftover(result.asset_type, name, result.location, why, command)


def search(assets: Any, project: str, timeout: float) -> Iterable[Any]:
    """Everything the stack could own: the labelled resources of any type, then the name-bearing types whole."""
    scope = f"projects/{project}"
    yield from assets.search_all_resources(scope=scope, query=f"labels.app:{PROJECT}", asset_types=[], timeout=timeout)
    yield from assets.search_all_resources(scope=scope, query="", asset_types=list(BY_NAME), timeout=timeout)


def peering_leftover(networks: Any, cfg: StackConfig, marks: Marks, timeout: float) -> Optional[Leftover]:
    """The Service Networking peering on the stack's VPC (on the default VPC maybe another service's, see `psa`)."""
    from google.api_core import exceptions as gexc

    vpc = marks.vpc
    try:
        network = networks.get(project=marks.project, network=vpc, timeout=timeout)
    except gexc.NotFound:
        return None
    peering = SERVICE_NETWORKING.replace(".", "-")
    if not any(p.name == peering for p in network.peerings):
        return None
    on_default = "on the default VPC (the stack's if none was there before it)"
    why = on_default if cfg.network.use_default_network else "on the stack's VPC"
    return Leftover(PEERING, vpc, "global", why, removal_command(PEERING, vpc, "global", marks.project))


def audit(
    stack: str, cfg: StackConfig, assets: Any, networks: Any, timeout: float, other_stacks: Iterable[str] = ()
) -> list[Leftover]:
    """The stack's resources still in the project, in the order to remove them."""
    marks = Marks.of(stack, cfg, other_stacks)
    found: dict[str, Leftover] = {}
    for result in search(assets, cfg.project, timeout):
        why = marks.why(result)
        if why and result.name not in found:
            found[result.name] = _leftover(result, why, cfg.project)
    peering = peering_leftover(networks, cfg, marks, timeout)
    if peering:
        found[f"{peering.name}/peering"] = peering
    order = {t: i for i, t in enumerate(COMMANDS)}
    return sorted(found.values(), key=lambda left: (order.get(left.asset_type, len(order)), left.name))


def render_text(stack: str, cfg: StackConfig, leftovers: list[Leftover]) -> str:
    if not leftovers:
        return f"leftovers: stack {stack}, project {cfg.project}: nothing of the stack is left"
    lines = [
        f"leftovers: stack {stack}, project {cfg.project}: {len(leftovers)} resource(s) remain, in the order to "
        "remove them"
    ]
    for left in leftovers:
        where = f" ({left.location})" if left.location and left.location != "global" else ""
        lines.append(f"  {left.asset_type} {left.name}{where}: by {left.why}")
        lines.append(f"    {left.command}")
    lines.append("Asset Inventory can lag a deletion by minutes: run the audit again before removing anything by hand.")
    return "\n".join(lines)


def render_json(stack: str, cfg: StackConfig, leftovers: list[Leftover]) -> str:
    found = [asdict(left) for left in leftovers]
    return json.dumps({"stack": stack, "project": cfg.project, "clean": not leftovers, "leftovers": found}, indent=2)
