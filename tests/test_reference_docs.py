"""The generated pages under docs/ are current, and the README stays a short, truthful entry point."""

import re
import site
from pathlib import Path

import pytest

from conftest import ROOT, stack_plan
from tools import reference_docs as docs

README = ROOT / "README.md"
DOC_PAGES = sorted((ROOT / "docs").glob("*.md"))
SITE_PACKAGES = [Path(p) for p in site.getsitepackages()]


def fresh(page: str, **sections) -> tuple[str, str]:
    return docs.render_page(page, {**docs.SECTIONS, **sections})


def test_the_config_reference_page_matches_the_pydantic_models():
    text, new = fresh("configuration.md")
    assert new == text, "docs/configuration.md is stale: run `make docs`"


def test_the_resource_table_matches_the_offline_plans():
    text, new = fresh("resources.md", **{"stack-resources": lambda: docs.stack_resources(stack_plan),
                                         "resource-graph": lambda: docs.resource_graph(stack_plan)})
    assert new == text, "docs/resources.md is stale: run `make docs`"
    assert "| **total** |" in text and "```mermaid\nflowchart LR\n" in text


def test_config_reference_lists_every_nested_key_and_the_secrets():
    ref = docs.config_reference()
    for key in ("`lustre.perUnitStorageThroughput`", "`cluster.systemPool.machineType`", "`network.rdmaCidrs`", "`hfToken`"):
        assert key in ref, key


def test_the_check_names_a_stale_page_and_write_brings_it_current(tmp_path, monkeypatch, capsys):
    for page in docs.PAGES:
        (tmp_path / page).write_text((docs.DOCS / page).read_text())
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    monkeypatch.setattr(docs, "SECTIONS", {**docs.SECTIONS, "stack-resources": lambda: docs.stack_resources(stack_plan),
                                           "resource-graph": lambda: docs.resource_graph(stack_plan)})
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text().replace("`lustre.capacityGib`", "`lustre.capacity`"))
    assert docs.main([]) == 1
    assert capsys.readouterr().out == "docs/configuration.md is stale: run `make docs`\n"
    assert docs.main(["--write"]) == 0
    assert page.read_text() == (ROOT / "docs" / "configuration.md").read_text()
    assert docs.main([]) == 0


def test_a_page_without_its_markers_is_refused_naming_the_page_and_section():
    with pytest.raises(SystemExit, match="docs/x.md has no <!-- config-reference:start -->"):
        docs.render("no markers", {"config-reference": docs.config_reference}, "docs/x.md")


# ---------------------------------------------------------------- README for users


def headings(text: str, level: str) -> list[str]:
    body = re.sub(r"```.*?```", "", text, flags=re.S)  # a `# comment` in a code block is no heading
    return [m.group(1) for m in re.finditer(rf"^{level} (.+)$", body, re.M)]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_readme_is_short_and_its_contents_list_every_section_in_order():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    contents = re.search(r"^## Contents\n\n(.*?)\n\n", text, re.S | re.M).group(1)
    listed = re.findall(r"^- \[(.+?)\]\(#(.+?)\)$", contents, re.M)
    sections = [h for h in headings(text, "##") if h != "Contents"]
    assert [title for title, _ in listed] == sections
    assert [a for _, a in listed] == [anchor(h) for h in sections]


def test_the_quick_start_begins_with_the_offline_plan_and_the_tests_and_make_has_both():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", quick, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands[:2] == ["make plan", "make test"]
    targets = re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), re.M)
    assert {"plan", "test", "docs", "golden"} <= set(targets)


@pytest.mark.parametrize("path", [README, *DOC_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_every_named_repository_file_exists(path):
    text = path.read_text()
    links = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"\w+:|#", t)]
    named = re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|md|yaml|json|txt))`", text)
    missing = [t for t in links if not (path.parent / t).exists()]
    # a path may also name a file of an installed package (e.g. pulumi/dynamic/dynamic.py)
    missing += [n for n in named if not any((base / n).exists() for base in (ROOT, *SITE_PACKAGES))]
    assert not missing, f"{path.relative_to(ROOT)} points at files that do not exist: {missing}"


def test_every_page_under_docs_is_linked_from_the_readme():
    text = README.read_text()
    assert not [p.name for p in DOC_PAGES if f"(docs/{p.name})" not in text]
