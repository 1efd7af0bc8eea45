"""Optional Streamable HTTP transport: several MCP clients share one server and one index.

    mcp-ragdoc --knowledge-dir DOCS --transport http [--port 8770] [--allow-remote HOST]

Loopback only unless --allow-remote names this machine's address. Every request needs the bearer
token kept in `<data-dir>/http-token` (made on first start, mode 0600; its path is printed on
stderr), one Host header naming this server, and, from a browser, this server's own Origin: the
console's checks (helpers.web.guard), so a web page the user opens cannot drive the server.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from helpers.config import Config
from helpers.web import guard as web_guard

TRANSPORTS = ("stdio", "http")
DEFAULT_HTTP_PORT = 8770  # the console is 8769
MCP_PATH = "/mcp"
TOKEN_FILENAME = "http-token"
TOKEN_BYTES = 32  # 256 bits, URL-safe
LISTEN_BACKLOG = 128  # a handful of agents connect at once; the kernel queues the rest
REMOTE_WARNING = """\
WARNING: --allow-remote {host}: MCP over plain HTTP at {url}; the bearer token is the only
WARNING: protection and travels unencrypted. Use it only on a network you trust."""

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def add_transport_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--transport", choices=TRANSPORTS, help="stdio (default) or http (Streamable HTTP)"
    )
    parser.add_argument(
        "--port", type=int, help=f"HTTP port (default {DEFAULT_HTTP_PORT}; 0 = any free port)"
    )
    parser.add_argument(
        "--allow-remote",
        metavar="HOST",
        help="listen on HOST (this machine's address) instead of 127.0.0.1; token still required",
    )


def transport_of(args: argparse.Namespace) -> str:
    return args.transport or os.environ.get("RAGDOC_TRANSPORT") or "stdio"


def load_or_create_token(data_dir: Path) -> tuple[str, Path]:
    """The token in `<data-dir>/http-token`, created 0600 on first use (clients keep it)."""
    path = data_dir / TOKEN_FILENAME
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        token = path.read_text(encoding="ascii").strip()
        if len(token) >= TOKEN_BYTES:
            os.chmod(path, 0o600)
            return token, path
        path.unlink()  # empty or truncated: make a new one
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    return token, path


class Guard:
    """ASGI middleware in front of the MCP endpoint: Host, Origin, then the bearer token."""

    def __init__(self, app: App, token: str, allowed_hosts: frozenset[str], url: str) -> None:
        self._app = app
        self._token = token.encode()
        self._allowed = allowed_hosts
        self._url = url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)  # lifespan
            return
        headers: dict[str, list[str]] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
        hosts = headers.get("host", [])
        if not web_guard.host_ok(hosts, self._allowed):
            await _refuse(send, 403, "unexpected Host header", f"connect to {self._url}")
            return
        origin = (headers.get("origin") or [None])[0]
        site = (headers.get("sec-fetch-site") or [None])[0]
        if (origin is not None or site is not None) and not web_guard.same_origin(
            origin, site, hosts[0]
        ):
            await _refuse(
                send, 403, "cross-origin request refused", "web pages may not call this server"
            )
            return
        auth = (headers.get("authorization") or [""])[0]
        scheme, _, given = auth.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token
        ):
            await _refuse(
                send,
                401,
                "missing or wrong bearer token",
                "send 'Authorization: Bearer <token>' with the token from the http-token file "
                "in the data dir (its path is printed when the server starts)",
            )
            return
        await self._app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str, hint: str) -> None:
    body = json.dumps({"error": message, "hint": hint}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="mcp-ragdoc"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(
    config: Config,
    mcp: Any,
    args: argparse.Namespace,
    on_listening: Callable[[], object] | None = None,
) -> int:
    """Bind, print the URL and token path on stderr, serve until SIGINT/SIGTERM. `on_listening`
    runs once the socket listens (e.g. watch mode: no sync starts for a server that never
    came up)."""
    import uvicorn

    host = web_guard.LOOPBACK_HOST
    if args.allow_remote is not None:
        host = args.allow_remote.strip()
        if host.lower() in web_guard.WILDCARD_HOSTS:
            sys.stderr.write(
                f"error: --allow-remote {args.allow_remote!r}: a wildcard address cannot be "
                "protected against DNS rebinding; pass this machine's address\n"
            )
            return 2
    port = args.port if args.port is not None else _env_port()
    if not 0 <= port <= 65535:
        sys.stderr.write(f"error: port {port} is out of range: use 1-65535, or 0 for any\n")
        return 2
    token_dir = config.data_dir
    try:
        token, token_path = load_or_create_token(token_dir)
    except OSError as exc:
        sys.stderr.write(f"error: cannot keep the bearer token in {token_dir}: {exc}\n")
        return 2
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        sys.stderr.write(
            f"error: cannot listen on {host}:{port} ({exc.strerror or exc}): pass another "
            "--port, or --port 0 for any free port\n"
        )
        return 2
    sock.listen(LISTEN_BACKLOG)  # clients told the URL below may connect before uvicorn starts
    port = sock.getsockname()[1]
    url = f"http://{web_guard.bracket(host)}:{port}{MCP_PATH}"
    app = mcp.http_app(path=MCP_PATH, transport="http", host_origin_protection=False)
    guarded = Guard(app, token, web_guard.allowed_hosts(host, port), url)
    if host != web_guard.LOOPBACK_HOST:
        sys.stderr.write(REMOTE_WARNING.format(host=host, url=url) + "\n")
    sys.stderr.write(f"RagDoc MCP over HTTP: {url}\nbearer token: {token_path}\n")
    sys.stderr.flush()
    if on_listening is not None:
        on_listening()
    server = uvicorn.Server(
        uvicorn.Config(guarded, log_level="warning", lifespan="on", access_log=False)
    )
    server.run(sockets=[sock])
    return 0


def _env_port() -> int:
    raw = os.environ.get("RAGDOC_HTTP_PORT")
    if not raw:
        return DEFAULT_HTTP_PORT
    try:
        return int(raw)
    except ValueError:
        return -1  # reported as out of range
