"""What one ``network.allowed_domains`` entry says: a host pattern and maybe a port.

``example.com`` (the apex and subdomains), ``*.example.com`` (subdomains only), an IP
address, each optionally with ``:port`` (``[v6]:port`` for IPv6). Read by ``http.*``
and the egress proxy (``runtime/builtins/net.py``) and checked by ``harness validate``
(``config.py``, ``artifacts/servers.py``).
"""

from __future__ import annotations


def split_entry(entry: str) -> tuple[str, int | None]:
    """``(host pattern, port or None)`` of one ``allowed_domains`` entry: ``example.com``,
    ``*.example.com:8443``, ``10.0.0.5:5432``, ``[::1]:8080``, ``::1`` (a bare IPv6
    address has no port). A port that is not 1-65535 gives port 0 (never matches;
    :func:`entry_problem` words it for ``harness validate``)."""
    entry = entry.strip()
    if entry.startswith("["):
        host, close, rest = entry[1:].partition("]")
        if close and rest.startswith(":"):
            return host, _port(rest[1:])
        return host, None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, _port(port)
    return entry, None


def _port(text: str) -> int:
    return int(text) if text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536 else 0


def entry_problem(entry: str) -> str | None:
    """Why an ``allowed_domains`` entry can never match, or None."""
    host, port = split_entry(entry)
    if port == 0:
        return (
            f'network.allowed_domains entry "{entry}" has an invalid port; write '
            '"host" or "host:port" with a port from 1 to 65535'
        )
    if not host.strip():
        return f'network.allowed_domains entry "{entry}" has no host'
    return None
