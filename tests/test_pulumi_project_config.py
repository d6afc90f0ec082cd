"""`Pulumi.yaml` `config:` defaults merged into a stack file as the Pulumi CLI merges them.

The merge follows pulumi/pulumi pkg/workspace/config.go `mergeConfig` and sdk/go/common/workspace/project.go
(`RewriteShorthandConfigValues`, `Project.Validate`, `ValidateConfigValue`) at v3.259.0
(infra/pulumi_project_config.py).
"""

from __future__ import annotations

import json

import pytest
from stack_file_support import DEV, read, refusal

from infra import stack_file
from infra.pulumi_project_config import read_project_config

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
