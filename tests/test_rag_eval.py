"""rag_eval.py: golden-file validation, and real evaluation runs through the service path."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import rag_eval

REPO_DIR = Path(__file__).resolve().parents[1]
UDHR_TH2TH = Path(__file__).resolve().parents[2] / "shared/eval/udhr-th2th"
REPORT_KEYS = {
    "name",
    "mode",
    "queries",
    "recall@1",
    "recall@3",
    "recall@8",
    "mrr@10",
    "zero_results",
    "latency_ms",
    "by_lang",
}
METRIC_KEYS = {"queries", "recall@1", "recall@3", "recall@8", "mrr@10", "zero_results"}

# Each document has vocabulary no other one shares, so the expected ranks follow from the text.
DOCS = {
    "kiwi.md": "# Kiwi orchard\n\nPrune kiwi vines in late winter; keep two buds per spur.\n",
    "guides/boiler.md": "# Boiler service\n\nBleed the radiators and check the boiler pressure "
    "gauge once a year before the heating season.\n",
    "ru/pechka.md": "# Русская печь\n\nПечь топят берёзовыми дровами; заслонку закрывают, "
    "когда угли погаснут.\n",
    "tax.md": "# Tax return\n\nFile the quarterly VAT return before the deadline.\n",
}
GOLDEN = {
    "name": "tiny",
    "queries": [
        {"id": "kiwi", "query": "pruning kiwi vines", "relevant": ["kiwi.md"], "lang": "en"},
        {
            "id": "boiler",
            "query": "boiler pressure gauge radiators",
            "relevant": [{"path": "guides/boiler.md", "location": {"heading": "Boiler service"}}],
            "lang": "en",
        },
        {
            "id": "pechka",
            "query": "берёзовыми дровами печь",
            "relevant": ["ru/pechka.md"],
            "lang": "ru",
        },
        # Nothing in any document shares a word with this query: zero results, a miss.
        {"id": "nowhere", "query": "zebra quasar", "relevant": ["tax.md"], "lang": "en"},
    ],
}


def make_knowledge_dir(root: Path) -> Path:
    docs = root / "docs"
    for rel, text in DOCS.items():
        path = docs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return docs


def write_golden(root: Path, data: Any) -> Path:
    path = root / "golden.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_DIR / "rag_eval.py"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        timeout=300,
    )


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny set evaluated end to end once: sync + search in a real subprocess."""
    root = tmp_path_factory.mktemp("tiny")
    docs = make_knowledge_dir(root)
    golden = write_golden(root, GOLDEN)
    data_dir = root / "state"
    proc = run_cli(
        golden, "--knowledge-dir", docs, "--data-dir", data_dir, "--mode", "lexical",
        "--semantic", "off", "--sync", "--json", "--details", "--explain",
    )  # fmt: skip
    return {"root": root, "docs": docs, "golden": golden, "data_dir": data_dir, "proc": proc}


def base_args(s: dict[str, Any]) -> list[str]:
    return [
        str(s["golden"]), "--knowledge-dir", str(s["docs"]), "--data-dir", str(s["data_dir"]),
        "--mode", "lexical", "--semantic", "off",
    ]  # fmt: skip


# -- malformed golden files --------------------------------------------------------------------
def q(**overrides: Any) -> dict[str, Any]:
    entry = {"id": "kiwi", "query": "kiwi vines", "relevant": ["kiwi.md"], "lang": "en"}
    entry.update(overrides)
    return entry


MALFORMED = {
    "not json": ("{'name': ", "is not valid JSON"),
    "top level is a list": ([q()], "top level must be an object"),
    "queries missing": ({"name": "x"}, "'queries' must be a list"),
    "queries empty": ({"name": "x", "queries": []}, "'queries' is empty"),
    "query entry not an object": ({"name": "x", "queries": ["kiwi"]}, "must be an object"),
    "id missing": ({"name": "x", "queries": [q(id=None)]}, "'id' must be a non-empty string"),
    "duplicate ids": ({"name": "x", "queries": [q(), q(query="other")]}, "duplicate id 'kiwi'"),
    "empty query text": ({"name": "x", "queries": [q(query="  ")]}, "'query' must be a non-empty"),
    "relevant empty": (
        {"name": "x", "queries": [q(relevant=[])]},
        "'relevant' must be a non-empty",
    ),
    "relevant not a list": ({"name": "x", "queries": [q(relevant="kiwi.md")]}, "'relevant' must"),
    "absolute relevant path": (
        {"name": "x", "queries": [q(relevant=["/etc/passwd"])]},
        "must be relative to the knowledge dir",
    ),
    "relevant path leaving the dir": (
        {"name": "x", "queries": [q(relevant=["../golden.json"])]},
        "must be relative to the knowledge dir",
    ),
    "relevant object without path": (
        {"name": "x", "queries": [q(relevant=[{"location": {"page": 1}}])]},
        "needs a string 'path'",
    ),
    "relevant location not an object": (
        {"name": "x", "queries": [q(relevant=[{"path": "kiwi.md", "location": 3}])]},
        "'location' of 'kiwi.md' must be an object",
    ),
    "name not a string": ({"name": 5, "queries": [q()]}, "'name' must be a non-empty string"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_golden_file_exits_2_with_a_message_naming_the_problem(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data, message = MALFORMED[case]
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, data)
    code = rag_eval.main(
        [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(tmp_path / "state")]
    )
    captured = capsys.readouterr()
    assert code == 2
    assert message in captured.err
    assert captured.out == ""


def test_a_relevant_file_missing_from_the_knowledge_dir_is_an_error_not_a_silent_miss(
    tmp_path: Path,
):
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, {"name": "x", "queries": [q(relevant=["kiwi.md", "gone.md"])]})
    proc = run_cli(golden, "--knowledge-dir", docs, "--data-dir", tmp_path / "state", "--sync")
    assert proc.returncode == 2
    assert "relevant file 'gone.md' does not exist" in proc.stderr
    assert str(docs) in proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "state" / "index.sqlite3").exists()  # refused before syncing


def test_every_problem_of_a_golden_file_is_listed_at_once(tmp_path: Path):
    docs = make_knowledge_dir(tmp_path)
    bad = [q(id="a", relevant=["no1.md"]), q(id="b", relevant=["no2.md"]), q(id="a")]
    golden = write_golden(tmp_path, {"name": "x", "queries": bad})
    with pytest.raises(rag_eval.EvalInputError) as info:
        rag_eval.load_golden(golden, docs)
    text = str(info.value)
    assert "3 problem(s)" in text
    assert "'no1.md'" in text and "'no2.md'" in text and "duplicate id 'a'" in text


def test_relevant_entries_may_be_paths_or_objects_with_a_location(tmp_path: Path):
    docs = make_knowledge_dir(tmp_path)
    golden = rag_eval.load_golden(write_golden(tmp_path, GOLDEN), docs)
    assert golden.name == "tiny"
    assert [x.query_id for x in golden.queries] == ["kiwi", "boiler", "pechka", "nowhere"]
    boiler = golden.queries[1].relevant[0]
    assert boiler == rag_eval.RelevantDoc("guides/boiler.md", {"heading": "Boiler service"})
    assert golden.queries[0].relevant[0] == rag_eval.RelevantDoc("kiwi.md", None)


def test_a_missing_data_dir_argument_is_refused_so_the_real_index_is_never_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.delenv("RAGDOC_DATA_DIR", raising=False)
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, GOLDEN)
    assert rag_eval.main([str(golden), "--knowledge-dir", str(docs)]) == 2
    assert "--data-dir is required" in capsys.readouterr().err


def test_an_unknown_channel_is_refused_with_the_valid_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, GOLDEN)
    args = [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(tmp_path / "s")]
    assert rag_eval.main([*args, "--channels", "bm25,vibes"]) == 2
    err = capsys.readouterr().err
    assert "'bm25,vibes'" in err and "bm25" in err and "filename" in err


def test_evaluating_without_an_index_says_to_pass_sync(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, GOLDEN)
    args = [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(tmp_path / "s")]
    assert rag_eval.main([*args, "--mode", "lexical"]) == 2
    assert "pass --sync" in capsys.readouterr().err


# -- real runs ---------------------------------------------------------------------------------
def test_a_synced_run_prints_exactly_one_json_object_with_document_level_metrics(synced):
    proc = synced["proc"]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # the whole of stdout is one object
    assert set(report) >= REPORT_KEYS
    assert report["name"] == "tiny" and report["mode"] == "lexical"
    assert report["queries"] == 4
    assert report["sync"]["state"] == "succeeded"
    assert report["sync"]["counts"]["added"] == 4
    ranks = {d["id"]: d["rank"] for d in report["details"]}
    assert ranks == {"kiwi": 1, "boiler": 1, "pechka": 1, "nowhere": None}
    assert report["recall@1"] == 0.75 and report["recall@8"] == 0.75
    assert report["mrr@10"] == 0.75
    assert report["zero_results"] == 1
    assert set(report["latency_ms"]) == {"p50", "p95"}
    assert report["latency_ms"]["p50"] > 0
    assert "[" in proc.stderr  # sync progress went to stderr


def test_the_json_report_breaks_metrics_down_by_query_language(synced):
    report = json.loads(synced["proc"].stdout)
    assert set(report["by_lang"]) == {"en", "ru"}
    assert set(report["by_lang"]["en"]) >= METRIC_KEYS
    assert report["by_lang"]["en"]["queries"] == 3
    assert report["by_lang"]["en"]["recall@8"] == round(2 / 3, 4)
    assert report["by_lang"]["ru"]["mrr@10"] == 1.0


def test_details_give_top_documents_and_explain_gives_channel_ranks_of_the_relevant_one(synced):
    details = {d["id"]: d for d in json.loads(synced["proc"].stdout)["details"]}
    assert details["kiwi"]["top"][0] == "kiwi.md"
    assert len(details["kiwi"]["top"]) == len(set(details["kiwi"]["top"]))
    assert min(c["rank"] for c in details["boiler"]["channels"].values()) == 1
    assert details["nowhere"]["top"] == [] and details["nowhere"]["channels"] is None


def test_text_details_show_each_query_rank_and_top_documents(
    synced, capsys: pytest.CaptureFixture[str]
):
    assert rag_eval.main([*base_args(synced), "--details", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "#1  kiwi: pruning kiwi vines" in out
    assert "miss  nowhere: zebra quasar" in out
    assert "top: (no results)" in out
    assert re.search(r"channels of guides/boiler.md: .*#1", out)
    assert out.splitlines()[-2].startswith("en ")  # per-language rows close the table


def test_a_channel_ablation_only_uses_the_channels_asked_for(
    synced, capsys: pytest.CaptureFixture[str]
):
    assert rag_eval.main([*base_args(synced), "--channels", "filename", "--json", "--explain"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["channels"] == ["filename"]
    # No query names a file, so the filename channel alone finds nothing.
    assert report["zero_results"] == 4 and report["recall@8"] == 0.0


def test_min_mrr_and_min_recall8_exit_1_only_when_the_run_is_below_them(
    synced, capsys: pytest.CaptureFixture[str]
):
    args = base_args(synced)
    assert rag_eval.main([*args, "--min-mrr", "0.7", "--min-recall8", "0.7"]) == 0
    assert rag_eval.main([*args, "--min-mrr", "0.8"]) == 1
    assert "MRR@10 0.7500 is below --min-mrr 0.8" in capsys.readouterr().err
    assert rag_eval.main([*args, "--min-recall8", "0.9"]) == 1
    assert "Recall@8 0.7500 is below --min-recall8 0.9" in capsys.readouterr().err


def test_udhr_th2th_finds_most_thai_articles_within_eight(tmp_path: Path):
    if not (UDHR_TH2TH / "golden.json").is_file():
        pytest.fail(f"evaluation set missing: {UDHR_TH2TH} (expected next to the repo in shared/)")
    proc = run_cli(
        UDHR_TH2TH / "golden.json", "--knowledge-dir", UDHR_TH2TH / "docs",
        "--data-dir", tmp_path / "state", "--mode", "lexical", "--semantic", "off",
        "--sync", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) >= REPORT_KEYS
    assert report["queries"] == 31
    assert set(report["by_lang"]) == {"th"}
    assert report["recall@8"] > 0.5, f"udhr-th2th lexical Recall@8 {report['recall@8']}"


def test_semantic_mode_without_semantic_search_is_refused_before_any_sync(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    docs = make_knowledge_dir(tmp_path)
    golden = write_golden(tmp_path, GOLDEN)
    args = [str(golden), "--knowledge-dir", str(docs), "--data-dir", str(tmp_path / "s")]
    assert rag_eval.main([*args, "--mode", "semantic", "--semantic", "off", "--sync"]) == 2
    assert "--mode semantic needs semantic search, which is off" in capsys.readouterr().err
    assert not (tmp_path / "s" / "index.sqlite3").exists()


# -- page level --------------------------------------------------------------------------------
def test_located_relevant_entries_are_scored_per_page_beside_the_document_level(tmp_path: Path):
    """A 4-page PDF: the right document is always found; the right page only for some queries.

    Page 1 is a contents page listing every topic (a hub): its share at rank 1 is reported.
    """
    from tests.format_fixtures import write_text_pdf

    docs = tmp_path / "docs"
    docs.mkdir()
    write_text_pdf(
        docs / "manual.pdf",
        [
            ["Contents", "Walrus feeding 2", "Puffin nesting 3", "Otter grooming 4"],
            ["Walrus feeding", "Walruses eat clams from the sea floor at dawn."],
            ["Puffin nesting", "Puffins dig burrows in cliff turf; walrus never visit."],
            ["Otter grooming", "Otters comb their fur with their claws after each dive."],
        ],
    )
    golden = {
        "name": "pages",
        "hubs": [{"path": "manual.pdf", "location": {"page": 1}}],
        "queries": [
            {"id": "clams", "query": "clams sea floor dawn", "group": "text", "lang": "en",
             "relevant": [{"path": "manual.pdf", "location": {"page": 2}}]},
            # both words sit on the contents page (a hub) and on page 4
            {"id": "otter", "query": "otter grooming", "group": "title", "lang": "en",
             "relevant": [{"path": "manual.pdf", "location": {"page": 4}}]},
            # on a page that is not asked for: document hit, page miss
            {"id": "burrows", "query": "cliff turf burrows", "group": "text", "lang": "en",
             "relevant": [{"path": "manual.pdf", "location": {"page": 2}}]},
            {"id": "doc", "query": "claws dive", "lang": "en", "relevant": ["manual.pdf"]},
        ],
    }  # fmt: skip
    path = write_golden(tmp_path, golden)
    proc = run_cli(
        path, "--knowledge-dir", docs, "--data-dir", tmp_path / "state", "--mode", "lexical",
        "--semantic", "off", "--sync", "--json", "--details",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["recall@1"] == 1.0  # one document: always found
    details = {d["id"]: d for d in report["details"]}
    assert details["clams"]["unit_rank"] == 1
    assert details["burrows"]["unit_rank"] is None
    assert details["otter"]["unit_rank"] in (1, 2)  # page 4 or the hub first
    assert "unit_rank" not in details["doc"]  # no location: document level only
    unit = report["unit_level"]
    assert unit["queries"] == 3
    assert unit["recall@1"] < 1.0 and unit["mrr@10"] < report["mrr@10"]
    assert details["clams"]["top_units"][0] == "manual.pdf, p. 2"
    assert set(report["by_group"]) == {"text", "title"}
    assert report["by_group"]["text"]["unit_level"]["queries"] == 2
    hub_top = sum(1 for d in report["details"] if d["hub_at_top"])
    assert report["hub_at_rank1"]["queries"] == hub_top
    text = run_cli(
        path, "--knowledge-dir", docs, "--data-dir", tmp_path / "state", "--mode", "lexical",
        "--semantic", "off",
    )  # fmt: skip
    assert "all unit" in text.stdout and "hub at rank 1" in text.stdout
