"""hrec.py SET IDX DOCS OUT [VARIANT...]: per query, the document (and page) rank in hybrid mode
under each variant of the units channel's lift beside the semantic side; the lexical channels
and the semantic candidates run once per query (memoised; the candidates through the warm query
worker), only fusion is redone. A variant is `KIND,LIFT`: KIND `lin` (main: 1 + L x s / top,
fusion.unit_factors) or `exp` (the tail lift, helpers.lexical.units.tail_factors, as the
lexical side's spread lift reads it), LIFT the factor's L (bench/notes/hyb-units.md)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

import rag_search
from helpers.config import Config
from helpers.lexical import units as U
from helpers.lexical.common import Filters
from helpers.ranking import fusion

SET, IDX, DOCS, OUT = sys.argv[1:5]
VARIANTS = sys.argv[5:]
TOP_K = 30  # rag_eval's search_top_k
golden = labkit.golden(SET)
conn = labkit.read_index(IDX)
config = Config(
    knowledge_dir=Path(DOCS),
    data_dir=Path(IDX),
    db_path=Path(IDX) / "index.sqlite3",
    semantic_model_dir=Path("/work/shared/models/multilingual-e5-small-int8"),
    read_only=True,
)
memo: dict = {}
labkit.memoise_channels(rag_search, memo)
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
    return labkit.relevant_ranks(rag_search.search(conn, q["query"], options), q)


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
