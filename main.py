"""MCP-RagDoc web console on the loopback interface.

    python main.py --knowledge-dir DOCS --data-dir STATE [--port 8769]

`--port` (or RAGDOC_UI_PORT) picks the port, 0 picks a free one; the URL is printed on stderr.
The console binds 127.0.0.1 only; `--allow-remote HOST` exposes it on HOST, loudly warned.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from types import FrameType

import rag_service
import web_ui
from helpers.config import add_config_arguments, config_from_args
from helpers.web import guard as web_guard

PORT_ENV = "RAGDOC_UI_PORT"
WILDCARD_HOSTS = web_guard.WILDCARD_HOSTS
REMOTE_WARNING = """\
WARNING: --allow-remote {host}: the console is reachable from the network at {url}
WARNING: there is no login and no TLS: anyone who can reach that address can read every
WARNING: indexed document and start or cancel syncs. Use it only on a network you trust."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="main.py", description=__doc__.split("\n")[0])
    add_config_arguments(parser)
    parser.add_argument(
        "--port",
        type=int,
        help=f"TCP port (default ${PORT_ENV} or {web_ui.DEFAULT_PORT}; 0 = any free port)",
    )
    parser.add_argument(
        "--allow-remote",
        metavar="HOST",
        help="DANGEROUS: listen on HOST (an address or name of this machine) instead of "
        "127.0.0.1; there is no authentication",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr")
    return parser


def resolve_port(cli_port: int | None, environ: dict[str, str] | os._Environ[str]) -> int:
    """--port wins over RAGDOC_UI_PORT, which wins over the default; ValueError if invalid."""
    if cli_port is not None:
        port = cli_port
    elif environ.get(PORT_ENV):
        try:
            port = int(environ[PORT_ENV])
        except ValueError as exc:
            raise ValueError(f"{PORT_ENV}={environ[PORT_ENV]!r} is not a port number") from exc
    else:
        port = web_ui.DEFAULT_PORT
    if not 0 <= port <= 65535:
        raise ValueError(f"port {port} is out of range: use 1-65535, or 0 for any free port")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        port = resolve_port(args.port, os.environ)
    except ValueError as exc:
        parser.error(str(exc))
    host = web_ui.LOOPBACK_HOST
    if args.allow_remote is not None:
        host = args.allow_remote.strip()
        if host.lower() in WILDCARD_HOSTS:
            parser.error(
                f"--allow-remote {args.allow_remote!r}: a wildcard address cannot be protected "
                "against DNS rebinding; pass this machine's address, e.g. --allow-remote 192.0.2.10"
            )
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    config = config_from_args(args)
    for problem in rag_service.check_config(config):
        sys.stderr.write(f"warning: {problem}\n")
    try:
        server = web_ui.make_server(config, host, port)
    except OSError as exc:
        sys.stderr.write(
            f"error: cannot listen on {host}:{port} ({exc.strerror or exc}): "
            "pass another --port, or --port 0 for any free port\n"
        )
        return 2
    if host != web_ui.LOOPBACK_HOST:
        sys.stderr.write(REMOTE_WARNING.format(host=host, url=server.url) + "\n")
    sys.stderr.write(f"RagDoc console: {server.url}\n")
    sys.stderr.flush()
    if config.watch:
        rag_service.start_watch_thread(config)

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, name="shutdown", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
