"""The Ray Job API client's errors (`workloads.job_errors`): the addresses they name are shown redacted."""

from __future__ import annotations

import pytest

from workloads.job_errors import DashboardUnreachable
from workloads.ray_connection import connect


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://127.0.0.1:9/?token=hf_abcdefghijklmnopqrstuvwxyzABCD", "http://127.0.0.1:9/"),
        ("http://127.0.0.1:9/#access_token=0123456789abcdef0123456789abcdef01234567", "http://127.0.0.1:9/"),
        ("http://127.0.0.1:9/hf_abcdefghijklmnopqrstuvwxyzABCD/dash", "http://127.0.0.1:9/***/dash"),
    ],
)
def test_an_unreachable_dashboard_is_named_without_query_fragment_or_a_token_in_its_path(url, shown):
    with pytest.raises(DashboardUnreachable) as err:
        connect(url, timeout=0.5)
    assert str(err.value).startswith(f"Ray dashboard unreachable at {shown} (")
    assert "hf_abc" not in str(err.value) and "0123456789abcdef" not in str(err.value)
