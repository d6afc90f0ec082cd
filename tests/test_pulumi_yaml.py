"""YAML as the Pulumi CLI's parser (yaml.v3) reads it: the scalar rules, the one reader of files, the cached parse
(infra/pulumi_yaml.py), seen through `read_stack_file`."""

from __future__ import annotations

import json
import os

import pytest
from stack_file_support import DEV

from infra import pulumi_yaml
from infra.stack_file import StackFileError, read_stack_file


def test_a_text_is_parsed_once_each_reader_gets_its_own_copy_and_an_edit_is_read_again(tmp_path, monkeypatch):
    parses = []
    real = pulumi_yaml._Document.load
    monkeypatch.setattr(pulumi_yaml._Document, "load", lambda self, text: parses.append(self.name) or real(self, text))
    pulumi_yaml._parsed.cache_clear()
    path = tmp_path / "Pulumi.cachetest.yaml"
    path.write_text("config:\n  nemo-rl-gke:zone: us-east1-b\n  nemo-rl-gke:labels:\n    team: ml\n")
    empty = tmp_path / "Pulumi.yaml"  # no project config: only the stack file is parsed
    first, _ = read_stack_file(path, project_file=empty)
    doc = pulumi_yaml.load_yaml(path.name, path.read_text())
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


# ----------------------------------------------------------------------------- YAML 1.2 core booleans (issue 46)

# gopkg.in/yaml.v3, the Pulumi CLI's parser (go-yaml/yaml branch v3 at f6f7691b, v3.0.1, resolve.go
# `resolveMapList`): exactly these six plain scalars resolve to !!bool. Every other spelling (`yes`, `on`, `y`,
# `tRUE`, ...) resolves to !!str, and the CLI keeps it as text: decode.go turns `y`/`yes`/`on` and `n`/`no`/`off`
# (three casings each) into a boolean only when it decodes into a Go `bool`, and a stack's config is decoded into
# plain values (pulumi/pulumi sdk/go/common/resource/config/value.go `unmarshalValue`).
YAML_V3_BOOLEANS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
YAML_11_ONLY = "y Y yes Yes YES on On ON n N no No NO off Off OFF tRUE fALSE TrUe".split()


def cluster_config(tmp_path, text: str) -> str:
    (tmp_path / "Pulumi.dev.yaml").write_text(f"config:\n  nemo-rl-gke:cluster:\n{text}")
    flat, _ = read_stack_file(tmp_path / "Pulumi.dev.yaml", project_file=tmp_path / "none.yaml")
    return flat["nemo-rl-gke:cluster"]


@pytest.mark.parametrize("spelling", sorted(YAML_V3_BOOLEANS))
def test_each_spelling_yaml_v3_reads_as_a_boolean_is_that_boolean_plain_tagged_in_flow_and_in_a_list(
    tmp_path, spelling
):
    value = YAML_V3_BOOLEANS[spelling]
    flat = cluster_config(
        tmp_path,
        f"    deletionProtection: {spelling}\n    tagged: !!bool {spelling}\n    flow: {{a: {spelling}}}\n"
        f"    listed: [{spelling}]\n    quoted: '{spelling}'\n",
    )
    assert json.loads(flat) == {
        "deletionProtection": value,
        "tagged": value,
        "flow": {"a": value},
        "listed": [value],
        "quoted": spelling,  # quoted: always text
    }


@pytest.mark.parametrize("spelling", YAML_11_ONLY)
def test_a_yaml_11_boolean_or_another_casing_stays_the_text_written_as_yaml_v3_keeps_it(tmp_path, spelling):
    assert json.loads(cluster_config(tmp_path, f"    deletionProtection: {spelling}\n")) == {
        "deletionProtection": spelling
    }
