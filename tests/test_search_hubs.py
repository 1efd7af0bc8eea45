"""Hub sections end to end: contents pages, an index, a link list and a question list in PDF,
DOCX, HTML and Markdown are scored at sync, stored per section, lowered in every search mode
(real model), still found when nothing else matches, and a prose `index.md` ranks as prose.
Existing indexes get their scores from migration 5."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import SHARED, make_config, undo_migration_5
from format_fixtures import write_text_pdf

import rag_search
import rag_service
from helpers.config import Config
from helpers.store import index_db
from helpers.store.codec import section_text
from helpers.text.hubs import hub_score

MODEL = SHARED / "models" / "multilingual-e5-small-int8"

TOPICS = {
    "scanner": "Installing the scanner driver",
    "printer": "Configuring the printer queue",
    "backup": "Nightly backups with rsync",
    "mail": "Setting up the mail relay",
}
HUB_ONLY = [
    "Replacing the projector lamp",
    "Ordering office supplies",
    "Booking a meeting room",
    "Joining the wireless network",
]
ANSWERS = {
    "scanner": (
        "answers/scanner.pdf",
        "The scanner driver comes with the SANE backends. Install the driver package, add "
        "your account to the scanner group and log in again. When the scanner is still not "
        "found, try another USB port; the driver itself rarely needs any settings.",
    ),
    "printer": (
        "answers/printer.docx",
        "Print jobs wait in the printer queue that CUPS keeps for each printer. Configure the "
        "queue in the CUPS web page on port 631: pick the model, set the paper size, and "
        "print a test page. A stuck queue is cleared with cancel -a.",
    ),
    "backup": (
        "answers/backup.html",
        "Every night at two o'clock rsync copies the home folders to the backup disk. Backups "
        "are kept for thirty days; older copies are deleted by the same job. To restore a file, "
        "copy it back from the dated folder on the backup disk.",
    ),
    "mail": (
        "answers/mail.md",
        "Outgoing mail goes through the relay, a postfix server in the basement. To set up a "
        "new machine, point its mail relay setting at relay.example.com on port 587 and use "
        "your normal login; the relay refuses mail from unknown senders.",
    ),
}
PROSE_INDEX = (
    "# Welcome\n\nThe coffee machine on the second floor needs descaling every month. Fill the "
    "tank with the descaling liquid from the cupboard, run two empty cups, then rinse the tank "
    "twice with clean water. Please write the date on the list next to the machine.\n"
)
QUERIES = {
    "scanner": "how do I install the scanner driver",
    "printer": "configure the printer queue",
    "backup": "nightly backups with rsync",
    "mail": "set up the mail relay",
}
HUB_PATHS = {"hubs/contents.pdf", "hubs/index.docx", "hubs/links.html", "hubs/faq.md"}


def _titles() -> list[str]:
    return [*TOPICS.values(), *HUB_ONLY]


def _write_folder(root: Path) -> None:
    import docx

    (root / "hubs").mkdir(parents=True)
    (root / "answers").mkdir()
    contents = ["Contents"]
    for n, title in enumerate(_titles(), start=1):
        contents.append(f"{n} {title} " + ". " * 20 + str(4 * n + 1))
        contents.append(f"{n}.1 Before you start " + ". " * 20 + str(4 * n + 2))
    write_text_pdf(root / "hubs/contents.pdf", [contents])
    document = docx.Document()
    document.add_heading("Index", level=1)
    terms = ["backup, nightly", "CUPS", "driver, scanner", "mail relay", "postfix"]
    terms += ["printer queue", "projector lamp", "rsync", "SANE", "office supplies"]
    for i, term in enumerate(terms):
        document.add_paragraph(f"{term}, {3 * i + 5}, {4 * i + 9}-{4 * i + 11}")
    document.save(str(root / "hubs/index.docx"))
    links = "".join(f'<li><a href="/help/{i}">{t}</a></li>' for i, t in enumerate(_titles()))
    (root / "hubs/links.html").write_text(
        f"<html><body><nav>Home</nav><main><h1>Help topics</h1><ul>{links}</ul></main>"
        "</body></html>",
        "utf-8",
    )
    questions = " ".join(f"How do I handle {t.lower()}?" for t in _titles())
    (root / "hubs/faq.md").write_text(f"Office FAQ {questions}\n", "utf-8")
    for rel, text in ANSWERS.values():
        path = root / rel
        # The answer does not repeat its title (as in an FAQ whose question is the heading of
        # a contents page): the hubs hold the query's exact words, the answer its meaning.
        if rel.endswith(".pdf"):
            write_text_pdf(path, [[text[i : i + 80] for i in range(0, len(text), 80)]])
        elif rel.endswith(".docx"):
            answer = docx.Document()
            answer.add_paragraph(text)
            answer.save(str(path))
        elif rel.endswith(".html"):
            path.write_text(f"<html><body><p>{text}</p></body></html>", "utf-8")
        else:
            path.write_text(f"{text}\n", "utf-8")
    (root / "index.md").write_text(PROSE_INDEX, "utf-8")


@pytest.fixture(scope="module")
def hub_config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    assert MODEL.is_dir(), f"the real test model is missing: {MODEL}"
    root = tmp_path_factory.mktemp("hubs")
    _write_folder(root / "docs")
    config = make_config(root / "docs", root / "state", semantic=True, semantic_model_dir=MODEL)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return config


def _hub_by_path(config: Config) -> dict[str, float]:
    conn = index_db.connect(config.db_path)
    rows = conn.execute(
        "SELECT d.path, MAX(s.hub) FROM sections s JOIN documents d ON d.id = s.document_id "
        "GROUP BY d.path"
    ).fetchall()
    conn.close()
    return {row[0]: row[1] for row in rows}


def test_sync_scores_every_hub_format_and_no_prose(hub_config: Config) -> None:
    hubs = _hub_by_path(hub_config)
    assert set(hubs) == HUB_PATHS | {rel for rel, _ in ANSWERS.values()} | {"index.md"}
    for path in HUB_PATHS:
        assert hubs[path] >= 0.8, (path, hubs)
    for path in {rel for rel, _ in ANSWERS.values()} | {"index.md"}:
        assert hubs[path] == 0.0, (path, hubs)


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_the_answer_outranks_every_hub_that_lists_it(hub_config: Config, mode: str) -> None:
    for key, query in QUERIES.items():
        hits = rag_service.search(hub_config, query, mode=mode, top_k=10).hits
        assert hits[0].path == ANSWERS[key][0], (mode, query, [h.path for h in hits])


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_hub_still_wins_when_nothing_else_matches(hub_config: Config, mode: str) -> None:
    hits = rag_service.search(hub_config, "replacing the projector lamp", mode=mode).hits
    assert hits[0].path in HUB_PATHS, (mode, [h.path for h in hits])


def test_semantic_mode_lowers_a_hub_but_keeps_it(hub_config: Config) -> None:
    """Every section is a semantic candidate (these answers are all office IT, close in
    meaning), so there a hub is first only when its cosine stands out; it is never dropped."""
    hits = rag_service.search(hub_config, "replacing the projector lamp", mode="semantic").hits
    assert {h.path for h in hits} & HUB_PATHS, [h.path for h in hits]


@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_a_prose_index_md_ranks_as_prose(hub_config: Config, mode: str) -> None:
    hits = rag_service.search(hub_config, "descaling the coffee machine", mode=mode).hits
    assert hits[0].path == "index.md", (mode, [h.path for h in hits])


def test_without_the_prior_a_hub_takes_rank_one(hub_config: Config, monkeypatch) -> None:
    """The check that the test above can fail: with the prior off, a hub wins a query."""
    monkeypatch.setattr(rag_search, "chunk_hubs", lambda conn, ids: {})
    for mode in ("lexical", "semantic", "hybrid"):
        firsts = {
            rag_service.search(hub_config, query, mode=mode).hits[0].path
            for query in QUERIES.values()
        }
        assert firsts & HUB_PATHS, (mode, firsts)


def test_the_prior_is_bounded_and_keeps_order_among_equals() -> None:
    fused = [(1, 1.0, {}), (2, 0.5, {}), (3, 0.2, {})]
    lowered = rag_search.apply_hub_prior(fused, {1: 1.0}, strength=0.9)
    assert [cid for cid, _, _ in lowered] == [2, 3, 1]
    assert lowered[-1][1] == pytest.approx(0.1)  # lowered, never removed
    alone = rag_search.apply_hub_prior([(7, 0.3, {})], {7: 1.0}, strength=0.9)
    assert [cid for cid, _, _ in alone] == [7]


def _schema_4_copy(config: Config, tmp_path: Path) -> Path:
    """A copy of the synced index as schema 4 left it (no sections.hub)."""
    db = tmp_path / "index.sqlite3"
    source = sqlite3.connect(config.db_path)
    target = sqlite3.connect(db)
    source.backup(target)
    source.close()
    undo_migration_5(target)
    target.commit()
    target.close()
    return db


def test_migration_5_backfills_the_scores_of_an_existing_index(
    hub_config: Config, tmp_path: Path
) -> None:
    with closing(sqlite3.connect(hub_config.db_path)) as source:
        expected = dict(source.execute("SELECT id, hub FROM sections"))
    db = _schema_4_copy(hub_config, tmp_path)
    conn = index_db.open_index(db)
    assert index_db.schema_version(conn) == index_db.SCHEMA_VERSION
    got = {row[0]: row[1] for row in conn.execute("SELECT id, hub FROM sections")}
    texts = dict(conn.execute("SELECT id, text FROM sections"))
    conn.close()
    assert got == expected and max(got.values()) >= 0.8
    assert all(got[sid] == hub_score(section_text(texts[sid])) for sid in got)


def test_a_schema_4_index_read_only_searches_without_the_prior(
    hub_config: Config, tmp_path: Path
) -> None:
    db = _schema_4_copy(hub_config, tmp_path)
    conn = index_db.connect(db, readonly=True)
    hits = rag_search.search(conn, "printer queue", rag_search.SearchOptions()).hits
    conn.close()
    assert hits and {h.path for h in hits} >= {ANSWERS["printer"][0]}


def test_resync_keeps_scores_when_a_hub_is_edited(hub_config: Config, tmp_path: Path) -> None:
    """A hub rewritten as prose loses its score at the next sync (the score follows the text)."""
    import shutil

    docs = tmp_path / "docs"
    shutil.copytree(hub_config.knowledge_dir, docs)
    config = make_config(docs, tmp_path / "state")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert _hub_by_path(config)["hubs/faq.md"] >= 0.8
    (docs / "hubs/faq.md").write_text(PROSE_INDEX.replace("coffee", "tea"), "utf-8")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert _hub_by_path(config)["hubs/faq.md"] == 0.0
