"""OCR settings that can be checked without loading the OCR stack (Pillow, httpx).

Every tool call validates the configuration; importing the engine modules for that would keep
them resident in the MCP server for nothing.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from helpers.errors import RagError

LANGS_PATTERN = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")  # tesseract `-l` value


class VlmConfigError(RagError, ValueError):
    """A vision-model setting that cannot be used; `hint` says what to set instead."""

    code = "config_error"


def langs_problem(langs: str) -> str | None:
    if LANGS_PATTERN.match(langs):
        return None
    return f"langs must look like 'eng+tha+rus', got {langs!r}"


def require_loopback(url: str, what: str = "vision-model URL") -> str:
    """Return `url` when its host is loopback (127.0.0.0/8, ::1, localhost); raise otherwise."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    hint = "run the model server on this machine and use e.g. http://127.0.0.1:8080/v1"
    if parts.scheme not in ("http", "https") or not host:
        raise VlmConfigError(f"{what} must be an http(s) URL, got {url!r}", hint)
    if host == "localhost":
        return url
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise VlmConfigError(f"{what} host {host!r} is not loopback", hint) from None
    loopback = address in ipaddress.ip_network("127.0.0.0/8") or address == ipaddress.ip_address(
        "::1"
    )
    if not loopback:
        raise VlmConfigError(f"{what} host {host!r} is not loopback", hint)
    return url
