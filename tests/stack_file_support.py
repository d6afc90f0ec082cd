"""What the stack-file tests share (tests/test_stack_file.py, test_pulumi_project_config.py, test_pulumi_yaml.py):
a stack file's text, a project file of given `config:`, and reading the two as the CLI would."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infra.stack_file import StackFileError, read_stack_file

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


def project_file(tmp_path, config: str) -> Path:
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
