"""Download the semantic model into the Hugging Face cache layout (explicit `model fetch` only).

Nothing else in the program downloads anything. Files land in
`<cache>/models--ORG--NAME/snapshots/<commit>/...` with `refs/main`, so model discovery finds
them like any hub download. Large files resume from a `.part` file (HTTP Range) and are checked
against the sha256 the hub publishes for LFS files (X-Linked-Etag / ETag).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from helpers.errors import RagError
from helpers.semantic.model import (
    DEFAULT_REPO_ID,
    ONNX_CANDIDATES,
    cpu_features,
    repo_cache_dir,
)

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://huggingface.co"
REQUIRED_FILES = ("config.json", "modules.json", "1_Pooling/config.json", "sentencepiece.bpe.model")
OPTIONAL_FILES = (
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
CHUNK_BYTES = 1 << 20  # hash in 1 MiB pieces: bounded memory even for a 470 MB fp32 file
TIMEOUT_S = 60.0  # per network operation (connect/read), not for the whole file
MAX_REDIRECTS = 5
OFFLINE_HINT = (
    "check the network (or a proxy via HTTPS_PROXY), or copy a sentence-transformers model "
    "folder by hand and pass --semantic-model-dir DIR"
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

Progress = Callable[[str, int, int | None], None]  # (file, bytes done, bytes total or None)


class FetchError(RagError):
    """A model download that did not complete; nothing half-written is kept."""

    code = "model_fetch_failed"

    def __init__(self, message: str, hint: str = OFFLINE_HINT) -> None:
        super().__init__(message, hint)


@dataclass(frozen=True)
class FetchResult:
    model_dir: Path  # the snapshot folder, usable as --semantic-model-dir
    revision: str  # commit id
    files: tuple[str, ...]
    downloaded_bytes: int


@dataclass(frozen=True)
class _Remote:
    url: str  # where the bytes are (after the hub's redirect to its CDN)
    commit: str | None
    sha256: str | None
    size: int | None


def default_onnx_files() -> list[str]:
    """ONNX files worth trying on this CPU, best first (the first one the repo has wins)."""
    features = cpu_features()
    return [f"onnx/{name}" for name, needs in ONNX_CANDIDATES if needs is None or needs in features]


def download_repo(
    dest_cache_root: Path,
    repo_id: str = DEFAULT_REPO_ID,
    base_url: str = DEFAULT_BASE_URL,
    files: Sequence[str] | None = None,
    *,
    revision: str = "main",
    onnx_files: Sequence[str] | None = None,
    progress: Progress | None = None,
    timeout_s: float = TIMEOUT_S,
) -> FetchResult:
    """Download `files` (default: the configs, the tokenizer and the best ONNX file for this CPU).

    With an explicit `files` list every file is required. Raises FetchError with a hint.
    """
    repo_dir = repo_cache_dir(Path(dest_cache_root), repo_id)
    base = base_url.rstrip("/")
    fetched: list[str] = []
    total_bytes = 0
    with httpx.Client(timeout=timeout_s, follow_redirects=False) as client:
        plan: list[tuple[str, bool]] = (
            [(f, True) for f in files]
            if files is not None
            else [
                *((f, True) for f in REQUIRED_FILES),
                *((f, False) for f in OPTIONAL_FILES),
            ]
        )
        commit: str | None = None
        for path, required in plan:
            remote = _probe(client, f"{base}/{repo_id}/resolve/{revision}/{path}")
            if remote is None:
                if required:
                    raise FetchError(
                        f"{repo_id} has no file {path!r} at revision {revision}",
                        f"check the repository id ({repo_id}) and revision",
                    )
                continue
            commit = commit or remote.commit or revision
            total_bytes += _download(
                client, remote, repo_dir / "snapshots" / commit / path, path, progress
            )
            fetched.append(path)
        if files is None:
            onnx_path = _fetch_first_onnx(
                client,
                base,
                repo_id,
                revision,
                onnx_files or default_onnx_files(),
                repo_dir,
                commit,
                progress,
            )
            commit = commit or revision
            fetched.append(onnx_path[0])
            total_bytes += onnx_path[1]
    commit = commit or revision
    (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs" / revision).write_text(commit, encoding="utf-8")
    return FetchResult(repo_dir / "snapshots" / commit, commit, tuple(fetched), total_bytes)


def _fetch_first_onnx(
    client: httpx.Client,
    base: str,
    repo_id: str,
    revision: str,
    candidates: Sequence[str],
    repo_dir: Path,
    commit: str | None,
    progress: Progress | None,
) -> tuple[str, int]:
    for path in candidates:
        remote = _probe(client, f"{base}/{repo_id}/resolve/{revision}/{path}")
        if remote is None:
            continue
        snapshot = repo_dir / "snapshots" / (commit or remote.commit or revision)
        return path, _download(client, remote, snapshot / path, path, progress)
    raise FetchError(
        f"{repo_id} has none of these ONNX files: {', '.join(candidates)}",
        "pick a sentence-transformers model with an onnx/ export, or convert one by hand and "
        "pass --semantic-model-dir DIR",
    )


def _probe(client: httpx.Client, url: str, hops: int = 0) -> _Remote | None:
    """HEAD without following redirects: the hub's own headers carry the commit and sha256.

    An LFS file answers with a redirect to its CDN plus X-Linked-Etag/-Size; any other redirect
    (a renamed repository) is followed up to MAX_REDIRECTS times.
    """
    try:
        head = client.head(url, headers={"Accept-Encoding": "identity"})
    except httpx.HTTPError as exc:
        raise FetchError(f"cannot reach {url}: {exc}") from exc
    if head.status_code == 404:
        return None
    if head.status_code in (401, 403):
        raise FetchError(
            f"{url}: access denied (HTTP {head.status_code})",
            "the repository may be gated or private; download it by hand and pass "
            "--semantic-model-dir DIR",
        )
    target = url
    if head.is_redirect:
        target = str(head.url.join(head.headers.get("location", "")))
        if not head.headers.get("x-linked-etag"):
            if hops >= MAX_REDIRECTS:
                raise FetchError(f"{url}: too many redirects")
            return _probe(client, target, hops + 1)
    elif head.status_code >= 400:
        raise FetchError(f"{url}: HTTP {head.status_code}")
    etag = (head.headers.get("x-linked-etag") or head.headers.get("etag") or "").strip()
    etag = etag.removeprefix("W/").strip('"').lower()
    size = head.headers.get("x-linked-size") or head.headers.get("content-length")
    return _Remote(
        url=target,
        commit=head.headers.get("x-repo-commit"),
        sha256=etag if _SHA256.match(etag) else None,
        size=int(size) if size and size.isdigit() else None,
    )


def _download(
    client: httpx.Client, remote: _Remote, dest: Path, name: str, progress: Progress | None
) -> int:
    """Fetch into dest + '.part', resuming with Range; verify size and sha256; then rename."""
    if dest.is_file() and _matches(dest, remote):
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.is_file() else 0
    if remote.size is not None and have > remote.size:
        part.unlink()
        have = 0
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    received = 0
    try:
        with client.stream("GET", remote.url, headers=headers, follow_redirects=True) as response:
            if response.status_code == 416 and have:
                pass  # the .part is already complete: verify below
            elif response.status_code == 206 and have:
                mode = "ab"
            elif response.status_code == 200:
                have, mode = 0, "wb"  # the server ignored Range: start over
            else:
                raise FetchError(f"{remote.url}: HTTP {response.status_code}")
            if response.status_code != 416:
                with part.open(mode) as out:
                    for piece in response.iter_bytes():  # as received: a cut loses nothing
                        out.write(piece)
                        received += len(piece)
                        if progress:
                            progress(name, have + received, remote.size)
    except httpx.HTTPError as exc:
        raise FetchError(
            f"download of {name} interrupted after {have + received} bytes: {exc}",
            "run `ragdoc model fetch` again: it resumes where it stopped",
        ) from exc
    if not _matches(part, remote):
        part.unlink()
        raise FetchError(
            f"{name}: downloaded file does not match the hub's size/sha256 "
            f"(expected {remote.size} bytes, sha256 {remote.sha256})",
            "run `ragdoc model fetch` again; if it repeats, the mirror is corrupt",
        )
    part.replace(dest)
    log.info("fetched %s (%d bytes)", name, dest.stat().st_size)
    return received


def _matches(path: Path, remote: _Remote) -> bool:
    if remote.size is not None and path.stat().st_size != remote.size:
        return False
    if remote.sha256 is None:
        return True
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for piece in iter(lambda: fh.read(CHUNK_BYTES), b""):
            digest.update(piece)
    return digest.hexdigest() == remote.sha256
