"""Cloud names and labels come from one place, within each API's limit."""

from infra.naming import Limit, cloud_name, labels


def test_a_short_name_is_prefix_dash_role_in_lowercase():
    assert cloud_name("Dev", "GPU-pool", Limit.GKE_NODE_POOL) == "dev-gpu-pool"


def test_a_long_name_is_cut_to_the_limit_with_a_hash_of_the_full_name():
    name = cloud_name("a-very-long-prefix-x", "rdma-subnet-for-nic-7", Limit.GKE_CLUSTER)
    # 33 characters of the name, its trailing hyphen dropped, then "-" and 6 hex digits of the full name's hash.
    assert name == "a-very-long-prefix-x-rdma-subnet-69f7db" and len(name) <= 40
    assert name != cloud_name("a-very-long-prefix-x", "rdma-subnet-for-nic-6", Limit.GKE_CLUSTER)
    assert name == cloud_name("a-very-long-prefix-x", "rdma-subnet-for-nic-7", Limit.GKE_CLUSTER), "deterministic"


def test_a_name_exactly_at_the_limit_is_kept_whole():
    prefix, role = "nemo-rl-dev", "g" * (Limit.GKE_NODE_POOL - len("nemo-rl-dev-"))
    assert cloud_name(prefix, role, Limit.GKE_NODE_POOL) == f"{prefix}-{role}"
    assert len(cloud_name(prefix, role + "x", Limit.GKE_NODE_POOL)) == Limit.GKE_NODE_POOL, "one more is cut"


def test_a_cut_that_falls_inside_a_word_uses_the_whole_limit():
    # Unlike the case above, no hyphen sits at the cut: every one of the 40 characters is used.
    name = cloud_name("nemo-rl-production", "gpupoolwithaverylongrole", Limit.GKE_NODE_POOL)
    assert len(name) == Limit.GKE_NODE_POOL and name.startswith("nemo-rl-production-gpupoolwith"), name
    assert name[-7] == "-" and all(c in "0123456789abcdef" for c in name[-6:]), name


def test_a_stack_name_becomes_a_valid_label_value():
    # Pulumi allows upper case and dots in stack names; GCP label values allow neither (nor over 63 characters).
    assert labels("Team.Prod_1", "c")["stack"] == "team-prod_1"
    long = labels("A" * 70, "c")["stack"]
    assert len(long) == Limit.LABEL_VALUE and long.startswith("a" * 56 + "-"), long


def test_labels_merge_user_labels_under_the_managed_ones():
    merged = labels("b200", "network", {"team": "rl", "managed-by": "me", "stack": "x"})
    assert merged == {
        "team": "rl",
        "managed-by": "pulumi",
        "app": "nemo-rl-gke",
        "stack": "b200",
        "component": "network",
    }


def test_every_labelled_resource_carries_the_managed_labels():
    from conftest import stack_plan

    plan = stack_plan("h200")
    labelled = [
        (r, r.inputs.get("labels") or r.inputs.get("resourceLabels"))
        for r in plan.resources
        if r.type.startswith("gcp:")
    ]
    labelled = [(r, lab) for r, lab in labelled if isinstance(lab, dict)]
    assert len(labelled) >= 3
    for r, lab in labelled:
        assert lab.get("managed-by") == "pulumi" and lab.get("stack") == "h200", f"{r.name}: {lab}"


def component_modules(root):
    """infra modules that define a ComponentResource, by module name."""
    import ast

    found = {}
    for path in sorted((root / "infra").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        bases = [ast.unparse(b) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for b in node.bases]
        if "pulumi.ComponentResource" in bases:
            found[f"infra.{path.stem}"] = tree
    return found


def sibling_imports(root):
    """(component module, component module it imports) pairs, lazy imports included."""
    import ast

    modules = component_modules(root)
    pairs = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            pairs += [(name, t) for t in targets if t in modules and t != name]
    return sorted(set(pairs))


def test_no_component_takes_a_shared_name_or_label_from_another_component(tmp_path):
    from conftest import ROOT

    assert sibling_imports(ROOT) == [], "shared names belong in infra/naming.py or infra/pod_facts.py"
    # The check sees an import between two component modules, and only that.
    (tmp_path / "infra").mkdir()
    component = "import pulumi\nclass A(pulumi.ComponentResource):\n    pass\n"
    (tmp_path / "infra" / "a.py").write_text(component)
    (tmp_path / "infra" / "b.py").write_text(component + "def f():\n    from infra.a import A\n")
    (tmp_path / "infra" / "c.py").write_text("from infra.a import A\n")
    assert sibling_imports(tmp_path) == [("infra.b", "infra.a")]
