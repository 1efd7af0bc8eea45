"""hrec.py SET IDX DOCS OUT [VARIANT...]: per query, the document (and page) rank in hybrid mode
under each variant of the units channel's lift beside the semantic side; the lexical channels
and the semantic candidates run once per query (memoised; the candidates through the warm query
worker), only fusion is redone. A variant is `KIND,LIFT`: KIND `lin` (main: 1 + L x s / top,
fusion.unit_factors) or `exp` (the tail lift, helpers.lexical.units.tail_factors, as the
lexical side's spread lift reads it), LIFT the factor's L (bench/notes/hyb-units.md)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import rag_search
from helpers.config import Config
from helpers.eval import metrics as em
from helpers.lexical import units as U
from helpers.lexical.common import Filters
from helpers.ranking import fusion
from helpers.store.fold_sql import register_fold

SET, IDX, DOCS, OUT = sys.argv[1:5]
VARIANTS = sys.argv[5:]
TOP_K = 30  # rag_eval's search_top_k
if SET.startswith(("lohelp", "pyindex", "x-")):
    GOLDEN = f"/work/idx/kw/{SET}/golden.json"
else:
    GOLDEN = f"/work/shared/eval/{SET}/golden.json"
golden = json.load(open(GOLDEN))
conn = sqlite3.connect(f"file:{IDX}/index.sqlite3?mode=ro", uri=True)
conn.row_factory = sqlite3.Row
register_fold(conn)
config = Config(
    knowledge_dir=Path(DOCS),
    data_dir=Path(IDX),
    db_path=Path(IDX) / "index.sqlite3",
    semantic_model_dir=Path("/work/shared/models/multilingual-e5-small-int8"),
    read_only=True,
)
memo: dict = {}


def memoised(name, fn):
    def run(ctx, *args):
        key = (ctx.query.raw, name)
        if key not in memo:
            memo[key] = fn(ctx, *args)
        return memo[key]

    return run


for _name, _fn in list(rag_search.LEXICAL_CHANNELS.items()):
    rag_search.LEXICAL_CHANNELS[_name] = memoised(_name, _fn)
rag_search.channel_units = memoised("units", rag_search.channel_units)
relative = fusion.unit_factors
STATE: dict = {}


def factors(units, lift):
    if STATE["kind"] == "lin":
        return relative(units, lift)
    scores = list(dict.fromkeys(s for _, s in units.ranked))
    if len(scores) < U.UNIT_TAIL_MIN_DOCUMENTS:
        return relative(units, lift)
    return U.tail_factors(units, lift)


fusion.unit_factors = factors
semantic_of: dict[str, list] = {}


def ranks(q):
    if q["query"] not in semantic_of:
        hits, why_not = rag_search._semantic_candidates(config, conn, q["query"], Filters())
        assert hits is not None, why_not
        semantic_of[q["query"]] = hits
    options = rag_search.SearchOptions(top_k=TOP_K, mode="hybrid", semantic=semantic_of[q["query"]])
    res = rag_search.search(conn, q["query"], options)
    docs = em.distinct_documents(h.path for h in res.hits)
    rel = q["relevant"]
    paths = [x if isinstance(x, str) else x["path"] for x in rel]
    doc = em.first_relevant_rank(docs, paths)
    unit = None
    if isinstance(rel[0], dict) and rel[0].get("location"):
        unit, _ = em.first_relevant_unit_rank(
            [(h.path, h.location) for h in res.hits], [(x["path"], x["location"]) for x in rel]
        )
    return [doc, unit]


out = json.load(open(OUT)) if Path(OUT).exists() else {}
started = time.time()
for name in VARIANTS:
    if name in out:
        continue
    kind, lift = name.split(",")
    STATE["kind"] = kind
    rag_search.unit_weight = lambda ctx, beside, lift=float(lift): (
        U.UnitWeight(1.0, 0.0, 0.0) if ctx.query.question else U.UnitWeight(1.0, 0.0, lift)
    )
    out[name] = [ranks(q) for q in golden["queries"]]
    mrr = sum(1 / r[0] for r in out[name] if r[0] and r[0] <= 10) / len(golden["queries"])
    print(SET, name, round(mrr, 4), round(time.time() - started, 1), "s", flush=True)
    json.dump(out, open(OUT, "w"))  # after each variant: a killed run keeps what it did
