"""Retrieval: one whole search over one parsed query and one connection, fused into one ranking.

`run` is what rag_service calls: it opens the read connection, asks the warm query worker for
semantic candidates (unless the mode is lexical) and calls `search`, which runs the channels
(each can be switched off for ablation through SearchOptions.channels):
  filename  the query names a file (helpers.lexical.filename)
  words     word-level BM25 with Snowball prefix stems (helpers.lexical.channels)
  sections  parent sections ranked by query-term density (summed chunk scores / chunks)
  bm25      trigram BM25 over title/path/body for Thai words, symbols and substrings
  exact     exact phrase, then all content terms
  short     1-2 character terms (word index, bounded instr() scan, or re-ranking)
  variants  split/joined words: data base <-> database (helpers.lexical.variants)
  fuzzy     OCR misreadings, only inside OCR chunks (helpers.lexical.ocr_fuzzy)
  cjk       Chinese/Japanese/Korean character bigrams, BM25 (helpers.lexical.cjk_pairs)
  units     BM25 over whole units (a PDF's outline entry or page, else a document) of 2-6-word
            queries: its documents lift the chunks the others found (helpers.lexical.units;
            weighted per query by units.unit_weight; beside the semantic side a bounded
            multiplier of the lexical evidence, not a channel)
RRF fuses the lexical channels; hybrid mode mixes lexical evidence and cosine per parent section
(hybrid_fuse). Hubs (sections.hub) and sections that only quote the query in a cross-reference
are lowered by bounded priors. Deterministic: fixed constants (helpers.ranking.constants), ties
by path, then position. The result carries what the band and the budget need (TopMatch, each
hit's MatchedChild): the service shapes the answer without reading again.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path

from helpers.config import Config
from helpers.errors import RagError, SemanticUnavailable
from helpers.health import semantic_state
from helpers.lexical.channels import (
    channel_bm25,
    channel_exact,
    channel_sections,
    channel_short,
    channel_words,
)
from helpers.lexical.cjk_pairs import channel_cjk
from helpers.lexical.common import (
    CHANNEL_DEPTH,
    ChannelResult,
    Filters,
    SearchContext,
    fts_phrase,
    section_ids,
)
from helpers.lexical.filename import channel_filename
from helpers.lexical.ocr_fuzzy import channel_fuzzy
from helpers.lexical.pointers import PointerPrior, apply_pointer_prior
from helpers.lexical.proximity import section_proximity
from helpers.lexical.query_terms import Query
from helpers.lexical.snippet import make_snippet
from helpers.lexical.units import (
    UnitWeight,
    channel_units,
    document_rank,
    first_passage_weak,
    lift_applies,
    section_coverage,
    tail_factors,
    unit_factors,
    unit_weight,
)
from helpers.lexical.variants import channel_variants
from helpers.ranking.confidence import coverage, unit_margin
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    HUB_PRIOR,
    RRF_K,
    SEMANTIC_DISTINCT,
    TIE_WINDOW_PER_HIT,
)
from helpers.ranking.fusion import hybrid_fuse, rrf_fuse
from helpers.results import ChannelRank, Hit, MatchedChild, SearchResult, TopMatch
from helpers.store.batched import rows_in
from helpers.store.codec import child_location, section_text, text_digest
from helpers.store.open_index import read_conn, read_only_reason

__all__ = [
    "CHANNEL_DEPTH",
    "CHANNEL_WEIGHTS",
    "LEXICAL_CHANNELS",
    "RRF_K",
    "ChannelResult",
    "Filters",
    "Query",
    "SearchOptions",
    "fts_phrase",
    "rrf_fuse",
    "run",
    "search",
]

LEXICAL_CHANNELS: dict[str, Callable[[SearchContext], ChannelResult]] = {
    "filename": channel_filename,
    "words": channel_words,
    "sections": channel_sections,
    "bm25": channel_bm25,
    "exact": channel_exact,
    "short": channel_short,
    "variants": channel_variants,
    "fuzzy": channel_fuzzy,
    "cjk": channel_cjk,
    "units": channel_units,  # runs last: it lifts the chunks the others found
}

TieKey = tuple[str, int, int, int]  # (path, section ordinal, chunk ordinal, chunk id)


@dataclass(frozen=True)
class SearchOptions:
    top_k: int = 8
    filters: Filters = field(default_factory=Filters)
    mode: str = "lexical"
    channels: tuple[str, ...] | None = None  # None = all lexical channels (ablation switch)
    knowledge_dir: Path | None = None  # for the file-system truth check
    # (chunk id, cosine) best first, fused as the "semantic" channel: `run` fills it from the
    # query worker; mode "semantic" uses it alone, "hybrid" with the lexical channels.
    semantic: list[tuple[int, float]] | None = None


def run(config: Config, raw_query: str, options: SearchOptions) -> SearchResult:
    """A whole search over one read connection: semantic candidates (unless lexical), then
    `search`. SemanticUnavailable in semantic mode when they cannot be had; in hybrid mode the
    lexical result says why in its warnings."""
    started = time.perf_counter()
    conn = read_conn(config)
    try:
        why_not = None
        if options.mode in ("hybrid", "semantic"):
            semantic, why_not = _semantic_candidates(config, conn, raw_query, options.filters)
            if why_not and options.mode == "semantic":
                raise SemanticUnavailable(why_not, "use mode='lexical', or enable semantic search")
            options = replace(options, semantic=semantic)
        result = search(conn, raw_query, options)
    finally:
        conn.close()
    if why_not:
        result = result.with_changes(
            warnings=[*result.warnings, f"{why_not} — lexical results only"]
        )
    return result.with_changes(elapsed_ms=(time.perf_counter() - started) * 1000)


def _semantic_candidates(
    config: Config, conn: sqlite3.Connection, raw_query: str, filters: Filters
) -> tuple[list[tuple[int, float]] | None, str | None]:
    """(chunk id, cosine) candidates, or (None, why not) when semantic search cannot answer."""
    light = semantic_state(config)  # off / unavailable decided without importing numpy
    if light["state"] != "ready":
        return None, f"semantic search {light['state']}: {light['hint']}"
    from helpers.semantic import candidates as semantic_candidates  # numpy: only when it runs
    from helpers.semantic.generations import NotReadyError

    # A read-only data dir has no log to append to; the worker's stderr is dropped instead.
    log_path = config.logs_dir / "semantic-query.log"
    if read_only_reason(config):
        log_path = Path(os.devnull)
    try:
        hits = semantic_candidates.query_candidates(
            config, conn, raw_query, light["model_dir"], filters, log_path
        )
    except NotReadyError as exc:
        return None, f"{exc.message}: {exc.hint}"
    except RagError as exc:  # the model, the query worker or the vector store
        return None, f"semantic search failed: {exc}"
    except OSError as exc:  # e.g. the model-hash cache cannot be saved on a read-only data dir
        return None, f"semantic search failed: {exc} (hint: check the data dir {config.data_dir})"
    return hits, None


def fuse_channels(
    results: list[ChannelResult],
    section_of: Callable[[list[int]], dict[int, int]] | None = None,
    hubs_of: Callable[[list[int]], dict[int, float]] | None = None,
    sizes_of: Callable[[list[int]], dict[int, int]] | None = None,
    proximity_of: Callable[[list[int]], dict[int, float]] | None = None,
    units: UnitWeight | None = None,
    covered_of: Callable[[int], float] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Lexical channels alone (or the semantic one alone): RRF, then the hub prior. With both:
    hybrid_fuse (needs `section_of`, chunk id -> parent section id). `hubs_of` maps chunk ids
    to their section's hub score (none: no prior); `proximity_of` maps chunk ids (best lexical
    evidence first) to their section's term-proximity share (helpers.lexical.proximity; hybrid
    only, none: unscaled); `units`, this query's weight of the units channel (none: its
    CHANNEL_WEIGHTS entry, no hybrid lift); `covered_of`, the share of the query's content words
    in a chunk's section (for `cover_below`, which gates the lift and the units channel's
    `spread_k`; none: neither is gated)."""
    semantic = [r for r in results if r.name == "semantic"]
    lexical = [r for r in results if r.name != "semantic"]
    if not (semantic and lexical and section_of is not None):
        weights = CHANNEL_WEIGHTS if units is None else {**CHANNEL_WEIGHTS, "units": units.rrf}
        fused = rrf_fuse(results, weights)
        if (
            units is not None
            and units.spread_k is not None
            and first_passage_weak(units, lambda: _first_shown(fused, hubs_of), covered_of)
        ):
            fused = rrf_fuse(results, weights, constants={"units": units.spread_k})
        if units is not None and lift_applies(
            units, lambda: _first_shown(fused, hubs_of), covered_of
        ):
            fused = _unit_lifted(fused, results, units)
        if hubs_of is None:
            return fused
        return apply_hub_prior(fused, hubs_of([cid for cid, _, _ in fused]))
    lift = units.hybrid_lift if units is not None else 0.0
    tail = tail_factors if units is not None and units.hybrid_tail else None
    return hybrid_fuse(
        lexical, semantic[0], section_of, hubs_of, sizes_of, proximity_of, lift, tail
    )


def _first_shown(
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    hubs_of: Callable[[list[int]], dict[int, float]] | None,
) -> int | None:
    """The chunk the ranking would show first: the head of `fused` after the hub prior."""
    head = fused[: TIE_WINDOW_PER_HIT * 2]
    if hubs_of is not None:
        head = apply_hub_prior(head, hubs_of([cid for cid, _, _ in head]))
    return head[0][0] if head else None


def _unit_lifted(
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    results: list[ChannelResult],
    weight: UnitWeight,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """The RRF scores times each chunk's unit factor (units.unit_factors), re-sorted."""
    units = next((r for r in results if r.name == "units"), None)
    factors = unit_factors(weight, units) if units is not None else {}
    if not factors:
        return fused
    lifted = [(cid, score * factors.get(cid, 1.0), ranks) for cid, score, ranks in fused]
    return sorted(lifted, key=lambda x: (-round(x[1], 12), x[0]))


def apply_hub_prior(
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    hubs: dict[int, float],
    strength: float | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Lower hub sections' scores by a bounded factor (default HUB_PRIOR) and re-sort (stable:
    ties keep their order)."""
    strength = HUB_PRIOR if strength is None else strength
    if not hubs or strength <= 0:
        return fused
    lowered = [
        (cid, score * (1.0 - strength * hubs.get(cid, 0.0)), ranks) for cid, score, ranks in fused
    ]
    return sorted(lowered, key=lambda x: -round(x[1], 12))


def chunk_hubs(conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, float]:
    """Chunk id -> its section's hub score, for the chunks whose section has one. An index of
    schema 4 or older opened read-only has no sections.hub column: no prior then."""
    sql = (
        "SELECT c.id, s.hub FROM chunks c JOIN sections s ON s.id = c.section_id "
        "WHERE c.id IN ({marks}) AND s.hub > 0"
    )
    try:
        return {row[0]: row[1] for row in rows_in(conn, sql, chunk_ids)}
    except sqlite3.OperationalError as exc:
        if "no such column" in str(exc):
            return {}
        raise


class _HubScores:
    """One search's hub lookups: each chunk's score is read once (fusion, then the hits)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._known: dict[int, float] = {}
        self._read: set[int] = set()

    def __call__(self, chunk_ids: list[int]) -> dict[int, float]:
        todo = [cid for cid in dict.fromkeys(chunk_ids) if cid not in self._read]
        if todo:
            self._known.update(chunk_hubs(self._conn, todo))
            self._read.update(todo)
        return {cid: self._known[cid] for cid in chunk_ids if cid in self._known}


def section_sizes(conn: sqlite3.Connection, section_ids: list[int]) -> dict[int, int]:
    """Section id -> its number of children (chunks_section index: ~0.1 ms for 100 sections)."""
    sql = (
        "SELECT section_id, COUNT(*) FROM chunks WHERE section_id IN ({marks}) GROUP BY section_id"
    )
    return {row[0]: row[1] for row in rows_in(conn, sql, section_ids)}


def _tie_keys(conn: sqlite3.Connection, ids: list[int]) -> dict[int, TieKey]:
    sql = (
        "SELECT c.id, d.path, s.ordinal, c.ordinal FROM chunks c "
        "JOIN documents d ON d.id = c.document_id JOIN sections s ON s.id = c.section_id "
        "WHERE c.id IN ({marks})"
    )
    return {row[0]: (row[1], row[2], row[3], row[0]) for row in rows_in(conn, sql, ids)}


def _break_ties(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    top_k: int,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Re-order equal fused scores by path, then position in the file. Only the head of the
    list that can become hits is looked at (its tied groups in full), to keep it cheap."""
    window = top_k * TIE_WINDOW_PER_HIT
    if len(fused) <= 1:
        return fused
    end = min(window, len(fused))
    last = round(fused[end - 1][1], 12)
    while end < len(fused) and round(fused[end][1], 12) == last:
        end += 1
    head = fused[:end]
    counts = Counter(round(score, 12) for _, score, _ in head)
    tied = [cid for cid, score, _ in head if counts[round(score, 12)] > 1]
    if not tied:
        return fused
    keys = _tie_keys(conn, tied)
    head.sort(key=lambda x: (-round(x[1], 12), keys.get(x[0], ("", 0, 0, x[0]))))
    return head + fused[end:]


def distinct_candidates(
    conn: sqlite3.Connection, hits: list[tuple[int, float]], limit: int
) -> list[tuple[int, float]]:
    """The semantic candidates down to the first `limit` distinct child texts, every copy of
    those kept: byte-identical copies (one man page under four names) share a vector, and
    without this they fill the candidate list, so it reaches that much less deep into the
    folder (and its cosine floor, the scale's 0, sits higher)."""
    if len(hits) <= limit:
        return hits
    sql = "SELECT id, text FROM chunks WHERE id IN ({marks})"
    rows = rows_in(conn, sql, [cid for cid, _ in hits])
    digests = {cid: text_digest(text) for cid, text in rows}
    return first_distinct(hits, lambda cid: digests.get(cid, cid), limit)


def first_distinct(
    hits: list[tuple[int, float]], key_of: Callable[[int], Hashable], limit: int
) -> list[tuple[int, float]]:
    """`hits` in order down to the first `limit` distinct keys, every hit of those keys kept
    (also the offline replay's cut: bench/fusion_ablation.py)."""
    kept: set[Hashable] = set()
    out: list[tuple[int, float]] = []
    for cid, cosine in hits:
        key = key_of(cid)
        if key not in kept:
            if len(kept) >= limit:
                continue
            kept.add(key)
        out.append((cid, cosine))
    return out


def _hubness_corrected(
    conn: sqlite3.Connection, hits: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """Semantic candidates re-ranked for hubness (helpers.semantic.hubness_store) when no word
    of the query is in any document (a question in another language than the folder): the
    semantic side then decides alone, and generic passages close to every query (hubs) take
    its first places. With lexical evidence the words keep hubs in check and nothing changes
    (bench/RESULTS.md, "Hubness correction")."""
    if not hits:
        return hits
    row = conn.execute(
        "SELECT id, fingerprint, vector_count, dim FROM semantic_generations WHERE ready = 1 "
        "ORDER BY id DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return hits
    from helpers.semantic import hubness_store  # numpy: only for such a query

    db = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    ref = hubness_store.GenerationRef(db, int(row[0]), str(row[1]), int(row[2]), int(row[3]))
    return hubness_store.corrected(conn, ref, hits)


def search(conn: sqlite3.Connection, raw_query: str, options: SearchOptions) -> SearchResult:
    """The channels, fusion, priors and ties over `conn` for one parsed query; the semantic
    candidates come in `options.semantic` (`run` fetches them)."""
    started = time.perf_counter()
    query = Query.parse(raw_query)
    ctx = SearchContext(conn, query, options.filters)
    hubs = _HubScores(conn)
    names = options.channels or tuple(LEXICAL_CHANNELS)
    if options.mode == "semantic" and options.semantic is not None:
        names = ()
    results = [LEXICAL_CHANNELS[name](ctx) for name in names if name != "units"]
    semantic: list[tuple[int, float]] = []
    if options.semantic is not None and options.mode in ("hybrid", "semantic"):
        semantic = distinct_candidates(conn, options.semantic, SEMANTIC_DISTINCT)
        if options.mode == "hybrid" and not any(r.ranked for r in results):
            semantic = _hubness_corrected(conn, semantic)
    # Unit-level BM25 lifts the chunks the other channels found: a channel in RRF when the
    # lexical side is alone, a bounded multiplier of their lexical evidence beside the semantic
    # side (hybrid_fuse), weighted per query (units.unit_weight).
    # A question beside the semantic side gets no lift (its answer is a passage): not run.
    weight = None
    beside_semantic = options.semantic is not None and options.mode == "hybrid"
    if "units" in names and not (beside_semantic and ctx.query.question):
        found = [cid for r in results for cid, _ in r.ranked]
        results.append(channel_units(ctx, found))
        weight = unit_weight(ctx, beside_semantic) if results[-1].ranked else None
    if options.semantic is not None and options.mode in ("hybrid", "semantic"):
        results.append(ChannelResult("semantic", semantic))
    fused = fuse_channels(
        results,
        lambda ids: section_ids(conn, ids),
        hubs,
        lambda sids: section_sizes(conn, sids),
        lambda ids: section_proximity(ctx, ids),
        weight,
        lambda cid: section_coverage(conn, query, cid),
    )
    # a section that matches only by quoting the query in a cross-reference points at the answer
    prior = apply_pointer_prior(conn, query, fused, options.top_k * TIE_WINDOW_PER_HIT)
    fused = _break_ties(conn, prior.ranked, options.top_k)
    hits, sections = _materialise(conn, fused, query, options)
    hub_of = hubs([h.chunk_id for h in hits])  # read in fusion already: a hub answers none
    hits = [replace(h, hub=hub_of[h.chunk_id]) if h.chunk_id in hub_of else h for h in hits]
    return SearchResult(
        query=raw_query,
        mode=options.mode,
        hits=hits,
        sections=sections,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        channels_used=[r.name for r in results if r.ranked],
        top=replace(
            _top_match(prior, ctx.query, hits, sections),
            unit_margin=unit_margin(results),
            unit_rank=_top_unit_rank(conn, results, hits),
        ),
        **ctx.limits(),  # truncated_channels + a warning for each
    )


def _top_unit_rank(
    conn: sqlite3.Connection, results: list[ChannelResult], hits: list[Hit]
) -> int | None:
    """The units channel's rank of the top hit's document, for the confidence band."""
    if not hits:
        return None
    if "units" in hits[0].channels:
        return hits[0].channels["units"].rank
    units = next((r for r in results if r.name == "units"), None)
    return document_rank(conn, units, hits[0].chunk_id)


def _top_match(
    prior: PointerPrior, fitted: Query, hits: list[Hit], sections: dict[int, str]
) -> TopMatch:
    """What the confidence band needs of the top hit beyond its ranks: the share of the
    query's content words in its section (in any form the lexical channels accept: `fitted`
    carries the stems in the index's languages), and how far the section only quotes the query
    in a cross-reference (the prior's weight). A query that names the file ("budget.csv")
    matched its path, not its text: the path counts when the filename channel found the hit."""
    if not hits:
        return TopMatch()
    top = hits[0]
    text = sections.get(top.section_id, top.snippet)
    named = f"{top.path}\n{text}" if "filename" in top.channels else text
    return TopMatch(coverage=coverage(fitted, named), pointer=prior.weight(top.section_id, text))


def _materialise(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    query: Query,
    options: SearchOptions,
) -> tuple[list[Hit], dict[int, str]]:
    """Best chunk per parent section → hits with snippet, location, parent text and the
    matched child (for the answer budget)."""
    hits: list[Hit] = []
    sections: dict[int, str] = {}
    for chunk_id, score, channels in fused:
        if len(hits) >= options.top_k:
            break
        row = conn.execute(
            "SELECT c.id, c.section_id, c.text, c.location, c.ocr, d.path, d.title, d.format, "
            "d.size, d.mtime_ns, d.sha256, s.text AS section_text, "
            "s.location AS section_location "
            "FROM chunks c "
            "JOIN documents d ON d.id = c.document_id JOIN sections s ON s.id = c.section_id "
            "WHERE c.id = ?",
            (chunk_id,),
        ).fetchone()
        if row is None or row["section_id"] in sections:
            continue
        stale = False
        abs_path = ""
        if options.knowledge_dir is not None:
            path = options.knowledge_dir / row["path"]
            abs_path = str(path)
            try:
                st = path.stat()
            except OSError:
                continue  # the file is gone: never return it as current
            stale = st.st_size != row["size"] or st.st_mtime_ns != row["mtime_ns"]
        location = child_location(row["location"], row["section_location"])
        sections[row["section_id"]] = section_text(row["section_text"])
        breadcrumb = " > ".join(p.strip() for p in location.heading_path if p.strip())
        hits.append(
            Hit(
                rank=len(hits) + 1,
                path=row["path"],
                abs_path=abs_path,
                title=row["title"],
                format=row["format"],
                location=location.to_dict(),
                location_label=location.label(),
                snippet=make_snippet(row["text"], list(query.terms)),
                score=score,
                channels=channels,
                section_id=row["section_id"],
                chunk_id=row["id"],
                ocr=bool(row["ocr"]),
                stale=stale,
                child=MatchedChild(row["text"], row["sha256"] or "", breadcrumb),
            )
        )
    return hits, sections
