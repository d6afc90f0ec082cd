"""The hostile-input catalogue: stack files and command lines a mistaken user or an attacker can
type, each run through the real entry points (`python -m infra.plan` = `tools.offline_plan.main`,
`python -m jobctl` = `jobctl.cli.main`), in process.

A refused input must give exit code 2, exactly one line on stderr that names the key (or flag)
and says what is allowed, and nothing on stdout; nothing is written. Unusual but valid input
(CRLF, a byte-order mark, unicode where Google Cloud allows it, YAML 1.2 spellings) keeps working.
Validation fails before the program runs, so the whole catalogue takes a few seconds.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from infra.naming import Limit, cloud_name
from infra.pulumi_yaml import MAX_STACK_FILE_BYTES, MAX_VALUES
from jobctl import cli as jobctl_cli
from tools import offline_plan

BASE = {"nemo-rl-gke:project": "my-gcp-project"}
STACK = "hostile"


def run_plan(argv: list[str], capsys) -> tuple[int, str, str]:
    code = offline_plan.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_jobctl(argv: list[str], capsys=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = jobctl_cli.main(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def stack_text(tmp_path: Path, text: "str | bytes") -> Path:
    path = tmp_path / f"Pulumi.{STACK}.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def stack_config(tmp_path: Path, **config: Any) -> Path:
    """A stack file (JSON is YAML 1.2) with BASE plus `config` (keys without namespace get it)."""
    full = dict(BASE)
    for key, value in config.items():
        full[key if ":" in key else f"nemo-rl-gke:{key}"] = value
    return stack_text(tmp_path, json.dumps({"config": full}))


# Each stack-file case goes through both entry points: the plan and the CLI refuse it alike.
ENTRY_POINTS: dict[str, Callable[[Path, Any], tuple[int, str, str]]] = {
    "plan": lambda path, capsys: run_plan(["--stack", STACK, "--config-file", str(path)], capsys),
    # A real submit: it validates everything `pulumi up` does before it looks for a dashboard.
    "jobctl": lambda path, capsys: run_jobctl(["submit", "--stack", STACK, "--config-file", str(path)]),
}


def assert_refused(result: tuple[int, str, str], names: str, *, allowed: bool = True) -> str:
    code, out, err = result
    lines = err.splitlines()
    assert code == 2, f"exit {code}, stderr {err!r}"
    assert out == "", f"stdout must stay empty, got {out[:200]!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {lines}"
    line = lines[0]
    assert names in line, f"{names!r} not named in {line!r}"
    if allowed:
        assert "allowed" in line, f"the line does not say what is allowed: {line!r}"
    for internal in ("pydantic", "instance of", "valid tuple", "Traceback", "Input should"):
        assert internal not in line, f"internal wording {internal!r} in {line!r}"
    return line


@pytest.fixture(params=list(ENTRY_POINTS))
def entry(request, capsys):
    return lambda path: ENTRY_POINTS[request.param](path, capsys)


# ---------------------------------------------------------------- stack files: config values

CONFIG_CASES = {
    # types
    "true is not a number": ({"gpuPool": {"nodeCount": True}}, "nemo-rl-gke:gpuPool.nodeCount: true"),
    "a word is not a number": ({"gpuPool": {"nodeCount": "two"}}, "nemo-rl-gke:gpuPool.nodeCount: 'two'"),
    "1 is not a boolean": ({"cluster": {"deletionProtection": 1}}, "nemo-rl-gke:cluster.deletionProtection"),
    "yes is not a boolean": (
        {"storage": {"deleteBucketOnDestroy": "yes"}},
        "nemo-rl-gke:storage.deleteBucketOnDestroy",
    ),
    "inf as text": ({"cost": {"bucketGib": "inf"}}, "nemo-rl-gke:cost.bucketGib: 'inf'"),
    "nan price": ({"cost": {"priceOverrides": {"gpu.a4-highgpu-8g.spot": "nan"}}}, "nemo-rl-gke:cost.priceOverrides"),
    "boolean price": (
        {"cost": {"priceOverrides": {"gpu.a4-highgpu-8g.spot": True}}},
        "nemo-rl-gke:cost.priceOverrides",
    ),
    "a section that is a number": ({"gpuPool": 3}, "nemo-rl-gke:gpuPool: '3' is not allowed; allowed: a map"),
    "a list that is a string": ({"network": {"rdmaCidrs": "192.168.1.0/24"}}, "nemo-rl-gke:network.rdmaCidrs"),
    "a value outside a choice": (
        {"cluster": {"releaseChannel": "NIGHTLY"}},
        "nemo-rl-gke:cluster.releaseChannel: 'NIGHTLY'",
    ),
    "a key with a typo": (
        {"gpuPool": {"nodecount": 2}},
        "nemo-rl-gke:gpuPool.nodecount: unknown key; did you mean nodeCount?",
    ),
    # stack names Pulumi allows, as the name prefix
    "a name prefix that is too long": ({"namePrefix": "a" * 21}, "nemo-rl-gke:namePrefix"),
    "a name prefix with google": ({"namePrefix": "google-ml"}, "nemo-rl-gke:namePrefix: 'google-ml'"),
    "a name prefix with g00gle": ({"namePrefix": "my-g00gle"}, "nemo-rl-gke:namePrefix"),
    "a project starting with goog": ({"project": "goog-research"}, "nemo-rl-gke:project"),
    # places that do not exist
    "an unknown region": (
        {"region": "us-centrall1", "zone": "us-centrall1-b"},
        "nemo-rl-gke:region: 'us-centrall1' has no zone with a4-highgpu-8g (flavour b200) and Managed Lustre in "
        "the zone "
        "catalogue; allowed (nearest first): us-central1-b,",
    ),
    "a zone without the flavour": ({"region": "us-east1", "zone": "us-east1-c"}, "nemo-rl-gke:zone: 'us-east1-c'"),
    "a zone of another region": ({"region": "us-east1", "zone": "us-central1-b"}, "nemo-rl-gke:zone"),
    "h200 where only b200 is": ({"flavour": "h200"}, "nemo-rl-gke:region: 'us-east1'"),
    "a b200 zone without Managed Lustre": (
        {"region": "europe-north1", "zone": "europe-north1-b"},
        "nemo-rl-gke:region",
    ),
    "a zone that is not a zone name": ({"zone": "us-east1-b; id"}, "nemo-rl-gke:zone"),
    # cloud naming and address rules
    "a label value with a newline": ({"labels": {"team": "ml\n"}}, "nemo-rl-gke:labels"),
    "an upper-case label key": ({"labels": {"Team": "ml"}}, "nemo-rl-gke:labels"),
    "a label over 128 bytes": ({"labels": {"team": "研" * 43}}, "nemo-rl-gke:labels"),
    "more labels than GCP allows": ({"labels": {f"k{i}": "v" for i in range(61)}}, "nemo-rl-gke:labels: 61 labels"),
    "a label the program sets": ({"labels": {"stack": "other"}}, "nemo-rl-gke:labels: label key 'stack'"),
    "a subnet smaller than /29": ({"network": {"gvnicCidr": "192.168.0.0/30"}}, "nemo-rl-gke:network.gvnicCidr"),
    "an RDMA subnet smaller than /29": (
        {"network": {"rdmaCidrs": ["192.168.1.0/30"] + [f"192.168.{n}.0/24" for n in range(2, 9)]}},
        "nemo-rl-gke:network.rdmaCidrs",
    ),
    "a range in 0.0.0.0/8": ({"network": {"psaCidr": "0.0.0.0/22"}}, "nemo-rl-gke:network.psaCidr: 0.0.0.0/22"),
    "a node subnet too small for the nodes": (
        {"network": {"primaryCidr": "10.0.0.0/29"}, "gpuPool": {"nodeCount": 8}},
        "nemo-rl-gke:network.primaryCidr: 10.0.0.0/29 has 4 usable addresses",
    ),
    "a link-local node range": (
        {"network": {"primaryCidr": "169.254.0.0/20"}},
        "nemo-rl-gke:network.primaryCidr: 169.254.0.0/20",
    ),
    "a loopback pod range": ({"network": {"podsCidr": "127.0.0.0/14"}}, "nemo-rl-gke:network.podsCidr"),
    "a multicast service range": ({"network": {"servicesCidr": "224.0.0.0/20"}}, "nemo-rl-gke:network.servicesCidr"),
    "a pod range too small for the nodes": ({"network": {"podsCidr": "10.4.0.0/24"}}, "nemo-rl-gke:network.podsCidr"),
    "a pod range inside the default VPC": (
        {"network": {"useDefaultNetwork": True, "podsCidr": "10.128.0.0/14"}},
        "nemo-rl-gke:network.podsCidr",
    ),
    "a pod range over the RDMA subnets": ({"network": {"podsCidr": "192.168.0.0/14"}}, "nemo-rl-gke:network"),
    "a host address instead of a range": (
        {"network": {"primaryCidr": "10.0.0.1/20"}},
        "nemo-rl-gke:network.primaryCidr",
    ),
    # Kubernetes rules
    "the kube-system namespace": ({"ray": {"namespace": "kube-system"}}, "nemo-rl-gke:ray.namespace: 'kube-system'"),
    "the default namespace": ({"ray": {"namespace": "default"}}, "nemo-rl-gke:ray.namespace: 'default'"),
    "a GKE system namespace": ({"ray": {"namespace": "gke-managed-system"}}, "nemo-rl-gke:ray.namespace"),
    "the managed Prometheus namespace": ({"ray": {"namespace": "gmp-system"}}, "nemo-rl-gke:ray.namespace"),
    "the default service account": ({"ray": {"serviceAccount": "default"}}, "nemo-rl-gke:ray.serviceAccount"),
    "a mount path with ..": ({"ray": {"mountPath": "/lustre/../etc"}}, "nemo-rl-gke:ray.mountPath"),
    "a mount path over /etc": ({"ray": {"mountPath": "/etc"}}, "nemo-rl-gke:ray.mountPath: '/etc'"),
    "a mount path under /usr": ({"ray": {"mountPath": "/usr/local/lustre"}}, "nemo-rl-gke:ray.mountPath"),
    "a mount path of /": ({"ray": {"mountPath": "/"}}, "nemo-rl-gke:ray.mountPath"),
    "a mount path over the NeMo-RL checkout": ({"ray": {"mountPath": "/opt"}}, "nemo-rl-gke:ray.mountPath: '/opt'"),
    "a mount path over Ray's session dir": ({"ray": {"mountPath": "/tmp"}}, "nemo-rl-gke:ray.mountPath"),
    # job overrides
    "an override without =": (
        {"job": {"overrides": ["grpo.max_num_steps"]}},
        "nemo-rl-gke:job.overrides[0]: 'grpo.max_num_steps' has no '='",
    ),
    "an override with an empty key": ({"job": {"overrides": ["=5"]}}, "nemo-rl-gke:job.overrides[0]: '=5' has no key"),
    "an append override with an empty key": ({"job": {"overrides": ["++=5"]}}, "nemo-rl-gke:job.overrides[0]"),
    "a deletion without a key": ({"job": {"overrides": ["~"]}}, "nemo-rl-gke:job.overrides[0]"),
    "an override with a shell command": ({"job": {"overrides": ["a=$(id)"]}}, "nemo-rl-gke:job.overrides[0]"),
    # secrets a recipe needs
    "a gated model without hfToken": (
        {
            "flavour": "h200",
            "region": "europe-west1",
            "zone": "europe-west1-b",
            "gpuPool": {"nodeCount": 2},
            "job": {"recipe": "gemma3-27b-gsm8k"},
        },
        "nemo-rl-gke:hfToken: not set",
    ),
    "wandbProject without wandbApiKey": ({"job": {"wandbProject": "grpo"}}, "nemo-rl-gke:wandbApiKey: not set"),
    "a token in plaintext": ({"hfToken": "hf_abc"}, "nemo-rl-gke:hfToken: stored in plaintext"),
    # labels
    "an empty label key": ({"labels": {"": "x"}}, "nemo-rl-gke:labels: label key '' is not allowed"),
    # the CPU pool's machine type: the catalogue of infra/machines.py
    "a GPU machine for the CPU pool": (
        {"cluster": {"systemPool": {"machineType": "a4-highgpu-8g"}}},
        "nemo-rl-gke:cluster.systemPool.machineType: 'a4-highgpu-8g' is a GPU machine type",
    ),
    "a made-up CPU machine type": (
        {"cluster": {"systemPool": {"machineType": "n2-imaginary-8"}}},
        "nemo-rl-gke:cluster.systemPool.machineType: 'n2-imaginary-8' is not in the CPU machine catalogue",
    ),
    "a CPU machine of a series the plan cannot price": (
        {"cluster": {"systemPool": {"machineType": "c4-standard-16"}}},
        "nemo-rl-gke:cluster.systemPool.machineType: 'c4-standard-16' is not in the CPU machine catalogue",
    ),
    "a 2-vCPU CPU pool": (
        {"cluster": {"systemPool": {"machineType": "n2-standard-2"}}, "ray": {"headCpu": 1, "headMemoryGib": 4}},
        "nemo-rl-gke:cluster.systemPool.machineType: 'n2-standard-2' leaves no room for a Ray head",
    ),
    # the control plane
    "0.0.0.0/0 as the allow-list": (
        {"cluster": {"controlPlaneAccess": "ip", "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]}},
        "nemo-rl-gke:cluster.masterAuthorizedNetworks: 0.0.0.0/0 covers every IPv4 address",
    ),
    "two halves that make every address": (
        {
            "cluster": {
                "controlPlaneAccess": "ip",
                "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/1"}, {"cidrBlock": "128.0.0.0/1"}],
            }
        },
        "nemo-rl-gke:cluster.masterAuthorizedNetworks: 0.0.0.0/1, 128.0.0.0/1 covers every IPv4 address",
    ),
    # the job: bounds, the model, credentials (the values are never repeated: test below)
    "a trillion steps": (
        {"job": {"maxNumSteps": 10**12}},
        "nemo-rl-gke:job.maxNumSteps: 1000000000000 is not allowed; allowed: at most 100000",
    ),
    "thousands of overrides": (
        {"job": {"overrides": [f"++extra.k{i}=1" for i in range(3000)]}},
        "nemo-rl-gke:job.overrides: 3000 overrides; allowed: at most 100",
    ),
    "an override of the recipe's model": (
        {"job": {"overrides": ["policy.model_name=meta-llama/Llama-3.1-8B"]}},
        "nemo-rl-gke:job.overrides[0]: 'policy.model_name=meta-llama/Llama-3.1-8B' changes the model of job.recipe",
    ),
    "deleting the recipe's model": ({"job": {"overrides": ["~policy.model_name"]}}, "nemo-rl-gke:job.overrides[0]"),
    "an override of a setting named for a credential": (
        {"job": {"overrides": ["+logger.wandb.api_key=abc"]}},
        "nemo-rl-gke:job.overrides[0]: sets 'api_key', a name for a credential",
    ),
}


@pytest.mark.parametrize("config,names", CONFIG_CASES.values(), ids=CONFIG_CASES.keys())
def test_a_bad_config_value_is_one_line_naming_the_key(config, names, tmp_path, entry):
    line = assert_refused(entry(stack_config(tmp_path, **config)), names)
    assert line.startswith("error: "), line


# ---------------------------------------------------------------- stack files: how they are read

FILE_CASES = {
    "a duplicate key": (
        "config:\n  nemo-rl-gke:project: a-project\n  nemo-rl-gke:project: my-gcp-project\n",
        "line 3: duplicate key 'nemo-rl-gke:project' (first at line 2)",
    ),
    "a duplicate nested key": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool:\n    nodeCount: 1\n    nodeCount: 8\n",
        "duplicate key 'nodeCount'",
    ),
    "a key both bare and namespaced": (
        "config:\n  project: a-project\n  nemo-rl-gke:project: my-gcp-project\n",
        "nemo-rl-gke:project is given twice",
    ),
    "a typo in the namespace": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gk:flavour: h200\n",
        "nemo-rl-gk:flavour: unknown namespace 'nemo-rl-gk'",
    ),
    "a namespace in capitals": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  NeMo-RL-GKE:flavour: h200\n",
        "NeMo-RL-GKE:flavour: unknown namespace",
    ),
    "a dotted key set without --path": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool.nodeCount: 2\n",
        "pulumi config set --path gpuPool.nodeCount",
    ),
    "a key with three parts": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  a:b:c: 1\n",
        "'a:b:c' is not a configuration key",
    ),
    "an alias bomb": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  x:a: &a [1,1,1,1,1,1,1,1,1,1]\n  x:b: &b "
        "[*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "  x:c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  x:d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        "  x:e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n  x:f: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
        f"expands to more than {MAX_VALUES} values",
    ),
    "an anchor inside itself": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  x:y: &a [*a]\n",
        "an anchor contains itself",
    ),
    "nesting ten thousand levels deep": ("config:\n  x:y: " + "[" * 10000 + "]" * 10000 + "\n", "nested too deeply"),
    "yes is a string in YAML 1.2": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:cluster:\n    deletionProtection: yes\n",
        "nemo-rl-gke:cluster.deletionProtection: 'yes' is not allowed; allowed: true or false",
    ),
    "an integer with a leading zero": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool:\n    nodeCount: 010\n",
        "nemo-rl-gke:gpuPool.nodeCount: 010 is ambiguous",
    ),
    "a .inf number": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:cost:\n    bucketGib: .inf\n",
        "nemo-rl-gke:cost.bucketGib: .inf is not allowed",
    ),
    "a .nan number": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:cost:\n    priceOverrides: "
        "{gpu.a4-highgpu-8g.spot: .NaN}\n",
        "nemo-rl-gke:cost.priceOverrides.gpu.a4-highgpu-8g.spot: .NaN",
    ),
    "a binary tag": (
        "config:\n  nemo-rl-gke:project: !!binary bXktZ2NwLXByb2plY3Q=\n",
        "tag !!binary is not supported",
    ),
    "a custom tag": ("config:\n  nemo-rl-gke:project: !env GCP_PROJECT\n", "tag !env is not supported"),
    "two documents": ("config:\n  nemo-rl-gke:project: my-gcp-project\n---\nconfig: {}\n", "holds one YAML document"),
    "no project at all": (
        "config:\n  nemo-rl-gke:flavour: b200\n",
        "nemo-rl-gke:project: required key is not set; allowed: Google Cloud project id",
    ),
    "a config that is a list": ("config:\n  - nemo-rl-gke:project\n", "'config' is not a map"),
    "a file that is a list": ("- config\n", "the file is not a map; allowed: a map with a 'config' map"),
    "a null map key": (
        "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:labels: {~: x}\n",
        "a map key is empty or null",
    ),
}


FILE_CASES["a plain key stored as a secret"] = (
    "config:\n  nemo-rl-gke:project:\n    secure: AAABAHsecretbytes\n",
    "nemo-rl-gke:project: stored as a secret, but it is a plain setting; allowed: a plain value",
)
FILE_CASES["a section stored with a secret inside"] = (
    "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:job:\n    overrides:\n      - secure: "
    "AAABAHsecretbytes\n",
    "nemo-rl-gke:job: stored as a secret",
)


@pytest.mark.parametrize("text,names", FILE_CASES.values(), ids=FILE_CASES.keys())
def test_a_stack_file_the_pulumi_cli_would_not_read_is_one_line(text, names, tmp_path, entry):
    assert_refused(entry(stack_text(tmp_path, text)), names)


def test_broken_yaml_is_one_line_with_the_line_number(tmp_path, entry):
    assert_refused(
        entry(stack_text(tmp_path, "config:\n  nemo-rl-gke:project: [unclosed\n")),
        "Pulumi.hostile.yaml: not valid YAML: line 3",
        allowed=False,
    )


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path, entry):
    assert_refused(
        entry(stack_text(tmp_path, b"config:\n  nemo-rl-gke:project: caf\xe9\n")),
        "not valid UTF-8 (byte 34)",
        allowed=False,
    )


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path, entry):
    text = b"config:\n" + b"  # padding\n" * (MAX_STACK_FILE_BYTES // 12 + 1)
    assert_refused(entry(stack_text(tmp_path, text)), f"at most {MAX_STACK_FILE_BYTES} bytes")


def test_many_values_without_an_alias_are_refused_as_many_values_not_as_aliases(tmp_path, entry):
    text = "config:\n  nemo-rl-gke:project: my-gcp-project\n  x:y: [" + ",".join(["1"] * (MAX_VALUES + 1)) + "]\n"
    line = assert_refused(entry(stack_text(tmp_path, text)), f"holds more than {MAX_VALUES} values")
    assert "alias" not in line, line


@pytest.mark.parametrize(
    "override",
    [
        "++env_vars.HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "++policy.generation.vllm_kwargs.hf_token=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "++extra.note=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
        "++logger.wandb.notes=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c",
        "++extra.url=https://user:Pa55word@example.com/x",
        "++extra.blob=Zx9Kq2LmN8pR4sT6vW1yB3cD5fG7hJ0kQ",
    ],
)
def test_a_credential_in_an_override_is_refused_without_being_repeated(override, tmp_path, entry, capsys):
    line = assert_refused(
        entry(stack_config(tmp_path, job={"overrides": [override]})), "nemo-rl-gke:job.overrides[0]: "
    )
    assert "hfToken and wandbApiKey" in line, line
    secret = override.partition("=")[2]
    assert secret not in line and secret[-12:] not in line, f"the credential is repeated: {line!r}"


@pytest.mark.parametrize(
    "override",
    [
        "policy.generation.max_new_tokens=512",
        "loss_fn.token_level_loss=false",
        "++policy.tokenizer.name=Qwen/Qwen2.5-1.5B-Instruct",
        "++logger.wandb.name=grpo-qwen2.5-1.5b-run-2026-12-03",
        "policy.model_name=Qwen/Qwen2.5-1.5B-Instruct",
    ],
)
def test_overrides_that_only_mention_tokens_are_not_mistaken_for_credentials(override, tmp_path):
    text = json.dumps({"config": {**BASE, "nemo-rl-gke:job": {"overrides": [override]}}})
    code, out, err = run_jobctl(
        ["submit", "--dry-run", "--stack", STACK, "--config-file", str(stack_text(tmp_path, text))]
    )
    assert err == "" and code == 0, err


def test_a_stack_file_that_is_a_directory_a_fifo_or_a_device_is_named_for_what_it_is(tmp_path, entry):
    import os

    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    for path, what in (
        (tmp_path, "is a directory"),
        (fifo, "is a named pipe (FIFO)"),
        (Path("/dev/null"), "is a character device"),
    ):
        line = assert_refused(entry(path), f"stack file {path} {what}")
        assert "not found" not in line


def test_a_stack_file_that_cannot_be_read_is_one_line_naming_it(tmp_path, entry, monkeypatch):
    import os

    path = stack_config(tmp_path)
    real_open = os.open

    def refuse(name, *args, **kwargs):  # what a file of another user's with mode 600 gives (tests may run as root)
        if Path(name) == path:
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    assert_refused(entry(path), f"stack file {path}: cannot be read (Permission denied)")


def test_a_config_file_that_is_not_there_is_named_with_its_path(tmp_path, entry):
    path = tmp_path / "elsewhere" / "Pulumi.hostile.yaml"
    assert_refused(entry(path), f"stack file {path} not found", allowed=False)
    assert_refused(entry(tmp_path / ("x" * 300)), "cannot be read (File name too long)")


def test_a_malformed_pulumi_config_environment_is_one_line_naming_it(monkeypatch, capsys):
    for value, says in (("{bad", "not valid JSON"), ("[1]", "a JSON list")):
        monkeypatch.setenv("PULUMI_CONFIG", value)
        assert_refused(run_plan(["--stack", "dev"], capsys), f"PULUMI_CONFIG: {says}")
    monkeypatch.delenv("PULUMI_CONFIG")
    monkeypatch.setenv("PULUMI_CONFIG_SECRET_KEYS", "nemo-rl-gke:hfToken")
    assert_refused(run_plan(["--stack", "dev"], capsys), "PULUMI_CONFIG_SECRET_KEYS: not valid JSON")


def test_a_missing_stack_file_names_the_stacks_there(capsys):
    assert_refused(
        run_plan(["--stack", "no-such-stack"], capsys), "stack file Pulumi.no-such-stack.yaml not found", allowed=False
    )


# ---------------------------------------------------------------- stack names Pulumi allows


@pytest.mark.parametrize("stack", ["2024", "-9", "google-ml", "9lives.v2"])
def test_a_stack_name_that_cannot_be_a_name_prefix_is_named(stack, tmp_path, capsys):
    path = stack_config(tmp_path)
    line = assert_refused(
        run_plan([f"--stack={stack}", "--config-file", str(path)], capsys), f"the stack name {stack!r}"
    )
    assert "nemo-rl-gke:namePrefix" in line


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["--stack", "x" * 5000], "--stack"),
        (["--stack", "../../etc/passwd"], "--stack"),
        (["--stack", "dev stack"], "--stack"),
        (["--stack", ""], "--stack"),
        (["--stack", "stäck"], "--stack"),
        (["--bogus"], "--bogus"),
        (["--out"], "--out"),
    ],
)
def test_a_bad_plan_flag_is_one_line_naming_it(argv, flag, capsys):
    assert_refused(run_plan(argv, capsys), flag, allowed=flag not in ("--bogus", "--out"))


def test_out_pointing_at_a_file_is_refused_before_the_plan_runs(tmp_path, capsys, monkeypatch):
    target = tmp_path / "manifests"
    target.write_text("not a directory")
    ran = []
    monkeypatch.setattr(offline_plan, "run_program", lambda *a, **k: ran.append(a))
    assert_refused(run_plan(["--out", str(target)], capsys), "--out")
    assert ran == [], "the plan ran before --out was checked"
    assert target.read_text() == "not a directory"


def test_an_empty_out_or_the_repository_root_is_refused_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    before = sorted(p.name for p in offline_plan.ROOT.iterdir())
    ran = []
    monkeypatch.setattr(offline_plan, "run_program", lambda *a, **k: ran.append(a))
    assert_refused(run_plan(["--out", ""], capsys), "argument --out: '' is not allowed")
    assert_refused(run_plan(["--graph", ""], capsys), "argument --graph: '' is not allowed")
    assert_refused(run_plan(["--out", str(offline_plan.ROOT)], capsys), "is the repository root")
    assert ran == [] and sorted(p.name for p in offline_plan.ROOT.iterdir()) == before


def test_an_out_or_graph_name_the_filesystem_refuses_is_one_line(tmp_path, capsys):
    too_long = tmp_path / ("d" * 300)
    assert_refused(run_plan(["--out", str(too_long)], capsys), "--out")
    assert_refused(run_plan(["--graph", str(too_long / "sub")], capsys), "--graph")


def test_out_under_a_file_and_graph_at_a_file_are_refused(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_refused(run_plan(["--out", str(blocker / "sub" / "dir")], capsys), "--out")
    assert_refused(run_plan(["--graph", str(blocker)], capsys), "--graph")
    assert not (blocker.parent / "sub").exists()


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["status", "--wait", "--timeout", "-1"], "--timeout"),
        (["submit", "--wait", "--timeout", "nan"], "--timeout"),
        (["status", "--wait", "--timeout", "0"], "--timeout"),
        (["logs", "--tail", "0"], "--tail"),
        (["logs", "--tail", "ten"], "--tail"),
        (["dashboard", "--port", "70000"], "--port"),
        (["watch", "--check-interval", "0"], "--check-interval"),
        (["watch", "--check-interval", "inf"], "--check-interval"),
        (["list", "--namespace", "Kube System"], "--namespace"),
        (["list", "--stack", "y" * 101], "--stack"),
        (["submit", "--stack", "a/b"], "--stack"),
        (["explode"], "invalid choice: 'explode'"),
        ([], "the following arguments are required"),
    ],
)
def test_a_bad_cli_flag_is_one_line_naming_it(argv, flag):
    assert_refused(run_jobctl(argv), flag, allowed=flag.startswith("--"))


@pytest.mark.parametrize(
    "argv,says",
    [
        (
            ["status", "--address", "javascript:alert(1)"],
            "--address javascript:alert(1): scheme 'javascript' is not allowed; allowed: http, https",
        ),
        (["status", "--address", "file:/etc/passwd"], "--address file:/etc/passwd: scheme 'file' is not allowed"),
        (
            ["list", "--endpoint", "http://203.0.113.10", "--head-service", "h"],
            "--endpoint http://203.0.113.10: scheme 'http' is not allowed",
        ),
        (
            ["list", "--endpoint", "ftp://203.0.113.10", "--head-service", "h"],
            "--endpoint ftp://203.0.113.10: scheme 'ftp' is not allowed",
        ),
        (
            ["list", "--endpoint", "javascript:x", "--head-service", "h"],
            "--endpoint javascript:x: scheme 'javascript' is not allowed; allowed: https",
        ),
    ],
)
def test_a_url_flag_with_the_wrong_scheme_is_refused_for_its_scheme(argv, says):
    # Before any network use: nothing listens at these addresses, so a probe would be exit 3, not 2.
    line = assert_refused(run_jobctl([*argv, "--stack", "dev"]), says)
    assert "port" not in line, line


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--address", "http://admin:S3cretPW@127.0.0.1:8265"],
        ["status", "--address", "admin:S3cretPW@127.0.0.1:8265"],
        ["status", "--address", "http://admin:S3cretPW@127.0.0.1:notaport"],
        ["list", "--endpoint", "https://admin:S3cretPW@203.0.113.10", "--head-service", "h", "--ca-file", "/dev/null"],
        ["dashboard", "--address", "http://admin:S3cretPW@127.0.0.1:8265"],
    ],
)
def test_a_password_in_a_url_flag_is_refused_and_never_repeated(argv):
    line = assert_refused(run_jobctl([*argv, "--stack", "dev"]), "***@", allowed=False)
    assert "S3cretPW" not in line and "admin" not in line, line


# ---------------------------------------------------------------- valid, if unusual

VALID_CASES = {
    "CRLF line ends and a byte-order mark": (
        b"\xef\xbb\xbfconfig:\r\n  nemo-rl-gke:project: my-gcp-project\r\n  nemo-rl-gke:zone: us-east1-b\r\n"
    ),
    "12:30 is a time, not 750": "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:cluster:\n    "
    "maintenanceStartTime: 12:30\n",
    "bare keys belong to the project": "config:\n  project: my-gcp-project\n  flavour: b200\n",
    "the old ns:config:key spelling": "config:\n  nemo-rl-gke:config:project: my-gcp-project\n",
    "an empty section means its defaults": "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool:\n "
    " nemo-rl-gke:cluster:\n    systemPool:\n",
    "unicode label values and keys": "config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:labels:\n    "
    "équipe: données\n    班: 研究\n",
    "strings pulumi config set --path writes": (
        'config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:gpuPool:\n    nodeCount: "1"\n'
        '  nemo-rl-gke:lustre:\n    exportOnDestroy: "False"\n'
    ),
    "provider keys of other namespaces": "config:\n  nemo-rl-gke:project: my-gcp-project\n  gcp:project: "
    "my-gcp-project\n  kubernetes:enableServerSideApply: true\n",
    "anchors and merge keys within limits": "config:\n  nemo-rl-gke:project: my-gcp-project\n  x:base: &base "
    "{nodeCount: 1}\n  nemo-rl-gke:gpuPool:\n    <<: *base\n    provisioning: spot\n",
    "a zone outside the catalogue with the opt-in": "config:\n  nemo-rl-gke:project: my-gcp-project\n  "
    "nemo-rl-gke:region: us-east1\n  nemo-rl-gke:zone: us-east1-c\n  nemo-rl-gke:allowUncataloguedZone: true\n",
}


@pytest.mark.parametrize("text", VALID_CASES.values(), ids=VALID_CASES.keys())
def test_unusual_but_valid_stack_files_keep_working(text, tmp_path):
    code, out, err = run_jobctl(
        ["submit", "--dry-run", "--stack", STACK, "--config-file", str(stack_text(tmp_path, text))]
    )
    assert (code, err) == (0, ""), err
    assert out.startswith("submission id: hostile-"), out


@pytest.mark.parametrize("stack", ["My_Stack.v2", "Dev", "a" * 100])
def test_every_stack_name_pulumi_allows_gets_a_valid_prefix_and_label(stack, tmp_path):
    from infra.config import parse
    from infra.naming import labels

    cfg = parse({"project": "my-gcp-project"}, stack)
    assert 1 <= len(cfg.name_prefix) <= 20 and cfg.name_prefix[0].isalpha() and cfg.name_prefix.islower()
    assert cfg.name_prefix != parse({"project": "my-gcp-project"}, stack.lower()).name_prefix or stack == stack.lower()
    value = labels(stack, "x")["stack"]
    assert len(value) <= 63 and all(c.islower() or c.isdigit() or c in "_-" for c in value), value
    code, out, err = run_jobctl(["submit", "--dry-run", "--stack", stack, "--config-file", str(stack_config(tmp_path))])
    assert (code, err) == (0, ""), err


def test_the_plan_of_an_unusual_stack_is_valid_json(tmp_path, capsys):
    text = VALID_CASES["unicode label values and keys"] + "  nemo-rl-gke:cost:\n    bucketGib: 1e3\n"
    code, out, err = run_plan(
        ["--stack", "Odd.Stack", "--config-file", str(stack_text(tmp_path, text)), "--json"], capsys
    )
    assert code == 0, err
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the plan JSON"))
    bucket = next(r for r in doc["resources"] if r["type"] == "gcp:storage/bucket:Bucket")
    assert bucket["inputs"]["labels"]["équipe"] == "données"
    assert bucket["inputs"]["labels"]["stack"] == "odd-stack"


@pytest.mark.parametrize(
    "override",
    [
        "a=$(id)",
        "a=`id`",
        "a=b; rm -rf /",
        "a=b && curl x",
        "a=b|sh",
        "a=b\nc=d",
        "a='b'",
        'a="b"',
        "a=b c",
        "a=${HOME}",
        "a=b>f",
    ],
)
def test_shell_metacharacters_and_newlines_in_an_override_are_one_line(override, tmp_path):
    result = run_jobctl(
        ["submit", "--stack", STACK, "--config-file", str(stack_config(tmp_path, job={"overrides": [override]}))]
    )
    line = assert_refused(result, "nemo-rl-gke:job.overrides[0]: ")
    assert "no spaces, quotes, shell metacharacters or newlines" in line


@pytest.mark.parametrize(
    "config,key",
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
        ({"ray": {"namespace": "n" * 64}}, "ray.namespace"),
        ({"lustre": {"filesystem": "f" * 9}}, "lustre.filesystem"),
        ({"job": {"overrides": ["a=" + "b" * 600]}}, "job.overrides[0]"),
    ],
)
def test_metacharacters_and_overlong_names_are_one_line_naming_the_key(config, key, tmp_path):
    result = run_jobctl(["submit", "--stack", STACK, "--config-file", str(stack_config(tmp_path, **config))])
    assert_refused(result, f"error: nemo-rl-gke:{key}: ")


def test_the_program_sets_exactly_the_label_keys_the_config_reserves():
    from infra.config import RESERVED_LABEL_KEYS
    from infra.naming import labels

    assert set(labels("dev", "x", {"team": "ml"})) - {"team"} == set(RESERVED_LABEL_KEYS)


@pytest.mark.parametrize("limit", list(Limit))
def test_derived_cloud_names_never_exceed_the_api_limit_and_stay_distinct(limit):
    prefix = "a" * 20
    names = {
        cloud_name(prefix, role, limit) for role in ("rdma-subnet-0", "rdma-subnet-1", "gvnic-allow-internal-and-more")
    }
    assert all(len(n) <= limit for n in names), names
    assert len(names) == 3, f"truncation to {limit} made names collide: {names}"
    assert all(not n.endswith("-") for n in names)


# ---------------------------------------------------------------- issue 36: the third pass, end to end

TOKEN = "hf_abcdefghijklmnopqrstuvwxyzABCD"
W_AND_B = "0123456789abcdef0123456789abcdef01234567"

THIRD_PASS = {
    "an override that divides by zero": ({"job": {"overrides": ["policy.dtensor_cfg.tensor_parallel_size=0"]}}, "job"),
    "a vLLM size of 00": ({"job": {"overrides": ["policy.generation.vllm_cfg.tensor_parallel_size=00"]}}, "job"),
    "a price that overflows": ({"cost": {"priceOverrides": {"gpu.a4-highgpu-8g.spot": 1.7e308}}}, "cost"),
    "a W&B key as the W&B project": ({"job": {"wandbProject": W_AND_B}}, "job.wandbProject"),
    "a token as the project": ({"project": TOKEN}, "nemo-rl-gke:project"),
    "a token as the prefix": ({"namePrefix": TOKEN}, "namePrefix"),
    "a token as the namespace": ({"ray": {"namespace": TOKEN}}, "ray.namespace"),
    "a token as a label": ({"labels": {"team": TOKEN}}, "labels"),
    "a token as the recipe": ({"job": {"recipe": TOKEN}}, "job"),
    "a token in an image tag": ({"ray": {"ncclInstallerImage": f"us-docker.pkg.dev/x/y:{TOKEN}"}}, "ray"),
    "a token as a price key": ({"cost": {"priceOverrides": {TOKEN: -1}}}, "cost.priceOverrides"),
    "a token in lustre.importFrom": ({"lustre": {"importFrom": f"gs://u:{TOKEN}@b/x/"}}, "lustre.importFrom"),
    "a token as a CIDR": ({"cluster": {"masterAuthorizedNetworks": [{"cidrBlock": TOKEN}]}}, "cidrBlock"),
    "a token in an override map": ({"job": {"overrides": [{"a": TOKEN}]}}, "job.overrides[0]"),
    "full-width digits in minMasterVersion": ({"cluster": {"minMasterVersion": "１.３５.０-gke.１０００"}}, "cluster"),
    "full-width digits in maintenanceStartTime": ({"cluster": {"maintenanceStartTime": "0３:0０"}}, "cluster"),
    "Arabic digits in the chart version": (
        {"ray": {"chartVersion": "١.٧.٠"}, "allowUntestedVersions": True},
        "ray.chartVersion",
    ),
    "a .. folder in lustre.importFrom": ({"lustre": {"importFrom": "gs://bucket/a/../b/"}}, "lustre.importFrom"),
    "an IPv6 address as a CIDR": ({"cluster": {"masterAuthorizedNetworks": [{"cidrBlock": "2001:db8::"}]}}, "IPv6"),
}


@pytest.mark.parametrize("case", THIRD_PASS.values(), ids=THIRD_PASS.keys())
def test_the_third_pass_config_cases_are_one_line_and_never_repeat_a_credential(case, tmp_path, entry):
    config, names = case
    line = assert_refused(entry(stack_config(tmp_path, **config)), names)
    assert TOKEN not in line and "abcdefghij" not in line and W_AND_B not in line, line


YAML_THIRD_PASS = {
    "!!bool yes": ("  nemo-rl-gke:cluster:\n    deletionProtection: !!bool yes\n", "true or false"),
    "!!bool on": ("  nemo-rl-gke:cluster:\n    deletionProtection: !!bool on\n", "true or false"),
    "!!int abc": ("  nemo-rl-gke:gpuPool:\n    nodeCount: !!int abc\n", "a whole number"),
    "!!float x": ("  nemo-rl-gke:job:\n    maxLostMinutes: !!float x\n", "a number"),
    "5000 digits": ("  nemo-rl-gke:gpuPool:\n    nodeCount: 1" + "0" * 5000 + "\n", "64 bits"),
    "!!int 0x": ("  nemo-rl-gke:gpuPool:\n    nodeCount: !!int 0x\n", "a whole number"),
    "a token as a key": (f"  {TOKEN}:x:y: 1\n", "configuration key"),
}


@pytest.mark.parametrize("case", YAML_THIRD_PASS.values(), ids=YAML_THIRD_PASS.keys())
def test_the_third_pass_yaml_cases_are_one_line(case, tmp_path, entry):
    body, allowed = case
    text = "config:\n  nemo-rl-gke:project: my-gcp-project\n" + body
    line = assert_refused(entry(stack_text(tmp_path, text)), allowed)
    assert "abcdefghij" not in line and len(line) < 500, line


def test_an_esc_environment_named_like_a_token_is_not_repeated(tmp_path, entry):
    text = f"environment:\n  - team/{TOKEN}\nconfig:\n  nemo-rl-gke:project: my-gcp-project\n"
    line = assert_refused(entry(stack_text(tmp_path, text)), "environment")
    assert "abcdefghij" not in line


def test_a_project_file_that_is_not_utf8_is_one_line(tmp_path, entry, monkeypatch):
    from infra import stack_file

    project = tmp_path / "Pulumi.yaml"
    project.write_bytes(b"name: nemo-rl-gke\nruntime: python\ndescription: caf\xe9\n")
    monkeypatch.setattr(stack_file, "PROJECT_FILE", project)
    assert_refused(entry(stack_config(tmp_path)), "Pulumi.yaml: not valid UTF-8")


def test_a_deeply_nested_pulumi_config_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("PULUMI_CONFIG", "[" * 100_000 + "]" * 100_000)
    assert_refused(run_plan(["--stack", "dev"], capsys), "PULUMI_CONFIG: nested too deeply")


def test_a_plaintext_token_from_a_config_file_names_that_file(tmp_path, entry):
    path = stack_config(tmp_path, hfToken=TOKEN)
    line = assert_refused(entry(path), f"remove it from --config-file {path}")
    assert "abcdefghij" not in line


@pytest.mark.parametrize(
    "address",
    [
        "http://nemo-rl-head-svc..nemo-rl.svc:8265",
        "http://localhost..:8265",
        "http://.localhost:8265",
        "http://" + "a" * 64 + ".svc:8265",
        "http://u:Zq#9x@127.0.0.1:9",
    ],
)
def test_the_third_pass_addresses_are_one_line_naming_the_flag(address):
    line = assert_refused(run_jobctl(["list", "--stack", "dev", "--address", address]), "--address")
    assert "Zq" not in line
    line = assert_refused(
        run_jobctl(["list", "--stack", "dev", "--endpoint", address.replace("http:", "https:"), "--head-service", "h"]),
        "--endpoint",
    )
    assert "Zq" not in line


@pytest.mark.parametrize(
    "argv",
    [
        ["--stack", f"{TOKEN}!"],
        ["--namespace", TOKEN],
        ["--tail", W_AND_B],
    ],
)
def test_a_token_typed_as_a_flag_value_is_not_repeated(argv):
    command = ["logs"] if "--tail" in argv else ["list"]
    line = assert_refused(run_jobctl([*command, *argv]), "argument")
    assert "abcdefghij" not in line and W_AND_B not in line and "a value that looks like a credential" in line, line


# ---------------------------------------------------------------- fourth pass: the day-2 CLI and the watcher

CLOSED = "http://127.0.0.1:9"
"""Nothing listens there: a case refused before the network is exit 2, one that reached it would be exit 3."""


@pytest.mark.parametrize("command", ["stop", "status", "logs"])
@pytest.mark.parametrize(
    "job",
    [TOKEN, W_AND_B, "", " ", "../version", "a/b", "x?y", ".hidden", "x" * 100_000, "a\nerror: forged"],
    ids=["token", "wandb-key", "empty", "blank", "dot-dot", "slash", "query", "dot", "100k", "newline"],
)
def test_a_job_flag_that_cannot_be_a_submission_id_is_refused_before_any_request(command, job):
    # '' is an unset variable: read as "no --job", `stop` would stop the stack's newest job, the running attempt.
    line = assert_refused(run_jobctl([command, "--stack", "dev", "--address", CLOSED, "--job", job]), "--job")
    assert "abcdefghij" not in line and W_AND_B not in line and "forged" not in line.partition("'")[0], line
    assert len(line) < 600, f"{len(line)} characters"


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--address", f"{CLOSED}\nerror: forged"],
        ["list", "--endpoint", "https://203.0.113.10\nerror: forged", "--head-service", "h"],
        ["list", "--endpoint", "https://gke.example.com", "--head-service", "h", "--ca-file", "x\nerror: forged"],
        ["status", "--address", CLOSED, "--ledger-file", "x\nerror: forged"],
        ["list", "--config-file", "x\nerror: forged"],
        ["list", "--namespace", "a\nerror: forged"],
    ],
)
def test_a_newline_in_a_flag_value_never_forges_a_second_error_line(argv):
    code, out, err = run_jobctl([*argv, "--stack", "dev"])
    assert code == 2 and out == "", (code, err)
    # The value is shown escaped inside the one line, never as a line of its own.
    assert err.count("\n") == 1 and err.startswith("error: ") and "\nerror: forged" not in err, err


@pytest.mark.parametrize(
    "address",
    ["http://127.0.0.1\x00:9", "http://nemo\x01rl.svc:8265", "http://nemo rl.svc:8265", "http://127.0.0.1:9/\x1b[2J"],
)
def test_a_control_character_or_space_in_a_url_flag_is_a_bad_address_not_an_unreachable_one(address):
    line = assert_refused(run_jobctl(["list", "--stack", "dev", "--address", address]), "--address")
    assert "\x1b" not in line and "\x00" not in line and "\x01" not in line, line
    line = assert_refused(
        run_jobctl(["list", "--stack", "dev", "--endpoint", address.replace("http:", "https:"), "--head-service", "h"]),
        "--endpoint",
    )


@pytest.mark.parametrize(
    "address", ["http://admin:Pw7//x@127.0.0.1:9", "admin:Pw7//x@127.0.0.1:9", "http://admin:Pw7//a//b@127.0.0.1:9"]
)
def test_a_password_holding_double_slashes_is_masked_whole(address):
    for argv in (
        ["list", "--address", address],
        ["list", "--endpoint", address.replace("http:", "https:"), "--head-service", "h"],
        ["dashboard", "--address", address],
    ):
        line = assert_refused(run_jobctl([*argv, "--stack", "dev"]), "***@", allowed=False)
        assert "Pw7" not in line and "admin" not in line and "//x" not in line, line


def dev_run_id() -> str:
    from jobctl.stack import build_spec, load_stack

    return build_spec(load_stack("dev")).run_id


def ledger_text(**attempt: Any) -> str:
    """A ledger of the dev stack's run whose one attempt has `attempt`'s fields (NaN as Python's JSON writes it)."""
    whole = {"attempt": 1, "submission_id": "dev-x", "start": 1.7e9, "nodes": 2, **attempt}
    return json.dumps({"stack": "dev", "run_id": dev_run_id(), "attempts": [whole]}, allow_nan=True)


LEDGER_SHAPES = {
    "a list": lambda: "[]",
    "a string": lambda: '"ledger"',
    "attempts as text": lambda: json.dumps({"stack": "dev", "run_id": dev_run_id(), "attempts": "x"}),
    "an attempt that is a number": lambda: json.dumps({"stack": "dev", "run_id": dev_run_id(), "attempts": [1]}),
    "a start that is text": lambda: ledger_text(start="yesterday"),
    "a NaN start": lambda: ledger_text(start=float("nan")),
    "a start of 1e309": lambda: ledger_text().replace("1700000000.0", "1e309"),
    "a start beyond any calendar": lambda: ledger_text(start=1e300),
    "nodes as a boolean": lambda: ledger_text(nodes=True),
}


@pytest.mark.parametrize("make", LEDGER_SHAPES.values(), ids=LEDGER_SHAPES.keys())
def test_a_ledger_file_of_the_wrong_shape_is_one_line_before_any_request(make, tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text(make())
    line = assert_refused(
        run_jobctl(["status", "--stack", "dev", "--address", CLOSED, "--ledger-file", str(path)]), "--ledger-file"
    )
    assert "Traceback" not in line


def within(seconds: float, action: Callable[[], Any]) -> Any:
    """`action()`, failing the test (not hanging it) when it takes longer than `seconds`."""
    import threading

    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(action()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds}s (a FIFO waited on?)"
    return result[0]


def test_a_ledger_file_that_is_a_fifo_a_device_or_a_directory_is_refused_without_waiting(tmp_path):
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "named pipe"), (Path("/dev/zero"), "character device"), (tmp_path, "directory")):
        argv = ["status", "--stack", "dev", "--address", CLOSED, "--ledger-file", str(path)]
        line = assert_refused(within(10, lambda argv=argv: run_jobctl(argv)), "--ledger-file")
        assert kind in line, line


def watcher_files(tmp_path: Path, run: Any) -> list[str]:
    from workloads.job_types import JobSpec

    spec = tmp_path / "spec.json"
    job = JobSpec.create(stack="dev", recipe="r", entrypoint="true", runtime_env={})
    spec.write_text(json.dumps(job.to_dict()))
    run_file = tmp_path / "run.json"
    run_file.write_text(run if isinstance(run, str) else json.dumps(run))
    return ["--address", CLOSED, "--spec-file", str(spec), "--run-file", str(run_file), "--once"]


def run_watcher(argv: list[str]) -> tuple[int, str, str]:
    from workloads import watcher

    out, err = io.StringIO(), io.StringIO()
    code = watcher.main(argv, out, err)
    return code, out.getvalue(), err.getvalue()


RUN_FILE_SHAPES = {
    "a list": [],
    "a node count as text": {"node_count": "eight"},
    "a price of NaN": '{"node_hour_usd": NaN}',
    "a budget of 1e309": '{"budget_usd": 1e309}',
    "a gang wait as text": {"gang_max_wait_minutes": "soon"},
    "rungs that are not pairs": {"gang_rungs": 5},
    "a recovery policy that is a list": {"recovery": []},
    "a namespace that is a number": {"ray_namespace": 5},
}


@pytest.mark.parametrize("run", RUN_FILE_SHAPES.values(), ids=RUN_FILE_SHAPES.keys())
def test_a_run_file_of_the_wrong_shape_is_one_line_naming_the_flag_before_any_request(run, tmp_path):
    assert_refused(run_watcher(watcher_files(tmp_path, run)), "--run-file")


def test_a_state_file_that_is_a_fifo_or_a_directory_is_refused_before_any_request(tmp_path):
    import os

    fifo = tmp_path / "state.fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "named pipe"), (Path("/dev/zero"), "character device"), (tmp_path, "directory")):
        argv = [*watcher_files(tmp_path, {}), "--state-file", str(path)]
        line = assert_refused(within(10, lambda argv=argv: run_watcher(argv)), "--state-file")
        assert kind in line, line


NOT_RAY = {
    "Jupyter's /api/version": ({"/api/version": (200, "application/json", b'{"version": "2.14.2"}')}, None, []),
    "an HTML page": ({}, (200, "text/html", b"<!doctype html><title>Sign in</title>"), []),
    "a job list that is not a list": (
        {
            "/api/version": (200, "application/json", b'{"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}'),
            "/api/jobs": (200, "application/json", b'{"jobs": 1}'),
        },
        None,
        [],
    ),
    "a job that is a list": (
        {
            "/api/version": (200, "application/json", b'{"version": "4", "ray_version": "2.60.0", "ray_commit": "x"}'),
            "/api/jobs/dev-x": (200, "application/json", b"[1, 2]"),
        },
        None,
        ["--job", "dev-x"],
    ),
}


@pytest.mark.parametrize("routes,default,job", NOT_RAY.values(), ids=NOT_RAY.keys())
def test_a_server_that_is_not_a_ray_dashboard_is_one_line_exit_3(routes, default, job):
    from stalled_http import AnsweringServer

    with AnsweringServer(routes, default) as url:
        command = ["status", *job] if job else ["list"]
        code, out, err = run_jobctl([*command, "--stack", "dev", "--address", url])
    assert code == 3 and out == "" and err.count("\n") == 1, (code, err)
    assert "not a Ray dashboard" in err and "Traceback" not in err, err


RAY_CLUSTERS = {
    "no spec": {"metadata": {"name": "nemo-rl"}},
    "a spec that is a list": {"spec": []},
    "worker groups that are a map": {"spec": {"workerGroupSpecs": {"gpu": {}}}},
    "no group of that name": {"spec": {"workerGroupSpecs": [{"groupName": f"{TOKEN}\nerror: forged"}]}},
    "a group that is a string": {"spec": {"workerGroupSpecs": ["gpu"]}},
    "replicas as text": {"spec": {"workerGroupSpecs": [{"groupName": "gpu", "replicas": "eight"}]}},
    "a cluster that is a list": [],
}


@pytest.mark.parametrize("cluster", RAY_CLUSTERS.values(), ids=RAY_CLUSTERS.keys())
def test_a_raycluster_of_an_unexpected_shape_is_one_clear_line(cluster):
    from stalled_http import AnsweringServer

    from workloads.gang_wait import VIEW_ERRORS, KubeGangView

    path = "/apis/ray.io/v1/namespaces/ns/rayclusters/nemo-rl"
    with AnsweringServer({path: (200, "application/json", json.dumps(cluster).encode())}) as url:
        view = KubeGangView(url, "t", None, "ns", "nemo-rl", "gpu", timeout=5)
        with pytest.raises(VIEW_ERRORS) as raised:
            view.group()
    err = raised.value
    assert isinstance(err, (ValueError, LookupError)) and not isinstance(err, (KeyError, StopIteration)), repr(err)
    text = str(err)
    assert "RayCluster nemo-rl" in text and "\n" not in text and "abcdefghij" not in text and len(text) < 600, text


# ---------------------------------------------------------------- issue 46: the fourth pass, stack file and plan

LOWER_HF = "hf_abcdefghijklmnopqrstuvwxyzabcdef"
LOWER_GHP = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"

FOURTH_PASS = {
    "a lowercase hf_ token as a label value": ({"labels": {"team": LOWER_HF}}, "nemo-rl-gke:labels"),
    "a lowercase ghp_ token as a label key": ({"labels": {LOWER_GHP: "ml"}}, "nemo-rl-gke:labels"),
    "the namespace nemo-rl": ({"nemo-rl:gpuPool": {"nodeCount": 2}}, "nemo-rl:gpuPool: unknown namespace 'nemo-rl'"),
    "the namespace NeMo-RL": ({"NeMo-RL:gpuPool": {"nodeCount": 2}}, "NeMo-RL:gpuPool: unknown namespace 'NeMo-RL'"),
    "the namespace rl-gke": ({"rl-gke:flavour": "h200"}, "rl-gke:flavour: unknown namespace 'rl-gke'"),
    "a gang preempted more than once an hour": (
        {"gpuPool": {"nodeCount": 2}, "cost": {"spotPreemptionsPerNodeDay": 24}},
        "nemo-rl-gke:cost.spotPreemptionsPerNodeDay",
    ),
    "maxLostMinutes below one save cycle": ({"job": {"maxLostMinutes": 1}}, "nemo-rl-gke:job.maxLostMinutes"),
    "a bucket no estimate can price": ({"cost": {"bucketGib": 1e300}}, "nemo-rl-gke:cost.bucketGib"),
    "a rung with two unknown keys": (
        {"gpuPool": {"capacity": {"ladder": ["spot", {"reservaton": "my-res", "size": 2}]}}},
        "nemo-rl-gke:gpuPool.capacity.ladder[1]",
    ),
    "YAML null as a number": ({"gpuPool": {"nodeCount": None}}, "nemo-rl-gke:gpuPool.nodeCount: null"),
    "YAML null as a list entry": ({"job": {"overrides": [None]}}, "nemo-rl-gke:job.overrides[0]: null"),
    "a 5000-digit number inside a JSON-string value": (
        {"gpuPool": '{"nodeCount": 1' + "0" * 5000 + "}"},
        "nemo-rl-gke:gpuPool",
    ),
}


@pytest.mark.parametrize("case", FOURTH_PASS.values(), ids=FOURTH_PASS.keys())
def test_the_fourth_pass_config_cases_are_one_line_and_never_repeat_a_credential(case, tmp_path, entry):
    config, names = case
    line = assert_refused(entry(stack_config(tmp_path, **config)), names)
    assert "abcdefghij" not in line and "None" not in line and len(line) < 600, line


def test_a_disk_image_error_says_the_forms_in_words_never_a_regular_expression(tmp_path, entry):
    line = assert_refused(
        entry(stack_config(tmp_path, gpuPool={"imageCacheDiskImage": "my image"})),
        "nemo-rl-gke:gpuPool.imageCacheDiskImage",
    )
    assert "global/images/NAME" in line and "^(" not in line and "{4,28}" not in line, line


def test_the_consoles_full_url_of_a_disk_image_is_read_as_its_path(tmp_path, capsys):
    url = "https://www.googleapis.com/compute/v1/projects/my-images-1/global/images/nemo-rl-cache"
    path = stack_config(tmp_path, gpuPool={"imageCacheDiskImage": url})
    code, out, err = run_plan(["--stack", STACK, "--config-file", str(path), "--json"], capsys)
    assert code == 0, err
    pools = [r for r in json.loads(out)["resources"] if r["type"] == "gcp:container/nodePool:NodePool"]
    disks = [d for p in pools for d in (p["inputs"].get("nodeConfig") or {}).get("secondaryBootDisks") or []]
    assert {d["diskImage"] for d in disks} == {"projects/my-images-1/global/images/nemo-rl-cache"}


def test_a_known_provider_namespace_is_left_to_its_provider(tmp_path, capsys):
    path = stack_config(tmp_path, **{"gcp:project": "my-gcp-project", "kubernetes:context": "x", "pulumi:tags": {}})
    code, out, err = run_plan(["--stack", STACK, "--config-file", str(path)], capsys)
    assert code == 0, err


# ----- --out and --graph: one path guard, everything checked before anything is written


def _no_plan_run(monkeypatch) -> list:
    ran: list = []
    monkeypatch.setattr(offline_plan, "run_program", lambda *a, **k: ran.append(a))
    return ran


def test_graph_never_writes_through_a_link_at_graph_mmd(tmp_path, capsys, monkeypatch):
    ran = _no_plan_run(monkeypatch)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "graph"
    out.mkdir()
    (out / "graph.mmd").symlink_to(victim)
    assert_refused(run_plan(["--graph", str(out)], capsys), f"--graph {out}")
    assert ran == [] and victim.read_text() == "keep"


def test_graph_onto_a_fifo_is_refused_without_opening_it(tmp_path, capsys, monkeypatch):
    import os

    ran = _no_plan_run(monkeypatch)
    os.mkfifo(tmp_path / "graph.mmd")
    assert_refused(run_plan(["--graph", str(tmp_path)], capsys), "--graph")
    assert ran == []


@pytest.mark.parametrize("folder", ["infra", "workloads", "jobctl", "tools", "tests", "tools/new-dir", "docs"])
def test_out_and_graph_inside_the_source_tree_are_refused(folder, capsys, monkeypatch):
    ran = _no_plan_run(monkeypatch)
    target = offline_plan.ROOT / folder
    before = sorted(p.name for p in target.iterdir()) if target.is_dir() else None
    assert_refused(run_plan(["--out", str(target)], capsys), "--out")
    assert_refused(run_plan(["--graph", str(target)], capsys), "--graph")
    assert ran == [] and (sorted(p.name for p in target.iterdir()) if target.is_dir() else None) == before


def test_out_with_a_graph_that_cannot_be_written_writes_no_manifest(tmp_path, capsys, monkeypatch):
    ran = _no_plan_run(monkeypatch)
    out, graph = tmp_path / "out", tmp_path / "graph"
    (graph / "graph.mmd").mkdir(parents=True)
    assert_refused(run_plan(["--out", str(out), "--graph", str(graph)], capsys), "--graph")
    assert ran == [] and not out.exists()


# ----- --compare: its document's values are data, never repeated where they could carry a credential


def _compare_doc(tmp_path: Path, edit: Callable[[dict], None]) -> Path:
    doc = json.loads((offline_plan.ROOT / "tests" / "golden" / "dev.json").read_text())
    edit(doc)
    path = tmp_path / "before.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda d: d.update(outputs=5), "outputs is not a map"),
        (lambda d: d.update(outputs=["runId"]), "outputs is not a map"),
        (lambda d: d["resources"][0].pop("inputs"), "resources[0] is not a resource with a name, a type and a map"),
        (lambda d: d["outputs"].update(runId=7), "outputs.runId is not a string"),
    ],
)
def test_compare_with_a_document_of_the_wrong_shape_is_one_line_and_exit_2(edit, reason, tmp_path, capsys):
    path = _compare_doc(tmp_path, edit)
    line = assert_refused(run_plan(["--stack", "dev", "--compare", str(path)], capsys), f"--compare {path}")
    assert reason in line, line


def test_compare_prints_no_forged_line_and_no_credential_from_the_document(tmp_path, capsys):
    def edit(doc: dict) -> None:
        doc["outputs"]["runId"] = f"dev-run\nerror: forged line {LOWER_HF}"
        doc["outputs"]["jobId"] = LOWER_GHP
        for r in doc["resources"]:
            if r["type"] == "gcp:container/nodePool:NodePool":
                r["inputs"].setdefault("nodeConfig", {})["serviceAccount"] = f"{TOKEN}@x.iam.gserviceaccount.com"

    path = _compare_doc(tmp_path, edit)
    code, out, err = run_plan(["--stack", "dev", "--compare", str(path)], capsys)
    assert code == 0, err
    assert not any(line.startswith("error: forged") for line in (out + err).splitlines())
    for secret in ("abcdefghij", LOWER_GHP, TOKEN):
        assert secret not in out and secret not in err


def test_a_kubernetes_api_trickling_its_answer_ends_at_the_deadline():
    import time

    from stalled_http import StalledServer

    from workloads.gang_wait import VIEW_ERRORS, KubeGangView

    with StalledServer(answer_version=False, trickle=0.2, trickle_bytes=40) as url:  # 8 s of bytes
        view = KubeGangView(url, "t", None, "ns", "nemo-rl", "gpu", timeout=0.5)  # each byte well within 0.5 s
        started = time.monotonic()
        with pytest.raises(VIEW_ERRORS, match="got no whole answer within 1.5s"):
            view.group()
    assert time.monotonic() - started < 4


@pytest.mark.parametrize("flag", ["--run-file", "--state-file", "--heartbeat-file", "--spec-file"])
def test_an_empty_watcher_file_flag_is_refused_not_read_as_no_file(flag, tmp_path):
    # Without a run file the defaults would apply (no budget, no gang wait): an unset variable must not mean that.
    argv = watcher_files(tmp_path, {})
    if flag in argv:
        argv[argv.index(flag) + 1] = ""
    else:
        argv += [flag, ""]
    assert_refused(run_watcher(argv), flag)
