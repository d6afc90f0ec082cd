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
    text, new = fresh("docs/configuration.md")
    assert new == text, "docs/configuration.md is stale: run `make docs`"


def test_the_resource_table_matches_the_offline_plans():
    text, new = fresh(
        "docs/resources.md",
        **{
            "stack-resources": lambda: docs.stack_resources(stack_plan),
            "resource-graph": lambda: docs.resource_graph(stack_plan),
        },
    )
    assert new == text, "docs/resources.md is stale: run `make docs`"
    assert "| **total** |" in text and "```mermaid\nflowchart LR\n" in text


def test_the_readmes_cost_time_and_destroy_table_matches_the_offline_plans():
    text, new = fresh("README.md", **{"stack-costs": lambda: docs.stack_costs(stack_plan)})
    assert new == text, "README.md's stack table is stale: run `make docs`"


def test_the_stack_table_has_every_committed_stack_with_its_plans_numbers():
    from infra.stack_file import available_stacks
    from tools import estimates

    table = docs.stack_costs(stack_plan)
    rows = {line.split("|")[1].strip(" `"): line for line in table.splitlines() if line.startswith("| `")}
    assert sorted(rows) == available_stacks()
    for stack, row in rows.items():
        est = estimates.compute(stack_plan(stack))
        assert docs._money(est.cost.spot_per_hour) in row.split("|")[3], (stack, row)
        assert f"~{est.deploy.total_minutes:.0f} min" in row, (stack, row)
    # dev is the scratch stack: its destroy deletes the bucket and exports nothing
    assert (
        "**the bucket too**" in rows["dev"]
        and "**without export**" in rows["dev"]
        and rows["dev"].endswith("| nothing |")
    )
    assert "the bucket (exports, job output)" in rows["b200"] and "refused until" in rows["b200"]
    assert "a node pool 120 min" in table and "the job's wait for its GPU workers 60 min" in table


def test_the_first_run_adds_the_gpu_hours_before_the_job_to_the_jobs_cost():
    from tools import estimates

    plan = stack_plan("dev")
    est = estimates.compute(plan)
    run = estimates.first_run(est, plan)
    gpu = next(i for i in est.cost.items if i.name.startswith("GPU nodes"))
    # The pool starts empty: the GPU nodes are billed from their creation for the Ray workers (after the Ray
    # release started, so long after the pool's readiness) to the submission, at the spot price.
    nodes_from = est.deploy.gpu_nodes_from
    assert nodes_from > est.deploy.finish_by_name[gpu.billed_from]
    gpu_before = gpu.spot_per_hour * (est.deploy.total_minutes - nodes_from) / 60
    assert run.gpu_before_job == pytest.approx(gpu_before) and run.before_job["spot"] > gpu_before > 0
    assert run.total("spot", est.cost.spot_per_hour) == pytest.approx(
        run.before_job["spot"] + est.cost.spot_per_hour * est.cost.job_hours
    )


def test_the_stack_table_shows_each_stacks_goodput_first_step_and_spend_before_it_from_its_plan():
    from tools.offline_plan import plan_document

    table = docs.stack_costs(stack_plan)
    header = table.splitlines()[0].split("|")
    column = header.index(" goodput; first step at, spot spend before it ")
    rows = {line.split("|")[1].strip(" `"): line.split("|") for line in table.splitlines() if line.startswith("| `")}
    for stack, cells in rows.items():
        doc = plan_document(stack_plan(stack))
        run = doc["estimates"]["firstRun"]
        good = "not modelled" if doc["goodput"] is None else f"{doc['goodput']['fraction']:.1%}"
        cell = cells[column].strip()
        assert cell == f"{good}; ~{run['firstStepMinutes']:.0f} min, {docs._money(run['beforeFirstStep']['spot'])}", (
            stack,
            cell,
        )
    assert rows["b200"][column].strip().startswith("82.4%; ~81 min")
    assert rows["autopilot"][column].strip().startswith("not modelled")


def test_the_spend_before_the_first_step_adds_nemo_rls_start_up_at_the_stacks_hourly_cost():
    from tools import estimates, gpu_arrival

    plan = stack_plan("b200")
    est = estimates.compute(plan)
    run = estimates.first_run(est, plan)
    # b200 streams its image (cluster.imageStreaming): the remote reads lengthen NeMo-RL's start-up.
    startup = gpu_arrival.NEMO_RL_STARTUP.minutes + gpu_arrival.STREAM_READ_MINUTES
    assert run.first_step_minutes == pytest.approx(est.deploy.total_minutes + startup)
    assert run.before_first_step("spot", est.cost.spot_per_hour) == pytest.approx(
        run.before_job["spot"] + est.cost.spot_per_hour * startup / 60
    )


def test_config_reference_lists_every_nested_key_and_the_secrets():
    ref = docs.config_reference()
    for key in (
        "`lustre.perUnitStorageThroughput`",
        "`cluster.systemPool.machineType`",
        "`network.rdmaCidrs`",
        "`hfToken`",
    ):
        assert key in ref, key


def test_the_check_names_a_stale_page_and_write_brings_it_current(tmp_path, monkeypatch, capsys):
    for page in docs.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((ROOT / page).read_text())
    monkeypatch.setattr(docs, "ROOT", tmp_path)
    monkeypatch.setattr(
        docs,
        "SECTIONS",
        {
            **docs.SECTIONS,
            "stack-resources": lambda: docs.stack_resources(stack_plan),
            "resource-graph": lambda: docs.resource_graph(stack_plan),
            "stack-costs": lambda: docs.stack_costs(stack_plan),
        },
    )
    page = tmp_path / "docs" / "configuration.md"
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


def test_the_example_plan_json_in_the_docs_has_the_plans_keys_and_the_dev_stacks_numbers():
    import json

    from tools.offline_plan import plan_document

    text = (ROOT / "docs" / "offline-plan.md").read_text()
    example = json.loads(re.search(r"```json\n(.*?)```", text, re.S).group(1))
    doc = plan_document(stack_plan("dev"))
    assert list(example) == list(doc) and list(example["estimates"]) == list(doc["estimates"])

    def shown(ex, real, path=""):
        # every number the example shows is the dev plan's; "..." stands for what it leaves out
        if isinstance(ex, dict):
            for key, value in ex.items():
                if key != "...":
                    shown(value, real[key], f"{path}.{key}")
        elif isinstance(ex, (int, float)) and not isinstance(ex, bool):
            assert ex == real, f"docs/offline-plan.md shows {path} = {ex}, the dev plan has {real}"

    shown(example["estimates"], doc["estimates"], "estimates")
    assert example["stack"] == doc["stack"] and example["outputs"]["clusterName"] == doc["outputs"]["clusterName"]


# ---------------------------------------------------------------- README facts a test can check


def test_the_readme_names_every_committed_stack_where_it_lists_them():
    from infra.stack_file import available_stacks

    text = README.read_text()
    stacks = available_stacks()
    words = {2: "Two", 3: "Three", 4: "Four", 5: "Five", 6: "Six"}
    sentence = re.search(r"(\w+) stacks are committed: (.*?)\. ", text, re.S)
    assert sentence and sentence.group(1) == words[len(stacks)], "README: the count of committed stacks is stale"
    assert [s for s in stacks if f"`{s}`" not in sentence.group(2)] == []
    select = re.search(r"pulumi stack select --create \w+ +# or ([^:]+):", text).group(1)
    assert sorted(re.findall(r"[\w-]+", select) + ["b200"]) == stacks, select


def test_the_day_2_list_shows_every_command_of_the_cli_with_the_venvs_python():
    from jobctl import cli

    commands = set(cli.parser()._subparsers._group_actions[0].choices)
    day2 = README.read_text().split("## Day 2", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\.venv/bin/python -m jobctl (\w+)", day2, re.M))
    assert listed == commands, f"README's day-2 list lacks {commands - listed} / names unknown {listed - commands}"


@pytest.mark.parametrize("path", [README, *DOC_PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_in_code_blocks_run_python_from_the_venv(path):
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", path.read_text(), re.S)
    bare = [line for b in blocks for line in b.splitlines() if re.match(r"\s*(\$ )?python3? -m ", line)]
    assert not bare, f"{path.relative_to(ROOT)}: `python -m` outside the venv fails; write .venv/bin/python -m: {bare}"


def test_the_readme_says_how_to_run_printed_commands_and_that_a_cold_make_test_installs_torch():
    text = README.read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/python -m" in quick and "source .venv/bin/activate" in quick
    pinned = re.search(r"^torch==", (ROOT / "requirements-test.txt").read_text(), re.M)
    assert not pinned or "torch" in quick, (
        "requirements-test.txt installs torch: the quick start must say a cold make test takes minutes"
    )
