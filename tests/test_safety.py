"""Nothing outside the knowledge dir, nothing hidden or secret, is ever indexed or served."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import rag_service
from helpers.config import Config
from helpers.safety import (
    FileEntry,
    PathRejected,
    SkippedEntry,
    in_scope,
    is_sensitive_name,
    normalize_user_path,
    resolve_inside,
    walk_files,
)


def test_prefix_scope_matches_only_at_a_folder_boundary():
    assert in_scope("docs/proj/a.md", "docs/proj")
    assert in_scope("docs/proj", "docs/proj/")
    assert not in_scope("docs/project-secret/a.md", "docs/proj")
    assert in_scope("anything.md", "")


@pytest.mark.parametrize(
    "raw", ["../etc/passwd", "/etc/passwd", "a/../../b", "C:\\Windows", "a\x00b", ".env", ".ssh/id"]
)
def test_tool_path_arguments_that_leave_the_folder_are_rejected(raw: str):
    with pytest.raises(PathRejected):
        normalize_user_path(raw)


def test_symlinks_are_not_followed_when_walking_or_resolving(tmp_path: Path, knowledge: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\ntop secret outside text\n", encoding="utf-8")
    (knowledge / "inside.md").write_text("# Inside\n\nvisible text\n", encoding="utf-8")
    os.symlink(outside, knowledge / "linked-dir")
    os.symlink(outside / "secret.md", knowledge / "linked.md")
    os.symlink(knowledge / "loop", knowledge / "loop")  # a symlink loop must not hang the walk
    entries = list(walk_files(knowledge, frozenset({".md"})))
    assert [e.rel_path for e in entries if isinstance(e, FileEntry)] == ["inside.md"]
    skipped = {e.rel_path: e.reason for e in entries if isinstance(e, SkippedEntry)}
    assert "symbolic link" in skipped["linked.md"]
    with pytest.raises(PathRejected):
        resolve_inside(knowledge, "linked-dir")
    with pytest.raises(PathRejected):
        resolve_inside(knowledge, "linked.md")


def test_hidden_sensitive_and_special_files_are_never_indexed(config: Config, knowledge: Path):
    (knowledge / "notes.md").write_text("# Notes\n\npublic alpha words\n", encoding="utf-8")
    (knowledge / ".hidden.md").write_text("hidden alpha words\n", encoding="utf-8")
    (knowledge / ".git").mkdir()
    (knowledge / ".git" / "config.md").write_text("git alpha words\n", encoding="utf-8")
    (knowledge / "keys").mkdir()
    (knowledge / "keys" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    (knowledge / "credentials.json").write_text('{"password": "alpha hunter2"}')
    (knowledge / "secrets.yaml").write_text("token: alpha\n")
    os.mkfifo(knowledge / "pipe.txt")  # reading a FIFO would block forever
    sock = socket.socket(socket.AF_UNIX)
    sock_path = knowledge / "s.txt"
    if len(str(sock_path)) < 100:
        sock.bind(str(sock_path))
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    sock.close()
    assert view.state == "succeeded"
    listed = rag_service.list_documents(config)
    assert [item["path"] for item in listed["items"]] == ["notes.md"]
    assert view.errors == []  # skips are counted by reason, not one job error each
    assert {"credentials.json", "secrets.yaml"} <= set(view.skipped["sensitive"]["examples"])
    assert set(view.skipped["hidden"]["examples"]) == {".git/", ".hidden.md"}
    hits = rag_service.search(config, "alpha", mode="lexical").hits
    assert [h.path for h in hits] == ["notes.md"]


def test_sync_of_a_sub_folder_stays_inside_it(config: Config, knowledge: Path):
    (knowledge / "a").mkdir()
    (knowledge / "b").mkdir()
    (knowledge / "a" / "one.md").write_text("# One\n\nshared term\n", encoding="utf-8")
    (knowledge / "b" / "two.md").write_text("# Two\n\nshared term\n", encoding="utf-8")
    view = rag_service.wait_for_job(
        config, rag_service.start_sync(config, "a").job_id, timeout_s=60
    )
    assert view.counts["added"] == 1
    assert [h.path for h in rag_service.search(config, "shared term", mode="lexical").hits] == [
        "a/one.md"
    ]
    with pytest.raises(rag_service.RagError):
        rag_service.start_sync(config, "../")
    with pytest.raises(rag_service.RagError):
        rag_service.start_sync(config, "a/one.md")  # not a folder


SECRET_STORES = [
    "secret.txt",
    "secrets.yaml",
    "passwords.xlsx",
    "Passwords 2024.xlsx",
    "password.txt",
    "credentials.json",
    "token.json",
    "github-token.txt",
    "myPasswords.docx",
    "API_Keys.txt",
    "recovery codes.txt",
    "wifi password.md",
    "vault.kdbx",
    "id_ed25519",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    "client.p12",
    "server.pfx",
    "prod.tfvars",
    "пароли 2024.xlsx",
    "รหัสผ่าน.xlsx",
]
ABOUT_SECRETS = [
    "password-policy.md",
    "Password Policy 2024.docx",
    "password reset guide.pdf",
    "how to rotate tokens.md",
    "secret-santa.docx",
    "Secret plan.md",
    "keys.md",
    "source code.md",
    "Tokenizer notes.md",
    "project-secret",
]


@pytest.mark.parametrize("name", SECRET_STORES)
def test_secret_store_names_are_sensitive_in_any_case(name: str):
    assert is_sensitive_name(name) and is_sensitive_name(name.upper())
    with pytest.raises(PathRejected):
        normalize_user_path(f"docs/{name}")


@pytest.mark.parametrize("name", ABOUT_SECRETS)
def test_documents_about_secrets_are_not_taken_for_secret_stores(name: str):
    assert not is_sensitive_name(name)
    assert normalize_user_path(f"docs/{name}") == f"docs/{name}"


def test_secret_store_files_and_folders_are_never_indexed_but_policies_are(
    config: Config, knowledge: Path
):
    from openpyxl import Workbook

    book = Workbook()
    book.active.append(["site", "login", "password"])
    book.active.append(["bank", "me", "zebra-omega-hunter2"])
    book.save(knowledge / "Passwords 2024.xlsx")
    (knowledge / "secret.txt").write_text("zebra-omega vault phrase\n", encoding="utf-8")
    (knowledge / "token.json").write_text('{"token": "zebra-omega"}', encoding="utf-8")
    (knowledge / "Secrets").mkdir()
    (knowledge / "Secrets" / "notes.md").write_text("# N\n\nzebra-omega notes\n")
    (knowledge / "password-policy.md").write_text(
        "# Password policy\n\nNever write a password such as zebra-omega in a file.\n"
    )
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.state == "succeeded"
    assert [i["path"] for i in rag_service.list_documents(config)["items"]] == [
        "password-policy.md"
    ]
    listed = rag_service.list_documents(config, status="skipped")["items"]
    skipped = {i["path"]: i["skip_reason"] for i in listed}
    assert {"Passwords 2024.xlsx", "secret.txt", "token.json", "Secrets"} <= set(skipped)
    assert set(skipped.values()) == {"sensitive"}
    hits = rag_service.search(config, "zebra-omega", mode="lexical").hits
    assert [h.path for h in hits] == ["password-policy.md"]
    with pytest.raises(rag_service.RagError):
        rag_service.read_document(config, "Passwords 2024.xlsx")
