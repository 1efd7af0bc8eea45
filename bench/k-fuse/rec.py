"""rec.py SET IDX OUT [hybrid]: per query, the document (and page) rank with the units channel
at several weights, beside the features a gate may read (content words, one passage holding
them all). Channels run once per query (memoised); only fusion is redone per weight. Hybrid:
the semantic candidates are fetched once per query through the warm worker, and the sweep is
over the lift instead (bench/notes/k-fuse.md)."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lex-gap"))
import labkit

import rag_search
from helpers.lexical.channels import passage_holds_all
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.lexical.units import UnitWeight, content_tokens

SET, IDX, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
HYBRID = len(sys.argv) > 4 and sys.argv[4] == "hybrid"
if HYBRID:  # key: the lift beside the semantic side
    VARIANTS = {str(v): UnitWeight(0.0, 0.0, v) for v in (0.0, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0)}
else:  # key: the RRF weight (no lift), or "L<lift>": RRF weight 1 and the lift
    VARIANTS = {str(w): UnitWeight(w, 0.0, 0.0) for w in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)}
    VARIANTS |= {f"L{v}": UnitWeight(1.0, v, 0.0) for v in (0.25, 0.5, 1.0, 2.0)}
TOP_K = 30  # rag_eval's search_top_k
golden = labkit.golden(SET)
conn = labkit.read_index(IDX)

memo: dict[tuple[str, str], object] = {}
labkit.memoise_channels(rag_search, memo)
base_channels = tuple(c for c in rag_search.LEXICAL_CHANNELS if c != "units")
semantic_of: dict[str, list[tuple[int, float]]] = {}
if HYBRID:
    from helpers.config import Config

    config = Config(
        knowledge_dir=Path(sys.argv[5]),
        data_dir=Path(IDX),
        db_path=Path(IDX) / "index.sqlite3",
        semantic_model_dir=Path("/work/shared/models/multilingual-e5-small-int8"),
        read_only=True,
    )


def ranks(q, channels, weight):
    rag_search.unit_weight = lambda ctx, beside=False: weight
    semantic = None
    mode = "lexical"
    if HYBRID:
        mode = "hybrid"
        semantic = semantic_of[q["query"]]
    options = rag_search.SearchOptions(top_k=TOP_K, channels=channels, mode=mode, semantic=semantic)
    return labkit.relevant_ranks(rag_search.search(conn, q["query"], options), q)


done = json.load(open(OUT)) if Path(OUT).exists() else []  # in golden order: fill it up
out = []
started = time.time()
for i, q in enumerate(golden["queries"]):
    old = done[i] if len(done) == len(golden["queries"]) else {}
    assert not old or old["q"] == q["query"][:80], (old["q"], q["query"])
    missing = [k for k in VARIANTS if k not in old]
    if old and (not missing or not 2 <= old["n"] <= 6):
        out.append(old)
        continue
    if HYBRID:
        hits, why_not = rag_search._semantic_candidates(config, conn, q["query"], Filters())
        assert hits is not None, why_not
        semantic_of[q["query"]] = hits
    parsed = Query.parse(q["query"])
    n = len(content_tokens(parsed))
    ctx = SearchContext(conn, parsed, Filters())
    row = {"n": n, "together": passage_holds_all(ctx), "question": parsed.question}
    row["q"] = q["query"][:80]
    row |= old
    if "base" not in row:
        row["base"] = ranks(q, base_channels, None)
    if 2 <= n <= 6:
        for key in missing:
            row[key] = ranks(q, None, VARIANTS[key])
    out.append(row)
json.dump(out, open(OUT, "w"))
print(SET, len(out), round(time.time() - started, 1), "s", flush=True)
