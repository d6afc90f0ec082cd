"""Where the Ray dashboard is: addresses and GKE endpoints checked and turned into URLs before any network
use; whatever a user typed is refused here as one `InvalidAddress` line. Standard library only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import unicodedata
from typing import Optional
from urllib.parse import quote, urlsplit

from workloads.job_errors import InvalidAddress

DASHBOARD_PORT_NAME = "dashboard"
"""KubeRay's name of the head service's dashboard port (8265)."""


def dashboard_proxy_url(endpoint: str, namespace: str, service: str) -> str:
    """The API server's service-proxy URL of the head service's dashboard port; an endpoint with a scheme is
    used as is (tests put a plain-http proxy there)."""
    base = endpoint_url(endpoint)
    ns, svc = quote(namespace, safe=""), quote(service, safe="")
    return f"{base.rstrip('/')}/api/v1/namespaces/{ns}/services/{svc}:{DASHBOARD_PORT_NAME}/proxy"


def needs_cluster_ca(endpoint: str) -> bool:
    """Whether `endpoint`'s certificate is signed by the cluster CA: GKE's IP endpoint's is, the DNS endpoint's
    (`gke-<id>.<region>.gke.goog`) is publicly trusted; plain http needs none."""
    parts = urlsplit(endpoint_url(endpoint))
    if parts.scheme != "https" or not parts.hostname:
        return False
    try:
        ipaddress.ip_address(parts.hostname)
    except ValueError:
        return False
    return True


def check_endpoint(endpoint: str) -> None:
    """`InvalidAddress` unless the GKE endpoint gives a usable URL: https only (its requests carry the bearer
    token), plain http to a loopback host alone."""
    refuse_bare_scheme(endpoint, "https")
    url = endpoint_url(endpoint)
    host, _ = host_port(url, endpoint)
    if urlsplit(url).scheme != "https" and not is_loopback(host):
        raise InvalidAddress(
            endpoint,
            "scheme 'http' is not allowed: the requests carry your Google bearer token; allowed: https "
            "(http only to a loopback proxy such as 127.0.0.1)",
        )


def refuse_bare_scheme(given: str, allowed: str) -> None:
    """`javascript:alert(1)`, `file:/etc/passwd`: a scheme without `//` (`host:8265` is a port)."""
    if "@" in given:  # `user:password@host`, whatever the password holds (`pw//x`): the credentials check names it
        return
    m = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):(?!//)(?!\d)", given)
    if m:
        raise InvalidAddress(given, f"scheme {m.group(1).lower()!r} is not allowed; allowed: {allowed}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_url(endpoint: str) -> str:
    if "://" in endpoint:
        return endpoint
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(endpoint).version == 6:
            return f"https://[{endpoint}]"  # a bare v6 address's colons would read as a port
    return f"https://{endpoint}"


def host_port(url: str, given: Optional[str] = None) -> tuple[str, int]:
    """Host and port of an http(s) URL; `InvalidAddress` naming `given` (the value as typed) where urllib or Ray
    would fail confusingly later."""
    given = url if given is None else given
    # urllib drops a tab or newline anywhere in a URL (CPython's bpo-43882 fix), so a pasted line break would reach
    # another host than the one shown; other control characters or a space reach the resolver and read as
    # "unreachable" (exit 3) where the address itself is wrong.
    bad = next((c for c in url if c.isspace() or unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise InvalidAddress(
            given, f"{bad!r} is not allowed in a URL; allowed: http(s)://host:port without spaces or control characters"
        )
    try:
        parts = urlsplit(url)
    except ValueError as err:  # e.g. an unclosed "[" of an IPv6 literal
        raise InvalidAddress(given, f"not a valid URL ({err})") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidAddress(given, f"scheme {parts.scheme!r} is not allowed; allowed: http, https")
    if "@" in url.partition("//")[2] or "@" in parts.netloc:
        # A password on the command line lands in shell history and messages; neither server takes one so.
        raise InvalidAddress(
            given, "credentials in the URL (user:password@) are not allowed; allowed: http(s)://host:port"
        )
    if not parts.hostname:
        raise InvalidAddress(given, "no host name; expected e.g. http://127.0.0.1:8265")
    _check_host_name(parts.hostname, given)
    # `SplitResult.port` raises without saying what was wrong, and accepts 0.
    tail = parts.netloc.rpartition("@")[2].rpartition("]")[2]
    port_text = tail.partition(":")[2]
    if not port_text:
        return parts.hostname, 443 if parts.scheme == "https" else 80
    if not (port_text.isascii() and port_text.isdigit()):
        raise InvalidAddress(given, f"port {port_text!r} is not a number; allowed: 1-65535")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise InvalidAddress(given, f"port {port} is out of range; allowed: 1-65535")
    return parts.hostname, port


def _check_host_name(host: str, given: str) -> None:
    """An IP literal, or DNS labels of 1-63 characters IDNA encodes (else socket raises a bare UnicodeError)."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host)
        return
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")  # one final dot: a rooted name
    try:
        encoded = [label.encode("idna") for label in labels]
    except UnicodeError:
        encoded = []
    if not encoded or not all(1 <= len(label) <= 63 for label in encoded):
        raise InvalidAddress(
            given,
            "the host name has an empty label (two dots, or a leading dot) or one over 63 characters; allowed: a host "
            "name such as nemo-rl-head-svc.nemo-rl.svc or an IP address",
        )
