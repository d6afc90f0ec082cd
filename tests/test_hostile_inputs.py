"""Hostile and malformed inputs are refused with a clear message, one test per class."""

import pytest

from conftest import ROOT
from infra.config import ConfigError, parse
from infra.naming import Limit, cloud_name
from infra.stack_file import MAX_STACK_FILE_BYTES, StackFileError, read_stack_file

BASE = {"project": "my-gcp-project"}


def rejection(**raw) -> str:
    with pytest.raises(ConfigError) as info:
        parse({**BASE, **raw}, "dev")
    return str(info.value)


@pytest.mark.parametrize(
    "override",
    ["a=$(id)", "a=`id`", "a=b; rm -rf /", "a=b && curl x", "a=b|sh", "a=b\nc=d", "a='b'", 'a="b"', "a=b c", "a=${HOME}", "a=b>f"],
)
def test_shell_metacharacters_and_newlines_in_job_overrides_are_refused(override):
    msg = rejection(job={"overrides": [override]})
    assert msg.startswith("nemo-rl-gke:job.overrides[0]: "), msg
    assert "no spaces, quotes, shell metacharacters or newlines" in msg
    assert len(msg.splitlines()) == 1, "a newline in the value must not split the error"


@pytest.mark.parametrize(
    "raw,key",
    [
        ({"namePrefix": "dev\nrm"}, "namePrefix"),
        ({"namePrefix": "dev;id"}, "namePrefix"),
        ({"ray": {"namespace": "ns$(id)"}}, "ray.namespace"),
        ({"ray": {"serviceAccount": "ray\n"}}, "ray.serviceAccount"),
        ({"ray": {"mountPath": "/lustre && id"}}, "ray.mountPath"),
        ({"lustre": {"instanceId": "x;id"}}, "lustre.instanceId"),
        ({"gpuPool": {"provisioning": "reservation", "reservationName": "r`id`"}}, "gpuPool.reservationName"),
        ({"job": {"wandbProject": "p $(id)"}}, "job.wandbProject"),
        ({"labels": {"team": "a;b"}}, "labels"),
    ],
)
def test_metacharacters_in_names_are_refused_naming_the_key(raw, key):
    msg = rejection(**raw)
    assert msg.startswith(f"nemo-rl-gke:{key}: "), msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize(
    "raw,key,limit",
    [
        ({"namePrefix": "a" * 21}, "namePrefix", "1-20"),
        ({"ray": {"namespace": "n" * 64}}, "ray.namespace", "at most 63"),
        ({"ray": {"serviceAccount": "s" * 64}}, "ray.serviceAccount", "at most 63"),
        ({"lustre": {"instanceId": "l" * 64}}, "lustre.instanceId", "1-63"),
        ({"lustre": {"filesystem": "f" * 9}}, "lustre.filesystem", "1-8"),
        ({"labels": {"k" * 64: "v"}}, "labels", "max 63"),
        ({"job": {"overrides": ["a=" + "b" * 600]}}, "job.overrides[0]", "at most 512"),
    ],
)
def test_overlong_names_are_refused_with_the_limit(raw, key, limit):
    msg = rejection(**raw)
    assert msg.startswith(f"nemo-rl-gke:{key}: ") and limit in msg, msg


@pytest.mark.parametrize("limit", list(Limit))
def test_derived_cloud_names_never_exceed_the_api_limit_and_stay_distinct(limit):
    prefix = "a" * 20
    names = {cloud_name(prefix, role, limit) for role in ("rdma-subnet-0", "rdma-subnet-1", "gvnic-allow-internal-and-more")}
    assert all(len(n) <= limit for n in names), names
    assert len(names) == 3, f"truncation to {limit} made names collide: {names}"
    assert all(not n.endswith("-") for n in names)


def test_a_stack_file_that_is_not_utf8_is_refused(tmp_path):
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(b"config:\n  nemo-rl-gke:project: caf\xe9\n")
    with pytest.raises(StackFileError) as info:
        read_stack_file(path)
    assert str(info.value) == "Pulumi.bad.yaml: not valid UTF-8 (byte 34)"


def test_a_huge_stack_file_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "Pulumi.huge.yaml"
    path.write_bytes(b"config:\n" + b"  # padding\n" * (MAX_STACK_FILE_BYTES // 12 + 1))
    with pytest.raises(StackFileError) as info:
        read_stack_file(path)
    assert str(info.value).startswith("Pulumi.huge.yaml: ") and f"at most {MAX_STACK_FILE_BYTES} bytes" in str(info.value)


def test_a_stack_file_that_is_not_yaml_is_refused(tmp_path):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config: [unclosed\n")
    with pytest.raises(StackFileError) as info:
        read_stack_file(path)
    assert str(info.value).startswith("Pulumi.broken.yaml: not valid YAML: ")


def test_a_stack_file_without_a_config_map_is_refused(tmp_path):
    path = tmp_path / "Pulumi.list.yaml"
    path.write_text("config:\n  - a\n")
    with pytest.raises(StackFileError) as info:
        read_stack_file(path)
    assert str(info.value) == "Pulumi.list.yaml: expected a map with a 'config' map"


def test_the_committed_stack_files_are_small_utf8_maps():
    for path in ROOT.glob("Pulumi.*.yaml"):
        config, _ = read_stack_file(path)
        assert config, path.name
