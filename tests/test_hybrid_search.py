"""Semantic and hybrid search end to end with the real multilingual model from shared/models:
sync builds vectors in the worker, search queries them through a short-lived subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SHARED, make_config
from stress.harness import McpProcess

import rag_service
from helpers.config import Config
from helpers.store.index_db import connect

MODEL = SHARED / "models" / "multilingual-e5-small-int8"

DOCS = {
    "th/education.md": "# การศึกษา\n\nทุกคนมีสิทธิในการศึกษา การศึกษาจะต้องให้เปล่าในชั้นประถมศึกษา\n",
    "th/work.md": "# การงาน\n\nทุกคนมีสิทธิในการงาน และในการคุ้มครองต่อการว่างงาน\n",
    "ru/weather.md": "# Погода\n\nЗавтра в Москве ожидается снег и сильный ветер.\n",
    "en/cooking.md": "# Pasta\n\nBoil the pasta in salted water for ten minutes.\n",
    "en/contract.md": "# Termination\n\nEither party may end this agreement with 60 days notice.\n",
}


@pytest.fixture(scope="module")
def semantic_config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    assert MODEL.is_dir(), (
        f"the real test model is missing: {MODEL} (shared/ must be beside the repo)"
    )
    root = tmp_path_factory.mktemp("hybrid")
    knowledge = root / "docs"
    for rel, text in DOCS.items():
        path = knowledge / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    config = make_config(knowledge, root / "state", semantic=True, semantic_model_dir=MODEL)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    assert view.semantic["total"] > 0 and view.semantic["done"] == view.semantic["total"]
    return config


def test_sync_builds_a_ready_vector_generation_for_every_chunk(semantic_config: Config):
    health = rag_service.health(semantic_config)
    assert health["semantic"]["state"] == "ready"
    conn = connect(semantic_config.db_path)
    chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    conn.close()
    assert health["semantic"]["vectors"] == chunks


def test_an_english_question_finds_the_thai_document(semantic_config: Config):
    result = rag_service.search(semantic_config, "right to free education", mode="semantic")
    assert result.hits[0].path == "th/education.md"
    assert "semantic" in result.hits[0].channels
    hybrid = rag_service.search(semantic_config, "right to free education", mode="hybrid")
    assert hybrid.hits[0].path == "th/education.md"
    assert not hybrid.warnings


def test_meaning_matches_without_shared_words(semantic_config: Config):
    hybrid = rag_service.search(semantic_config, "how do I cancel the contract", mode="hybrid")
    assert hybrid.hits[0].path == "en/contract.md"
    russian = rag_service.search(semantic_config, "snow forecast for tomorrow", mode="hybrid")
    assert russian.hits[0].path == "ru/weather.md"


def test_filters_apply_to_semantic_candidates_too(semantic_config: Config):
    result = rag_service.search(
        semantic_config, "right to free education", mode="semantic", path_prefix="en"
    )
    assert result.hits and all(h.path.startswith("en/") for h in result.hits)


def test_semantic_off_or_missing_model_falls_back_to_lexical_with_a_warning(
    semantic_config: Config, tmp_path: Path
):
    off = make_config(semantic_config.knowledge_dir, semantic_config.data_dir, semantic=False)
    result = rag_service.search(off, "pasta", mode="hybrid")
    assert result.hits[0].path == "en/cooking.md"
    assert any("semantic search off" in w for w in result.warnings)
    with pytest.raises(rag_service.RagError) as err:
        rag_service.search(off, "pasta", mode="semantic")
    assert "lexical" in str(err.value)


ML_LIBRARIES = ("onnxruntime", "sentencepiece")  # shared objects that must never map into it


def _mapped_ml_libraries(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    return {name for name in ML_LIBRARIES if name in maps.lower()}


def test_the_mcp_server_answers_semantic_searches_without_loading_the_ml_runtime(
    semantic_config: Config, tmp_path: Path
):
    """The design rule: onnxruntime and sentencepiece live only in short-lived subprocesses."""
    server = McpProcess.start(semantic_config, tmp_path / "server.log", semantic_model=MODEL)
    try:
        for query in ("right to free education", "notice period to end the contract"):
            is_error, result = server.call(
                "rag_search", {"query": query, "mode": "hybrid", "detail": "full"}
            )
            assert not is_error, result
            assert "semantic" in result["hits"][0]["channels"], result["hits"][0]
        assert result["hits"][0]["path"] == "en/contract.md"
        health_error, health = server.call("rag_health", {})
        assert not health_error and health["semantic"]["state"] == "ready", health
        assert _mapped_ml_libraries(server.proc.pid) == set()
    finally:
        server.close()


def test_hubness_correction_only_when_no_word_of_the_query_is_in_the_folder(
    semantic_config: Config,
):
    from helpers.semantic import hubness, hubness_store

    hubness_store._cache.clear()
    lexical = rag_service.search(semantic_config, "Boil the pasta in salted water", mode="hybrid")
    assert lexical.hits[0].path == "en/cooking.md"
    assert not hubness_store._cache  # words matched: the semantic side is left as it is
    # no word of it in any document or file name (the file name channel counts too)
    cross = rag_service.search(semantic_config, "children learn without paying", mode="hybrid")
    assert cross.hits[0].path == "th/education.md"
    top = cross.hits[0].channels["semantic"].score
    assert hubness.weight_for(top) > 0  # a weak best match (cosine < STRONG_COSINE) ...
    assert hubness_store._cache  # ... and no word in any document: the correction ran
    hubness_store._cache.clear()
