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


def test_labels_merge_user_labels_under_the_managed_ones():
    merged = labels("b200", "network", {"team": "rl", "managed-by": "me", "stack": "x"})
    assert merged == {"team": "rl", "managed-by": "pulumi", "app": "nemo-rl-gke", "stack": "b200", "component": "network"}


def test_every_labelled_resource_carries_the_managed_labels():
    from conftest import stack_plan

    plan = stack_plan("h200")
    labelled = [(r, r.inputs.get("labels") or r.inputs.get("resourceLabels")) for r in plan.resources if r.type.startswith("gcp:")]
    labelled = [(r, lab) for r, lab in labelled if isinstance(lab, dict)]
    assert len(labelled) >= 3
    for r, lab in labelled:
        assert lab.get("managed-by") == "pulumi" and lab.get("stack") == "h200", f"{r.name}: {lab}"
