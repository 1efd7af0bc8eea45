"""What the per-query lab scripts share (rec.py, hrec.py here, bench/k-fuse/rec.py): channels
run once per query, and a result's document and page rank of the relevant answer."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.eval import metrics as em
from helpers.store.fold_sql import register_fold


def memoised(memo: dict, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(ctx, ...)` computed once per query text and channel name."""

    def run(ctx: Any, *args: Any) -> Any:
        key = (ctx.query.raw, name)
        if key not in memo:
            memo[key] = fn(ctx, *args)
        return memo[key]

    return run


def memoise_passage_channels(rag_search: Any, memo: dict) -> None:
    """Every lexical channel of rag_search but the units channel memoised (a lab script that
    varies the units channel runs it per variant)."""
    for name, fn in list(rag_search.LEXICAL_CHANNELS.items()):
        rag_search.LEXICAL_CHANNELS[name] = memoised(memo, name, fn)


def memoise_channels(rag_search: Any, memo: dict) -> None:
    """Every lexical channel of rag_search (and the units channel's own name) memoised."""
    memoise_passage_channels(rag_search, memo)
    rag_search.channel_units = memoised(memo, "units", rag_search.channel_units)


def relevant_ranks(result: Any, query: dict) -> list[int | None]:
    """[the relevant document's rank, the relevant page's rank (None without locations)]."""
    docs = em.distinct_documents(h.path for h in result.hits)
    rel = query["relevant"]
    paths = [x if isinstance(x, str) else x["path"] for x in rel]
    doc = em.first_relevant_rank(docs, paths)
    unit = None
    if isinstance(rel[0], dict) and rel[0].get("location"):
        unit, _ = em.first_relevant_unit_rank(
            [(h.path, h.location) for h in result.hits],
            [(x["path"], x["location"]) for x in rel],
        )
    return [doc, unit]


def mrr_at_10(ranks: list[list[int | None]]) -> tuple[float, float]:
    """(document MRR@10, page MRR@10 or -1 for a set without locations) of relevant_ranks rows."""
    n = len(ranks)
    doc = sum(1 / r[0] for r in ranks if r[0] and r[0] <= 10) / n
    pages = [r[1] for r in ranks]
    if all(p is None for p in pages):
        return doc, -1.0
    return doc, sum(1 / p for p in pages if p and p <= 10) / n


def run_variants(
    conn: sqlite3.Connection,
    golden_set: dict,
    variants: list[str],
    out_path: str,
    select: Callable[[str], Any],
    extra: Callable[[], list[Any]] = list,
) -> None:
    """Each variant not yet in OUT (a JSON of name -> relevant_ranks rows, rewritten after each):
    `select(name)` sets it up, lexical search of every query to TOP_K, MRR@10 printed with
    `extra()` and the time so far."""
    import rag_search  # the scripts put the repo root on sys.path before importing labkit

    path = Path(out_path)
    out = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    started = time.time()
    for name in variants:
        if name in out:
            continue
        select(name)
        ranks = []
        for q in golden_set["queries"]:
            res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=TOP_K))
            ranks.append(relevant_ranks(res, q))
        out[name] = ranks
        mrr, pm = mrr_at_10(ranks)
        took = round(time.time() - started, 1)
        print(
            golden_set["name"], name, round(mrr, 4), round(pm, 4), *extra(), took, "s", flush=True
        )
        with open(out_path, "w", encoding="utf-8") as handle:
            json.dump(out, handle)


TOP_K = 30  # rag_eval's search_top_k: the depth a lab script ranks to


def variant_run(argv: list[str]) -> tuple[str, str, str, list[str], dict]:
    """`SCRIPT SET IDX OUT VARIANT...` of a script that compares variants: (SET, IDX, OUT,
    VARIANTS, SET's golden set)."""
    name, idx, out = argv[1:4]
    return name, idx, out, argv[4:], golden(name)


# Where this session's sets live (bench/build_keyword_eval.py, bench/build_pdf_eval.py output).
KEYWORD_ROOT = "/work/idx/kw"
PDF_GOLDEN = "/tmp/lg/dpdf-set/golden.json"
SHARED_EVAL = "/work/shared/eval"


def golden(name: str) -> dict:
    """The golden set `name`: a built keyword or cross set, debian-pdf, else ../shared/eval."""
    if name == "debian-pdf":
        path = PDF_GOLDEN
    elif name.startswith(("lohelp", "pyindex", "x-")):
        path = f"{KEYWORD_ROOT}/{name}/golden.json"
    else:
        path = f"{SHARED_EVAL}/{name}/golden.json"
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_index(data_dir: str) -> sqlite3.Connection:
    """A read-only connection to DATA_DIR/index.sqlite3 as search opens one (rows by name, the
    fold function registered)."""
    conn = sqlite3.connect(f"file:{data_dir}/index.sqlite3?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    register_fold(conn)
    return conn
