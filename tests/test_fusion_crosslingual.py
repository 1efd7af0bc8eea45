"""Hybrid search end to end with the real model (shared/models) on a question in another
language than the folder: one word it shares with the wrong document (a number) must not
outvote the meaning the semantic side found."""

from __future__ import annotations

import pytest
from conftest import SHARED, make_config, require_tool

import rag_service
from helpers.config import Config

MODEL = SHARED / "models" / "multilingual-e5-small-int8"

DOCS = {
    "th/education.md": "# การศึกษา\n\nทุกคนมีสิทธิในการศึกษา การศึกษาจะต้องให้เปล่าในชั้นประถมศึกษา\n",
    "th/work.md": "# การงาน\n\nทุกคนมีสิทธิในการงาน และในการคุ้มครองต่อการว่างงาน\n",
    "th/marriage.md": "# การสมรส\n\nชายและหญิงที่มีอายุเต็มบริบูรณ์แล้วมีสิทธิที่จะสมรส\n",
    "th/sales.md": "# ยอดขาย 2024\n\nยอดขายพาสต้าในปี 2024 เพิ่มขึ้นในทุกสาขา\n",
}
QUERY = "everyone has the right to free education 2024"


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    require_tool(MODEL.is_dir(), "the real embedding model", f"put it at {MODEL}")
    root = tmp_path_factory.mktemp("fusion-crosslingual")
    knowledge = root / "docs"
    for rel, text in DOCS.items():
        path = knowledge / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    cfg = make_config(knowledge, root / "state", semantic=True, semantic_model_dir=MODEL)
    view = rag_service.wait_for_job(cfg, rag_service.start_sync(cfg).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return cfg


def test_the_lexical_side_alone_takes_the_document_that_shares_the_number(config: Config):
    lexical = rag_service.search(config, QUERY, mode="lexical")
    assert lexical.hits and lexical.hits[0].path == "th/sales.md"


def test_the_semantic_side_alone_finds_the_document_that_answers(config: Config):
    semantic = rag_service.search(config, QUERY, mode="semantic")
    assert semantic.hits[0].path == "th/education.md"


def test_hybrid_follows_the_meaning_when_the_words_matched_only_a_number(config: Config):
    hybrid = rag_service.search(config, QUERY, mode="hybrid")
    assert hybrid.hits[0].path == "th/education.md"
