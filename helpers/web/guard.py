"""Host and Origin checks shared by the web console and the MCP HTTP transport.

A loopback server is still reachable from any web page the user opens: DNS rebinding points a
foreign name at 127.0.0.1, and a page may post to localhost. So a request must carry exactly one
Host header naming this server, and a browser request (one with an Origin) must come from this
server's own origin. Pure functions: the two servers wire them into their own request types.
"""

from __future__ import annotations

from collections.abc import Sequence

LOOPBACK_HOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost")
# A wildcard address cannot be checked against the Host header (any name would have to pass),
# so remote use needs the concrete address or name that clients will type.
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})


def bracket(name: str) -> str:
    """An IPv6 literal as it appears in a URL or Host header."""
    return f"[{name}]" if ":" in name else name


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values a server bound to `host:port` answers to (lower case)."""
    names = {host, *LOOPBACK_NAMES} if host != LOOPBACK_HOST else set(LOOPBACK_NAMES)
    return frozenset(f"{bracket(n)}:{port}".lower() for n in names)


def host_ok(host_headers: Sequence[str], allowed: frozenset[str]) -> bool:
    """Exactly one Host header, naming this server."""
    return len(host_headers) == 1 and host_headers[0].strip().lower() in allowed


def expected_origin(host_header: str) -> str:
    return "http://" + host_header.strip().lower()


def same_origin(origin: str | None, fetch_site: str | None, host_header: str) -> bool:
    """Origin equals this server's (or, without Origin, Sec-Fetch-Site says same-origin)."""
    same = (
        origin == expected_origin(host_header)
        if origin is not None
        else fetch_site == ("same-origin")
    )
    return same and (fetch_site is None or fetch_site == "same-origin")
