"""Addresses and GKE endpoints (`workloads.ray_address`): what needs the cluster CA, and what is refused as
an `InvalidAddress` before any network use (bad ports, host names IDNA refuses, credentials in the URL)."""

from __future__ import annotations

import pytest

from workloads import ray_address
from workloads.job_errors import InvalidAddress
from workloads.ray_connection import connect


@pytest.mark.parametrize(
    ("endpoint", "needed"),
    [
        ("203.0.113.10", True),
        ("203.0.113.10:443", True),
        ("2001:db8::1", True),
        ("[2001:db8::1]:443", True),
        ("https://203.0.113.10", True),
        ("gke-0123456789abcdef-123456789012.us-east1.gke.goog", False),
        ("gke-0123456789abcdef-123456789012.us-east1.gke.goog:443", False),
        ("https://gke-0123456789abcdef-123456789012.us-east1.gke.goog", False),
        ("http://127.0.0.1:8001", False),
    ],
)
def test_only_an_ip_endpoint_needs_the_cluster_ca(endpoint, needed):
    assert ray_address.needs_cluster_ca(endpoint) is needed, endpoint


def test_connect_raises_invalid_address_before_touching_the_network():
    with pytest.raises(InvalidAddress) as bad:
        connect("127.0.0.1:0")
    assert (bad.value.address, bad.value.reason) == ("127.0.0.1:0", "port 0 is out of range; allowed: 1-65535")
    with pytest.raises(InvalidAddress, match=r"^203\.0\.113\.10:https: port 'https' is not a number"):
        connect(gke_endpoint="203.0.113.10:https", service="head", ca_file="unused.pem", token_provider=lambda: "t")


@pytest.mark.parametrize(
    "host", ["nemo-rl-head-svc..nemo-rl.svc", "localhost..", ".localhost", "a" * 64 + ".nemo-rl.svc"]
)
def test_a_host_name_idna_refuses_is_an_invalid_address_not_a_unicode_error(host):
    with pytest.raises(InvalidAddress) as err:
        connect(f"http://{host}:8265", timeout=0.1)
    assert err.value.reason.startswith("the host name has an empty label (two dots, or a leading dot) or one over 63")
    with pytest.raises(InvalidAddress):
        ray_address.check_endpoint(f"https://{host}")


@pytest.mark.parametrize("password", ["Zq#9x", "Zq?9x", "Zq/9x", "Zq@9x"])
def test_a_password_holding_url_delimiters_is_refused_and_never_repeated(password):
    with pytest.raises(InvalidAddress) as err:
        connect(f"http://admin:{password}@127.0.0.1:9", timeout=0.1)
    assert "credentials in the URL" in str(err.value) and "Zq" not in str(err.value) and "9x" not in str(err.value)
    assert str(err.value).startswith("http://***@127.0.0.1:9: ")
