"""bm25f.py SET IDX OUT [VARIANT...]: per query, the document (and page) rank in lexical mode
with the units channel ranked by a two-field BM25 (FTS5's bm25() with column weights: weighted
term frequencies over one length, i.e. BM25F's simple form), the fields being the unit's
headings (the document title for a whole-document unit, every heading_path entry of its
sections) and its whole text as stored today. A variant is `W` (the headings' weight; `base`
= the index's own units_fts). The side table is built once per index under /tmp; the passage
channels run once per query (memoised), the units channel and fusion per variant."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

import rag_search
from helpers.lexical import units as U
from helpers.store.codec import section_text
from helpers.store.units import UnitSpan, _unit_text
from helpers.text.unit_tokens import decode_runs, text_tokens, unit_tokens

SET, IDX, OUT, VARIANTS, golden = labkit.variant_run(sys.argv)
TOP_K = labkit.TOP_K
side = Path(f"/tmp/bm25f/{SET}.sqlite3")


def headings(title: str, span: UnitSpan, locations: list[str]) -> str:
    seen: dict[str, None] = {}
    if span.page is None:
        seen[title] = None
    for loc in locations[span.first : span.last + 1]:
        fields = json.loads(loc) if loc else {}
        for h in fields.get("heading_path") or ():
            seen.setdefault(h, None)
    return "\n".join(seen)


def build_side() -> None:
    side.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{IDX}/index.sqlite3?mode=ro", uri=True)
    tmp = side.with_suffix(".part")
    tmp.unlink(missing_ok=True)
    dst = sqlite3.connect(tmp)
    dst.execute(
        "CREATE VIRTUAL TABLE uf USING fts5(head, tokens, content = '', "
        "tokenize = \"unicode61 remove_diacritics 0 categories 'L* N* Co M*'\")"
    )
    units = src.execute(
        "SELECT u.id, u.document_id, u.first_ordinal, u.last_ordinal, u.page, u.lang, "
        "u.lang_runs, d.title FROM units u JOIN documents d ON d.id = u.document_id "
        "ORDER BY u.document_id, u.first_ordinal"
    ).fetchall()
    cache: dict[int, tuple[list[str], list[str]]] = {}
    for unit_id, doc_id, first, last, page, lang, runs, title in units:
        if doc_id not in cache:
            rows = src.execute(
                "SELECT ordinal, text, location FROM sections WHERE document_id = ? "
                "ORDER BY ordinal",
                (doc_id,),
            ).fetchall()
            texts = [""] * (rows[-1][0] + 1 if rows else 0)
            locs = [""] * len(texts)
            for o, t, loc in rows:
                texts[o], locs[o] = section_text(t), loc
            cache.clear()
            cache[doc_id] = (texts, locs)
        texts, locs = cache[doc_id]
        span = UnitSpan(first, last, page)
        text = _unit_text(title, span, texts)
        body = " ".join(text_tokens(text, decode_runs(lang, runs, text.count("\n") + 1)))
        head = " ".join(unit_tokens(headings(title, span, locs), lang))
        dst.execute("INSERT INTO uf(rowid, head, tokens) VALUES (?,?,?)", (unit_id, head, body))
    dst.commit()
    dst.close()
    tmp.rename(side)


if not side.exists():
    build_side()
conn = labkit.read_index(IDX)
conn.execute("ATTACH DATABASE ? AS bf", (f"file:{side}?mode=ro",))
memo: dict = {}
labkit.memoise_passage_channels(rag_search, memo)
STATE: dict = {}
base_ranked = U.ranked_units


def ranked_units(ctx, depth=U.UNIT_DEPTH):
    if STATE["w"] is None:
        return base_ranked(ctx, depth)
    match = U.unit_match(ctx.query, U.index_languages(ctx.conn), U._units_holding(ctx.conn))
    if not match:
        return []
    key = (ctx.query.raw, STATE["w"])
    if key not in memo:
        sql = (
            "SELECT f.rowid, u.document_id, bm25(uf, ?, 1.0) AS r FROM bf.uf f "
            "JOIN units u ON u.id = f.rowid WHERE uf MATCH ? ORDER BY r, f.rowid LIMIT ?"
        )
        rows = ctx.conn.execute(sql, (STATE["w"], match, depth)).fetchall()
        memo[key] = [(row[0], row[1], -row[2]) for row in rows]
    return memo[key]


U.ranked_units = ranked_units

labkit.run_variants(
    conn,
    golden,
    VARIANTS,
    OUT,
    lambda name: STATE.update(w=None if name == "base" else float(name)),
)
