"""The README's generated sections are current."""

from conftest import ROOT, stack_plan
from tools import reference_docs as docs


def test_readme_config_reference_matches_the_pydantic_models():
    text = (ROOT / "README.md").read_text()
    assert docs.render(text, {"config-reference": docs.config_reference}) == text, (
        "README config reference is stale: run `make docs`"
    )


def test_readme_resource_table_matches_the_offline_plans():
    text = (ROOT / "README.md").read_text()
    fresh = docs.render(text, {"stack-resources": lambda: docs.stack_resources(stack_plan)})
    assert fresh == text, "README resource table is stale: run `make docs`"


def test_config_reference_lists_every_nested_key_and_the_secrets():
    ref = docs.config_reference()
    for key in ("`lustre.perUnitStorageThroughput`", "`cluster.systemPool.machineType`", "`network.rdmaCidrs`", "`hfToken`"):
        assert key in ref, key
