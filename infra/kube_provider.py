"""Access to the GKE cluster's Kubernetes API for every in-cluster object of the stack.

An exec plugin, not a token: a deploy-time token expires after an hour, failing a long `pulumi up` or a later
destroy (https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl).
`--use_application_default_credentials` (kubernetes/cloud-provider-gcp cmd/gke-gcloud-auth-plugin) makes its
tokens ADC's, the identity pulumi-gcp and `jobctl` use. Nothing secret is in the kubeconfig; the DNS endpoint's
certificate is publicly trusted, so it carries no CA.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.options import child_options
from infra.stack_context import StackContext

AUTH_PLUGIN = "gke-gcloud-auth-plugin"
AUTH_API_VERSION = "client.authentication.k8s.io/v1beta1"
AUTH_ARGS = ("--use_application_default_credentials",)
AUTH_INSTALL_HINT = (
    "Install gke-gcloud-auth-plugin to reach the GKE cluster: `gcloud components install gke-gcloud-auth-plugin` "
    "(or `apt-get install google-cloud-cli-gke-gcloud-auth-plugin`), then run `gcloud auth application-default login`."
)


def build_kubeconfig(context: str, endpoint: str, ca_certificate: Optional[str]) -> str:
    """A one-cluster kubeconfig (JSON, which the provider accepts as well as YAML)."""
    server = endpoint if endpoint.startswith("https://") else f"https://{endpoint}"
    cluster = {"server": server, **({"certificate-authority-data": ca_certificate} if ca_certificate else {})}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "preferences": {},
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": AUTH_API_VERSION,
                        "command": AUTH_PLUGIN,
                        "args": list(AUTH_ARGS),
                        "installHint": AUTH_INSTALL_HINT,
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    return json.dumps(doc, sort_keys=True)


@dataclass(frozen=True)
class KubernetesAccessArgs:
    ctx: StackContext
    cluster_name: pulumi.Input[str]
    endpoint: pulumi.Input[str]
    ca_certificate: Optional[pulumi.Input[str]]  # None for the DNS endpoint
    location: Optional[str] = None  # the control plane's location; None: the stack's zone


class KubernetesAccess(pulumi.ComponentResource):
    """The `pulumi_kubernetes.Provider` of every in-cluster object. A stable `clusterIdentifier` turns a new
    endpoint or CA into an in-place provider update instead of replacing every object. `deleteUnreachable` stays
    unset: pulumi-kubernetes refuses to delete a Helm release on an unreachable cluster anyway (pulumi/
    pulumi-kubernetes issue 2675); objects are `deleted_with` the cluster instead (__main__.py)."""

    def __init__(self, name: str, args: KubernetesAccessArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:KubernetesAccess", name, None, opts)
        project, where = args.ctx.project, args.location or args.ctx.zone
        # gcloud's own context name, as users see it in `kubectl config get-contexts`.
        context = pulumi.Output.from_input(args.cluster_name).apply(lambda n: f"gke_{project}_{where}_{n}")
        self.cluster_identifier = context
        self.kubeconfig = pulumi.Output.all(context, args.endpoint, args.ca_certificate or "").apply(
            lambda args: build_kubeconfig(args[0], args[1], args[2] or None)
        )
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster_identifier,
            opts=child_options(self, opts),
        )
        self.register_outputs({"clusterIdentifier": self.cluster_identifier})
