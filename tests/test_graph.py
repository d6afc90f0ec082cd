"""The resource graph: collapsed siblings, components as subgraphs, faithful edges, files.

docs/resources.md embeds the dev graph; tests/test_reference_docs.py checks it is current.
"""

from collections import defaultdict

from conftest import stack_plan

from tools import deploy_time, graph


def dev_graph() -> graph.Graph:
    return graph.build(stack_plan("dev"))


def reachable(edges, start):
    succ = defaultdict(set)
    for a, b, _ in edges:
        succ[a].add(b)
    seen, stack = set(), [start]
    while stack:
        for n in succ[stack.pop()]:
            if n not in seen:
                seen.add(n)
                stack.append(n)
    return seen


def test_the_eight_rdma_subnets_and_the_nine_gke_network_objects_collapse_into_one_node_each():
    labels = {n.label for n in dev_graph().nodes.values()}
    assert {"network-rdma-subnet ×8", "gke-networks-params ×9", "gke-networks-network ×9"} <= labels
    # Distinct resources of one type stay distinct.
    assert {"network-vpc", "network-gvnic-vpc", "network-rdma-vpc", "network-subnet", "network-gvnic-subnet"} <= labels


def test_every_custom_resource_is_in_exactly_one_node():
    g = dev_graph()
    covered = [u for n in g.nodes.values() for u in n.urns]
    assert sorted(covered) == sorted(r.urn for r in stack_plan("dev").resources if r.custom)


def test_every_wait_of_the_plan_survives_as_a_path_in_the_graph():
    plan, g = stack_plan("dev"), dev_graph()
    node_of = {u: n.id for n in g.nodes.values() for u in n.urns}
    for urn, deps in deploy_time.waits(plan).items():
        for dep in deps:
            a, b = node_of[dep], node_of[urn]
            assert a == b or b in reachable(g.edges, a), (dep, urn)


def test_implied_edges_are_left_out():
    g = dev_graph()
    edges = {(a, b) for a, b, _ in g.edges}
    # ray-release waits for the GPU pool, but through the NCCL installer: no direct arrow.
    assert ("n_gke_gpu_pool", "n_nccl_daemonset") in edges and ("n_nccl_daemonset", "n_ray_release") in edges
    assert ("n_gke_gpu_pool", "n_ray_release") not in edges


def test_components_are_mermaid_subgraphs():
    g = dev_graph()
    text = graph.mermaid(g)
    assert text.startswith("flowchart LR\n")
    assert 'subgraph c_network["network · Networking"]' in text
    assert 'n_network_rdma["network-rdma-subnet ×8<br/>Subnetwork"]' in text
    assert 'n_lustre_instance[("lustre-instance<br/>Instance")]' in text
    assert "n_kube_provider -.-> n_gke_networks_params" in text
    assert text.count("subgraph ") == text.count("\n  end") + text.count("\n    end")


def test_plan_graph_option_writes_the_mermaid_file_only(tmp_path, capsys):
    from tools import offline_plan

    code = offline_plan.main(["--stack", "h200", "--assume-secrets", "--graph", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    g = graph.build(stack_plan("h200"))
    assert (tmp_path / "graph.mmd").read_text() == graph.mermaid(g)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.mmd"]
    assert out.startswith("nemo-rl-gke / h200")
