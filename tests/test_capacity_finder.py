"""The capacity finder (tools/capacity_finder.py) against the doctor's fakes of the Google clients."""

from __future__ import annotations

import inspect
import io
import json

import pytest
from doctor_fakes import FakeProject, b200_reservation, config, real_clients

from infra.zones import catalogue
from tools import capacity_finder

LADDER = {"nodeCount": 2, "capacity": {"ladder": [{"reservation": "my-a4-block"}, "spot", "onDemand"]}}


@pytest.fixture
def project():
    p = FakeProject()
    p.lustre_zones = catalogue().zones_for("a4-highgpu-8g")
    return p


class RegionalQuotas:
    """Regions.get answering per region: `quotas[region][metric] = (limit, usage)`."""

    def __init__(self, project, quotas):
        self.p, self.quotas = project, quotas

    def get(self, request=None, *, project=None, region=None, timeout=None):
        from google.cloud import compute_v1

        self.p.record("regions", "get", project=project, region=region, timeout=timeout)
        return compute_v1.Region(
            name=region,
            quotas=[
                compute_v1.Quota(metric=m, limit=lim, usage=use)
                for m, (lim, use) in self.quotas.get(region, {}).items()
            ],
        )


def clients(project, quotas):
    c = project.clients()
    c.regions = RegionalQuotas(project, quotas)
    return c


def by_zone(answers):
    return {a.zone: a for a in answers}


def test_zones_are_ranked_by_the_first_rung_that_holds_the_whole_gang(project):
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=2)  # in us-east1-b
    quotas = {
        "us-east1": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (64.0, 0.0), "NVIDIA_B200_GPUS": (64.0, 0.0)},
        "us-central1": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (16.0, 0.0), "NVIDIA_B200_GPUS": (0.0, 0.0)},
        "europe-west4": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (8.0, 0.0), "NVIDIA_B200_GPUS": (16.0, 0.0)},
        "asia-northeast1": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (0.0, 0.0), "NVIDIA_B200_GPUS": (0.0, 0.0)},
    }
    cfg = config(gpuPool=LADDER)
    answers = capacity_finder.find("dev", cfg, clients(project, quotas), timeout=5)
    zones = by_zone(answers)
    assert set(zones) == set(catalogue().machine_types["a4-highgpu-8g"]), (
        "every zone of the machine catalogue: the live Lustre locations say where Lustre is, not the static list"
    )
    east, central, eu, east4 = (
        zones["us-east1-b"],
        zones["us-central1-b"],
        zones["europe-west4-b"],
        zones["asia-northeast1-b"],
    )
    assert east.best.rung == "reservation my-a4-block" and east.current
    assert central.best.rung == "spot" and [r.status for r in central.rungs] == ["short", "fits", "short"]
    assert eu.best.rung == "onDemand", "spot has 8 of 16; on-demand holds the gang"
    assert east4.best is None
    order = [a.zone for a in answers]
    # Spot in us-central1 (2 x $32.61/h) is cheaper than the reservation's on-demand rate in us-east1,
    # which is cheaper than on-demand in europe (x 1.10); no rung fits in asia-northeast1: after every zone where
    # one does.
    assert (
        order.index("us-central1-b")
        < order.index("us-east1-b")
        < order.index("europe-west4-b")
        < order.index("asia-northeast1-b")
    )
    assert (
        central.change
        == "pulumi config set --stack dev region us-central1 && pulumi config set --stack dev zone us-central1-b"
    )
    assert east.reservations == ["my-a4-block 2/2"]


def test_a_region_without_the_metric_is_unknown_not_a_fit(project):
    answers = by_zone(capacity_finder.find("dev", config(), clients(project, {}), timeout=5))
    rung = answers["us-central1-b"].rungs[0]
    assert rung.status == capacity_finder.UNKNOWN and "lists no PREEMPTIBLE_NVIDIA_B200_GPUS" in rung.detail


def test_a_zone_where_lustre_is_not_offered_to_the_project_is_said_and_ranked_last(project):
    project.lustre_zones = ["us-east1-b"]
    quotas = {"us-central1": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (64.0, 0.0)}}
    answers = capacity_finder.find("dev", config(), clients(project, quotas), timeout=5)
    assert answers[0].zone == "us-east1-b" and answers[0].lustre
    assert not by_zone(answers)["us-central1-b"].lustre


def test_every_call_is_one_the_real_client_accepts(project):
    project.reservations["my-a4-block"] = b200_reservation("my-a4-block", count=2)
    capacity_finder.find("dev", config(gpuPool=LADDER), project.clients(), timeout=5)
    for client, method, kwargs in project.calls:
        inspect.signature(getattr(real_clients()[client], method)).bind(None, **kwargs)
    assert {(c, m) for c, m, _ in project.calls} >= {
        ("regions", "get"),
        ("reservations", "list"),
        ("lustre", "list_locations"),
    }


def test_the_command_prints_each_zone_with_its_one_line_change(project):
    quotas = {"us-central1": {"PREEMPTIBLE_NVIDIA_B200_GPUS": (64.0, 0.0)}}
    out, err = io.StringIO(), io.StringIO()
    rc = capacity_finder.main(["--stack", "b200-ladder"], out=out, err=err, connect=lambda _: clients(project, quotas))
    text = out.getvalue()
    assert rc == 0 and err.getvalue() == ""
    assert text.splitlines()[0].startswith(
        "capacity finder: stack b200-ladder, 8 x a4-highgpu-8g, ladder spot > flexStart > onDemand"
    )
    assert "  us-central1-b: $260.85/h at spot" in text, "8 x the catalogue's 32.6064, not an estimate"
    assert capacity_finder.TIES in text.splitlines()[0]
    assert "Managed Lustre from the project's Managed Lustre locations (read now)" in text.splitlines()[0]
    assert (
        "use it: pulumi config set --stack b200-ladder region us-central1 && pulumi config set --stack b200-ladder "
        "zone us-central1-b" in text
    )
    out = io.StringIO()
    assert (
        capacity_finder.main(["--stack", "b200-ladder", "--json"], out=out, connect=lambda _: clients(project, quotas))
        == 0
    )
    assert json.loads(out.getvalue())["zones"][0]["zone"] == "us-central1-b"


def test_a_bad_stack_is_one_line_and_exit_2():
    err = io.StringIO()
    assert capacity_finder.main(["--stack", "no-such-stack"], err=err, connect=lambda _: pytest.fail("no call")) == 2
    assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: ")


def test_json_that_cannot_run_prints_an_error_document_without_the_doctors_checks_key():
    out, err = io.StringIO(), io.StringIO()
    code = capacity_finder.main(["--stack", "no-such-stack", "--json"], out=out, err=err, connect=lambda _: None)
    doc = json.loads(out.getvalue())
    assert code == 2 and doc["ok"] is False and doc["exitCode"] == 2 and "checks" not in doc, doc
    assert doc["stack"] == "no-such-stack" and doc["error"] in err.getvalue()


def test_with_the_live_lustre_list_every_zone_of_the_machine_catalogue_is_considered(project):
    # Zones the static Lustre list of data/zones.yaml lacks (us-east4-b, us-south1-b) but the project is offered.
    project.lustre_zones = ["us-east4-b", "us-south1-b", "us-east1-b"]
    answers = by_zone(capacity_finder.find("dev", config(), clients(project, {}), timeout=5))
    assert len(answers) == len(catalogue().machine_types["a4-highgpu-8g"]) == 11
    assert answers["us-east4-b"].lustre and answers["us-south1-b"].lustre and not answers["us-central1-b"].lustre
    assert {a.lustre_from for a in answers.values()} == {capacity_finder.LIVE_LUSTRE}


def test_without_the_live_lustre_list_only_the_static_lists_zones_are_considered_and_it_says_so(project):
    from google.api_core import exceptions as gexc

    def refuse(*args, **kwargs):
        raise gexc.PermissionDenied("lustre.locations.list")

    c = clients(project, {})
    c.lustre.list_locations = refuse
    answers = capacity_finder.find("dev", config(), c, timeout=5)
    assert [a.zone for a in answers] != [] and {a.zone for a in answers} == set(catalogue().zones_for("a4-highgpu-8g"))
    assert {a.lustre_from for a in answers} == {capacity_finder.STATIC_LUSTRE}
    assert "static list of data/zones.yaml" in capacity_finder.render_text("dev", config(), answers).splitlines()[0]


def test_equal_prices_rank_sourced_before_estimated_then_the_stacks_zone_then_by_name(project):
    project.lustre_zones = catalogue().machine_types["a4-highgpu-8g"]
    b200 = {"PREEMPTIBLE_NVIDIA_B200_GPUS": (64.0, 0.0)}
    quotas = {r: b200 for r in ("us-central1", "us-east1", "us-east4", "us-south1", "us-west2", "us-west3")}
    cfg = config(zone="us-east1-b")
    answers = capacity_finder.find("dev", cfg, clients(project, quotas), timeout=5)
    us = [a for a in answers if a.region.startswith("us-")]
    # One spot price for every US zone: the catalogue's in us-central1 and us-east1, the fallback (an estimate,
    # said) elsewhere.
    assert len({a.best.gang_hour for a in us}) == 1
    assert [a.zone for a in us][:2] == ["us-east1-b", "us-central1-b"], "sourced first, the stack's own zone first"
    assert all(a.best.estimate is None for a in us[:2]) and all("fallback" in a.best.estimate for a in us[2:])
    assert [a.zone for a in us[2:]] == sorted(a.zone for a in us[2:])
    text = capacity_finder.render_text("dev", cfg, answers)
    assert "  us-east4-b: $65.21/h at spot *" in text and "  us-east1-b: $65.21/h at spot\n" in text
    assert "  * us-east4 spot: us-central1 price x 1 (fallback rule for us-east4)" in text


class Unreachable:
    """Regions.get as the REST client fails with a token but no route (requests' ConnectionError)."""

    def get(self, request=None, *, project=None, region=None, timeout=None):
        from requests.exceptions import ConnectionError

        raise ConnectionError(
            "HTTPSConnectionPool(host='compute.googleapis.com', port=443): Max retries exceeded "
            "(Caused by NewConnectionError('Failed to establish a new connection: [Errno 101] Network is unreachable'))"
        )


def test_a_token_but_no_route_to_google_is_one_line_and_exit_3(project):
    c = project.clients()
    c.regions = Unreachable()
    out, err = io.StringIO(), io.StringIO()
    code = capacity_finder.main(["--stack", "b200-ladder"], out=out, err=err, connect=lambda _: c)
    assert (code, out.getvalue()) == (3, ""), err.getvalue()
    assert err.getvalue().count("\n") == 1 and "could not reach Google Cloud" in err.getvalue()
    assert "Network is unreachable" in err.getvalue() and "Traceback" not in err.getvalue()
