"""KubernetesAccess: the provider's kubeconfig, its identity, and the ordering helpers of the Kubernetes half.

The helpers the Kubernetes-half test modules share (`record`, `k8s_doc`, `schema_problems`, ...) live
in k8s_support.py.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from conftest import ALL_STACKS, AUTOPILOT_STACKS, stack_plan
from k8s_support import CTX, Recorded, record

from infra.kube_provider import AUTH_API_VERSION, AUTH_PLUGIN, KubernetesAccess, KubernetesAccessArgs
from infra.options import child_options
from tools.mocks import Registration

ENDPOINT = "203.0.113.10"
CA = "Q0EtQ0VSVA=="


def access(**kwargs: Any) -> Recorded:
    opts = kwargs.pop("opts", None)
    args = {"cluster_name": "t-gke", "endpoint": ENDPOINT, "ca_certificate": CA, **kwargs}
    return record(lambda: KubernetesAccess("kube", KubernetesAccessArgs(CTX, **args), opts))


def kubeconfig_of(rec: Recorded) -> dict[str, Any]:
    return json.loads(rec.one("pulumi:providers:kubernetes").inputs["kubeconfig"])


# ---------------------------------------------------------------- the provider


def test_the_kubeconfig_authenticates_through_the_gke_auth_plugin_and_holds_no_credential():
    config = kubeconfig_of(access())
    (user,) = config["users"]
    assert set(user["user"]) == {"exec"}, f"kubeconfig user has more than an exec plugin: {sorted(user['user'])}"
    plugin = user["user"]["exec"]
    assert plugin["command"] == AUTH_PLUGIN == "gke-gcloud-auth-plugin"
    assert plugin["apiVersion"] == AUTH_API_VERSION == "client.authentication.k8s.io/v1beta1"
    assert plugin["provideClusterInfo"] is True
    # The identity pulumi-gcp, the dynamic providers and the CLI use (ADC), not gcloud's own account.
    assert plugin["args"] == ["--use_application_default_credentials"], plugin
    assert "gcloud auth application-default login" in plugin["installHint"]
    assert "gke-gcloud-auth-plugin" in plugin["installHint"]
    text = json.dumps(config)
    for credential in ("token", "password", "client-key-data", "client-certificate-data", "auth-provider"):
        assert f'"{credential}"' not in text, f"kubeconfig carries a {credential}"


def test_the_kubeconfig_points_at_the_cluster_endpoint_over_https_with_the_cluster_ca():
    config = kubeconfig_of(access())
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": f"https://{ENDPOINT}", "certificate-authority-data": CA}
    (context,) = config["contexts"]
    assert config["current-context"] == context["name"] == cluster["name"]
    assert context["context"] == {"cluster": cluster["name"], "user": config["users"][0]["name"]}


def test_a_dns_endpoint_kubeconfig_carries_no_ca_so_the_system_roots_verify_it():
    host = "gke-0123456789abcdef-123456789012.us-east1.gke.goog"
    (cluster,) = kubeconfig_of(access(endpoint=host, ca_certificate=None))["clusters"]
    assert cluster["cluster"] == {"server": f"https://{host}"}


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_stack_provider_talks_to_the_cluster_dns_endpoint_without_the_cluster_ca(stack):
    plan = stack_plan(stack)
    (provider,) = plan.by_type("pulumi:providers:kubernetes")
    (cluster,) = json.loads(provider.inputs["kubeconfig"])["clusters"]
    assert cluster["cluster"] == {"server": f"https://{plan.outputs['clusterEndpoint']}"}, provider.name
    assert plan.outputs["clusterEndpoint"].endswith(".gke.goog"), provider.name


def test_an_endpoint_given_as_a_url_is_not_prefixed_twice():
    config = kubeconfig_of(access(endpoint="https://198.51.100.7"))
    assert config["clusters"][0]["cluster"]["server"] == "https://198.51.100.7"


def test_the_cluster_identifier_is_project_location_and_cluster_name_and_ignores_endpoint_and_ca():
    first = access().one("pulumi:providers:kubernetes").inputs
    moved = access(endpoint="198.51.100.99", ca_certificate="T1RIRVI=").one("pulumi:providers:kubernetes").inputs
    assert first["clusterIdentifier"] == "gke_test-project_us-east1-b_t-gke"
    assert moved["clusterIdentifier"] == first["clusterIdentifier"], "identifier must not follow endpoint/CA changes"
    assert moved["kubeconfig"] != first["kubeconfig"]


def test_an_explicit_location_names_the_identifier():
    inputs = access(location="europe-west1-b").one("pulumi:providers:kubernetes").inputs
    assert inputs["clusterIdentifier"] == "gke_test-project_europe-west1-b_t-gke"


def test_delete_unreachable_is_left_unset_so_the_environment_variable_can_still_enable_it(monkeypatch):
    monkeypatch.delenv("PULUMI_K8S_DELETE_UNREACHABLE", raising=False)
    inputs = access().one("pulumi:providers:kubernetes").inputs
    assert "deleteUnreachable" not in inputs, inputs


def test_the_component_publishes_its_identifier_and_is_a_component_of_the_project_type():
    rec = access()
    assert rec.outputs_of("nemo-rl-gke:infra:KubernetesAccess") == {
        "clusterIdentifier": "gke_test-project_us-east1-b_t-gke"
    }
    provider = rec.one("pulumi:providers:kubernetes")
    assert provider.name == "kube-provider"
    assert provider.parent == rec.one("nemo-rl-gke:infra:KubernetesAccess").urn


# ---------------------------------------------------------------- child_options


def test_child_options_copies_the_callers_depends_on_to_every_child():
    import pulumi_kubernetes as k8s

    def build():
        first = k8s.core.v1.Namespace("first", metadata={"name": "first"})

        class Parent(pulumi.ComponentResource):
            def __init__(self, opts):
                super().__init__("test:x:Parent", "parent", None, opts)
                k8s.core.v1.ServiceAccount("parent-child", metadata={"name": "c"}, opts=child_options(self, opts))
                self.register_outputs({"ok": True})

        Parent(pulumi.ResourceOptions(depends_on=[first]))

    rec = record(build)
    child = rec.one("kubernetes:core/v1:ServiceAccount")
    first = rec.one("kubernetes:core/v1:Namespace")
    assert first.urn in child.dependencies, f"{child.name} lost the parent's depends_on: {child.dependencies}"


def test_child_options_refuses_a_depends_on_it_cannot_copy():
    opts = pulumi.ResourceOptions()
    # Set after construction: ResourceOptions itself refuses a non-resource at construction, but an
    # Output of resources (which it accepts) cannot be copied child by child either.
    opts.depends_on = "not-a-resource"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="depends_on"):
        child_options(None, opts)  # type: ignore[arg-type]


# ---------------------------------------------------------------- whole program


def kubernetes_objects(plan) -> list[Registration]:
    return [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]


def test_every_kubernetes_object_of_the_stack_goes_through_the_gke_provider():
    plan = stack_plan("h200")
    (provider,) = plan.by_type("pulumi:providers:kubernetes")
    objects = kubernetes_objects(plan)
    assert len(objects) >= 20
    stray = [r.name for r in objects if r.provider != provider.urn]
    assert not stray, f"Kubernetes objects on another provider (e.g. a default kubeconfig): {stray}"


def test_the_provider_waits_for_the_cluster_and_is_named_after_it():
    plan = stack_plan("h200")
    (provider,) = plan.by_type("pulumi:providers:kubernetes")
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    assert cluster.urn in provider.dependencies, f"{provider.name} does not wait for {cluster.name}"
    assert provider.inputs["clusterIdentifier"] == (
        f"gke_{cluster.inputs['project']}_{cluster.inputs['location']}_{cluster.inputs['name']}"
    )


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_built_in_kubernetes_object_of_every_stack_passes_the_kubernetes_schema(stack):
    from k8s_support import k8s_doc, schema_problems

    plan = stack_plan(stack)
    # The GKE network kinds have no published schema (test_gke_networks checks their fields) and the
    # Helm release's RayCluster is rendered and checked against the KubeRay CRD in test_ray_cluster.
    built_in = [
        r
        for r in kubernetes_objects(plan)
        if r.type.split(":")[1].split("/")[0] in ("core", "apps", "batch", "rbac.authorization.k8s.io")
    ]
    # The watcher's grants (infra/watcher_deployment.py `gang_rules`) are on every stack: the Role on its pods and
    # RayCluster (goodput marks, the release after the run), the ClusterRole to read their nodes.
    gang_rbac = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    assert {r.type.rsplit(":", 1)[1] for r in built_in} == {
        "Namespace",
        "ServiceAccount",
        "Secret",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "ConfigMap",
        "DaemonSet",
        "Deployment",
        *gang_rbac,
        # Standard stacks: the weights' staging (infra/weight_staging.py), the just-in-time GPU placeholders and their
        # timer (gpuPool.justInTime, on by default).
        *(() if stack in AUTOPILOT_STACKS else ("Job",)),
    }, [r.type for r in built_in]
    problems = [p for r in built_in for p in schema_problems(k8s_doc(r), f"{r.name} ({r.type})")]
    assert problems == []


# ---------------------------------------------------------------- destroy with the cluster already gone


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_in_cluster_object_is_deleted_with_the_cluster_so_destroy_never_needs_its_api(stack):
    # pulumi-kubernetes refuses to delete a Helm release on an unreachable cluster whatever
    # deleteUnreachable says (provider.go Delete); the engine skips the delete of a resource whose
    # deletedWith target goes in the same run (pulumi/pulumi pkg/resource/deploy/step.go isDeletedWith).
    plan = stack_plan(stack)
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    in_cluster = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    assert any(r.type == "kubernetes:helm.sh/v3:Release" for r in in_cluster)
    for r in in_cluster:
        assert r.options.get("deletedWith") == cluster.urn, f"{r.name} ({r.type}): its delete would need the cluster"


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_job_submission_alone_is_really_deleted_so_the_job_stops_before_the_lustre_export(stack):
    plan = stack_plan(stack)
    (job,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    (guard,) = [r for r in plan.resources if r.type.endswith("LustreGuard")]
    release = plan.one("kubernetes:helm.sh/v3:Release")
    assert "deletedWith" not in job.options, job.name
    # Delete order is the reverse of the dependencies: job, then the release, then the export.
    assert release.urn in job.dependencies and guard.urn in release.dependencies
