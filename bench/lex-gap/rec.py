"""rec.py SET IDX OUT [VARIANT...]: per query, the document (and page) rank under each variant of
the units channel's weight in lexical mode, the channels run once per query (memoised), only
fusion redone (as bench/k-fuse/rec.py). A variant is `spreadRRF,togetherRRF,spreadLift,
togetherLift,kind,gate[,k]` with kind `lin` (main: 1 + L x s / top), `exp` (the tail lift,
1 + L x exp(-(top - s) / tail scale)), `exq` (exp, but lin under 10 ranked documents) or `exm`
(exp scaled by the top's margin), gate `tok` (main's count of unit tokens) or `word`
(helpers.lexical.units.query_terms), k the units channel's RRF constant (`KS/KT`: KS when
no chunk holds every content word, KT when one does or for a question; the variants' weights
carry no spread_k, so main's gate does not run). `cov` records per query [the share of its
content words in the first hit's section without a spread lift, whether a chunk holds them all]
for bench/lex-gap/loso.py's gate and bench/lex-gap/kgate.py."""
# ruff: noqa: E402, SIM115  (lab script, run from the repo root)

import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import labkit

import rag_search
from helpers.lexical import units as U
from helpers.lexical.channels import passage_holds_all
from helpers.lexical.common import Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.ranking import fusion
from helpers.ranking.confidence import coverage

SET, IDX, OUT, VARIANTS, golden = labkit.variant_run(sys.argv)
TOP_K = labkit.TOP_K
conn = labkit.read_index(IDX)
memo: dict = {}


labkit.memoise_channels(rag_search, memo)
raw_units = U.channel_units
holds = {}
STATE = {}


def units_gated(ctx, found=()):
    """The channel with the gate of the current variant."""
    gate = STATE["gate"]
    key = (ctx.query.raw, "units-raw")
    if key not in memo:
        saved = (U.UNIT_MIN_TERMS, U.UNIT_MAX_TERMS)
        U.UNIT_MIN_TERMS, U.UNIT_MAX_TERMS = 0, 10**6
        memo[key] = raw_units(ctx, found)
        U.UNIT_MIN_TERMS, U.UNIT_MAX_TERMS = saved
    n = len(U.content_tokens(ctx.query)) if gate == "tok" else U.query_terms(ctx.query)
    if not 2 <= n <= 6:
        return rag_search.ChannelResult("units", [])
    return memo[key]


rag_search.channel_units = units_gated


def weight_of(ctx, beside_semantic=False):
    v = STATE["v"]
    if ctx.query.question:
        STATE["k_now"] = v["kt"]
        return U.UnitWeight(1.0, 0.0, 0.0)
    if ctx.query.raw not in holds:
        holds[ctx.query.raw] = passage_holds_all(ctx)
    STATE["k_now"] = v["kt"] if holds[ctx.query.raw] else v["k"]
    if holds[ctx.query.raw]:
        return U.UnitWeight(v["wt"], v["lt"], 0.0)
    return U.UnitWeight(v["ws"], v["ls"], 0.0)


rag_search.unit_weight = weight_of


def factors(units, lift):
    few = len(set(s for _, s in units.ranked)) < 10
    if STATE["v"]["kind"] == "lin" or (STATE["v"]["kind"] == "exq" and few):
        top = max((s for _, s in units.ranked), default=0.0)
        if lift <= 0 or top <= 0:
            return {}
        return {cid: 1.0 + lift * max(s, 0.0) / top for cid, s in units.ranked}
    scores = list(dict.fromkeys(s for _, s in units.ranked))
    if lift <= 0 or len(scores) < 2:
        return {}
    top = max(scores)
    scale = sum(scores) / len(scores) - min(scores)
    if scale <= 0:
        return {}
    if STATE["v"]["kind"] == "exm":  # scaled by the top's margin over the second
        second = sorted(scores, reverse=True)[1]
        lift *= 1.0 - math.exp(-(top - second) / scale)
    return {cid: 1.0 + lift * math.exp(-(top - s) / scale) for cid, s in units.ranked}


fusion.unit_factors = factors


def parse(name):
    ws, wt, ls, lt, kind, gate, *k = name.split(",")
    return {
        "ws": float(ws),
        "wt": float(wt),
        "ls": float(ls),
        "lt": float(lt),
        "kind": kind,
        "gate": gate,
        "k": float(k[0].split("/")[0]) if k else 60.0,
        "kt": float(k[0].split("/")[-1]) if k else 60.0,
    }


def rrf_fuse(results, weights, tie_key=None, constants=None):
    """rag_search.rrf_fuse with the units channel's own RRF constant (the variant's k)."""
    fused, ranks = {}, {}
    for result in results:
        weight = weights.get(result.name, 1.0) * result.coverage
        k = STATE.get("k_now", STATE["v"]["k"]) if result.name == "units" else rag_search.RRF_K
        if result.name == "units":  # the same value at rank 1 as with RRF_K
            weight *= (k + 1) / (rag_search.RRF_K + 1)
        for position, (chunk_id, score) in enumerate(result.ranked, start=1):
            rank = result.ranks[position - 1] if result.ranks else position
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (k + rank)
            ranks.setdefault(chunk_id, {})[result.name] = rag_search.ChannelRank(rank, score)
    order = tie_key or (lambda cid: (cid,))
    return sorted(
        ((cid, score, ranks[cid]) for cid, score in fused.items()),
        key=lambda x: (-round(x[1], 12), order(x[0])),
    )


rag_search.rrf_fuse = rrf_fuse


def features(q):
    """[coverage of the top hit's section (the rule without a spread lift), a chunk holds all]."""
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=TOP_K))
    parsed = Query.parse(q["query"])
    if not res.hits:
        return [0.0, True]
    top = res.hits[0]
    cov = coverage(parsed, res.sections.get(top.section_id, top.snippet))
    return [cov, passage_holds_all(SearchContext(conn, parsed, Filters()))]


def ranks(q):
    if STATE["feat"]:
        return features(q)
    res = rag_search.search(conn, q["query"], rag_search.SearchOptions(top_k=TOP_K))
    return labkit.relevant_ranks(res, q)


out = json.load(open(OUT)) if Path(OUT).exists() else {}
started = time.time()
for name in VARIANTS:
    if name in out:
        continue
    STATE["feat"] = name == "cov"
    STATE["v"] = parse("1.5,1,0,0.5,exp,word,60" if name == "cov" else name)
    STATE["gate"] = STATE["v"]["gate"]
    out[name] = [ranks(q) for q in golden["queries"]]
    mrr = sum(1 / r[0] for r in out[name] if r[0] and r[0] <= 10) / len(golden["queries"])
    mrr = -1 if name == "cov" else mrr
    print(SET, name, round(mrr, 4), round(time.time() - started, 1), "s", flush=True)
    json.dump(out, open(OUT, "w"))  # after each variant: a killed run keeps what it did
