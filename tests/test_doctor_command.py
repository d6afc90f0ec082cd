"""`python -m tools.doctor` (tools/doctor/doctor_command.py): flags, the report as text and JSON, exit
codes, and the hand-over to `--leftovers`.
"""

from __future__ import annotations

import io
import json

import pytest
from doctor_fakes import PROJECT, FakeProject, config

from infra.config import ConfigError
from infra.stack_file import DEFAULT_STACK
from tools.doctor import doctor_command, project_checks
from tools.doctor.check_context import DEFAULT_TIMEOUT, FAIL, PASS, WARN, Result
from tools.doctor.check_runner import CHECKS
from tools.doctor.doctor_command import (
    EXIT_FAILED,
    EXIT_NO_CREDENTIALS,
    EXIT_OK,
    EXIT_USAGE,
    error_json,
    render_json,
    render_text,
)
from tools.doctor.google_clients import NoCredentials


@pytest.fixture
def project():
    return FakeProject()


def cli(project, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(["--stack", "dev", *argv], out=out, err=err, connect=lambda p: project.clients())
    return code, out.getvalue(), err.getvalue()


def test_the_command_prints_one_line_per_check_and_exits_0_when_nothing_fails(project):
    project.quotas.pop("PREEMPTIBLE_NVIDIA_B200_GPUS")  # a warning does not fail the run
    code, out, err = cli(project)
    assert code == EXIT_OK and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("doctor: stack dev, project my-gcp-project")
    assert any(line.split()[:2] == ["warn", "gpu-quota"] for line in lines)
    assert lines[-1] == "0 failed, 1 warning(s), 19 passed"


def test_a_failure_prints_its_fix_and_exits_1(project, monkeypatch):
    monkeypatch.setattr(project_checks, "manages_apis", lambda cfg: False)  # manageApis: false: an API off fails
    project.enabled.discard("lustre.googleapis.com")
    code, out, _ = cli(project)
    assert code == EXIT_FAILED
    assert f"fix: gcloud services enable lustre.googleapis.com --project {PROJECT}" in out


def test_json_output(project, monkeypatch):
    monkeypatch.setattr(project_checks, "manages_apis", lambda cfg: False)  # manageApis: false: an API off fails
    project.enabled.discard("lustre.googleapis.com")
    code, out, _ = cli(project, "--json")
    doc = json.loads(out)
    assert code == EXIT_FAILED and doc["ok"] is False and doc["stack"] == "dev"
    apis = next(c for c in doc["checks"] if c["check"] == "apis")
    assert apis == {
        "check": "apis",
        "status": "fail",
        "summary": "off: lustre.googleapis.com",
        "fix": f"gcloud services enable lustre.googleapis.com --project {PROJECT}",
    }


def test_missing_credentials_are_one_line_and_exit_3(monkeypatch, tmp_path):
    # A named credentials file that does not exist stops google.auth.default before any metadata-server probe.
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(["--stack", "dev"], out=out, err=err)
    assert code == EXIT_NO_CREDENTIALS and out.getvalue() == ""
    message = err.getvalue()
    assert message.startswith("error: no usable Application Default Credentials (File ") and "none.json" in message
    assert "gcloud auth application-default login" in message and message.count("\n") == 1


def test_an_unknown_stack_is_one_line_and_exit_2(project):
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(
        ["--stack", "nope"], out=out, err=err, connect=lambda p: pytest.fail("no stack, no cloud")
    )
    assert code == EXIT_USAGE and err.getvalue().count("\n") == 1 and "Pulumi.nope.yaml" in err.getvalue()


def test_the_doc_describes_every_check():
    from pathlib import Path

    doc = (Path(doctor_command.__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()
    for name in ("project", "apis", *(name for name, _, _ in CHECKS)):
        assert f"\n| {name} |" in doc, f"docs/doctor.md has no row for the {name} check"


@pytest.mark.parametrize(
    ("flag", "allowed"),
    [
        (["--timeout", "0"], "allowed: a number of seconds above 0, at most 600"),
        (["--timeout", "601"], "allowed: a number of seconds above 0, at most 600"),
        (["--timeout", "soon"], "allowed: a number of seconds above 0, at most 600"),
        (["--stack", "../dev"], "is not a Pulumi stack name; allowed: 1-100 letters, digits, '-', '_' or '.'"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_a_bad_flag_is_one_line_naming_what_is_allowed_and_exit_2(flag, allowed):
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(flag, out=out, err=err, connect=lambda p: pytest.fail("bad flags, no cloud"))
    assert code == EXIT_USAGE and err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: ")
    assert allowed in err.getvalue() and not out.getvalue()


def test_the_longest_timeout_is_accepted():
    assert doctor_command.parser().parse_args(["--timeout", "600"]).timeout == 600


def test_the_command_reads_sys_argv_asks_the_stacks_project_with_its_timeout_and_prints_to_stdout(
    project, monkeypatch, capsys
):
    monkeypatch.setattr("sys.argv", ["doctor", "--stack", "dev", "--timeout", "7"])
    asked = []
    code = doctor_command.main(connect=lambda p: asked.append(p) or project.clients())
    out, err = capsys.readouterr()
    assert (code, err, asked) == (EXIT_OK, "", [PROJECT])
    assert out.startswith("doctor: stack dev, project my-gcp-project, us-east1 / us-east1-b\n  pass  project ")
    assert out.endswith("\n0 failed, 0 warning(s), 20 passed\n")
    assert {kw["timeout"] for _, _, kw in project.calls} == {7}


def test_the_command_without_flags_checks_the_default_stack_with_the_default_timeout(project, monkeypatch):
    seen = []
    monkeypatch.setattr(
        doctor_command, "run_checks", lambda stack, cfg, clients, timeout: seen.append((stack, timeout)) or []
    )
    monkeypatch.setattr(doctor_command, "render_text", lambda stack, cfg, results: f"report of {stack}")
    out, err = io.StringIO(), io.StringIO()
    assert doctor_command.main([], out=out, err=err, connect=lambda p: project.clients()) == EXIT_OK
    assert seen == [(DEFAULT_STACK, DEFAULT_TIMEOUT)]
    assert (out.getvalue(), err.getvalue()) == (f"report of {DEFAULT_STACK}\n", "")


def test_the_text_report_aligns_the_checks_and_prints_fixes_only_of_what_did_not_pass():
    results = [
        Result("project", PASS, "fine", "not printed"),
        Result("gpu-quota", WARN, "careful", "look"),
        Result("zone", FAIL, "broken", "repair"),
        Result("zone", FAIL, "also broken"),
    ]
    assert render_text("dev", config(), results) == (
        "doctor: stack dev, project my-gcp-project, us-east1 / us-east1-b\n"
        "  pass  project    fine\n"
        "  warn  gpu-quota  careful\n"
        "                   fix: look\n"
        "  fail  zone       broken\n"
        "                   fix: repair\n"
        "  fail  zone       also broken\n"
        "2 failed, 1 warning(s), 1 passed"
    )


def test_the_json_report_is_the_results_whole_and_ok_only_without_a_failure():
    results = [Result("project", PASS, "fine"), Result("zone", WARN, "careful", "look")]
    text = render_json("dev", config(), results)
    assert text.splitlines()[:3] == ["{", '  "stack": "dev",', '  "project": "my-gcp-project",']
    assert json.loads(text) == {
        "stack": "dev",
        "project": PROJECT,
        "ok": True,
        "checks": [
            {"check": "project", "status": "pass", "summary": "fine", "fix": None},
            {"check": "zone", "status": "warn", "summary": "careful", "fix": "look"},
        ],
    }
    failed = [*results, Result("zone", FAIL, "broken")]
    assert json.loads(render_json("dev", config(), failed))["ok"] is False


def test_a_run_that_cannot_check_prints_a_json_error_document_naming_the_stack_once_known():
    assert error_json(None, 2, "bad flag").splitlines()[:2] == ["{", '  "stack": null,']
    assert json.loads(error_json("dev", 3, "no credentials")) == {
        "stack": "dev",
        "ok": False,
        "exitCode": 3,
        "error": "no credentials",
        "checks": [],
    }
    out, err = io.StringIO(), io.StringIO()
    doctor_command.main(["--json", "--bogus"], out=out, err=err, connect=lambda p: pytest.fail("bad flags, no cloud"))
    assert json.loads(out.getvalue())["stack"] is None
    out = io.StringIO()
    doctor_command.main(["--json", "--stack", "nope"], out=out, err=err, connect=lambda p: pytest.fail("no stack"))
    assert json.loads(out.getvalue())["stack"] == "nope"


def test_a_stack_the_program_refuses_is_one_line_and_exit_2(monkeypatch):
    def refuse(name):
        raise ConfigError("gpuPool.nodeCount: must be 1 or more\nzone: not in region us-east1")

    monkeypatch.setattr(doctor_command, "load_stack", refuse)
    out, err = io.StringIO(), io.StringIO()
    code = doctor_command.main(
        ["--stack", "dev"], out=out, err=err, connect=lambda p: pytest.fail("no stack, no cloud")
    )
    assert (code, out.getvalue()) == (EXIT_USAGE, "")
    assert err.getvalue() == "error: gpuPool.nodeCount: must be 1 or more; zone: not in region us-east1\n"


def test_no_credentials_at_connect_is_one_line_and_exit_3_and_json_gets_its_document(project):
    def no_credentials(p):
        raise NoCredentials("no usable Application Default Credentials (test)")

    out, err = io.StringIO(), io.StringIO()
    assert doctor_command.main(["--stack", "dev"], out=out, err=err, connect=no_credentials) == EXIT_NO_CREDENTIALS
    assert (out.getvalue(), err.getvalue()) == ("", "error: no usable Application Default Credentials (test)\n")
    out, err = io.StringIO(), io.StringIO()
    assert doctor_command.main(["--stack", "dev", "--json"], out=out, err=err, connect=no_credentials) == 3
    assert json.loads(out.getvalue()) == json.loads(
        error_json("dev", 3, "no usable Application Default Credentials (test)")
    )


def test_leftovers_runs_the_leftover_audit_instead_of_the_checks(project, monkeypatch):
    seen = []
    out, err = io.StringIO(), io.StringIO()

    def connect(p):
        return None

    def audit(stack, cfg, args, to, fail, connect_with):
        seen.append((stack, cfg.project, args.leftovers, args.json, args.timeout, to is out, connect_with is connect))
        return fail(3, "the audit could not search")

    monkeypatch.setattr(doctor_command, "leftovers_main", audit)
    monkeypatch.setattr(doctor_command, "run_checks", lambda *a, **k: pytest.fail("no checks with --leftovers"))
    assert doctor_command.main(["--stack", "dev", "--leftovers", "--json"], out=out, err=err, connect=connect) == 3
    assert seen == [("dev", PROJECT, True, True, DEFAULT_TIMEOUT, True, True)]
    # The audit's failures go through the command's own one line (and JSON document).
    assert err.getvalue() == "error: the audit could not search\n"
    assert json.loads(out.getvalue()) == json.loads(error_json("dev", 3, "the audit could not search"))


def test_the_flags_help_says_what_each_does_and_its_default():
    p = doctor_command.parser()
    assert p.prog == "python -m tools.doctor"
    assert p.description == "Check the stack's Google Cloud project before `pulumi up` (read-only)."
    assert {a.dest: a.help for a in p._actions} == {
        "help": "show this help message and exit",
        "stack": "stack name (Pulumi.<stack>.yaml); default dev",
        "json": "print the results as JSON",
        "leftovers": "after `pulumi destroy`: list what of the stack is still in the project (exit 1 when anything is)",
        "timeout": "seconds per API call (the run ends within 4x that); default 20",
    }
    assert p.parse_args([]).json is False and p.parse_args([]).leftovers is False


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--stack", "nope", "--json"], 2, "stack file Pulumi.nope.yaml not found"),
        (["--json", "--stack", "../dev"], 2, "is not a Pulumi stack name"),
        (["--json", "--timeout", "0"], 2, "allowed: a number of seconds above 0"),
        (["--json", "--leftovers", "--stack", "nope"], 2, "Pulumi.nope.yaml"),
    ],
)
def test_json_that_cannot_run_prints_a_json_error_document_and_the_same_line_on_stderr(argv, code, says):
    out, err = io.StringIO(), io.StringIO()
    assert (
        doctor_command.main(argv, out=out, err=err, connect=lambda p: pytest.fail("nothing to check, no cloud")) == code
    )
    doc = json.loads(out.getvalue())
    assert doc["ok"] is False and doc["exitCode"] == code and doc["checks"] == [] and says in doc["error"], doc
    assert err.getvalue() == f"error: {doc['error']}\n"


def test_json_without_credentials_is_a_json_error_document_with_exit_3(monkeypatch, tmp_path):
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "none.json"))
    out, err = io.StringIO(), io.StringIO()
    assert doctor_command.main(["--stack", "dev", "--json"], out=out, err=err) == EXIT_NO_CREDENTIALS
    doc = json.loads(out.getvalue())
    assert (doc["stack"], doc["exitCode"]) == ("dev", 3) and "gcloud auth application-default login" in doc["error"]
