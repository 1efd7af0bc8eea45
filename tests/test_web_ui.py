"""The web console over real HTTP: a real server on 127.0.0.1, a real index, real sync workers."""

from __future__ import annotations

import http.client
import json
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import files_for_seconds, needs_mount, write_corpus
from stress.harness import fill_after_sync, foreign_exclusive_lock, tmpfs
from web_fixtures import (
    PDF_PAGE2_WORDS,
    SECRET_TEXT,
    Http,
    make_config,
    running_console,
    start_console_process,
    sync_now,
    write_small_corpus,
)

import main as console_main
import rag_service
import web_ui
from helpers.config import Config

STRICT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; frame-ancestors 'none'; base-uri 'none'"
)
EVENT_STREAM_BOUND_S = 60.0  # a bound for reading the stream, not a speed expectation
SHORT_BUSY_S = 0.5  # the console gives up on a foreign lock this fast in these tests
FOREIGN_LOCK_S = 3.0  # far past SHORT_BUSY_S, so the sync is refused, not queued


@dataclass(frozen=True)
class Console:
    http: Http
    server: web_ui.ConsoleServer
    config: Config
    root: Path


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    root = tmp_path_factory.mktemp("web")
    write_small_corpus(root)
    config = make_config(root / "kb", root / "state")
    sync_now(config)
    with running_console(config) as server:
        yield Console(Http(server.port, server.csrf_token), server, config, root)


def assert_security_headers(reply_headers: dict[str, str]) -> None:
    assert reply_headers["content-security-policy"].startswith(STRICT_CSP)
    assert reply_headers["x-content-type-options"] == "nosniff"
    assert reply_headers["referrer-policy"] == "no-referrer"
    assert not [name for name in reply_headers if name.startswith("access-control-")]


# -- page and assets ---------------------------------------------------------------------------
def test_the_page_carries_the_csrf_token_and_loads_only_same_origin_files(console: Console) -> None:
    reply = console.http.get("/")
    assert reply.status == 200
    assert reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["content-security-policy"] == STRICT_CSP
    html = reply.body.decode()
    token = re.search(r'<meta name="csrf-token" content="([^"]+)">', html)
    assert token and token.group(1) == console.server.csrf_token
    assert len(token.group(1)) >= 32
    assert "<script>" not in html and not re.search(r"\son[a-z]+=", html)  # no inline code
    assert not re.search(r"(src|href)=\"(https?:)?//", html)  # nothing from the network
    for asset in re.findall(r'(?:src|href)="(/ui/[^"]+)"', html):
        assert console.http.get(asset).status == 200


def test_static_assets_have_their_types_and_unknown_or_escaping_names_are_404(
    console: Console,
) -> None:
    js = console.http.get("/ui/rag.js")
    assert js.status == 200 and js.headers["content-type"] == "text/javascript; charset=utf-8"
    css = console.http.get("/ui/rag.css")
    assert css.status == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
    for path in ("/ui/missing.js", "/ui/../web_ui.py", "/ui/%2e%2e/web_ui.py", "/ui/rag.html"):
        reply = console.http.get(path)
        assert reply.status == 404, path
        assert b"import" not in reply.body


def test_each_ui_script_and_style_uses_no_network_resource() -> None:
    for path in (Path(web_ui.UI_DIR)).iterdir():
        text = path.read_text(encoding="utf-8")
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        assert "https://" not in text and "@import" not in text
        assert not re.search(r"\.(inner|outer)HTML|insertAdjacentHTML|document\.write", text)


# -- search and read ---------------------------------------------------------------------------
def test_search_returns_hits_with_location_marked_snippet_and_parent_section(
    console: Console,
) -> None:
    reply = console.http.get("/api/search?q=invoice+payment&mode=lexical")
    assert reply.status == 200
    assert_security_headers(reply.headers)
    data = reply.json()
    hit = data["hits"][0]
    assert hit["path"] == "contracts/service-agreement.md"
    assert "Invoice payment terms" in hit["location_label"]
    assert "**" in hit["snippet"]
    assert hit["abs_path"] == str(console.config.knowledge_dir / hit["path"])
    assert "payable within 30 days" in data["sections"][str(hit["section_id"])]
    assert hit["channels"]


def test_search_filters_by_folder_and_file_type(console: Console) -> None:
    in_reports = console.http.get("/api/search?q=2026&mode=lexical&path_prefix=reports").json()
    assert in_reports["hits"]
    assert all(h["path"].startswith("reports/") for h in in_reports["hits"])
    pdf_only = console.http.get(
        "/api/search?q=" + quote(PDF_PAGE2_WORDS) + "&mode=lexical&type=pdf"
    ).json()
    assert pdf_only["hits"] and all(h["format"] == "pdf" for h in pdf_only["hits"])
    assert pdf_only["hits"][0]["location"]["page"] == 2


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("/api/search?q=x&mode=fuzzy", "invalid_argument"),
        ("/api/search?q=", "invalid_argument"),
        ("/api/search?q=x&top_k=abc", "invalid_argument"),
        ("/api/search?q=x&type=exe", "invalid_argument"),
        ("/api/search?q=x&path_prefix=../etc", "invalid_argument"),
    ],
)
def test_bad_search_arguments_are_a_400_with_a_hint(
    console: Console, query: str, code: str
) -> None:
    reply = console.http.get(query)
    assert reply.status == 400
    body = reply.json()
    assert body["error"] == code and body["message"]
    assert set(body) == {"error", "message", "hint"}


def test_read_returns_the_hit_section_with_its_neighbours(console: Console) -> None:
    hit = console.http.get("/api/search?q=invoice&mode=lexical").json()["hits"][0]
    reply = console.http.get(
        f"/api/read?path={quote(hit['path'])}&section_id={hit['section_id']}&before=1&after=1"
    )
    assert reply.status == 200
    sections = reply.json()["sections"]
    ids = [s["section_id"] for s in sections]
    assert hit["section_id"] in ids and len(sections) == 3
    assert any("Termination" in s["location_label"] for s in sections)


def test_read_of_an_unindexed_path_is_404_and_of_a_bad_path_is_400(console: Console) -> None:
    assert console.http.get("/api/read?path=contracts/none.md").status == 404
    assert console.http.get("/api/read?path=../outside/secret.txt").status == 400
    assert console.http.get("/api/read").status == 400


def test_search_before_anything_is_indexed_is_a_409_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    config = make_config(tmp_path / "kb", tmp_path / "state")
    with running_console(config) as server:
        reply = Http(server.port).get("/api/search?q=anything")
    assert reply.status == 409
    assert reply.json()["error"] == "index_missing" and "sync" in reply.json()["hint"]


def test_a_missing_knowledge_dir_is_a_503_on_search_but_health_still_answers(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path / "absent", tmp_path / "state")
    with running_console(config) as server:
        http = Http(server.port)
        search = http.get("/api/search?q=anything")
        health = http.get("/api/health")
    assert search.status == 503 and search.json()["error"] == "config_error"
    assert health.status == 200 and health.json()["status"] == "error"


# -- storage faults: typed errors get their own HTTP status --------------------------------------
def test_index_busy_is_a_503_with_retry_after_and_starts_no_job(console: Console) -> None:
    impatient = replace(console.config, busy_timeout_s=SHORT_BUSY_S)
    jobs_before = console.http.get("/api/jobs").json()["jobs"]
    with running_console(impatient) as server:
        http = Http(server.port, server.csrf_token)
        with foreign_exclusive_lock(impatient.db_path, seconds=FOREIGN_LOCK_S):
            reply = http.post("/api/sync", {})
    assert reply.status == 503
    assert reply.headers["retry-after"] == str(web_ui.INDEX_BUSY_RETRY_AFTER_S)
    assert reply.json()["error"] == "index_busy"
    assert "retry in a few seconds" in reply.json()["hint"]
    assert_security_headers(reply.headers)
    assert console.http.get("/api/jobs").json()["jobs"] == jobs_before


def test_a_write_on_a_read_only_data_dir_is_a_409_and_reads_still_answer(
    console: Console,
) -> None:
    read_only = replace(console.config, read_only=True)
    with running_console(read_only) as server:
        http = Http(server.port, server.csrf_token)
        sync = http.post("/api/sync", {})
        cancel = http.post("/api/sync/cancel", {"job_id": "any-job"})
        search = http.get("/api/search?q=invoice&mode=lexical")
        health = http.get("/api/health").json()
    for refused in (sync, cancel):
        assert refused.status == 409 and refused.json()["error"] == "read_only"
        assert "--data-dir" in refused.json()["hint"]
        assert "retry-after" not in refused.headers
    assert search.status == 200 and search.json()["hits"]
    assert "--read-only" in health["read_only"]


@needs_mount
def test_a_sync_on_a_full_disk_is_a_507_and_searches_still_answer(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "memo.md").write_text("# Memo\n\nThe invoice is due.\n", encoding="utf-8")
    with tmpfs(tmp_path / "tiny", "2m") as tiny:
        config = make_config(tmp_path / "kb", tiny / "state")
        sync_now(config)
        fill_after_sync(tiny, config)  # the new job row now needs blocks there are none of
        try:
            with running_console(config) as server:
                http = Http(server.port, server.csrf_token)
                sync = http.post("/api/sync", {})
                search = http.get("/api/search?q=invoice&mode=lexical")
        finally:
            (tiny / "filler").unlink()
    assert sync.status == 507 and sync.json()["error"] == "disk_full"
    assert f"free space on {config.data_dir}" in sync.json()["hint"]
    assert search.status == 200 and search.json()["hits"]


# -- health and files --------------------------------------------------------------------------
def test_health_reports_counts_paths_and_engine_states(console: Console) -> None:
    report = console.http.get("/api/health").json()
    assert report["knowledge_dir"] == str(console.config.knowledge_dir)
    assert report["documents"]["total"] == 6
    assert report["chunks"] >= report["documents"]["total"]
    assert report["schema_version"] >= 1 and report["chunk_scheme"] >= 1
    assert report["semantic"]["state"] == "off" and report["semantic"]["hint"]
    assert report["ocr"]["state"] in ("available", "unavailable")
    assert report["last_job"]["state"] == "succeeded"


def test_files_are_paged_sorted_and_filtered_on_the_server(console: Console) -> None:
    first = console.http.get("/api/files?limit=2&offset=0&sort=path").json()
    second = console.http.get("/api/files?limit=2&offset=2&sort=path").json()
    assert first["total"] == second["total"] == 6
    assert len(first["items"]) == 2 and first["next_offset"] == 2
    paths = [i["path"] for i in first["items"] + second["items"]]
    assert paths == sorted(paths)
    by_size = console.http.get("/api/files?sort=size&desc=1").json()["items"]
    sizes = [i["size"] for i in by_size]
    assert sizes == sorted(sizes, reverse=True)
    reports = console.http.get("/api/files?contains=REPORTS").json()
    assert {i["path"] for i in reports["items"]} == {"reports/budget.csv", "reports/sales-2026.txt"}
    assert console.http.get("/api/files?status=failed").json()["total"] == 0
    assert console.http.get("/api/files?status=bogus").status == 400
    assert console.http.get("/api/files?limit=0").status == 400


# -- sync jobs ---------------------------------------------------------------------------------
def read_events(http: Http, job_id: str) -> list[dict[str, object]]:
    """Every `job` event of the stream until the server ends it (it does when the job is final)."""
    conn_reply: list[dict[str, object]] = []
    sock = socket.create_connection(("127.0.0.1", http.port), timeout=EVENT_STREAM_BOUND_S)
    with sock:
        sock.sendall(
            f"GET /api/sync/events?job_id={job_id} HTTP/1.1\r\nHost: {http.host}\r\n\r\n".encode()
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, stream = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"text/event-stream" in head and b"Content-Security-Policy" in head
    for block in stream.decode().split("\n\n"):
        lines = block.splitlines()
        if "event: job" in lines:
            data = next(line for line in lines if line.startswith("data: "))
            conn_reply.append(json.loads(data[len("data: ") :]))
    return conn_reply


def test_sync_start_streams_progress_until_final_and_lands_in_the_history(
    console: Console,
) -> None:
    (console.config.knowledge_dir / "notes" / "added.md").write_text(
        "# Added later\n\nA fresh quarterly memo.\n", encoding="utf-8"
    )
    started = console.http.post("/api/sync", {})
    assert started.status in (200, 202)
    job = started.json()
    events = read_events(console.http, job["job_id"])
    assert events and events[-1]["state"] == "succeeded"
    assert events[-1]["percent"] == 100.0 and events[-1]["counts"]["added"] == 1
    assert all(e["job_id"] == job["job_id"] for e in events)
    status = console.http.get(f"/api/sync/status?job_id={job['job_id']}").json()
    assert status["state"] == "succeeded"
    history = console.http.get("/api/jobs?limit=5").json()["jobs"]
    assert history[0]["job_id"] == job["job_id"] and len(history) == 2
    assert console.http.get("/api/search?q=quarterly+memo&mode=lexical").json()["hits"]


def test_status_of_an_unknown_job_is_404(console: Console) -> None:
    assert console.http.get("/api/sync/status?job_id=nope").status == 404
    assert console.http.get("/api/sync/events?job_id=nope").status == 404


def test_a_running_sync_outlives_a_console_restart_and_is_cancelled_by_the_new_one(
    tmp_path: Path,
) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    # long enough to outlive a console restart on any machine: ~15 s of this one's syncing
    write_corpus(kb, max(600, files_for_seconds(tmp_path, 15)))
    config = make_config(kb, tmp_path / "state")
    with running_console(config) as first:
        old = Http(first.port, first.csrf_token)
        job = old.post("/api/sync", {}).json()
        assert job["state"] in ("queued", "running")
        again = old.post("/api/sync", {})
        assert again.status == 200 and again.json()["already_running"] is True
        assert again.json()["job_id"] == job["job_id"]
    with running_console(config) as second:  # a new process would start exactly like this
        assert second.csrf_token != first.csrf_token
        http = Http(second.port, second.csrf_token)
        latest = http.get("/api/jobs?limit=1").json()["jobs"][0]
        assert latest["job_id"] == job["job_id"]
        stale_token = http.post("/api/sync/cancel", {"job_id": job["job_id"]}, token=old.token)
        assert stale_token.status == 403
        cancelled = http.post("/api/sync/cancel", {"job_id": job["job_id"]})
        assert cancelled.status == 200
        assert cancelled.json()["state"] in ("queued", "cancelling", "cancelled")
        final = rag_service.wait_for_job(config, job["job_id"], timeout_s=60)
        assert final.state == "cancelled"
        assert http.get(f"/api/sync/status?job_id={job['job_id']}").json()["state"] == "cancelled"


def test_sync_of_a_folder_outside_the_knowledge_dir_is_refused(console: Console) -> None:
    reply = console.http.post("/api/sync", {"path": "../outside"})
    assert reply.status == 400 and reply.json()["error"] == "invalid_argument"
    assert console.http.post("/api/sync", {"path": 5}).status == 400
    assert console.http.post("/api/sync/cancel", {}).status == 400


# -- opening originals -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "ctype"),
    [
        ("contracts/service-agreement.md", "text/plain; charset=utf-8"),
        ("reports/budget.csv", "text/plain; charset=utf-8"),
        ("manuals/wrench.pdf", "application/pdf"),
        ("notes/page.html", "text/html; charset=utf-8"),
    ],
)
def test_originals_are_served_read_only_with_their_content_type(
    console: Console, path: str, ctype: str
) -> None:
    reply = console.http.get("/api/file?path=" + quote(path))
    assert reply.status == 200
    assert reply.headers["content-type"] == ctype
    assert reply.body == (console.config.knowledge_dir / path).read_bytes()
    assert reply.headers["content-disposition"].startswith("inline;")
    assert_security_headers(reply.headers)


def test_untrusted_originals_are_sandboxed_except_pdfs(console: Console) -> None:
    html = console.http.get("/api/file?path=notes/page.html")
    assert html.headers["content-security-policy"] == STRICT_CSP + "; sandbox"
    pdf = console.http.get("/api/file?path=manuals/wrench.pdf")
    assert pdf.headers["content-security-policy"] == STRICT_CSP


@pytest.mark.parametrize(
    "raw_query",
    [
        "../outside/secret.txt",
        "%2e%2e%2foutside%2fsecret.txt",
        "%2E%2E/outside/secret.txt",
        "notes/%2e%2e/%2e%2e/outside/secret.txt",
        "..%5coutside%5csecret.txt",
        "/etc/passwd",
        "%2fetc%2fpasswd",
        "",
    ],
)
def test_path_traversal_and_absolute_paths_are_refused(console: Console, raw_query: str) -> None:
    reply = console.http.get("/api/file?path=" + raw_query)
    assert reply.status in (400, 403)
    assert SECRET_TEXT.encode() not in reply.body and b"root:" not in reply.body
    assert reply.json()["error"] in ("forbidden", "invalid_argument")


@pytest.mark.parametrize(
    "path", ["notes/escape.txt", "linked/secret.txt", "notes/inner-link.md", "linked"]
)
def test_symlinks_are_refused_even_when_they_point_inside(console: Console, path: str) -> None:
    reply = console.http.get("/api/file?path=" + quote(path))
    assert reply.status == 403
    assert SECRET_TEXT.encode() not in reply.body


@pytest.mark.parametrize(
    "path", [".env", "notes/.hidden-note.md", "notes/credentials.txt", ".git/config", "a/.ssh/x"]
)
def test_hidden_and_sensitive_files_are_refused(console: Console, path: str) -> None:
    reply = console.http.get("/api/file?path=" + quote(path))
    assert reply.status == 403
    assert b"hunter2" not in reply.body and b"API_KEY" not in reply.body


def test_folders_missing_files_and_unread_formats_are_not_served(console: Console) -> None:
    assert console.http.get("/api/file?path=contracts").status == 403
    assert console.http.get("/api/file?path=contracts/none.md").status == 404
    (console.config.knowledge_dir / "notes" / "tool.bin").write_text("echo hi\n")  # .sh is read
    assert console.http.get("/api/file?path=notes/tool.bin").status == 403


# -- request security rules --------------------------------------------------------------------
@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost.evil.example:{port}", None],
)
def test_a_foreign_or_missing_host_header_is_403(console: Console, host: str | None) -> None:
    value = None if host is None else host.format(port=console.server.port)
    for path in ("/", "/api/health", "/api/file?path=reports/budget.csv"):
        reply = console.http.request("GET", path, host=value)
        assert reply.status == 403, (host, path)
        assert b"csrf-token" not in reply.body and b"Engineering" not in reply.body
        assert_security_headers(reply.headers)


def test_both_loopback_names_are_accepted_as_host(console: Console) -> None:
    port = console.server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert console.http.request("GET", "/api/health", host=host).status == 200


@pytest.mark.parametrize(
    ("origin", "extra"),
    [
        ("http://evil.example", {}),
        ("null", {}),
        ("http://localhost:1", {}),
        (None, {"Sec-Fetch-Site": "cross-site"}),
        (None, {"Sec-Fetch-Site": "same-site"}),
        (None, {}),  # neither Origin nor Fetch Metadata: cannot prove same-origin
        ("", {"Sec-Fetch-Site": "cross-site"}),  # right Origin but the browser says otherwise
    ],
)
def test_cross_origin_posts_are_403_even_with_the_token(
    console: Console, origin: str | None, extra: dict[str, str]
) -> None:
    before = len(console.http.get("/api/jobs").json()["jobs"])
    for path, payload in (("/api/sync", {}), ("/api/sync/cancel", {"job_id": "x"})):
        reply = console.http.post(path, payload, origin=origin, extra=extra)
        assert reply.status == 403, (origin, extra, path)
        assert "cross-origin" in reply.json()["message"]
    assert len(console.http.get("/api/jobs").json()["jobs"]) == before


def test_same_origin_by_fetch_metadata_alone_is_accepted(console: Console) -> None:
    reply = console.http.post(
        "/api/sync/cancel",
        {"job_id": "unknown-job"},
        origin=None,
        extra={"Sec-Fetch-Site": "same-origin"},
    )
    assert reply.status == 404  # passed the origin and token checks, then the service said 404


@pytest.mark.parametrize("token", ["", "wrong-token", "x" * 43])
def test_posts_without_the_right_csrf_token_are_403(console: Console, token: str) -> None:
    before = len(console.http.get("/api/jobs").json()["jobs"])
    reply = console.http.post("/api/sync", {}, token=token)
    assert reply.status == 403 and "CSRF" in reply.json()["message"]
    assert len(console.http.get("/api/jobs").json()["jobs"]) == before


def test_a_refused_post_leaves_the_keep_alive_connection_usable_or_closed(
    console: Console,
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", console.server.port, timeout=30)
    try:
        body = json.dumps({"path": "x" * 2000}).encode()
        conn.request("POST", "/api/sync", body, {"Content-Type": "application/json"})
        refused = conn.getresponse()
        assert refused.status == 403
        refused.read()
        conn.request("GET", "/api/health")  # reconnects by itself if the server hung up
        follow_up = conn.getresponse()
        assert follow_up.status == 200 and json.loads(follow_up.read())["status"]
    finally:
        conn.close()


def test_state_changes_need_post_and_json(console: Console) -> None:
    reply = console.http.get("/api/sync")
    assert reply.status == 405 and reply.headers["allow"] == "POST"
    assert console.http.get("/api/sync/cancel?job_id=x").status == 405
    form = console.http.request(
        "POST",
        "/api/sync",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": console.http.origin,
            "X-CSRF-Token": console.server.csrf_token,
        },
        body=b"path=",
    )
    assert form.status == 415
    assert console.http.post("/api/search", {"q": "x"}).status == 405


def test_api_reads_from_other_sites_are_refused_by_fetch_metadata(console: Console) -> None:
    for site in ("cross-site", "same-site"):
        reply = console.http.get("/api/search?q=invoice", **{"Sec-Fetch-Site": site})
        assert reply.status == 403 and b"invoice" not in reply.body.lower()
    assert console.http.get("/api/health", **{"Sec-Fetch-Site": "same-origin"}).status == 200
    assert console.http.get("/api/health", **{"Sec-Fetch-Site": "none"}).status == 200


def test_no_cors_headers_even_for_a_preflight_or_a_foreign_origin(console: Console) -> None:
    preflight = console.http.request(
        "OPTIONS",
        "/api/sync",
        headers={
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-csrf-token",
        },
    )
    assert preflight.status == 405
    assert_security_headers(preflight.headers)
    search = console.http.get("/api/search?q=invoice", Origin="http://evil.example")
    assert_security_headers(search.headers)


def test_every_kind_of_response_carries_the_security_headers(console: Console) -> None:
    replies = [
        console.http.get("/"),
        console.http.get("/ui/rag.css"),
        console.http.get("/api/health"),
        console.http.get("/api/files"),
        console.http.get("/api/jobs"),
        console.http.get("/nope"),
        console.http.get("/api/file?path=.env"),
        console.http.get("/api/sync"),
        console.http.post("/api/sync", {}, token=""),
        console.http.request("BREW", "/"),  # answered by the stdlib's own error page
        console.http.request("GET", "/", host="evil.example"),
    ]
    for reply in replies:
        assert_security_headers(reply.headers)
    assert {r.status for r in replies} >= {200, 403, 404, 405, 501}


# -- main.py -----------------------------------------------------------------------------------
def test_main_with_port_zero_prints_its_url_and_serves_on_loopback(console: Console) -> None:
    config = console.config
    process = start_console_process(
        ["--knowledge-dir", str(config.knowledge_dir), "--data-dir", str(config.data_dir)],
        env={"RAGDOC_UI_PORT": "0", "RAGDOC_SEMANTIC": "off"},
    )
    try:
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/", process.url)
        assert match, process.url
        port = int(match.group(1))
        assert port != web_ui.DEFAULT_PORT
        http = Http(port)
        assert http.get("/api/health").json()["documents"]["total"] >= 6
        assert "csrf-token" in http.get("/").body.decode()
    finally:
        assert process.stop() == 0


def test_main_allow_remote_warns_loudly_and_accepts_only_that_host(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    args = ["--knowledge-dir", str(tmp_path / "kb"), "--data-dir", str(tmp_path / "s")]
    process = start_console_process([*args, "--port", "0", "--allow-remote", "127.0.0.2"])
    try:
        port = int(process.url.rsplit(":", 1)[1].strip("/"))
        assert process.url == f"http://127.0.0.2:{port}/"
        assert "WARNING" in "".join(process.stderr_lines)
        conn = socket.create_connection(("127.0.0.2", port), timeout=10)
        with conn:
            conn.sendall(f"GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.2:{port}\r\n\r\n".encode())
            head = conn.recv(65536)
        assert head.startswith(b"HTTP/1.1 409")  # reached the service: nothing indexed yet
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        process.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "*"])
def test_main_refuses_a_wildcard_remote_address(tmp_path: Path, host: str) -> None:
    with pytest.raises(SystemExit) as exc:
        console_main.main(["--data-dir", str(tmp_path), "--allow-remote", host, "--port", "0"])
    assert exc.value.code == 2


def test_the_port_comes_from_the_flag_then_the_environment_then_the_default() -> None:
    assert console_main.resolve_port(9000, {"RAGDOC_UI_PORT": "9100"}) == 9000
    assert console_main.resolve_port(None, {"RAGDOC_UI_PORT": "9100"}) == 9100
    assert console_main.resolve_port(None, {}) == 8769
    assert console_main.resolve_port(0, {}) == 0
    with pytest.raises(ValueError, match="not a port"):
        console_main.resolve_port(None, {"RAGDOC_UI_PORT": "http"})
    with pytest.raises(ValueError, match="out of range"):
        console_main.resolve_port(70000, {})
