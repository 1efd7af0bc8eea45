"""Retrieval: independent ranked channels over the index, fused into one ranking.

Channels (each can be switched off for ablation through SearchOptions.channels):
  filename  the query names a file (helpers.lexical.filename)
  words     word-level BM25 with Snowball prefix stems (helpers.lexical.channels)
  sections  parent sections ranked by query-term density (summed chunk scores / chunks)
  bm25      trigram BM25 over title/path/body for Thai words, symbols and substrings
  exact     exact phrase, then all content terms
  short     1-2 character terms (word index, bounded instr() scan, or re-ranking)
  variants  split/joined words: data base <-> database (helpers.lexical.variants)
  fuzzy     OCR misreadings, only inside OCR chunks (helpers.lexical.ocr_fuzzy)
  cjk       Chinese/Japanese/Korean character bigrams, BM25 (helpers.lexical.cjk_pairs)
Lexical channels are fused by RRF; in hybrid mode, lexical evidence and the semantic cosine are
combined per parent section (hybrid_fuse). In every mode, hub sections (contents pages, indexes,
lists of questions or links: sections.hub) are lowered by a bounded prior (HUB_PRIOR). Fusion
is deterministic: fixed constants and weights, ties broken by path, then position in the file.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path

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
from helpers.lexical.pointers import apply_pointer_prior
from helpers.lexical.proximity import scaled_evidence, section_proximity
from helpers.lexical.query_terms import Query
from helpers.lexical.snippet import make_snippet
from helpers.lexical.variants import channel_variants
from helpers.results import ChannelRank, Hit, SearchResult
from helpers.store.codec import child_location, section_text, text_digest

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
    "search",
]

# RRF constant from Cormack et al. (2009); 60 keeps a rank-1 hit of one channel from
# outweighing consistent mid-rank agreement of the others.
RRF_K = 60
# Per-channel weights in the fused score (w * coverage / (RRF_K + rank)). A file named in the
# query is the strongest signal a user can give, so the filename channel counts double. words and
# sections read the same word-level evidence (chunk view, section view); at 0.9 for words neither
# costs any eval set more than 0.002 MRR (grid 0.75-1.0 on debfaq/pyfaq/manru).
CHANNEL_WEIGHTS: dict[str, float] = {
    "filename": 2.0,
    "words": 0.9,
    "sections": 1.0,
    "bm25": 1.0,
    "exact": 1.0,
    "short": 1.0,
    "variants": 1.0,
    "fuzzy": 1.0,
    "cjk": 1.0,
    "semantic": 1.0,  # SearchOptions.semantic, when rag_service supplies it
}

# Hybrid: per query, the share of lexical evidence in a section's score (the rest is the min-max
# normalised cosine) moves with how decisive each side is: share = BASE + GAIN x (lexical margin -
# semantic margin), margins = the gap between a side's top two sections on its 0-1 scale. A
# quotation or a man-page description that one section matches far better than the next leans on
# words; a question whose words are everywhere leans on meaning. From the fusion ablation in
# bench/RESULTS.md: the only setting family that beats both single modes on every monolingual set
# (base 0.45-0.5 x gain 0.5-0.75 all do; no fixed share does since chunk scheme 3).
HYBRID_LEXICAL_BASE = 0.5
HYBRID_MARGIN_GAIN = 0.5
HYBRID_SHARE_BOUNDS = (0.1, 0.9)  # neither side is ever ignored
# Hybrid, semantic side: a section scores its best child's normalised cosine plus this share of
# its next SEMANTIC_CHILD_COUNT children's (_semantic_sections), scaled by the part of the
# section those children are (a nine-window PDF page gets a third) and by 1 - hub. From the
# ablation in bench/RESULTS.md: debfaq-en, udhr-en2th and manru gain, no set or page-level
# half loses (count-blind, the debian-pdf bookmark half lost R@1 0.852 -> 0.845); on the
# lexical side, or at 0.1 and more, it costs the FAQ sets and udhr-en2th.
SEMANTIC_CHILD_SHARE = 0.05
SEMANTIC_CHILD_COUNT = 2
# Semantic candidates handed to fusion: the first 100 distinct child texts of the worker's list
# (rag_semantic_candidates.SEMANTIC_DEPTH = 400 fetched), with every byte-identical copy of them.
# Copies share one vector and tie; counted apart, manru's four-name man pages filled the list four
# times over and cut its reach to ~30 pages (hybrid MRR@10 0.693 -> 0.711, Recall@8 0.921 -> 0.954;
# sets without copies unchanged, bench/RESULTS.md "manru: copies, scales and names"). The list is
# not cut again at the lexical CHANNEL_DEPTH: that would drop copies (0.711 -> 0.703).
SEMANTIC_DISTINCT = 100

# Hub prior: a section's score is multiplied by 1 - HUB_PRIOR x hub (sections.hub, 0-1 from
# helpers.text.hubs) in every mode: the fused RRF score in lexical and semantic mode, each side's
# section score in hybrid (hybrid_fuse). A contents page, an index or a list of questions mentions
# every topic and answers none, so it matches any query; the prior moves it behind sections that
# match about as well, and it still ranks (first, when only hubs hold the query's words). 0.9
# from the ablation in bench/RESULTS.md (1.0 would score a hub 0: no longer a bounded prior).
HUB_PRIOR = 0.9

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
}

TieKey = tuple[str, int, int, int]  # (path, section ordinal, chunk ordinal, chunk id)
# Candidates per requested hit whose ties are broken by path (several chunks of one section
# collapse into one hit, so the head must be longer than top_k).
TIE_WINDOW_PER_HIT = 8


@dataclass
class SearchOptions:
    top_k: int = 8
    filters: Filters = field(default_factory=Filters)
    mode: str = "lexical"
    channels: tuple[str, ...] | None = None  # None = all lexical channels (ablation switch)
    knowledge_dir: Path | None = None  # for the file-system truth check
    # (chunk id, cosine) from the semantic worker (rag_service), best first; fused as the
    # "semantic" channel. mode "semantic" uses it alone, "hybrid" with the lexical channels.
    semantic: list[tuple[int, float]] | None = None


def rrf_fuse(
    results: list[ChannelResult],
    weights: dict[str, float],
    tie_key: Callable[[int], tuple[object, ...]] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """(chunk id, fused score, per-channel rank) sorted by score; ties by `tie_key` (path, then
    position in the file, when search() supplies it), else by chunk id."""
    fused: dict[int, float] = {}
    ranks: dict[int, dict[str, ChannelRank]] = {}
    for result in results:
        weight = weights.get(result.name, 1.0) * result.coverage
        for rank, (chunk_id, score) in enumerate(result.ranked, start=1):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + weight / (RRF_K + rank)
            ranks.setdefault(chunk_id, {})[result.name] = ChannelRank(rank, score)
    order = tie_key or (lambda cid: (cid,))
    return sorted(
        ((cid, score, ranks[cid]) for cid, score in fused.items()),
        key=lambda x: (-round(x[1], 12), order(x[0])),
    )


def fuse_channels(
    results: list[ChannelResult],
    section_of: Callable[[list[int]], dict[int, int]] | None = None,
    hubs_of: Callable[[list[int]], dict[int, float]] | None = None,
    sizes_of: Callable[[list[int]], dict[int, int]] | None = None,
    proximity_of: Callable[[list[int]], dict[int, float]] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Lexical channels alone (or the semantic one alone): RRF, then the hub prior. With both:
    hybrid_fuse (needs `section_of`, chunk id -> parent section id). `hubs_of` maps chunk ids
    to their section's hub score (none: no prior); `proximity_of` maps chunk ids (best lexical
    evidence first) to their section's term-proximity share (helpers.lexical.proximity; hybrid
    only, none: unscaled)."""
    semantic = [r for r in results if r.name == "semantic"]
    lexical = [r for r in results if r.name != "semantic"]
    if not (semantic and lexical and section_of is not None):
        fused = rrf_fuse(results, CHANNEL_WEIGHTS)
        if hubs_of is None:
            return fused
        return apply_hub_prior(fused, hubs_of([cid for cid, _, _ in fused]))
    return hybrid_fuse(lexical, semantic[0], section_of, hubs_of, sizes_of, proximity_of)


def lexical_evidence(lexical: list[ChannelResult]) -> dict[int, float]:
    """Per chunk: the weighted sum of each channel's score relative to that channel's best,
    scaled so the best chunk has 1.0.

    Unlike RRF ranks, this keeps how far ahead a hit is: a Thai quotation whose BM25 score is
    2.5x the runner-up's must not tie with it when the cosines are close.
    """
    evidence: dict[int, float] = {}
    for result in lexical:
        top = max((score for _, score in result.ranked), default=0.0)
        if top <= 0:
            continue
        weight = CHANNEL_WEIGHTS.get(result.name, 1.0) * result.coverage
        for chunk_id, score in result.ranked:
            evidence[chunk_id] = evidence.get(chunk_id, 0.0) + weight * max(score, 0.0) / top
    best = max(evidence.values(), default=0.0)
    return {cid: value / best for cid, value in evidence.items()} if best > 0 else {}


def hybrid_fuse(
    lexical: list[ChannelResult],
    semantic: ChannelResult,
    section_of: Callable[[list[int]], dict[int, int]],
    hubs_of: Callable[[list[int]], dict[int, float]] | None = None,
    sizes_of: Callable[[list[int]], dict[int, int]] | None = None,
    proximity_of: Callable[[list[int]], dict[int, float]] | None = None,
) -> list[tuple[int, float, dict[str, ChannelRank]]]:
    """Convex combination per parent section of lexical evidence and normalised cosine, with
    the lexical share chosen per query (hybrid_share).

    Fusing per section, not per chunk, lets the two sides agree when they picked different
    chunks of the same passage (at chunk level that agreement was lost and hybrid fell below
    semantic alone on the FAQ sets). Each side keeps its best chunk per section; the section is
    represented by the lexical chunk when there is one (its snippet shows the query words).
    The hub prior lowers hub sections on each side before the mix, and each side is scaled
    back to a best of 1: a hub falls behind sections that match about as well on that side,
    but when only hubs hold the query's words it keeps the full lexical weight.
    """
    lex_ranked = rrf_fuse(lexical, CHANNEL_WEIGHTS)
    evidence = lexical_evidence(lexical)
    if proximity_of is not None:  # words that stand together (helpers.lexical.proximity)
        ordered = sorted(evidence, key=lambda cid: (-evidence[cid], cid))
        evidence = scaled_evidence(evidence, proximity_of(ordered))
    sections = section_of([cid for cid, _, _ in lex_ranked] + [cid for cid, _ in semantic.ranked])
    chosen: dict[int, int] = {}  # section -> representative chunk
    ranks: dict[int, dict[str, ChannelRank]] = {}
    lexical_best: dict[int, float] = {}
    for cid, _score, channel_ranks in lex_ranked:
        section = sections.get(cid)
        value = evidence.get(cid, 0.0)
        if section is None or value <= lexical_best.get(section, -1.0):
            continue
        lexical_best[section] = value
        chosen[section] = cid
        ranks[section] = dict(channel_ranks)
    cosines: dict[int, list[float]] = {}  # section -> its candidate children's cosines, best first
    for rank, (cid, cosine) in enumerate(semantic.ranked, start=1):
        section = sections.get(cid)
        if section is None:
            continue
        if section not in cosines:  # ranked best first: the section's best chunk comes first
            chosen.setdefault(section, cid)
            ranks.setdefault(section, {})["semantic"] = ChannelRank(rank, cosine)
        cosines.setdefault(section, []).append(cosine)
    section_hub: dict[int, float] = {}
    if hubs_of is not None:
        hubs = hubs_of(list(chosen.values()))
        section_hub = {sec: hubs.get(cid, 0.0) for sec, cid in chosen.items()}
    sizes = (
        sizes_of([sec for sec, values in cosines.items() if len(values) > 1]) if sizes_of else {}
    )
    cosine_best = _semantic_sections(cosines, section_hub, sizes)
    if hubs_of is not None:
        lexical_best = _lowered_side(lexical_best, section_hub)
        cosine_best = _lowered_side(cosine_best, section_hub)
    share = hybrid_share(list(lexical_best.values()), list(cosine_best.values()))
    combined = {sec: share * value for sec, value in lexical_best.items()}
    for sec, value in cosine_best.items():
        combined[sec] = combined.get(sec, 0.0) + (1 - share) * value
    return sorted(
        ((chosen[sec], score, ranks[sec]) for sec, score in combined.items()),
        key=lambda x: (-round(x[1], 12), x[0]),
    )


def _semantic_sections(
    cosines: dict[int, list[float]],
    hubs: dict[int, float] | None = None,
    sizes: dict[int, int] | None = None,
) -> dict[int, float]:
    """Per section: its best child's min-max normalised cosine plus SEMANTIC_CHILD_SHARE x its
    next SEMANTIC_CHILD_COUNT children's, scaled back to a best of 1. A passage whose several
    windows all match the query beats one whose single window happens to (a short generic
    article next to the long one that answers, udhr-en2th). `sizes` (children per section)
    make it the share of the section that matches, not a count that favours long pages; a hub's
    share shrinks with its hub score: many matching windows are what a contents page is."""
    hubs, sizes = hubs or {}, sizes or {}
    if not cosines:
        return {}
    best = [values[0] for values in cosines.values()]
    high, low = max(best), min(best)
    spread = (high - low) or 1.0
    scores = {}
    for sec, values in cosines.items():
        normed = [max(c - low, 0.0) / spread for c in values[: 1 + SEMANTIC_CHILD_COUNT]]
        share = SEMANTIC_CHILD_SHARE * (1.0 - hubs.get(sec, 0.0))
        size = sizes.get(sec, 0)
        if size > 1 + SEMANTIC_CHILD_COUNT:  # the share of its windows that match, not their count
            share *= (1 + SEMANTIC_CHILD_COUNT) / size
        scores[sec] = normed[0] + share * sum(normed[1:])
    top = max(scores.values()) or 1.0
    return {sec: value / top for sec, value in scores.items()}


def _lowered_side(scores: dict[int, float], hubs: dict[int, float]) -> dict[int, float]:
    """One side's 0-1 section scores with the hub prior applied, rescaled to a best of 1."""
    lowered = {sec: v * (1.0 - HUB_PRIOR * hubs.get(sec, 0.0)) for sec, v in scores.items()}
    best = max(lowered.values(), default=0.0)
    return {sec: v / best for sec, v in lowered.items()} if best > 0 else lowered


def hybrid_share(lexical: list[float], semantic: list[float]) -> float:
    """Lexical share for one query from each side's 0-1 section scores: the more decisive
    side (larger gap between its top two) gets more weight."""

    def margin(values: list[float]) -> float:
        top = sorted(values, reverse=True)[:2]
        return top[0] - top[1] if len(top) == 2 else float(bool(top))

    share = HYBRID_LEXICAL_BASE + HYBRID_MARGIN_GAIN * (margin(lexical) - margin(semantic))
    low, high = HYBRID_SHARE_BOUNDS
    return min(high, max(low, share))


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
    found: dict[int, float] = {}
    for start in range(0, len(chunk_ids), 500):
        batch = chunk_ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        try:
            rows = conn.execute(
                "SELECT c.id, s.hub FROM chunks c JOIN sections s ON s.id = c.section_id "
                f"WHERE c.id IN ({marks}) AND s.hub > 0",
                batch,
            ).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such column" in str(exc):
                return {}
            raise
        found.update((row[0], row[1]) for row in rows)
    return found


def section_sizes(conn: sqlite3.Connection, section_ids: list[int]) -> dict[int, int]:
    """Section id -> its number of children (chunks_section index: ~0.1 ms for 100 sections)."""
    found: dict[int, int] = {}
    for start in range(0, len(section_ids), 500):
        batch = section_ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        found.update(
            conn.execute(
                f"SELECT section_id, COUNT(*) FROM chunks WHERE section_id IN ({marks}) "
                "GROUP BY section_id",
                batch,
            ).fetchall()
        )
    return found


def _tie_keys(conn: sqlite3.Connection, ids: list[int]) -> dict[int, TieKey]:
    keys: dict[int, TieKey] = {}
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        for row in conn.execute(
            "SELECT c.id, d.path, s.ordinal, c.ordinal FROM chunks c "
            "JOIN documents d ON d.id = c.document_id JOIN sections s ON s.id = c.section_id "
            f"WHERE c.id IN ({marks})",
            batch,
        ):
            keys[row[0]] = (row[1], row[2], row[3], row[0])
    return keys


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
    without this they fill the candidate list four times over, so the list reaches a quarter
    as deep into the folder (and its cosine floor, the scale's 0, sits that much higher)."""
    if len(hits) <= limit:
        return hits
    digests: dict[int, bytes] = {}
    ids = [cid for cid, _ in hits]
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        marks = ",".join("?" * len(batch))
        rows = conn.execute(f"SELECT id, text FROM chunks WHERE id IN ({marks})", batch)
        digests.update((cid, text_digest(text)) for cid, text in rows)
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
    (corrected whenever the best cosine is weak, it cost debfaq-en Recall@8 and the debian-pdf
    page level: bench/RESULTS.md, "Hubness correction")."""
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
    started = time.perf_counter()
    query = Query.parse(raw_query)
    ctx = SearchContext(conn, query, options.filters)
    names = options.channels or tuple(LEXICAL_CHANNELS)
    if options.mode == "semantic" and options.semantic is not None:
        names = ()
    results = [LEXICAL_CHANNELS[name](ctx) for name in names]
    if options.semantic is not None and options.mode in ("hybrid", "semantic"):
        semantic = distinct_candidates(conn, options.semantic, SEMANTIC_DISTINCT)
        if options.mode == "hybrid" and not any(r.ranked for r in results):
            semantic = _hubness_corrected(conn, semantic)
        results.append(ChannelResult("semantic", semantic))
    fused = fuse_channels(
        results,
        lambda ids: section_ids(conn, ids),
        lambda ids: chunk_hubs(conn, ids),
        lambda sids: section_sizes(conn, sids),
        lambda ids: section_proximity(ctx, ids),
    )
    # a section that matches only by quoting the query in a cross-reference points at the answer
    fused = apply_pointer_prior(conn, query, fused, options.top_k * TIE_WINDOW_PER_HIT)
    fused = _break_ties(conn, fused, options.top_k)
    hits, sections = _materialise(conn, fused, query, options)
    return SearchResult(
        query=raw_query,
        mode=options.mode,
        hits=hits,
        sections=sections,
        elapsed_ms=(time.perf_counter() - started) * 1000,
        channels_used=[r.name for r in results if r.ranked],
    )


def _materialise(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float, dict[str, ChannelRank]]],
    query: Query,
    options: SearchOptions,
) -> tuple[list[Hit], dict[int, str]]:
    """Best chunk per parent section → hits with snippet, location and parent text."""
    hits: list[Hit] = []
    sections: dict[int, str] = {}
    for chunk_id, score, channels in fused:
        if len(hits) >= options.top_k:
            break
        row = conn.execute(
            "SELECT c.id, c.section_id, c.text, c.location, c.ocr, d.path, d.title, d.format, "
            "d.size, d.mtime_ns, s.text AS section_text, s.location AS section_location "
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
            )
        )
    hubs = chunk_hubs(conn, [h.chunk_id for h in hits])  # for rag_confidence: a hub answers none
    hits = [replace(h, hub=hubs[h.chunk_id]) if h.chunk_id in hubs else h for h in hits]
    return hits, sections
