"""`make mutants`' driver (tests/mutants.py): which modules and tests it picks, how it counts. The mutmut
run itself is not part of the suite (minutes per module); docs/testing.md records one."""

import pytest

from tests import mutants


def test_a_module_is_mutated_against_its_mirror_tests_and_a_package_as_a_whole(monkeypatch, tmp_path):
    naming = mutants.resolve("infra/naming.py")
    assert (naming.name, naming.mutate, naming.tests) == ("infra/naming", "infra/naming.py", "tests/test_naming.py")
    assert naming.workdir == mutants.ROOT / ".mutants" / "infra.naming"
    # A package directory (infra/config/ after it is split) is one module, its files all mutated.
    (tmp_path / "infra" / "config").mkdir(parents=True)
    (tmp_path / "infra" / "config" / "__init__.py").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_config.py").write_text("")
    monkeypatch.setattr(mutants, "ROOT", tmp_path)
    assert mutants.resolve("infra/config/").mutate == "infra/config/*"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("infra/nope", "module 'infra/nope': no infra/nope.py or package infra/nope/"),
        ("tests/conftest", "module 'tests/conftest': outside the source packages"),
        ("infra/options", "module 'infra/options': no mirror test module tests/test_options.py"),
    ],
)
def test_a_module_without_source_or_mirror_tests_is_refused_in_one_line(name, message, capsys):
    assert mutants.main([name]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_every_default_module_has_its_mirror_tests():
    assert [mutants.resolve(m).tests for m in mutants.DEFAULT_MODULES] == [
        f"tests/test_{m.rsplit('/', 1)[1]}.py" for m in mutants.DEFAULT_MODULES
    ]


def test_the_equivalent_mutants_are_read_from_docs_testing_md_with_their_lines():
    judged = mutants.equivalents()
    line, why = judged["infra.naming.x_labels__mutmut_19"]
    assert line == '"stack": cloud_name(re.sub(r"[^a-z0-9_-]", "-", stack.lower()), "", ),' and "63" in why
    assert all(name.startswith(("infra.", "workloads.", "tools.")) for name in judged)


def test_the_rate_excludes_equivalents_only_while_their_line_is_the_one_judged():
    target = mutants.resolve("infra/naming")
    codes = {"m__mutmut_1": 1, "m__mutmut_2": 0, "m__mutmut_3": 0, "m__mutmut_4": 33, "m__mutmut_5": 36}
    judged = {"m__mutmut_2": ("a = 2", "why"), "m__mutmut_3": ("b = 3", "why")}
    shown = {"m__mutmut_2": "a = 2", "m__mutmut_3": "b = 4  # renumbered: another mutant now"}.get
    line, open_ = mutants.summarize(target, codes, judged, shown)
    # killed: 1 and the timeout (5); counted: those, the stale "equivalent" 3 and the unreached 4.
    assert line == (
        "infra/naming: 50.0% killed (2 of 4; 5 mutants, 1 equivalent, 1 survived, "
        "1 not reached by tests/test_naming.py)"
    )
    assert open_ == ["m__mutmut_3", "m__mutmut_4"]


def test_a_helper_without_tests_of_its_own_is_mutated_against_the_tests_that_assert_its_output():
    assert mutants.resolve("infra/placement").tests == "tests/test_cluster.py"
    assert mutants.resolve("infra/gke_common").tests == "tests/test_cluster.py"


def test_the_mutation_run_leaves_out_the_tests_on_the_local_ray_head_and_runs_without_xdist():
    cfg = mutants.setup_cfg(mutants.resolve("workloads/recovery/classify"), ["infra", "tests", "workloads"])
    args = cfg.split("pytest_add_cli_args =", 1)[1].split()
    assert args == ["-p", "no:xdist", "-m", "not", "ray"], cfg
    assert "\n    not ray\n" in cfg  # one argument: mutmut splits the value at newlines only
    assert "pytest_add_cli_args_test_selection = tests/test_classify.py\n" in cfg


def test_only_hands_its_globs_to_mutmut_run(monkeypatch, tmp_path):
    seen = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(mutants, "WORK", tmp_path)
    monkeypatch.setattr(mutants, "prepare", lambda target: target.workdir.mkdir(parents=True))
    monkeypatch.setattr(mutants.subprocess, "run", lambda argv, **kw: seen.append(argv) or Done())
    line, _ = mutants.run(mutants.resolve("infra/cluster"), 2, ("infra.cluster.x_*",))
    assert seen[0][-4:] == ["run", "--max-children", "2", "infra.cluster.x_*"] and "0 mutants" in line
