"""Loopback web console: the static page under ui/ plus a small JSON API over rag_service.

Every answer comes from rag_service (search, sync jobs, health, listing, reading); this module
only adds HTTP, the security rules of a local console and the read-only file opener:
- the Host header must name this console (DNS rebinding cannot reach it under another name);
- state changes are POST, same-origin (Origin or Sec-Fetch-Site) and carry the CSRF token;
- API reads refuse cross-site Fetch Metadata; there are no CORS headers at all;
- every response carries a strict CSP, nosniff and no-referrer; originals other than PDFs are
  additionally sandboxed, because the documents are untrusted.
"""

from __future__ import annotations

import codecs
import hmac
import json
import logging
import re
import secrets
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import rag_service
from helpers.config import Config, bundled_dir
from helpers.errors import (
    ConfigError,
    DiskFull,
    Forbidden,
    IndexBusy,
    IndexMissing,
    InvalidArgument,
    NotFound,
    RagError,
    ReadOnlyDataDir,
)
from helpers.extract.formats import Format, format_for
from helpers.web import guard as web_guard
from helpers.web.guard import LOOPBACK_HOST

UI_DIR = bundled_dir("ui", "ragdoc_ui", "rag.html")
PAGE_FILE = UI_DIR / "rag.html"
CSRF_PLACEHOLDER = "__CSRF_TOKEN__"
DEFAULT_PORT = 8769
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'"
)
# Originals are untrusted: a sandboxed document gets an opaque origin and runs no script, so an
# HTML file in the knowledge dir cannot read the CSRF token or call the API. PDFs are exempt:
# Chromium's viewer refuses to run in a sandbox, and it never runs document script in our origin.
ORIGINAL_CSP = CSP + "; sandbox"
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),  # no embedding from other sites, even opaque
)
MAX_QUERY_FIELDS = 50  # the widest form (search) has six
MAX_BODY_BYTES = 16 * 1024  # POST bodies are tiny JSON objects ({"path": ...}, {"job_id": ...})
STATIC_NAME = re.compile(r"^/ui/([a-z0-9][a-z0-9_-]*\.(?:js|css|svg))$")  # no '/', no '..'
STATIC_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SSE_POLL_S = 0.5  # the worker writes its row once a second; twice as often shows every update
SSE_KEEPALIVE_S = 15.0  # a comment line keeps proxies and the browser from timing the stream out
SSE_MAX_S = 600.0  # one stream's life; EventSource reconnects by itself
IDLE_TIMEOUT_S = 120.0  # an idle keep-alive connection gives its thread back after this
COPY_CHUNK = 256 * 1024
UTF8_PROBE_BYTES = 1 << 20  # decide "charset=utf-8" for text originals from the first MiB
ERROR_STATUS: tuple[tuple[type[RagError], HTTPStatus], ...] = (
    (InvalidArgument, HTTPStatus.BAD_REQUEST),
    (NotFound, HTTPStatus.NOT_FOUND),
    (Forbidden, HTTPStatus.FORBIDDEN),
    (IndexMissing, HTTPStatus.CONFLICT),
    (ReadOnlyDataDir, HTTPStatus.CONFLICT),  # the request is fine; the data dir's state refuses it
    (IndexBusy, HTTPStatus.SERVICE_UNAVAILABLE),  # with Retry-After
    (DiskFull, HTTPStatus.INSUFFICIENT_STORAGE),
    (ConfigError, HTTPStatus.SERVICE_UNAVAILABLE),
)
# A writer holds the index lock for one batch of a big document (~1 s,
# helpers.index.document_write), so a few seconds later the lock is usually free again.
INDEX_BUSY_RETRY_AFTER_S = 5

log = logging.getLogger("ragdoc.console")


class ApiError(Exception):
    """An HTTP-level refusal with the same {error, message, hint} shape as RagError."""

    def __init__(
        self, status: HTTPStatus, code: str, message: str, hint: str = "", allow: str = ""
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"error": code, "message": message, "hint": hint}
        self.headers = (("Allow", allow),) if allow else ()


def _forbidden(message: str, hint: str = "") -> ApiError:
    return ApiError(HTTPStatus.FORBIDDEN, "forbidden", message, hint)


def _bad_request(message: str, hint: str = "") -> ApiError:
    return ApiError(HTTPStatus.BAD_REQUEST, "invalid_argument", message, hint)


class ConsoleServer(ThreadingHTTPServer):
    """One console process: its configuration, CSRF token and the Host names it answers to."""

    daemon_threads = True  # open event streams never block shutdown

    def __init__(self, config: Config, host: str = LOOPBACK_HOST, port: int = DEFAULT_PORT):
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__((host, port), ConsoleHandler)
        self.config = config
        self.csrf_token = secrets.token_urlsafe(32)
        self.stopping = threading.Event()
        self.port: int = self.server_address[1]
        self.allowed_hosts = web_guard.allowed_hosts(host, self.port)
        self.url = f"http://{web_guard.bracket(host)}:{self.port}/"

    def shutdown(self) -> None:
        self.stopping.set()
        super().shutdown()


def make_server(
    config: Config, host: str = LOOPBACK_HOST, port: int = DEFAULT_PORT
) -> ConsoleServer:
    """A bound console (port 0 = a free port; read `.port` / `.url`); call serve_forever()."""
    return ConsoleServer(config, host, port)


class ConsoleHandler(BaseHTTPRequestHandler):
    server: ConsoleServer
    protocol_version = "HTTP/1.1"
    server_version = "RagDocConsole"
    timeout = IDLE_TIMEOUT_S

    def version_string(self) -> str:
        return self.server_version  # no Python version on the wire

    # -- plumbing ------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        log.debug("%s " + format, self.address_string(), *args)

    def end_headers(self) -> None:
        """Every response, including the stdlib's own error pages, gets the security headers."""
        csp = getattr(self, "_csp", CSP)
        for name, value in SECURITY_HEADERS:
            self.send_header(name, csp if name == "Content-Security-Policy" else value)
        super().end_headers()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")  # no CORS preflight support, on purpose: answered 405

    def send_response(self, code: int, message: str | None = None) -> None:
        self._responded = True
        super().send_response(code, message)

    def _handle(self, method: str) -> None:
        self._csp = CSP
        self._responded = False
        self._body_read = False
        try:
            self._check_host()
            url = urlsplit(self.path)
            try:
                params = parse_qs(url.query, max_num_fields=MAX_QUERY_FIELDS)
            except ValueError as exc:
                raise _bad_request("too many query parameters") from exc
            self._route(method, url.path, params)
        except ApiError as exc:
            self._fail(exc.status, exc.body, exc.headers)
        except RagError as exc:
            self._fail(_status_of(exc), exc.to_dict(), _error_headers(exc))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:
            log.exception("console request %s %s failed", method, self.path)
            self._fail(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                {
                    "error": "internal",
                    "message": "the console hit an unexpected error",
                    "hint": "see the console's stderr for the traceback",
                },
            )

    def _fail(
        self, status: HTTPStatus, body: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        if self._responded:  # a stream broke half-way: the status line is gone, just hang up
            self.close_connection = True
            return
        if not self._body_read and self.headers.get("Content-Length", "0") not in ("", "0"):
            # An unread request body would be parsed as the next request on this connection.
            headers = (*headers, ("Connection", "close"))
        self._send_json(status, body, headers)

    def _route(self, method: str, path: str, params: dict[str, list[str]]) -> None:
        if method == "POST" and path in POST_ROUTES:
            self._check_same_origin_and_token()
            POST_ROUTES[path](self, self._read_json_body())
            return
        if method in ("GET", "HEAD"):
            if path == "/":
                self._send_page()
                return
            match = STATIC_NAME.match(path)
            if match:
                self._send_static(match.group(1))
                return
            if path in GET_ROUTES and method == "GET":
                self._check_fetch_site()
                GET_ROUTES[path](self, params)
                return
        if path in POST_ROUTES or path in GET_ROUTES or path == "/":
            allowed = (
                "POST" if path in POST_ROUTES else "GET" if path in GET_ROUTES else "GET, HEAD"
            )
            raise ApiError(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{method} is not allowed on {path}",
                f"use {allowed}",
                allow=allowed,
            )
        raise ApiError(HTTPStatus.NOT_FOUND, "not_found", f"no such page: {path}")

    # -- security checks -----------------------------------------------------------------------
    def _check_host(self) -> None:
        if not web_guard.host_ok(self.headers.get_all("Host") or [], self.server.allowed_hosts):
            raise _forbidden(
                "unexpected Host header",
                f"open the console at {self.server.url} (other host names are refused)",
            )

    def _check_same_origin_and_token(self) -> None:
        origin, site = self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site")
        if not web_guard.same_origin(origin, site, self.headers["Host"]):
            raise _forbidden(
                "cross-origin request refused", "state changes are accepted from the console only"
            )
        token = self.headers.get("X-CSRF-Token", "")
        if not hmac.compare_digest(token.encode(), self.server.csrf_token.encode()):
            raise _forbidden("missing or wrong CSRF token", "reload the console page and try again")

    def _check_fetch_site(self) -> None:
        # Other sites (and other ports on localhost, which are "same-site") may not read the API.
        if self.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site"):
            raise _forbidden("cross-site request refused", "use the console page itself")

    def _read_json_body(self) -> dict[str, Any]:
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise ApiError(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "POST bodies must be JSON",
                "send Content-Type: application/json",
            )
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as exc:
            raise _bad_request("bad Content-Length") from exc
        if not 0 <= length <= MAX_BODY_BYTES:
            raise ApiError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "too_large", "request body is too large"
            )
        raw = self.rfile.read(length) if length else b"{}"
        self._body_read = True
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise _bad_request("request body is not valid JSON") from exc
        if not isinstance(body, dict):
            raise _bad_request("request body must be a JSON object")
        return body

    # -- responses -----------------------------------------------------------------------------
    def _send_bytes(
        self,
        status: HTTPStatus,
        data: bytes,
        content_type: str,
        cache: str = "no-store",
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", cache)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_json(
        self, status: HTTPStatus, obj: Any, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        self._send_bytes(status, data, "application/json; charset=utf-8", headers=headers)

    def _send_page(self) -> None:
        page = PAGE_FILE.read_text(encoding="utf-8")
        html = page.replace(CSRF_PLACEHOLDER, self.server.csrf_token)
        self._send_bytes(HTTPStatus.OK, html.encode("utf-8"), "text/html; charset=utf-8")

    def _send_static(self, name: str) -> None:
        path = UI_DIR / name
        if not path.is_file():
            raise ApiError(HTTPStatus.NOT_FOUND, "not_found", f"no such asset: {name}")
        ctype = STATIC_TYPES[path.suffix]
        self._send_bytes(HTTPStatus.OK, path.read_bytes(), ctype, cache="no-cache")

    # -- API: search, read, list, health -------------------------------------------------------
    def api_search(self, params: dict[str, list[str]]) -> None:
        types = [t for raw in params.get("type", []) for t in raw.split(",") if t.strip()]
        result = rag_service.search(
            self.server.config,
            _str(params, "q") or "",
            top_k=_int(params, "top_k", 8),
            path_prefix=_str(params, "path_prefix"),
            file_types=types or None,
            mode=_str(params, "mode") or "hybrid",
        )
        self._send_json(HTTPStatus.OK, result.to_dict())

    def api_read(self, params: dict[str, list[str]]) -> None:
        path = _str(params, "path")
        if not path:
            raise _bad_request("path is required", "pass a path from a search hit or the list")
        location = None
        if _str(params, "location"):
            try:
                location = json.loads(_str(params, "location") or "")
            except ValueError as exc:
                raise _bad_request("location is not JSON", 'e.g. {"page": 3}') from exc
            if not isinstance(location, dict):
                raise _bad_request("location must be a JSON object", 'e.g. {"page": 3}')
        section = _str(params, "section_id")
        result = rag_service.read_document(
            self.server.config,
            path,
            section_id=_int(params, "section_id", 0) if section else None,
            location=location,
            before=_int(params, "before", 1),
            after=_int(params, "after", 1),
            offset=_int(params, "offset", 0),
        )
        self._send_json(HTTPStatus.OK, result)

    def api_files(self, params: dict[str, list[str]]) -> None:
        result = rag_service.list_documents(
            self.server.config,
            path_prefix=_str(params, "path_prefix"),
            status=_str(params, "status"),
            limit=_int(params, "limit", 50),
            offset=_int(params, "offset", 0),
            sort=_str(params, "sort") or "path",
            descending=_str(params, "desc") in ("1", "true"),
            contains=_str(params, "contains"),
        )
        self._send_json(HTTPStatus.OK, result)

    def api_health(self, params: dict[str, list[str]]) -> None:
        self._send_json(HTTPStatus.OK, rag_service.health(self.server.config))

    # -- API: sync jobs ------------------------------------------------------------------------
    def api_sync(self, body: dict[str, Any]) -> None:
        path = body.get("path")
        if path is not None and not isinstance(path, str):
            raise _bad_request("path must be a string")
        view = rag_service.start_sync(self.server.config, path or None)
        self._send_json(
            HTTPStatus.OK if view.already_running else HTTPStatus.ACCEPTED, view.to_dict()
        )

    def api_cancel(self, body: dict[str, Any]) -> None:
        job_id = body.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            raise _bad_request("job_id is required", "pass the id shown by the sync panel")
        self._send_json(
            HTTPStatus.OK, rag_service.cancel_sync(self.server.config, job_id).to_dict()
        )

    def api_status(self, params: dict[str, list[str]]) -> None:
        view = rag_service.sync_status(self.server.config, _str(params, "job_id"))
        self._send_json(HTTPStatus.OK, view.to_dict())

    def api_jobs(self, params: dict[str, list[str]]) -> None:
        views = rag_service.list_jobs(self.server.config, _int(params, "limit", 20))
        self._send_json(HTTPStatus.OK, {"jobs": [v.to_dict() for v in views]})

    def api_events(self, params: dict[str, list[str]]) -> None:
        """Server-Sent Events: one `job` event per change of the job row, until it is final."""
        config = self.server.config
        view = rag_service.sync_status(config, _str(params, "job_id"))  # 404 before streaming
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")  # no length: the stream ends the connection
        self.end_headers()
        self.close_connection = True
        self.wfile.write(b"retry: 2000\n\n")
        last, quiet_s, lived_s = "", 0.0, 0.0
        while True:
            data = json.dumps(view.to_dict(), ensure_ascii=False)
            if data != last:
                self.wfile.write(f"event: job\ndata: {data}\n\n".encode())
                last, quiet_s = data, 0.0
            elif quiet_s >= SSE_KEEPALIVE_S:
                self.wfile.write(b": keepalive\n\n")
                quiet_s = 0.0
            self.wfile.flush()
            if view.state in rag_service.FINAL_STATES or lived_s >= SSE_MAX_S:
                return
            if self.server.stopping.wait(SSE_POLL_S):
                return
            quiet_s += SSE_POLL_S
            lived_s += SSE_POLL_S
            try:
                view = rag_service.sync_status(config, view.job_id)
            except RagError as exc:  # the client falls back to polling, which shows the error
                error = json.dumps(exc.to_dict(), ensure_ascii=False)
                self.wfile.write(f"event: failure\ndata: {error}\n\n".encode())
                return

    # -- API: the original file, read-only -----------------------------------------------------
    def api_open_file(self, params: dict[str, list[str]]) -> None:
        opened = rag_service.open_original(self.server.config, _str(params, "path"))
        with opened as (handle, real, size):
            fmt = format_for(real)
            ctype = self._original_type(fmt, handle)
            self._csp = CSP if real.suffix.lower() == ".pdf" else ORIGINAL_CSP
            disposition = "inline" if fmt is not None and fmt.inline else "attachment"
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(size))
            self.send_header(
                "Content-Disposition", f"{disposition}; filename*=UTF-8''{quote(real.name)}"
            )
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            while chunk := handle.read(COPY_CHUNK):
                self.wfile.write(chunk)

    @staticmethod
    def _original_type(fmt: Format | None, handle: Any) -> str:
        """The format's registered type (HTML as UTF-8); plain text for a format shown as
        text, with charset=utf-8 when the start of the file decodes as UTF-8."""
        if fmt is None or not fmt.shown_as_text:
            if fmt is None or not fmt.mime:
                return "application/octet-stream"
            return f"{fmt.mime}; charset=utf-8" if fmt.mime == "text/html" else fmt.mime
        probe = handle.read(UTF8_PROBE_BYTES)
        handle.seek(0)
        try:
            codecs.getincrementaldecoder("utf-8")().decode(probe, final=False)
        except UnicodeDecodeError:
            return "text/plain"  # legacy encodings: let the browser detect the charset
        return "text/plain; charset=utf-8"


GET_ROUTES = {
    "/api/search": ConsoleHandler.api_search,
    "/api/read": ConsoleHandler.api_read,
    "/api/files": ConsoleHandler.api_files,
    "/api/health": ConsoleHandler.api_health,
    "/api/sync/status": ConsoleHandler.api_status,
    "/api/sync/events": ConsoleHandler.api_events,
    "/api/jobs": ConsoleHandler.api_jobs,
    "/api/file": ConsoleHandler.api_open_file,
}
POST_ROUTES = {
    "/api/sync": ConsoleHandler.api_sync,
    "/api/sync/cancel": ConsoleHandler.api_cancel,
}


def _status_of(exc: RagError) -> HTTPStatus:
    for cls, status in ERROR_STATUS:
        if isinstance(exc, cls):
            return status
    return HTTPStatus.INTERNAL_SERVER_ERROR


def _error_headers(exc: RagError) -> tuple[tuple[str, str], ...]:
    if isinstance(exc, IndexBusy):
        return (("Retry-After", str(INDEX_BUSY_RETRY_AFTER_S)),)
    return ()


def _str(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    return values[-1] if values else None


def _int(params: dict[str, list[str]], name: str, default: int) -> int:
    raw = _str(params, name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise _bad_request(f"{name} must be a whole number, got {raw!r}") from exc
