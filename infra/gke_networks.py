"""The GKE multi-network objects that let Ray worker pods use the GPU nodes' extra NICs: a pod gets a NIC only
through a `Network` + `GKENetworkParamSet` named in its `networking.gke.io/interfaces` annotation
(https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods). All derived from the
same `NicAttachment`s, so names and annotation cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options
from infra.stack_context import NicAttachment

API_VERSION = "networking.gke.io/v1"
DEFAULT_INTERFACE = "eth0"  # the pod's primary interface; NCCL/Gloo bootstrap stays on it
# A bound, in case GKE holds a finalizer while a node pool still lists the network.
DELETE_TIMEOUT = pulumi.CustomTimeouts(delete="15m")


def interfaces_annotation(nics: tuple[NicAttachment, ...]) -> str:
    entries = [{"interfaceName": DEFAULT_INTERFACE, "network": "default"}]
    entries += [{"interfaceName": nic.interface, "network": nic.network_object} for nic in nics]
    return json.dumps(entries, separators=(",", ":"))


@dataclass(frozen=True)
class GkeNetworkObjectsArgs:
    nics: tuple[NicAttachment, ...]


class GkeNetworkObjects(pulumi.ComponentResource):
    """One GKENetworkParamSet + Network pair per extra NIC. No edge to the GPU node pool: if GKE refused to delete
    a Network a pool still uses, "Networks before pools" would deadlock `pulumi destroy`."""

    def __init__(self, name: str, args: GkeNetworkObjectsArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:GkeNetworkObjects", name, None, opts)
        for nic in args.nics:
            self._objects(name, nic, opts)
        self.network_names = [nic.network_object for nic in args.nics]
        self.interfaces_annotation = interfaces_annotation(tuple(args.nics))
        self.register_outputs({"networkNames": self.network_names, "interfacesAnnotation": self.interfaces_annotation})

    def _objects(self, name: str, nic: NicAttachment, opts: Optional[pulumi.ResourceOptions]) -> None:
        params = k8s.apiextensions.CustomResource(
            f"{name}-params-{nic.network_object}",
            api_version=API_VERSION,
            kind="GKENetworkParamSet",
            metadata={"name": nic.network_object, "labels": dict(MANAGED_LABELS)},
            spec={"vpc": nic.vpc, "vpcSubnet": nic.subnet, "deviceMode": nic.device_mode},
            opts=child_options(self, opts, custom_timeouts=DELETE_TIMEOUT),
        )
        k8s.apiextensions.CustomResource(
            f"{name}-network-{nic.network_object}",
            api_version=API_VERSION,
            kind="Network",
            metadata={"name": nic.network_object, "labels": dict(MANAGED_LABELS)},
            spec={
                "type": "Device",
                "parametersRef": {
                    "group": "networking.gke.io",
                    "kind": "GKENetworkParamSet",
                    "name": nic.network_object,
                },
            },
            opts=child_options(self, opts, depends_on=[params], custom_timeouts=DELETE_TIMEOUT),
        )
