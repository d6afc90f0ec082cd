"""The stack file as the Pulumi CLI sees it: `Pulumi.yaml` `config:` defaults merged in, ESC refused.

The merge follows pulumi/pulumi pkg/workspace/config.go `mergeConfig` and sdk/go/common/workspace/project.go
(`RewriteShorthandConfigValues`, `Project.Validate`, `ValidateConfigValue`) at v3.259.0; every entry
point (the offline plan, `python -m jobctl`, the doctor) reads through `infra.stack_file`.
"""

from __future__ import annotations

import io
import json
import os
import textwrap

import pytest

from infra import stack_file
from infra.stack_file import StackFileError, read_project_config, read_stack_file

DEV = """\
config:
  nemo-rl-gke:project: my-gcp-project
  nemo-rl-gke:region: us-east1
  nemo-rl-gke:zone: us-east1-b
  nemo-rl-gke:flavour: b200
  nemo-rl-gke:gpuPool:
    nodeCount: 1
    provisioning: spot
  nemo-rl-gke:job:
    recipe: qwen2.5-1.5b-gsm8k
"""


def project_file(tmp_path, config: str) -> "stack_file.Path":
    path = tmp_path / "Pulumi.yaml"
    path.write_text("name: nemo-rl-gke\nruntime: python\nconfig:\n" + textwrap.indent(textwrap.dedent(config), "  "))
    return path


def read(tmp_path, config: str, stack: str = DEV) -> dict[str, str]:
    (tmp_path / "Pulumi.dev.yaml").write_text(stack)
    flat, _ = read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=project_file(tmp_path, config))
    return flat


def refusal(tmp_path, config: str, stack: str = DEV) -> str:
    with pytest.raises(StackFileError) as err:
        read(tmp_path, config, stack)
    message = str(err.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- the merge


def test_a_project_default_fills_a_key_the_stack_file_lacks_and_the_stack_file_wins(tmp_path):
    flat = read(
        tmp_path,
        """\
        namePrefix: team-a
        flavour: h200
        """,
    )
    assert flat["nemo-rl-gke:namePrefix"] == "team-a"
    assert flat["nemo-rl-gke:flavour"] == "b200"


def test_the_typed_form_and_another_namespaces_value_are_merged(tmp_path):
    flat = read(
        tmp_path,
        """\
        ray:
          type: object
          default: {headCpu: 4}
        gcp:project:
          value: my-gcp-project
        labels: {default: {team: rl}}
        """,
    )
    assert json.loads(flat["nemo-rl-gke:ray"]) == {"headCpu": 4}
    assert flat["gcp:project"] == "my-gcp-project"
    assert json.loads(flat["nemo-rl-gke:labels"]) == {"team": "rl"}


def test_a_shorthand_key_of_another_namespace_is_a_value_not_a_default(tmp_path):
    flat = read(tmp_path, "gcp:region: us-east1\n")
    assert flat["gcp:region"] == "us-east1"


def test_a_stack_map_is_not_merged_with_a_default_map(tmp_path):
    flat = read(tmp_path, "gpuPool: {default: {nodeCount: 4, provisioning: onDemand, compactPlacement: true}}\n")
    assert json.loads(flat["nemo-rl-gke:gpuPool"]) == {"nodeCount": 1, "provisioning": "spot"}


def test_a_dotted_project_key_sets_only_the_missing_path_inside_the_stacks_map(tmp_path):
    flat = read(
        tmp_path,
        """\
        job.maxNumSteps: "7"
        job.recipe: gemma3-27b-gsm8k
        """,
    )
    # "7" is text in Pulumi.yaml and an integer inside the map (config/object.go coerce).
    assert json.loads(flat["nemo-rl-gke:job"]) == {"recipe": "qwen2.5-1.5b-gsm8k", "maxNumSteps": 7}


def test_a_default_with_a_type_is_checked_against_it(tmp_path):
    assert "not of type integer" in refusal(tmp_path, "count: {type: integer, default: many}\n")


@pytest.mark.parametrize(
    "config, expected",
    [
        ("namePrefix: {default: a, value: b}\n", "has both 'default' and 'value'"),
        ("namePrefix: {default: a, required: true}\n", "'required' is not allowed"),
        ("cost: 1.5\n", "write a number with a fraction as {default: 1.5}"),
        ("gcp:region: {default: us-east1}\n", "another namespace has a 'default'"),
        ("gcp:region: {type: string, value: us-east1}\n", "another namespace declares a type"),
        ("zones: {type: array, default: []}\n", "type array without 'items'"),
        ("job[0]: x\n", "not a key or dotted path"),
    ],
)
def test_a_project_config_the_cli_refuses_is_refused_in_one_line(tmp_path, config, expected):
    message = refusal(tmp_path, config)
    assert message.startswith("Pulumi.yaml: config.") and expected in message, message


def test_a_typed_key_without_a_default_must_be_in_the_stack_file(tmp_path):
    message = refusal(tmp_path, "teamName: {type: string}\n")
    assert "stack 'dev' is missing configuration value(s) 'teamName'" in message


def test_a_stack_value_of_the_wrong_type_is_refused(tmp_path):
    stack = DEV + "  nemo-rl-gke:teamSize: many\n"
    assert "nemo-rl-gke:teamSize is not of type integer" in refusal(tmp_path, "teamSize: {type: integer}\n", stack)
    assert (
        read(tmp_path, "teamSize: {type: integer}\n", DEV + "  nemo-rl-gke:teamSize: 5\n")["nemo-rl-gke:teamSize"]
        == "5"
    )


def test_a_secret_key_must_be_a_secure_value(tmp_path):
    stack = DEV + "  nemo-rl-gke:token: plain\n"
    assert "must be a secret" in refusal(tmp_path, "token: {type: string, secret: true}\n", stack)
    secure = DEV + "  nemo-rl-gke:token:\n    secure: AAABAM\n"
    assert (
        read(tmp_path, "token: {type: string, secret: true}\n", secure)["nemo-rl-gke:token"]
        == stack_file.OFFLINE_SECRET
    )


def test_the_committed_project_file_declares_no_config():
    # The golden plans are of the stack files alone: any default here would show in them.
    assert read_project_config(stack_file.PROJECT_FILE) == []


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
    from tools import doctor
    from tools.doctor import doctor_command

    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["submit", "--dry-run", "--config-file", str(esc_stack(tmp_path))], out=out, err=err) == 2
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1 and "team/gpu-quota" in err.getvalue()
    # The doctor reads Pulumi.<stack>.yaml of the project root; here that root is tmp_path.
    esc_stack(tmp_path)
    monkeypatch.setattr(doctor_command, "load_stack", lambda name: stack_file.load_stack(name, tmp_path))
    err = io.StringIO()
    code = doctor.main(["--stack", "dev"], err=err, connect=lambda p: pytest.fail("a refused stack file asks no cloud"))
    assert code == doctor.EXIT_USAGE and err.getvalue().count("\n") == 1 and "team/gpu-quota" in err.getvalue()


def test_a_text_is_parsed_once_each_reader_gets_its_own_copy_and_an_edit_is_read_again(tmp_path, monkeypatch):
    parses = []
    real = stack_file._Document.load
    monkeypatch.setattr(stack_file._Document, "load", lambda self, text: parses.append(self.name) or real(self, text))
    stack_file._parsed.cache_clear()
    path = tmp_path / "Pulumi.cachetest.yaml"
    path.write_text("config:\n  nemo-rl-gke:zone: us-east1-b\n  nemo-rl-gke:labels:\n    team: ml\n")
    empty = tmp_path / "Pulumi.yaml"  # no project config: only the stack file is parsed
    first, _ = read_stack_file(path, project_file=empty)
    doc = stack_file.load_yaml(path.name, path.read_text())
    doc["config"]["nemo-rl-gke:labels"]["team"] = "changed by a caller"
    second, _ = read_stack_file(path, project_file=empty)
    assert parses == ["Pulumi.cachetest.yaml"]
    assert first == second == {"nemo-rl-gke:zone": "us-east1-b", "nemo-rl-gke:labels": '{"team":"ml"}'}
    path.write_text("config:\n  nemo-rl-gke:zone: us-east1-c\n")
    assert read_stack_file(path, project_file=empty)[0] == {"nemo-rl-gke:zone": "us-east1-c"}
    assert parses == ["Pulumi.cachetest.yaml"] * 2


# ----------------------------------------------------------------------------- scalars yaml.v3 refuses (issue 36)


def scalar_refusal(tmp_path, value: str) -> str:
    (tmp_path / "Pulumi.dev.yaml").write_text(f"config:\n  nemo-rl-gke:cluster:\n    deletionProtection: {value}\n")
    with pytest.raises(StackFileError) as err:
        read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=tmp_path / "none.yaml")
    message = str(err.value)
    assert "\n" not in message and "nemo-rl-gke:cluster.deletionProtection" in message and "allowed" in message
    return message


@pytest.mark.parametrize("value", ["!!bool yes", "!!bool on", "!!bool off", "!!bool 1"])
def test_a_yaml_11_boolean_under_an_explicit_tag_is_refused_not_read_as_false(tmp_path, value):
    # yaml.v3 v3.0.1 resolve.go: only true/True/TRUE/false/False/FALSE resolve to !!bool, and a tag the
    # text does not resolve to fails ("cannot decode !!str `yes` as a !!bool").
    assert "true or false" in scalar_refusal(tmp_path, value)


@pytest.mark.parametrize(
    "value, allowed",
    [
        ("!!int abc", "a whole number"),
        ("!!float x", "a number"),
        ("!!int 0x", "a whole number"),
        ("0x_", "a whole number"),
        ("!!int 1" + "0" * 5000, "64 bits"),
        ("1" + "0" * 5000, "64 bits"),
        ("!!float 1" + "0" * 400, "a finite number"),
    ],
)
def test_a_scalar_that_cannot_become_its_type_is_one_line_naming_the_key(tmp_path, value, allowed):
    message = scalar_refusal(tmp_path, value)
    assert allowed in message and len(message) < 400


def test_the_tags_the_cli_reads_keep_working(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(
        "config:\n  nemo-rl-gke:cluster:\n    deletionProtection: !!bool FALSE\n  nemo-rl-gke:gpuPool:\n"
        "    nodeCount: !!int 0x2\n  nemo-rl-gke:job:\n    maxLostMinutes: !!float 5\n"
    )
    flat, _ = read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=tmp_path / "none.yaml")
    assert flat["nemo-rl-gke:cluster"] == '{"deletionProtection":false}'
    assert flat["nemo-rl-gke:gpuPool"] == '{"nodeCount":2}'
    assert json.loads(flat["nemo-rl-gke:job"]) == {"maxLostMinutes": 5}


def test_a_project_file_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV)
    bad = tmp_path / "Pulumi.yaml"
    bad.write_bytes(b"name: nemo-rl-gke\nruntime: python\ndescription: caf\xe9\n")
    with pytest.raises(StackFileError) as err:
        read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=bad)
    assert str(err.value) == "Pulumi.yaml: not valid UTF-8 (byte 50); allowed: a UTF-8 text file"


def test_a_project_file_that_is_a_fifo_is_refused_without_opening_it(tmp_path):
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV)
    fifo = tmp_path / "Pulumi.yaml"
    os.mkfifo(fifo)
    with pytest.raises(StackFileError) as err:
        read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=fifo)
    assert "named pipe" in str(err.value) and "allowed: a regular file" in str(err.value)


def test_the_plaintext_secret_error_names_the_config_file_it_came_from(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(DEV + "  nemo-rl-gke:hfToken: hf_abcdefghijklmnopqrstuvwxyz\n")
    with pytest.raises(stack_file.ConfigError) as err:
        stack_file.load_stack("dev", tmp_path, path)
    assert f"remove it from --config-file {path} and run" in str(err.value) and "Pulumi.dev.yaml" not in str(err.value)
    assert "hf_abc" not in str(err.value)


def test_the_plaintext_secret_error_names_the_project_file_when_the_default_is_there(tmp_path, monkeypatch):
    (tmp_path / "Pulumi.dev.yaml").write_text(DEV)
    monkeypatch.setattr(stack_file, "PROJECT_FILE", project_file(tmp_path, "hfToken: hf_abcdefghijklmnopqrstuvwx\n"))
    with pytest.raises(stack_file.ConfigError) as err:
        stack_file.load_stack("dev", tmp_path)
    assert "remove it from Pulumi.yaml" in str(err.value) and "hf_abc" not in str(err.value)
