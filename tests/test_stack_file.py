"""The stack file as the Pulumi CLI sees it: ESC refused, `Pulumi.yaml` `config:` defaults merged in through
every entry point (the offline plan, `python -m jobctl`, the doctor), each of which reads through
`infra.stack_file`; the merge itself is tests/test_pulumi_project_config.py's, the YAML tests/test_pulumi_yaml.py's.
"""

from __future__ import annotations

import io

import pytest
from stack_file_support import DEV, project_file, refusal

from infra import stack_file
from infra.config import ConfigError

# ----------------------------------------------------------------------------- ESC environments


@pytest.mark.parametrize(
    "environment, named",
    [
        ("environment:\n  - team/gpu-quota\n", "team/gpu-quota"),
        ("environment:\n  imports:\n    - team/base\n    - team/gpu\n", "team/base, team/gpu"),
    ],
)
def test_an_esc_environment_is_refused_in_one_line_naming_it_and_how_to_proceed(tmp_path, environment, named):
    message = refusal(tmp_path, "", environment + DEV)
    assert message.startswith("Pulumi.dev.yaml: environment: ") and named in message
    assert "copy the values it sets into `config:`" in message and "pulumi env open" in message


# ----------------------------------------------------------------------------- through the entry points


@pytest.fixture
def project_defaults(tmp_path, monkeypatch):
    """Point every reader at a project file of `config`."""

    def use(config: str):
        monkeypatch.setattr(stack_file, "PROJECT_FILE", project_file(tmp_path, config))

    return use


def esc_stack(tmp_path):
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("environment:\n  - team/gpu-quota\n" + DEV)
    return path


def test_the_offline_plan_applies_the_projects_defaults(project_defaults, capsys):
    from tools import offline_plan

    # A default the config refuses shows it was merged, before any mock run (which would cost seconds).
    project_defaults("namePrefix: Team_A\n")
    assert offline_plan.main(["--stack", "dev"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "namePrefix" in err and "Team_A" in err
    project_defaults("teamName: {type: string}\n")
    assert offline_plan.main(["--stack", "dev"]) == 2
    assert "stack 'dev' is missing configuration value(s) 'teamName'" in capsys.readouterr().err


def test_the_offline_plan_refuses_an_esc_environment_in_one_line(tmp_path, capsys):
    from tools import offline_plan

    assert offline_plan.main(["--stack", "dev", "--config-file", str(esc_stack(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "team/gpu-quota" in err


def test_the_cli_builds_the_job_with_the_projects_default(project_defaults):
    from jobctl import cli

    out = io.StringIO()
    assert cli.main(["submit", "--dry-run", "--stack", "dev"], out=out) == 0
    assert "grpo.max_num_steps=7" not in out.getvalue()
    project_defaults("job.maxNumSteps: 7\n")
    out = io.StringIO()
    assert cli.main(["submit", "--dry-run", "--stack", "dev"], out=out) == 0
    assert "grpo.max_num_steps=7" in out.getvalue()


def test_the_cli_and_the_doctor_refuse_an_esc_environment_in_one_line(tmp_path, monkeypatch):
    from jobctl import cli
    from tools.doctor import doctor_command

    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["submit", "--dry-run", "--config-file", str(esc_stack(tmp_path))], out=out, err=err) == 2
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1 and "team/gpu-quota" in err.getvalue()
    # The doctor reads Pulumi.<stack>.yaml of the project root; here that root is tmp_path.
    esc_stack(tmp_path)
    monkeypatch.setattr(doctor_command, "load_stack", lambda name: stack_file.load_stack(name, tmp_path))
    err = io.StringIO()
    code = doctor_command.main(
        ["--stack", "dev"], err=err, connect=lambda p: pytest.fail("a refused stack file asks no cloud")
    )
    assert code == doctor_command.EXIT_USAGE and err.getvalue().count("\n") == 1 and "team/gpu-quota" in err.getvalue()


def test_the_plaintext_secret_error_names_the_config_file_it_came_from(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(DEV + "  nemo-rl-gke:hfToken: hf_abcdefghijklmnopqrstuvwxyz\n")
    with pytest.raises(ConfigError) as err:
        stack_file.load_stack("dev", tmp_path, path)
    assert f"remove it from --config-file {path} and run" in str(err.value) and "Pulumi.dev.yaml" not in str(err.value)
    assert "hf_abc" not in str(err.value)


def test_the_plaintext_secret_error_names_the_project_file_when_the_default_is_there(tmp_path, monkeypatch):
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV)
    monkeypatch.setattr(stack_file, "PROJECT_FILE", project_file(tmp_path, "hfToken: hf_abcdefghijklmnopqrstuvwx\n"))
    with pytest.raises(ConfigError) as err:
        stack_file.load_stack("dev", tmp_path)
    assert "remove it from Pulumi.yaml" in str(err.value) and "hf_abc" not in str(err.value)
