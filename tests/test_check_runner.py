"""The doctor's run (tools/doctor/check_runner.py) against faked Google Cloud answers: the project first,
then every check at once under one deadline; a check that cannot ask warns, never a traceback.
"""

from __future__ import annotations

import inspect

import pytest
from doctor_fakes import (
    FAKES,
    NUMBER,
    PROJECT,
    FakeProject,
    compute_v1,
    config,
    only,
    real_clients,
    run,
)
from google.api_core import exceptions as gexc
from google.auth.exceptions import RefreshError

from tools.doctor import check_runner
from tools.doctor.check_context import FAIL, PASS, WARN, Result
from tools.doctor.check_runner import CHECKS, run_checks
from tools.doctor.google_clients import NO_CREDENTIALS, NoCredentials


@pytest.fixture
def project():
    return FakeProject()


def test_a_healthy_project_passes_every_check(project):
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert [r.check for r in results][:2] == ["project", "apis"]
    assert {r.check for r in results} == {"project", "apis", *(name for name, _, _ in CHECKS)}
    bad = [r for r in results if r.status != PASS]
    assert not bad, bad


def test_every_call_is_one_the_real_client_accepts(project):
    cfg = config(
        gpuPool={
            "nodeCount": 1,
            "provisioning": "reservation",
            "reservationName": "b200-res",
            "imageCacheDiskImage": "global/images/nemo-rl-cache",
        },
        network={"useDefaultNetwork": True},
    )
    project.networks["default"] = compute_v1.Network(name="default")
    run_checks("dev", cfg, project.clients(), timeout=5)
    del project.quotas["PREEMPTIBLE_NVIDIA_B200_GPUS"]  # asks Cloud Quotas
    run_checks("dev", config(), project.clients(), timeout=5)
    called = {(client, method) for client, method, _ in project.calls}
    assert {c for c, _ in called} == set(FAKES), "every client is exercised"
    for client, method, kwargs in project.calls:
        real = getattr(real_clients()[client], method)
        try:
            inspect.signature(real).bind(None, **kwargs)
        except TypeError as err:
            real_class = real_clients()[client].__name__
            pytest.fail(f"{client}.{method}({', '.join(kwargs)}) does not fit {real_class}.{method}: {err}")


def test_no_route_to_google_fails_instead_of_passing_nothing(project):
    project.errors["get_project"] = gexc.ServiceUnavailable("failed to connect to all addresses")
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [("project", FAIL)]
    assert "ServiceUnavailable" in results[0].summary


def test_the_project_that_cannot_be_seen_fails_alone(project):
    results = run_checks("dev", config(project="other-project"), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [("project", FAIL)]
    assert "gcloud projects describe other-project" in results[0].fix


def test_refused_credentials_are_a_credentials_error(project):
    project.errors["get_project"] = RefreshError("invalid_grant: Token has been expired or revoked.")
    with pytest.raises(NoCredentials, match="gcloud auth application-default login"):
        run_checks("dev", config(), project.clients(), timeout=5)


def test_a_check_whose_call_is_denied_warns_instead_of_crashing(project):
    project.errors["get_server_config"] = gexc.PermissionDenied("container.clusters.getServerConfig denied")
    result = only(project, "gke-versions")
    assert result.status == WARN and "permission denied" in result.summary


def test_a_check_that_does_not_answer_in_time_warns(project, monkeypatch):
    project.errors["lookup_bucket"] = gexc.DeadlineExceeded("deadline")
    result = only(project, "bucket")
    assert result.status == WARN and "no answer within 5s" in result.summary


def test_the_project_is_named_by_its_number_before_anything_else_is_asked(project):
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert results[0] == Result("project", PASS, f"{PROJECT} is project number {NUMBER}")
    assert project.calls[0] == ("projects", "get_project", {"name": f"projects/{PROJECT}", "timeout": 5})


@pytest.mark.parametrize("error", [gexc.NotFound("no"), gexc.Forbidden("no"), gexc.PermissionDenied("no")])
def test_a_project_that_is_missing_or_hidden_fails_whole_with_how_to_look(project, error):
    project.errors["get_project"] = error
    assert run_checks("dev", config(), project.clients(), timeout=5) == [
        Result(
            "project",
            FAIL,
            f"project {PROJECT} does not exist or you cannot see it",
            f"gcloud projects describe {PROJECT}  # fix nemo-rl-gke:project, or ask for roles/browser on it",
        )
    ]
    assert len(project.calls) == 1


def test_a_project_that_cannot_be_asked_fails_whole_naming_the_error(project):
    project.errors["get_project"] = gexc.ServiceUnavailable("failed to connect to all addresses\nretrying")
    assert run_checks("dev", config(), project.clients(), timeout=5) == [
        Result(
            "project",
            FAIL,
            f"could not ask for project {PROJECT}: ServiceUnavailable (failed to connect to all addresses)",
        )
    ]


def test_refused_credentials_are_the_no_credentials_message_with_the_refusal(project):
    project.errors["get_project"] = RefreshError("invalid_grant: Token has been expired or revoked.")
    with pytest.raises(NoCredentials) as raised:
        run_checks("dev", config(), project.clients(), timeout=5)
    assert str(raised.value) == NO_CREDENTIALS.format(
        reason="refused: invalid_grant: Token has been expired or revoked."
    )


def test_an_api_check_that_cannot_ask_warns_and_every_other_check_still_runs(project):
    project.errors["batch_get_services"] = gexc.PermissionDenied("serviceusage.services.get denied")
    checks = run(project)
    assert checks["apis"] == [Result("apis", WARN, "not checked: permission denied (serviceusage.services.get denied)")]
    assert checks["zone"][0].status == PASS and checks["lustre"][0].status == PASS
    project.errors["batch_get_services"] = gexc.DeadlineExceeded("deadline")
    assert run(project)["apis"] == [Result("apis", WARN, "not checked: no answer within 5s")]


def test_an_api_that_is_off_skips_every_check_that_calls_it_whole(project):
    project.enabled.discard("compute.googleapis.com")
    results = run_checks("dev", config(), project.clients(), timeout=5)
    skipped = [r for r in results if r.summary == "not checked: compute.googleapis.com is off"]
    enable = f"gcloud services enable compute.googleapis.com --project {PROJECT}"
    assert skipped == [
        Result(name, WARN, "not checked: compute.googleapis.com is off", enable)
        for name, _, needs in CHECKS
        if "compute.googleapis.com" in needs
    ]
    assert len(skipped) == 7
    assert not any(c in ("regions", "machine_types", "reservations", "compute_projects") for c, _, _ in project.calls)


def fake_checks(monkeypatch, *checks):
    """Replace the doctor's checks by `(name, function, apis)` triples."""
    monkeypatch.setattr(check_runner, "CHECKS", tuple(checks))


def test_the_checks_run_at_once_in_the_doctors_threads_and_report_in_their_order_whatever_ends_first(
    project, monkeypatch
):
    import threading

    names = [f"c{i}" for i in range(len(CHECKS))]
    together = threading.Barrier(len(names), timeout=5)  # passes only when every check runs at the same time
    threads = {}
    ended = []
    lock = threading.Lock()

    def check_named(name):
        def check(ctx):
            together.wait()
            threads[name] = threading.current_thread().name
            # The last check ends first.
            while True:
                with lock:
                    if len(ended) == len(names) - 1 - names.index(name):
                        ended.append(name)
                        break
            assert ctx.timeout == 5 and ctx.project_number == NUMBER and ctx.stack == "dev"
            if name == "c1":
                return [Result(name, PASS, "one"), Result(name, FAIL, "two", "fix two")]
            return Result(name, PASS, f"{name} done")

        return check

    fake_checks(monkeypatch, *((n, check_named(n), ()) for n in names))
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert [r.check for r in results[2:]] == ["c0", "c1", "c1", *names[2:]]
    assert results[3:5] == [Result("c1", PASS, "one"), Result("c1", FAIL, "two", "fix two")]
    assert results[2] == Result("c0", PASS, "c0 done")
    assert ended == names[::-1]
    assert all(t.startswith("doctor_") for t in threads.values()) and len(set(threads.values())) == len(names)


def test_a_check_that_needs_several_apis_that_are_off_names_them_all_and_the_rest_run(project, monkeypatch):
    project.enabled -= {"lustre.googleapis.com", "storage.googleapis.com"}
    fake_checks(
        monkeypatch,
        (
            "both",
            lambda ctx: pytest.fail("skipped checks are not called"),
            ("lustre.googleapis.com", "storage.googleapis.com"),
        ),
        ("other", lambda ctx: Result("other", PASS, "ran"), ("compute.googleapis.com",)),
    )
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert results[2:] == [
        Result(
            "both",
            WARN,
            "not checked: lustre.googleapis.com, storage.googleapis.com is off",
            f"gcloud services enable lustre.googleapis.com storage.googleapis.com --project {PROJECT}",
        ),
        Result("other", PASS, "ran"),
    ]


def test_every_check_skipped_still_reports_each(project, monkeypatch):
    project.enabled.discard("lustre.googleapis.com")
    fake_checks(monkeypatch, ("l", lambda ctx: pytest.fail("skipped"), ("lustre.googleapis.com",)))
    results = run_checks("dev", config(), project.clients(), timeout=5)
    assert [(r.check, r.status) for r in results] == [
        ("project", PASS),
        ("apis", WARN),
        ("l", WARN),
    ]


def raising(exc):
    def check(ctx):
        raise exc

    return check


def test_a_check_that_raises_warns_with_the_first_line_of_why_never_a_traceback(project, monkeypatch):
    errors = {
        "forbidden": gexc.Forbidden("caller lacks storage.buckets.get\nmore"),
        "denied": gexc.PermissionDenied("  \n container.clusters.get denied\nmore"),
        "deadline": gexc.DeadlineExceeded("deadline"),
        "timeout": TimeoutError("slow"),
        "google": gexc.InternalServerError("backend error\ndetails"),
        "other": ValueError("bad value\nsecond line"),
        "blank": ValueError(" \n "),
        "bare": KeyError(),
    }
    fake_checks(monkeypatch, *((name, raising(exc), ()) for name, exc in errors.items()))
    results = run_checks("dev", config(), project.clients(), timeout=7)
    assert results[2:] == [
        Result("forbidden", WARN, "not checked: permission denied (caller lacks storage.buckets.get)"),
        Result("denied", WARN, "not checked: permission denied (container.clusters.get denied)"),
        Result("deadline", WARN, "not checked: no answer within 7s"),
        Result("timeout", WARN, "not checked: no answer within 7s"),
        Result("google", WARN, "not checked: InternalServerError (backend error)"),
        Result("other", WARN, "not checked: ValueError: bad value"),
        Result("blank", WARN, "not checked: ValueError: ValueError"),
        Result("bare", WARN, "not checked: KeyError: KeyError"),
    ]


class Clock:
    """`time` for the doctor: `monotonic` answers the times given, then the last one."""

    def __init__(self, *times):
        self.times = list(times)

    def monotonic(self):
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


def test_the_checks_share_one_deadline_of_four_calls_and_five_seconds(project, monkeypatch):
    import concurrent.futures

    waits = []

    def wait(fs, timeout=None, return_when=None):
        waits.append((timeout, return_when))
        return concurrent.futures.wait(fs, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(check_runner, "wait", wait)
    monkeypatch.setattr(check_runner, "time", Clock(1000.0, 1003.0, 1010.0, 1044.0))
    fake_checks(
        monkeypatch,
        ("a", lambda ctx: Result("a", PASS, "a"), ()),
        ("b", lambda ctx: Result("b", PASS, "b"), ()),
    )
    run_checks("dev", config(), project.clients(), timeout=7)
    # The deadline is 1000 + 4 x 7 + 5 = 1033: 30 s left at the first wait, then 23, then none.
    assert waits[0] == (30.0, concurrent.futures.FIRST_COMPLETED)
    assert [w[0] for w in waits] in ([30.0], [30.0, 23.0])


def test_a_wait_past_the_deadline_asks_for_no_time_at_all(project, monkeypatch):
    import concurrent.futures

    waits = []

    def wait(fs, timeout=None, return_when=None):
        waits.append(timeout)
        return concurrent.futures.wait(fs, timeout=timeout, return_when=return_when)

    monkeypatch.setattr(check_runner, "wait", wait)
    monkeypatch.setattr(check_runner, "time", Clock(1000.0, 1044.0))
    fake_checks(monkeypatch, ("a", lambda ctx: Result("a", PASS, "a"), ()))
    results = run_checks("dev", config(), project.clients(), timeout=7)
    assert waits[0] == 0.0
    assert results[2].check == "a"


def test_checks_that_do_not_end_by_the_deadline_warn_and_those_that_did_are_kept(project, monkeypatch):
    import threading

    release = threading.Event()

    def slow(ctx):
        release.wait(10)
        return Result("slow", PASS, "late")

    fake_checks(
        monkeypatch,
        ("slow", slow, ()),
        ("quick", lambda ctx: Result("quick", PASS, "in time", "pulumi config set zone z"), ()),
        ("slower", slow, ()),
    )
    # The deadline is set at 1000; the first wait ends with the quick check, the next is past the deadline.
    monkeypatch.setattr(check_runner, "time", Clock(1000.0, 1000.0, 2000.0))
    started = __import__("time").monotonic()
    try:
        results = run_checks("dev", config(), project.clients(), timeout=0.1)
    finally:
        release.set()
    assert __import__("time").monotonic() - started < 5, "the doctor does not wait for checks past the deadline"
    assert results[2:] == [
        Result("slow", WARN, "not checked: no answer within 0.1s"),
        Result("quick", PASS, "in time", "pulumi config set --stack dev zone z"),
        Result("slower", WARN, "not checked: no answer within 0.1s"),
    ]
