"""Secrets fail closed through the real pipeline: a real worker syncs real files of every text
format, a DOCX and a PDF; the secrets are in no search result, snippet, section, rag_read answer
or byte of the index file, and an index written before the detector loses them on the next sync.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import SHARED, make_config
from secret_fixtures import (
    MARKER,
    PLACEHOLDERS,
    SECRETS,
    NoRedaction,
    NullObserver,
    gcp_service_account,
    prose,
    write_docx,
    write_pdf,
    write_text_formats,
)
from semantic_fixtures import REAL_MODEL_DIR
from stress.harness import wait_until, worker_pids

import rag_service
import rag_sync
from helpers.config import Config
from helpers.extract import document as extract_document
from helpers.extract.blocks import ExtractContext
from helpers.index.discard import mark_purge_pending, purge_pending
from helpers.safety import FileEntry, walk_files
from helpers.secrets import DETECTOR_VERSION, REDACTION
from helpers.semantic import vector_pack
from helpers.store import index_db
from helpers.store.codec import section_text, text_digest

FORMATS = ("txt", "md", "yaml", "json", "csv", "html", "docx", "pdf")
EVAL_BYTES_PER_REDACTION = 10 * 1024 * 1024  # the issue: at most one redaction per 10 MB


def _sync(config: Config):  # type: ignore[no-untyped-def]
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    wait_until(lambda: not worker_pids(config.data_dir), timeout=60)  # WAL checkpointed
    return view


def _index_bytes(config: Config) -> bytes:
    """The file and its WAL, plus the section texts decompressed (migration 9 stores them
    zlib-compressed, which a byte search would not see into)."""
    with closing(sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)) as conn:
        sections = [section_text(t).encode() for (t,) in conn.execute("SELECT text FROM sections")]
    return b"".join(
        [
            *(
                Path(f"{config.db_path}{suffix}").read_bytes()
                for suffix in ("", "-wal")
                if Path(f"{config.db_path}{suffix}").exists()
            ),
            *sections,
        ]
    )


def _write_all_formats(root: Path) -> dict[str, Path]:
    files = write_text_formats(root)
    files["docx"] = write_docx(root / "handbook.docx")
    files["pdf"] = write_pdf(root / "handbook.pdf")
    return files


def _leaks(text: str) -> list[str]:
    return [s.name for s in SECRETS if s.probe in text]


def _byte_leaks(raw: bytes) -> list[str]:
    """Secrets with any 12-character run in the file, as stored or folded to lower case (an
    FTS5 segment keeps terms folded and prefix-compressed: whole secrets rarely show there)."""
    out = []
    for s in SECRETS:
        runs = {s.probe[i : i + 12] for i in range(len(s.probe) - 11)}
        if any(r.encode() in raw or r.lower().encode() in raw for r in runs):
            out.append(s.name)
    return out


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Config:
    root = tmp_path_factory.mktemp("secrets")
    _write_all_formats(root / "docs")
    (root / "docs" / "placeholders.md").write_text(
        "# Setup\n\n" + "\n\n".join(PLACEHOLDERS) + "\n", encoding="utf-8"
    )
    (root / "docs" / "notes.txt").write_text(SECRETS[1].value + "\n", encoding="utf-8")
    (root / "docs" / "project-settings.json").write_text(
        json.dumps(gcp_service_account(), indent=2), encoding="utf-8"
    )
    github = next(x for x in SECRETS if x.name == "github token")
    slack = next(x for x in SECRETS if x.name == "slack token")
    (root / "docs" / "in-headings.md").write_text(
        f"# Deploy with {github.value}\n\n{prose(1)}\n\n## Rotate\n\n{prose(2)}\n",
        encoding="utf-8",
    )
    (root / "docs" / "in-header.csv").write_text(
        f"setting,{slack.value}\nretries,{prose(3).replace(',', ' ')}\ntimeout,30\n",
        encoding="utf-8",
    )
    accounts = [("user", "password", "tokens"), ("alice", ACCOUNT_PASSWORD, "120")]
    accounts.append(("bob", "", "7"))
    (root / "docs" / "accounts.csv").write_text(
        "\n".join(",".join(row) for row in accounts) + "\n", encoding="utf-8"
    )
    write_xlsx(root / "docs" / "accounts.xlsx", accounts)
    config = make_config(root / "docs", root / "state")
    _sync(config)
    return config


ACCOUNT_PASSWORD = "Vt7qLm2xRw9zKp4s"


def write_xlsx(path: Path, rows: list[tuple[str, str, str]]) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(list(row))
    for _ in range(30):  # prose rows: the sheet is not mostly secret
        sheet.append(["note", "", prose(5)])
    book.save(str(path))


def test_every_secret_type_in_every_format_is_redacted_and_the_documents_flagged(synced: Config):
    listed = {item["path"]: item for item in rag_service.list_documents(synced)["items"]}
    for fmt in FORMATS:
        item = listed[f"handbook.{fmt}"]
        assert item["status"] == "indexed", item
        assert item["redactions"] >= len(SECRETS), (fmt, item["redactions"])
        read = rag_service.read_document(synced, f"handbook.{fmt}")
        text = "\n".join(section["text"] for section in read["sections"])
        assert MARKER in text and REDACTION in text
        assert _leaks(text) == [], fmt
    assert listed["placeholders.md"]["redactions"] == 0
    assert listed["in-headings.md"]["redactions"] == 1  # the title, breadcrumbs and locations
    assert listed["in-headings.md"]["title"] == f"Deploy with {REDACTION}"
    assert listed["in-header.csv"]["redactions"] == 1  # repeated above every row, counted once
    for path in ("in-headings.md", "in-header.csv"):
        read = rag_service.read_document(synced, path)
        assert _leaks(json.dumps(read)) == [] and REDACTION in json.dumps(read)
    for path in ("accounts.csv", "accounts.xlsx"):  # a password column, no `=` anywhere
        read = json.dumps(rag_service.read_document(synced, path))
        assert listed[path]["redactions"] == 1 and ACCOUNT_PASSWORD not in read, path
        assert "alice" in read and "120" in read
    health = rag_service.health(synced)["secrets"]
    assert health["detector_version"] == DETECTOR_VERSION
    assert health["documents_redacted"] == len(FORMATS) + 4
    assert health["redactions"] == sum(item["redactions"] for item in listed.values())
    assert health["older_detector_documents"] == 0


def test_secrets_are_in_no_search_result_snippet_or_section(synced: Config):
    for secret in SECRETS:
        for mode in ("lexical",):
            result = rag_service.search(synced, secret.probe, mode=mode, top_k=20)
            shown = [h.snippet for h in result.hits] + list(result.sections.values())
            assert _leaks("\n".join(shown)) == [], secret.name
    result = rag_service.search(synced, f"{MARKER} rotates quarter", mode="lexical", top_k=50)
    assert {h.path for h in result.hits} >= {f"handbook.{fmt}" for fmt in FORMATS}
    shown = [h.snippet for h in result.hits] + list(result.sections.values())
    assert _leaks("\n".join(shown)) == []
    assert any(REDACTION in text for text in result.sections.values())


def test_secrets_are_not_in_the_bytes_of_the_index(synced: Config):
    raw = _index_bytes(synced)
    assert MARKER.encode() in raw  # the text is there, so the search below could fail
    assert _byte_leaks(raw) == []
    assert ACCOUNT_PASSWORD.encode() not in raw and ACCOUNT_PASSWORD.lower().encode() not in raw


def test_placeholders_and_policy_prose_are_kept_verbatim(synced: Config):
    read = rag_service.read_document(synced, "placeholders.md")
    text = "\n".join(section["text"] for section in read["sections"])
    for line in PLACEHOLDERS:
        assert line in text


def test_a_key_file_and_a_service_account_json_are_skipped_and_reported(synced: Config):
    listed = {item["path"] for item in rag_service.list_documents(synced)["items"]}
    assert "notes.txt" not in listed and "project-settings.json" not in listed
    job = rag_service.sync_status(synced)
    # Counted under the skip reason `secret` (with examples), not one job error per file.
    assert sorted(job.skipped["secret"]["examples"]) == ["notes.txt", "project-settings.json"]
    assert job.skipped["secret"]["count"] == 2 and job.counts["skipped"] >= 2
    assert not {e["path"] for e in job.errors} & {"notes.txt", "project-settings.json"}
    skipped = rag_service.list_documents(synced, status="skipped")["items"]
    reasons = {i["path"]: (i["skip_reason"], i["error"]) for i in skipped}
    for path in ("notes.txt", "project-settings.json"):
        reason, message = reasons[path]
        assert reason == "secret"
        assert message.startswith("skipped: the file is mostly secret material (private key")


def test_a_purge_left_owed_by_a_cancelled_or_killed_sync_runs_on_the_next_one(
    synced: Config,
):
    with closing(index_db.open_index(synced.db_path)) as conn:
        mark_purge_pending(conn)
    view = _sync(synced)
    assert view.counts["added"] == view.counts["updated"] == 0
    with closing(index_db.open_index(synced.db_path)) as conn:
        assert not purge_pending(conn)


def test_every_write_connection_has_secure_delete_on(tmp_path: Path):
    conn = index_db.open_index(tmp_path / "index.sqlite3")
    with closing(conn):
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


def test_a_secret_already_in_an_older_index_disappears_on_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    knowledge = tmp_path / "docs"
    files = write_text_formats(knowledge)
    (knowledge / "id_backup.txt").write_text(SECRETS[0].value + "\n", encoding="utf-8")
    config = make_config(knowledge, tmp_path / "state")
    # The older index: written without redaction, every row marked as read by no detector.
    with monkeypatch.context() as patch:
        patch.setattr(extract_document, "BlockRedactor", NoRedaction)  # in process: no sandbox
        with closing(index_db.open_index(config.db_path)) as conn:
            rag_sync.sync_files(conn, knowledge, "", ExtractContext(), NullObserver(), {})
            conn.execute("UPDATE documents SET detector_version = 0, redactions = 0")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = _index_bytes(config)
    assert _byte_leaks(raw)  # the old index leaks
    health = rag_service.health(config)
    assert health["secrets"]["older_detector_documents"] == len(files) + 1
    assert any("secret detector" in w for w in health["warnings"])
    view = _sync(config)  # the files are unchanged: only the detector version differs
    assert view.counts["unchanged"] == 0 and view.counts["updated"] == len(files)
    listed = {item["path"]: item for item in rag_service.list_documents(config)["items"]}
    assert "id_backup.txt" not in listed
    assert all(item["redactions"] >= len(SECRETS) for item in listed.values())
    for secret in SECRETS:
        result = rag_service.search(config, secret.probe, mode="lexical", top_k=20)
        shown = [h.snippet for h in result.hits] + list(result.sections.values())
        assert _leaks("\n".join(shown)) == [], secret.name
    raw = _index_bytes(config)
    assert MARKER.encode() in raw
    assert _byte_leaks(raw) == []
    with closing(sqlite3.connect(config.db_path)) as conn:
        versions = {r[0] for r in conn.execute("SELECT detector_version FROM documents")}
    assert versions == {DETECTOR_VERSION}
    assert _sync(config).counts["unchanged"] == len(files)  # and then nothing is read again


def _eval_docs() -> list[Path]:
    roots = sorted(SHARED.glob("eval/*/docs"))
    if not roots:
        if os.environ.get("CI"):
            pytest.fail(f"no eval corpora under {SHARED / 'eval'}")
        pytest.skip("no eval corpora")
    return roots


def test_the_eval_corpora_lose_at_most_one_redaction_per_10_mb():
    """False positives are lost text: the real documents of every eval set keep theirs."""
    total_bytes = redactions = 0
    found: list[str] = []
    for root in _eval_docs():
        for entry in walk_files(root, rag_sync.extractors.SUPPORTED_SUFFIXES, ""):
            if not isinstance(entry, FileEntry):
                continue
            total_bytes += entry.size
            try:
                content = rag_sync.extract_document(entry, ExtractContext(), NullObserver())
            except rag_sync.ExtractionError:
                continue
            if content.redactions:
                redactions += content.redactions
                found.append(f"{root.parent.name}/{entry.rel_path}: {content.redactions}")
    allowed = math.ceil(total_bytes / EVAL_BYTES_PER_REDACTION)
    assert total_bytes > 1_000_000
    assert redactions <= allowed, found


def test_prose_between_secrets_survives_in_every_format(synced: Config):
    for fmt in FORMATS:
        read = rag_service.read_document(synced, f"handbook.{fmt}")
        text = " ".join(" ".join(s["text"].split()) for s in read["sections"])
        assert " ".join(prose(3).split()[-12:]) in text, fmt


def test_vectors_are_built_from_the_redacted_text(tmp_path: Path):
    """Every vector is keyed by the hash of a stored (redacted) chunk text: the semantic phase
    never saw the secret; a semantic search for one shows none either."""
    if not REAL_MODEL_DIR.is_dir():
        pytest.fail(f"the real test model is missing: {REAL_MODEL_DIR}")
    files = write_text_formats(tmp_path / "docs")
    for fmt in ("yaml", "json", "csv", "html"):
        files.pop(fmt).unlink()
    config = make_config(
        tmp_path / "docs", tmp_path / "state", semantic=True, semantic_model_dir=REAL_MODEL_DIR
    )
    view = _sync(config)
    assert view.semantic["total"] > 0 and view.semantic["done"] == view.semantic["total"]
    with closing(sqlite3.connect(config.db_path)) as conn:
        texts = {text_digest(t): t for (t,) in conn.execute("SELECT text FROM chunks")}
        embedded = [
            digest
            for (blob,) in conn.execute("SELECT text_hashes FROM semantic_blocks")
            for digest in vector_pack.unpack_hashes(blob)
        ]
    assert embedded and set(embedded) == set(texts)
    assert _leaks("\n".join(texts.values())) == []
    assert any(REDACTION in t for t in texts.values())
    for secret in SECRETS[:4]:
        result = rag_service.search(config, f"{secret.key} {secret.probe}", mode="semantic")
        assert result.hits
        shown = [h.snippet for h in result.hits] + list(result.sections.values())
        assert _leaks("\n".join(shown)) == [], secret.name
