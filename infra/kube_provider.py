"""Access to the GKE cluster's Kubernetes API for every in-cluster object of the stack.

Why a kubeconfig with an exec plugin and no token: a token taken at deploy time (e.g. from
`gcp.organizations.get_client_config`) expires after about an hour, and a long `pulumi up` (node
pools, image pulls) or any later `pulumi destroy` would then fail half way. `gke-gcloud-auth-plugin`
mints a fresh token on every connection
(https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl).

One identity: with no arguments the plugin mints tokens for gcloud's own account (`gcloud auth
login`, through `gcloud config config-helper`), which need not be the identity pulumi-gcp, the
dynamic providers and `python -m jobctl` use: Application Default Credentials. The plugin's
`--use_application_default_credentials` flag (kubernetes/cloud-provider-gcp
cmd/gke-gcloud-auth-plugin; gcloud writes the same argument when `container/use_application_default_credentials`
is set) makes it mint them from ADC too, so one `gcloud auth application-default login` is all a
deploy needs. Only on the real cloud: gcloud refuses to
*write* that flag together with `--dns-endpoint` in its own kubeconfigs (googlecloudsdk
api_lib/container/kubeconfig.py); the plugin itself does not know which endpoint it serves, and the
DNS endpoint takes any Google OAuth token of an identity with `container.clusters.connect`. Nothing secret is in the
kubeconfig: it holds only the endpoint and, for the IP endpoint,
the cluster CA. The DNS endpoint (`cluster.controlPlaneAccess: dns`) serves a publicly trusted
certificate, so its kubeconfig carries no CA and clients verify against the system roots, as the
kubeconfig `gcloud container clusters get-credentials --dns-endpoint` writes does.

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
"""Tokens from Application Default Credentials, the identity every other part of a deploy uses."""
AUTH_INSTALL_HINT = (
    "Install gke-gcloud-auth-plugin to reach the GKE cluster: `gcloud components install gke-gcloud-auth-plugin` "
    "(or `apt-get install google-cloud-cli-gke-gcloud-auth-plugin`), then run `gcloud auth application-default login`."
)


def context_name(project: str, location: str, cluster_name: str) -> str:
    """The kubeconfig context name gcloud itself would write (`gke_<project>_<location>_<cluster>`).

    Using gcloud's convention means the identifier matches what users see in `kubectl config get-contexts`.
    """
    return f"gke_{project}_{location}_{cluster_name}"


def build_kubeconfig(context: str, endpoint: str, ca_certificate: Optional[str]) -> str:
    """A one-cluster kubeconfig (JSON, which the provider accepts as well as YAML).

    `provideClusterInfo` hands the plugin the cluster's endpoint and CA, which it uses to pick the
    right credentials; `installHint` is what kubectl/Pulumi print when the plugin is missing.
    """
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
    """What `KubernetesAccess` needs: the cluster's name, endpoint and CA, and where it is."""

    ctx: StackContext
    cluster_name: pulumi.Input[str]
    endpoint: pulumi.Input[str]
    ca_certificate: Optional[pulumi.Input[str]]
    """None for an endpoint with a publicly trusted certificate (the DNS endpoint)."""
    location: Optional[str] = None
    """The control plane's location (a cluster's `location`); None: the stack's zone."""


class KubernetesAccess(pulumi.ComponentResource):
    """The `pulumi_kubernetes.Provider` every in-cluster object of the stack is created with.

    - `clusterIdentifier`: without it the provider is replaced whenever its kubeconfig changes (a new
      endpoint IP after a control-plane migration, a rotated CA), and a provider replacement replaces
      every Kubernetes object created with it. With a stable identifier (`gke_<project>_<location>_<name>`)
      such changes become in-place provider updates. The flip side, only observable on a real cloud:
      if the cluster itself is deleted and recreated under the same name, Pulumi will not know the
      in-cluster objects are gone; `pulumi refresh` after such a recreation brings the state back.
    - `deleteUnreachable` is deliberately left unset (not False), and it is NOT what lets a destroy
      finish after the cluster was deleted out of band: pulumi-kubernetes refuses to delete a Helm
      release on an unreachable cluster whatever it says (provider/pkg/provider/provider.go Delete:
      "can't delete Helm Release with unreachable cluster", before the deleteUnreachable branch;
      pulumi/pulumi-kubernetes issue 2675, open). What does: every in-cluster object is `deleted_with`
      the cluster (__main__.py), so the engine skips their deletes when the cluster goes in the same
      run, reachable or not. A blanket True here would also silently drop objects from the state
      after any transient outage (e.g. an authorized-networks change) during a `pulumi up` that
      removes one of them.
    - Server-side apply stays on (the 4.x default) so fields set by controllers (KubeRay, GKE webhooks)
      are not fought over.
    """

    provider: k8s.Provider
    cluster_identifier: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]

    def __init__(self, name: str, args: KubernetesAccessArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:KubernetesAccess", name, None, opts)
        project, where = args.ctx.project, args.location or args.ctx.zone
        context = pulumi.Output.from_input(args.cluster_name).apply(lambda n: context_name(project, where, n))
        self.cluster_identifier = context
        self.kubeconfig = pulumi.Output.all(context, args.endpoint, args.ca_certificate or "").apply(
            lambda args: build_kubeconfig(args[0], args[1], args[2] or None)
        )
        # The endpoint and CA are outputs of the cluster, so the provider already waits for it; the
        # caller's depends_on (if any) is kept on the component and copied here.
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            cluster_identifier=self.cluster_identifier,
            opts=child_options(self, opts),
        )
        self.register_outputs({"clusterIdentifier": self.cluster_identifier})
