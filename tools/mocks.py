"""Offline stand-ins for the Pulumi engine and the cloud providers.

`PlanMocks` answers resource registrations with the inputs plus the computed outputs that
later resources read (self links, the cluster endpoint, the Lustre mount point, ...), shaped like
the real provider's outputs. `RecordingMonitor` keeps every registration request exactly as the
engine would receive it (camelCase inputs after Pulumi's translation, secrets still marked), so
the plan and the tests see what a real `pulumi up` would send.
"""

from __future__ import annotations

import base64
import copy
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Optional

from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks

SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
SIG_KEY = "4dabf18193072939515e22adb298388d"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

SECRET_PLACEHOLDER = "[secret]"
FAKE_PROJECT_NUMBER = "123456789012"
# Documentation ranges (RFC 5737) so nobody mistakes a planned address for a real one.
FAKE_ENDPOINT = "203.0.113.10"
# The DNS endpoint's form, gke-<id>.<region>.gke.goog (GKE ControlPlaneEndpointsConfig.DNSEndpointConfig).
FAKE_DNS_ENDPOINT_ID = "gke-0123456789abcdef0123456789abcdef-123456789012"
FAKE_LUSTRE_IP = "10.16.0.2"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\noffline-plan\n-----END CERTIFICATE-----\n").decode()


def plain(value: Any, *, reveal_secrets: bool = False) -> Any:
    """Turn a deserialised-from-struct value into plain JSON: secrets hidden, integral floats as ints."""
    if isinstance(value, dict):
        sig = value.get(SIG_KEY)
        if sig == SECRET_SIG:
            return plain(value.get("value"), reveal_secrets=True) if reveal_secrets else SECRET_PLACEHOLDER
        if sig == RESOURCE_SIG:
            return value.get("urn")
        return {k: plain(v, reveal_secrets=reveal_secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, reveal_secrets=reveal_secrets) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value == UNKNOWN:
        return "[unknown]"
    return value


@dataclass
class Registration:
    """One resource registration as the engine receives it."""

    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    provider: str
    inputs: dict[str, Any]
    dependencies: list[str]
    options: dict[str, Any] = field(default_factory=dict)
    raw_inputs: dict[str, Any] = field(default_factory=dict, repr=False)
    """Inputs with secret markers kept (for secret-handling tests)."""


def canonical_order(registrations: list[Registration]) -> list[Registration]:
    """Parent before children, siblings by name: RPCs arrive in whatever order the event loop runs apply
    callbacks, and a plan that users diff (and the docs made from it) needs one order."""
    urns = {r.urn for r in registrations}
    children: dict[str, list[Registration]] = {}
    for r in registrations:
        children.setdefault(r.parent if r.parent in urns else "", []).append(r)
    ordered: list[Registration] = []
    stack = sorted(children.get("", []), key=_sibling_key, reverse=True)
    while stack:
        r = stack.pop()
        ordered.append(r)
        stack.extend(sorted(children.get(r.urn, []), key=_sibling_key, reverse=True))
    return ordered


def _sibling_key(r: Registration) -> tuple[str, str]:
    return (r.name, r.type)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """A MockMonitor that records every registration request."""

    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.component_outputs: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        raw = json_format.MessageToDict(request.object)
        deps = set(request.dependencies)
        for prop_deps in request.propertyDependencies.values():
            deps.update(prop_deps.urns)
        deps.discard("")
        with self._lock:
            self.registrations.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=bool(request.custom),
                    # A provider reference is "<urn>::<id>".
                    provider=request.provider.rsplit("::", 1)[0] if request.provider else "",
                    inputs=plain(raw),
                    dependencies=sorted(deps),
                    options=_options(request),
                    raw_inputs=raw,
                )
            )
        return response

    def RegisterResourceOutputs(self, request):
        outputs = plain(json_format.MessageToDict(request.outputs)) if request.HasField("outputs") else {}
        with self._lock:
            self.component_outputs[request.urn] = outputs
        return super().RegisterResourceOutputs(request)


def _options(request: Any) -> dict[str, Any]:
    """The resource options that change behaviour, as the plan document names them; unset ones left out."""
    timeouts = request.customTimeouts
    options = {
        "protect": request.protect,
        "retainOnDelete": request.retainOnDelete,
        "deleteBeforeReplace": request.deleteBeforeReplace,
        "ignoreChanges": list(request.ignoreChanges),
        "replaceOnChanges": list(request.replaceOnChanges),
        # An alias (a URN or a spec) keeps a moved resource's state (tools/upgrade_check.py reads them).
        "aliases": [json_format.MessageToDict(a) for a in request.aliases] + list(request.aliasURNs),
        "import": request.importId,
        "replaceWith": list(request.replace_with),
        "deletedWith": request.deletedWith,
        "customTimeouts": {k: v for k in ("create", "update", "delete") if (v := getattr(timeouts, k))},
        "hooks": json_format.MessageToDict(request.hooks) if request.HasField("hooks") else {},
    }
    return {key: value for key, value in options.items() if value}


def _gcp_outputs(typ: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    """Computed outputs of the gcp resources, shaped like the provider's."""
    cname = inputs.get("name", name)
    proj = inputs.get("project", project)
    base = f"https://www.googleapis.com/compute/v1/projects/{proj}"
    kind = typ.rsplit(":", 1)[-1]
    if typ == "gcp:container/cluster:Cluster":
        return _cluster_outputs(cname, proj, inputs)
    if typ == "gcp:compute/subnetwork:Subnetwork":
        link = f"{base}/regions/{inputs.get('region')}/subnetworks/{cname}"
        return {"name": cname, "selfLink": link, "gatewayAddress": "192.0.2.1"}
    if typ.startswith("gcp:compute/") and kind in ("Network", "Firewall", "Router", "GlobalAddress"):
        extra = {"networkId": "4242"} if kind == "Network" else {}
        return {"name": cname, "selfLink": f"{base}/global/{kind.lower()}s/{cname}", **extra}
    if typ == "gcp:lustre/instance:Instance":
        return {
            "name": f"projects/{proj}/locations/{inputs.get('location')}/instances/{inputs.get('instanceId')}",
            "mountPoint": f"{FAKE_LUSTRE_IP}@tcp:/{inputs.get('filesystem')}",
            "state": "ACTIVE",
        }
    if typ == "gcp:storage/bucket:Bucket":
        return {"name": cname, "url": f"gs://{cname}", "selfLink": f"https://www.googleapis.com/storage/v1/b/{cname}"}
    if typ == "gcp:serviceaccount/account:Account":
        email = f"{inputs.get('accountId', name)}@{proj}.iam.gserviceaccount.com"
        return {"email": email, "name": f"projects/{proj}/serviceAccounts/{email}", "member": f"serviceAccount:{email}"}
    if typ == "gcp:projects/serviceIdentity:ServiceIdentity":
        agent = str(inputs.get("service", "")).split(".", 1)[0]
        email = f"service-{FAKE_PROJECT_NUMBER}@gcp-sa-{agent}.iam.gserviceaccount.com"
        return {"email": email, "member": f"serviceAccount:{email}"}
    if typ == "gcp:servicenetworking/connection:Connection":
        return {"peering": "servicenetworking-googleapis-com"}
    return {"name": cname} if typ in ("gcp:container/nodePool:NodePool", "gcp:compute/routerNat:RouterNat") else {}


def _cluster_outputs(cname: str, proj: str, inputs: dict[str, Any]) -> dict[str, Any]:
    out = {
        "name": cname,
        "endpoint": FAKE_ENDPOINT,
        "masterAuth": {"clusterCaCertificate": FAKE_CA},
        "selfLink": f"https://container.googleapis.com/v1/projects/{proj}/locations/{inputs.get('location')}/clusters/{cname}",
        "masterVersion": inputs.get("minMasterVersion", "1.34.1-gke.1000000"),
    }
    endpoints = inputs.get("controlPlaneEndpointsConfig")
    if isinstance(endpoints, dict) and isinstance(endpoints.get("dnsEndpointConfig"), dict):
        location = str(inputs.get("location", ""))
        # A zone (us-east1-b) ends in a letter, a region (us-east1) in a digit.
        region = location.rsplit("-", 1)[0] if location[-1:].isalpha() else location
        dns = {**endpoints["dnsEndpointConfig"], "endpoint": f"{FAKE_DNS_ENDPOINT_ID}.{region}.gke.goog"}
        out["controlPlaneEndpointsConfig"] = {**endpoints, "dnsEndpointConfig": dns}
    return out


class PlanMocks(pulumi_mocks.Mocks):
    """Answers registrations and invokes offline; `preview`: as in the first `pulumi preview` of a new stack,
    every output a provider computes and every id unknown, so no apply callback on them runs."""

    def __init__(self, project_id: str = "offline-project", *, preview: bool = False):
        self.project_id = project_id
        self.preview = preview

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        if self.preview and args.custom:
            # The engine's preview of a create returns the inputs and leaves the rest unknown (for a
            # dynamic provider, which declares no preview support, the inputs only: pulumi/pulumi
            # sdk/go/common/resource/plugin/provider_plugin.go Create, `if req.Preview`). Which keys
            # the rest are: those the real answer adds or fills in (an input block with a computed
            # field inside, like the cluster's DNS endpoint, is unknown as a whole, as the bridge plans
            # it), found on a copy with the unknowns filled in.
            inputs = dict(args.inputs)
            filled = copy.copy(args)
            filled.inputs = json.loads(json.dumps(inputs, default=lambda _: "unknown"))  # a preview's unknowns
            _, answer = self._answer(filled)
            computed = {k for k, v in answer.items() if k not in inputs or v != filled.inputs[k]}
            return "", {**inputs, **{k: UNKNOWN for k in computed}}
        return self._answer(args)

    def _answer(self, args: pulumi_mocks.MockResourceArgs) -> tuple[Optional[str], dict]:
        inputs = dict(args.inputs)
        state = dict(inputs)
        if args.typ.startswith("gcp:"):
            state |= _gcp_outputs(args.typ, args.name, inputs, self.project_id)
        elif args.typ == "kubernetes:helm.sh/v3:Release":
            state["status"] = {
                "name": inputs.get("name", args.name),
                "namespace": inputs.get("namespace", "default"),
                "status": "deployed",
                "revision": 1,
                "chart": inputs.get("chart"),
                "version": inputs.get("version"),
            }
        elif args.typ.startswith("kubernetes:") and isinstance(inputs.get("metadata"), dict):
            meta = dict(inputs.get("metadata") or {})
            meta.setdefault("name", args.name)
            state["metadata"] = meta
        resource_id = state.get("name") if isinstance(state.get("name"), str) else f"{args.name}-id"
        return resource_id, state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        if args.token == "gcp:organizations/getProject:getProject":
            project = args.args.get("projectId") or self.project_id
            found = {"projectId": project, "number": FAKE_PROJECT_NUMBER, "name": project, "id": f"projects/{project}"}
            return found, []  # an empty failure list, not None: pulumi's MockMonitor.Invoke iterates it
        return {}, []
