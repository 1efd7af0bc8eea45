"""merge_forms.py SET IDX OUT [VARIANT...]: lexical-mode ranks with the units channel's query
words scored as one term over all their forms (the stems a word takes in each of the index's
languages): a unit identified as English holds `isnul`, one identified as Swedish `isnull`, and
searching the form most units hold misses the other language's units. Variant `base` = main;
`max` / `sum` = the per-form BM25 parts (bm25() of each form alone, divided by the form's IDF)
merged per unit by max or sum, times the word's IDF from the summed document counts."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

import rag_search
from helpers.lexical import units as U
from helpers.lexical.common import fts_phrase
from helpers.text.unit_tokens import unit_tokens

SET, IDX, OUT, VARIANTS, golden = labkit.variant_run(sys.argv)
TOP_K = labkit.TOP_K
conn = labkit.read_index(IDX)
memo: dict = {}
labkit.memoise_passage_channels(rag_search, memo)
STATE: dict = {"split": 0, "queries": 0}
base_ranked = U.ranked_units
N_UNITS = conn.execute("SELECT COUNT(*) FROM units").fetchone()[0]


def varint(blob: bytes, at: int = 0) -> tuple[int, int]:
    value = 0
    for i in range(9):
        byte = blob[at + i]
        if i == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at + i + 1
    raise ValueError


_avg = conn.execute("SELECT block FROM units_fts_data WHERE id = 1").fetchone()[0]
_rows, _at = varint(_avg)
AVG_LEN = varint(_avg, _at)[0] / _rows
K1, B = 1.2, 0.75


def unit_len(rowid: int) -> int:
    return varint(
        conn.execute("SELECT sz FROM units_fts_docsize WHERE id = ?", (rowid,)).fetchone()[0]
    )[0]


def idf(n: int) -> float:
    value = math.log((N_UNITS - n + 0.5) / (n + 0.5))
    return value if value > 0 else 1e-6


def word_forms(query, languages, holding):
    stops = frozenset(g.text for g in query.groups if g.stop and g not in query.content)
    per_language = [unit_tokens(query.raw, lang, stops) for lang in languages or ("",)]
    words = []
    for variants in zip(*per_language, strict=True):
        forms = [f for f in dict.fromkeys(variants) if holding(f) > 0] or [variants[0]]
        if forms not in words:
            words.append(forms)
    return words


def ranked_units(ctx, depth=U.UNIT_DEPTH):
    if STATE["v"] == "base":
        return base_ranked(ctx, depth)
    holding = U._units_holding(ctx.conn)
    words = word_forms(ctx.query, U.index_languages(ctx.conn), holding)
    if all(len(f) == 1 for f in words):
        return base_ranked(ctx, depth)
    STATE["split"] += 1
    where, params = ctx.filters.sql()
    sql = (
        "SELECT f.rowid, u.document_id, f.rank FROM units_fts f JOIN units u ON u.id = f.rowid "
        f"JOIN documents d ON d.id = u.document_id WHERE units_fts MATCH ? AND {where}"
    )
    scores: dict[int, float] = {}
    doc_of: dict[int, int] = {}
    for forms in words:
        counts = {f: holding(f) for f in forms}
        word_idf = idf(min(sum(counts.values()), N_UNITS))
        part: dict[int, float] = {}
        for f in forms:
            for rowid, doc, rank in ctx.conn.execute(sql, [fts_phrase(f), *params]):
                g = -rank / idf(counts[f])
                doc_of[rowid] = doc
                if STATE["v"] == "exact":
                    k = K1 * (1 - B + B * unit_len(rowid) / AVG_LEN)
                    part[rowid] = part.get(rowid, 0.0) + round(g * k / (K1 + 1 - g))
                elif STATE["v"] == "sum":
                    part[rowid] = part.get(rowid, 0.0) + g
                else:
                    part[rowid] = max(part.get(rowid, 0.0), g)
        for rowid, g in part.items():
            if STATE["v"] == "exact":
                k = K1 * (1 - B + B * unit_len(rowid) / AVG_LEN)
                g = g * (K1 + 1) / (g + k)
            scores[rowid] = scores.get(rowid, 0.0) + word_idf * g
    ranked = sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:depth]
    return [(rowid, doc_of[rowid], score) for rowid, score in ranked]


U.ranked_units = ranked_units

labkit.run_variants(
    conn,
    golden,
    VARIANTS,
    OUT,
    lambda name: STATE.update(v=name, split=0),
    lambda: ["split", STATE["split"]],
)
