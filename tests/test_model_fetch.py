"""Model fetch against a real local HTTP server that mimics the hub's resolve/CDN behaviour."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from semantic_fixtures import build_tiny_model

from helpers.semantic.fetch import FetchError, download_repo
from helpers.semantic.model import (
    DEFAULT_REPO_ID,
    find_in_hf_cache,
    load_model_info,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_FILES = ("sentencepiece.bpe.model", "onnx/model.onnx")


@dataclass
class FakeHub:
    files: dict[str, bytes]
    wrong_sha: set[str] = field(default_factory=set)
    cut_first_get: dict[str, int] = field(default_factory=dict)  # path -> bytes sent, then hang up
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""

    def by_sha(self, sha: str) -> tuple[str, bytes] | None:
        for path, data in self.files.items():
            if hashlib.sha256(data).hexdigest() == sha:
                return path, data
        return None


def make_handler(hub: FakeHub) -> type[http.server.BaseHTTPRequestHandler]:
    prefix = f"/{DEFAULT_REPO_ID}/resolve/main/"

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_HEAD(self) -> None:
            self.answer(body=False)

        def do_GET(self) -> None:
            self.answer(body=True)

        def answer(self, body: bool) -> None:
            hub.requests.append((self.command, self.path, self.headers.get("Range")))
            if self.path.startswith("/cdn/"):
                return self.cdn(self.path.removeprefix("/cdn/"), body)
            path = self.path.removeprefix(prefix)
            if not self.path.startswith(prefix) or path not in hub.files:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = hub.files[path]
            self.send_response(302 if path in LFS_FILES else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            if path in LFS_FILES:
                sha = hashlib.sha256(data).hexdigest()
                shown = "0" * 64 if path in hub.wrong_sha else sha
                self.send_header("X-Linked-Etag", f'"{shown}"')
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("Location", f"/cdn/{sha}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

        def cdn(self, sha: str, body: bool) -> None:
            found = hub.by_sha(sha)
            if found is None:
                self.send_response(404)
                self.end_headers()
                return
            path, data = found
            start = 0
            header = self.headers.get("Range")
            if header:
                start = int(header.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if not body:
                return
            cut = hub.cut_first_get.pop(path, None)
            self.wfile.write(data[start:cut] if cut is not None else data[start:])
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True

    return Handler


@pytest.fixture(scope="module")
def model_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = build_tiny_model(tmp_path_factory.mktemp("repo"), onnx_name="model.onnx")
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture
def hub(model_files: dict[str, bytes]) -> Iterator[FakeHub]:
    fake = FakeHub(dict(model_files))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield fake
    server.shutdown()
    server.server_close()


def test_fetch_fills_the_hf_cache_layout_that_discovery_then_finds(
    hub: FakeHub, tmp_path: Path
) -> None:
    result = download_repo(tmp_path / "hub", base_url=hub.url)
    snapshot = (
        tmp_path / "hub" / "models--sentence-transformers--paraphrase-multilingual-MiniLM-L12-v2"
    )
    assert result.model_dir == snapshot / "snapshots" / COMMIT
    assert (snapshot / "refs" / "main").read_text() == COMMIT
    for path in result.files:
        assert (result.model_dir / path).read_bytes() == hub.files[path]
    assert "onnx/model.onnx" in result.files and "tokenizer_config.json" not in result.files
    tried = [p for m, p, _ in hub.requests if m == "HEAD" and "/onnx/" in p]
    assert tried[-1].endswith("onnx/model.onnx") and len(tried) >= 2  # better files 404 first
    assert find_in_hf_cache(DEFAULT_REPO_ID, cache_root=tmp_path / "hub") == result.model_dir
    assert load_model_info(result.model_dir).dim == 32
    again = download_repo(tmp_path / "hub", base_url=hub.url)
    assert again.downloaded_bytes == 0 and again.model_dir == result.model_dir


def test_an_interrupted_download_resumes_with_a_range_request(hub: FakeHub, tmp_path: Path) -> None:
    size = len(hub.files["onnx/model.onnx"])
    hub.cut_first_get["onnx/model.onnx"] = size // 3
    with pytest.raises(FetchError) as error:
        download_repo(tmp_path / "hub", base_url=hub.url)
    assert "again" in error.value.hint
    parts = list((tmp_path / "hub").rglob("model.onnx.part"))
    assert len(parts) == 1 and parts[0].stat().st_size == size // 3
    result = download_repo(tmp_path / "hub", base_url=hub.url)
    assert (
        "GET",
        f"/cdn/{hashlib.sha256(hub.files['onnx/model.onnx']).hexdigest()}",
        f"bytes={size // 3}-",
    ) in hub.requests
    assert (result.model_dir / "onnx/model.onnx").read_bytes() == hub.files["onnx/model.onnx"]
    assert not parts[0].exists()


def test_a_sha256_mismatch_is_refused_and_nothing_is_installed(
    hub: FakeHub, tmp_path: Path
) -> None:
    hub.wrong_sha.add("sentencepiece.bpe.model")
    with pytest.raises(FetchError) as error:
        download_repo(tmp_path / "hub", base_url=hub.url)
    assert "sha256" in str(error.value)
    assert not list((tmp_path / "hub").rglob("sentencepiece.bpe.model*"))
    assert not list((tmp_path / "hub").rglob("refs"))
    assert find_in_hf_cache(DEFAULT_REPO_ID, cache_root=tmp_path / "hub") is None


def test_a_file_the_repository_lacks_is_named_in_the_error(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(FetchError) as error:
        download_repo(tmp_path / "hub", base_url=hub.url, files=["config.json", "missing.json"])
    assert "missing.json" in str(error.value)


def test_an_unreachable_hub_gives_an_offline_hint(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(FetchError) as error:
        download_repo(tmp_path / "hub", base_url=f"http://127.0.0.1:{port}", timeout_s=5)
    assert "--semantic-model-dir" in error.value.hint
