"""The units channel: BM25 over whole retrieval units (a page of a paged file, else a document;
migration 11, helpers.store.units), as evidence for the chunks the other channels found.

A keyword query's terms are spread over a page's title, headings and body, so no single chunk
holds them all and passage-level channels lose to whole-document BM25 (bench/notes/u-lex.md).
Here the query is the OR of its tokens (helpers.text.unit_tokens: Snowball stems in the
languages of the index's units, CJK bigrams, Thai words) over units_fts, ranked by FTS5's bm25()
(Robertson-Walker Okapi BM25, k1 = 1.2, b = 0.75); a word the units hold in several forms
(stemmed in their different languages) is one term over all of them
(helpers.lexical.unit_words). The ranked units do not compete as hits of their own: each unit's
rank goes to every chunk of it that another channel found (one rank per unit), so a chunk with
passage-level and unit-level evidence wins; a unit no other channel reached is represented by
its first chunk.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from helpers.lexical import unit_words
from helpers.lexical.channels import passage_holds_all
from helpers.lexical.common import ChannelResult, SearchContext, fts_phrase
from helpers.lexical.index_terms import LANGUAGE_MIN_SHARE
from helpers.lexical.query_terms import Query
from helpers.ranking import fusion
from helpers.ranking.confidence import coverage
from helpers.ranking.constants import (
    CHANNEL_WEIGHTS,
    UNIT_HYBRID_LIFT,
    UNIT_HYBRID_TAIL,
    UNIT_LIFT_SPREAD,
    UNIT_LIFT_TOGETHER,
    UNIT_RRF_K_SPREAD,
    UNIT_SPREAD_COVERAGE_BELOW,
    UNIT_TAIL_MIN_DOCUMENTS,
    UNIT_WEIGHT_SPREAD,
)
from helpers.store.backfill import units_rebuild_pending
from helpers.store.batched import rows_in
from helpers.store.codec import section_text
from helpers.store.units import unit_languages
from helpers.text import cjk
from helpers.text.unit_tokens import unit_tokens

# Units ranked per query: as deep as a channel's chunk list goes in practice (a keyword query's
# answer page is in the first few dozen units whenever BM25 finds it at all).
UNIT_DEPTH = 100
# The distinct content words of a query the channel runs for (an identifier's parts count
# apart). From 2: what a unit adds over a passage is several query words found together in it;
# for one word it only ranks units by that word's frequency and their length, which the passage
# channels already weigh. Up to 6: a longer query is a description or a question whose words
# stand together in the passage that answers it, and summing them over whole documents favours
# long documents that mention many of them (man-page descriptions, articles quoted whole).
# Both bounds, like the channel weight, chosen by leave-one-set-out over the public
# sets (bench/notes/u-lex.md).
UNIT_MIN_TERMS = 2
UNIT_MAX_TERMS = 6
# Characters of a CJK run that count as one word for those bounds: the bigram, the unit the
# CJK channels match, and about a word's length in Chinese, Japanese and Korean.
CJK_WORD_CHARS = 2


@dataclass(frozen=True)
class UnitWeight:
    """How much the units channel counts for one query: its RRF weight and its lift of the
    fused score (unit_factors) when the lexical side is alone, its lift of the lexical evidence
    beside the semantic side (fusion.unit_lift). `cover_below`: the lift applies only when the
    first passage holds under that share of the query's content words (None: always); `tail`:
    the lift reads the unit score on the tail's scale (tail_factors), else relative to the best
    (fusion.unit_factors); `spread_k`: the channel's RRF constant when the first passage holds
    under `cover_below` of the content words (None: RRF_K), so the pages it ranks first stand
    out from the passage channels' correlated votes (bench/notes/k-spread.md); `hybrid_tail`:
    the hybrid lift reads the unit score on the tail's scale too."""

    rrf: float
    lift: float
    hybrid_lift: float
    cover_below: float | None = None
    tail: bool = False
    spread_k: float | None = None
    hybrid_tail: bool = False


_LANGUAGES: dict[tuple[str, int], tuple[str, ...]] = {}
_CACHE_LOCK = threading.Lock()


def unit_match(
    query: Query, languages: tuple[str, ...], units_holding: Callable[[str], int]
) -> str:
    """The FTS5 query over units_fts: the OR of the query's distinct tokens, each word by the
    form most units hold (unit_words.query_words; ranked_units searches a word several units
    hold in several forms by unit_words instead)."""
    words = unit_words.query_words(_per_language(query, languages), units_holding)
    forms = (max(word.forms, key=lambda form: form[1])[0] for word in words)
    return " OR ".join(dict.fromkeys(fts_phrase(form) for form in forms))


def _per_language(query: Query, languages: tuple[str, ...]) -> list[list[str]]:
    """The query's tokens as the units are tokenised in each of `languages`, its stop words left
    out (unless it has only those: a unit that holds none of its content words is no evidence,
    and the lift would bring it in). Each word is then searched by every form units hold
    (unit_words): the form of the main language left unstemmed in pages identified as another
    is another term there."""
    stops = frozenset(g.text for g in query.groups if g.stop and g not in query.content)
    return [unit_tokens(query.raw, lang, stops) for lang in languages or ("",)]


def _units_holding(conn: sqlite3.Connection) -> Callable[[str], int]:
    def count(token: str) -> int:
        row = conn.execute("SELECT doc FROM units_vocab WHERE term = ?", (token,)).fetchone()
        return int(row[0]) if row else 0

    return count


def content_tokens(query: Query) -> set[str]:
    """The distinct unstemmed tokens of the query's content words (an identifier's parts apart)."""
    return {token for group in query.content for token in unit_tokens(group.text, "")}


def index_languages(conn: sqlite3.Connection) -> tuple[str, ...]:
    """The stemming languages of at least LANGUAGE_MIN_SHARE of the index's units (the most
    common one when none is), cached per database file and newest unit id (every sync that
    writes a unit changes the key). A language of a few units only (an identifier's slip on a
    short page) would add query forms that only those units hold: rare forms, so high IDF, and
    those units would win (bench/notes/u-lex.md, "Query languages")."""
    try:
        high = conn.execute("SELECT MAX(id) FROM units").fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return ()
        raise
    path = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    key = (path or f"memory:{id(conn)}", int(high or 0))
    with _CACHE_LOCK:
        if key in _LANGUAGES:
            return _LANGUAGES[key]
    counts = unit_languages(conn)
    total = sum(n for _, n in counts)
    languages = tuple(lang for lang, n in counts if n >= LANGUAGE_MIN_SHARE * total)
    languages = languages or tuple(lang for lang, _ in counts[:1])
    with _CACHE_LOCK:
        _LANGUAGES[key] = languages
    return languages


def ranked_units(ctx: SearchContext, depth: int = UNIT_DEPTH) -> list[tuple[int, int, float]]:
    """(unit id, document id, -bm25) best first, ties by unit id, with the search filters
    applied; none on an index without units (schema older than 11, opened read-only) or while
    they are being rebuilt (only some documents have units then)."""
    if units_rebuild_pending(ctx.conn):
        return []
    try:
        words = unit_words.query_words(
            _per_language(ctx.query, index_languages(ctx.conn)), _units_holding(ctx.conn)
        )
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    if not words:
        return []
    where, params = ctx.filters.sql()
    if any(len(word.forms) > 1 for word in words):
        return unit_words.ranked_by_words(ctx.conn, words, (where, params), depth)
    match = " OR ".join(dict.fromkeys(fts_phrase(word.forms[0][0]) for word in words))
    sql = (
        "SELECT f.rowid, u.document_id, f.rank FROM units_fts f JOIN units u ON u.id = f.rowid "
        f"JOIN documents d ON d.id = u.document_id WHERE units_fts MATCH ? AND {where} "
        "ORDER BY f.rank, f.rowid LIMIT ?"
    )
    try:
        rows = ctx.conn.execute(sql, [match, *params, depth]).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [(row[0], row[1], -row[2]) for row in rows]


def documents_of(conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, int]:
    """Chunk id -> its document."""
    sql = "SELECT id, document_id FROM chunks WHERE id IN ({marks})"
    return {row[0]: row[1] for row in rows_in(conn, sql, chunk_ids)}


def first_chunks(conn: sqlite3.Connection, unit_ids: list[int]) -> dict[int, int]:
    """Unit id -> its first chunk (section order, then chunk order)."""
    sql = (
        "SELECT u.id, (SELECT c.id FROM sections s JOIN chunks c ON c.section_id = s.id "
        "WHERE s.document_id = u.document_id AND s.ordinal >= u.first_ordinal "
        "AND s.ordinal <= u.last_ordinal ORDER BY s.ordinal, c.ordinal LIMIT 1) "
        "FROM units u WHERE u.id IN ({marks})"
    )
    return {row[0]: row[1] for row in rows_in(conn, sql, unit_ids) if row[1] is not None}


def unit_counts(conn: sqlite3.Connection, doc_ids: list[int]) -> dict[int, int]:
    """Document id -> its number of units."""
    sql = "SELECT document_id, COUNT(*) FROM units WHERE document_id IN ({marks}) GROUP BY 1"
    return {row[0]: row[1] for row in rows_in(conn, sql, doc_ids)}


def corrected_maxp(
    conn: sqlite3.Connection, best: dict[int, tuple[int, float]], scores: list[float]
) -> dict[int, tuple[int, float]]:
    """`best` (document -> its best unit and score) with each score lowered by what a maximum
    over the document's m units gains by chance, re-ordered: the expected maximum of m draws
    from an exponential tail of scale s exceeds one draw by s x (H_m - 1) (H_m the harmonic
    number). The tail's scale is the ranked units' mean excess over the last of them (the
    exponential is memoryless, so the excess over any cut has the same scale). Without it a
    manual of 500 outline entries outranks one of 27 on the luck of its best entry."""
    if len(best) < 2 or len(scores) < 2:
        return best
    counts = unit_counts(conn, list(best))
    if all(counts.get(doc, 1) <= 1 for doc in best):
        return best
    scale = sum(scores) / len(scores) - min(scores)
    lowered = {
        doc: (unit, score - scale * sum(1.0 / i for i in range(2, counts.get(doc, 1) + 1)))
        for doc, (unit, score) in best.items()
    }
    return dict(sorted(lowered.items(), key=lambda item: (-item[1][1], item[1][0])))


def channel_units(ctx: SearchContext, found: Iterable[int] = ()) -> ChannelResult:
    """The ranked units' evidence on chunks, by document: documents in the order of their best
    unit (BM25 of the best passage as the document's score, "MaxP": Dai & Callan, SIGIR 2019),
    every chunk of `found` (the other channels' candidates) in such a document at its rank; a
    ranked document with none of them, the first chunk of its best unit. Without `found` (the
    channel alone) one chunk per document. Inside a document the other channels decide: a
    manual's pages are cut where its pages end, not where its topics do, and page-level BM25
    ranked them worse than passages do (bench/notes/u-lex.md, "PDF manuals")."""
    if not UNIT_MIN_TERMS <= query_terms(ctx.query) <= UNIT_MAX_TERMS:
        return ChannelResult("units", [])
    units = ranked_units(ctx)
    if not units:
        return ChannelResult("units", [])
    best: dict[int, tuple[int, float]] = {}  # document -> (its best unit, that unit's score)
    for unit_id, doc_id, score in units:
        best.setdefault(doc_id, (unit_id, score))
    best = corrected_maxp(ctx.conn, best, [score for _, _, score in units])
    by_doc: dict[int, list[int]] = {}
    for chunk_id, doc_id in documents_of(ctx.conn, list(dict.fromkeys(found))).items():
        if doc_id in best:
            by_doc.setdefault(doc_id, []).append(chunk_id)
    missing = {best[doc][0]: doc for doc in best if doc not in by_doc}
    for unit_id, chunk_id in first_chunks(ctx.conn, list(missing)).items():
        by_doc[missing[unit_id]] = [chunk_id]
    ranked: list[tuple[int, float]] = []
    ranks: list[int] = []
    for rank, (doc_id, (_, score)) in enumerate(best.items(), start=1):
        for chunk_id in sorted(by_doc.get(doc_id, ())):
            ranked.append((chunk_id, score))
            ranks.append(rank)
    return ChannelResult("units", ranked, ranks=tuple(ranks))


def document_rank(
    conn: sqlite3.Connection, units: ChannelResult | None, chunk_id: int
) -> int | None:
    """The units channel's rank of the document of `chunk_id` (None: the channel did not rank
    it). Beside the semantic side the top hit may be a passage no lexical channel found, so
    the channel holds other chunks of its document, or none."""
    if units is None or not units.ranked:
        return None
    ranks = units.ranks or tuple(range(1, len(units.ranked) + 1))
    by_chunk = dict(zip((cid for cid, _ in units.ranked), ranks, strict=True))
    if chunk_id in by_chunk:
        return by_chunk[chunk_id]
    documents = documents_of(conn, [chunk_id, *by_chunk])
    wanted = documents.get(chunk_id)
    found = [by_chunk[cid] for cid, doc in documents.items() if cid != chunk_id and doc == wanted]
    return min(found) if wanted is not None and found else None


def unit_weight(ctx: SearchContext, beside_semantic: bool = False) -> UnitWeight:
    """The units channel's weight for this query (bench/notes/k-fuse.md, lex-gap.md): a question
    keeps the plain channel (its answer is a passage); otherwise, beside the semantic side, the
    lift (hybrid fusion reads nothing else, so no probe runs); with the lexical side alone, a
    lift by the document's unit score relative to the best when a chunk holds every content
    word; when none does, a higher rank weight and the tail lift (tail_factors), only when the
    first passage holds few of the words (cover_below)."""
    plain = CHANNEL_WEIGHTS["units"]
    if ctx.query.question:
        return UnitWeight(plain, 0.0, 0.0)
    if beside_semantic:
        return UnitWeight(plain, 0.0, UNIT_HYBRID_LIFT, hybrid_tail=UNIT_HYBRID_TAIL)
    if passage_holds_all(ctx):
        return UnitWeight(plain, UNIT_LIFT_TOGETHER, UNIT_HYBRID_LIFT)
    return UnitWeight(
        UNIT_WEIGHT_SPREAD,
        UNIT_LIFT_SPREAD,
        UNIT_HYBRID_LIFT,
        UNIT_SPREAD_COVERAGE_BELOW,
        True,
        UNIT_RRF_K_SPREAD,
    )


def tail_factors(units: ChannelResult, lift: float) -> dict[int, float]:
    """Chunk -> 1 + lift x exp(-(top - s) / scale), s its document's unit score, top the best
    document's, scale the tail scale of the ranked documents' scores (their mean excess over
    the last, as in corrected_maxp): under that exponential tail, the ratio of the likelihood of
    the document's score to the top's. 1 + lift for the top document, falling by a factor e for
    each tail scale below it. The score relative to the best (fusion.unit_factors) depends on
    the scores' magnitude, which grows with the query's words and their IDF: the first dozen
    documents of a keyword query are within 10-20 % of the best, and that lift barely moved
    them (bench/notes/lex-gap.md). One factor per document: its chunks keep their order.
    Under UNIT_TAIL_MIN_DOCUMENTS distinct scores the tail's scale is no estimate (a folder of
    three PDF manuals ranks three): the relative score then (fusion.unit_factors)."""
    scores = list(dict.fromkeys(score for _, score in units.ranked))
    if lift <= 0 or len(scores) < 2:
        return {}
    if len(scores) < UNIT_TAIL_MIN_DOCUMENTS:
        return fusion.unit_factors(units, lift)
    top = max(scores)
    scale = sum(scores) / len(scores) - min(scores)
    if scale <= 0:
        return {}
    return {cid: 1.0 + lift * math.exp(-(top - s) / scale) for cid, s in units.ranked}


def query_terms(query: Query) -> int:
    """The number of distinct content words the units gate counts: an identifier's parts apart,
    a run of Chinese, Japanese or Korean characters one word per CJK_WORD_CHARS of it. Its
    overlapping bigrams are no words: a run of n characters has n - 1 of them, so a two-word
    Korean index term (`데이터베이스 가져오기`) counted 8 and was gated out like a description."""
    words = {t for g in query.content if g.kind != "cjk" for t in unit_tokens(g.text, "")}
    runs = {g.text for g in query.content if g.kind == "cjk"}
    return len(words) + sum(_cjk_words(run) for run in runs)


def _cjk_words(run: str) -> int:
    """The words of a run of CJK characters: Korean writes a space between words, so a run of
    Hangul is one word with its particles (`데이터베이스`); Chinese and Japanese write none, so
    one word per CJK_WORD_CHARS characters."""
    if cjk.is_hangul(run):
        return 1
    return -(-len(run) // CJK_WORD_CHARS)


def unit_factors(weight: UnitWeight, units: ChannelResult) -> dict[int, float]:
    """Chunk -> its lift factor on the lexical side alone: on the tail's scale or relative to
    the best document, as `weight` says."""
    if weight.tail:
        return tail_factors(units, weight.lift)
    return fusion.unit_factors(units, weight.lift)


def lift_applies(
    weight: UnitWeight,
    first_shown: Callable[[], int | None],
    covered_of: Callable[[int], float] | None,
) -> bool:
    """Whether the lift of `weight` applies: a lift, and when it is gated (cover_below), a
    first passage (`first_shown`: the chunk the ranking would show first, after the hub prior)
    whose section holds under that share of the query's content words (`covered_of`)."""
    return weight.lift > 0 and first_passage_weak(weight, first_shown, covered_of)


def first_passage_weak(
    weight: UnitWeight,
    first_shown: Callable[[], int | None],
    covered_of: Callable[[int], float] | None,
) -> bool:
    """Whether the passages have not found the query: no gate (cover_below None), or the first
    passage's section (`first_shown`, `covered_of`) holds under cover_below of its content
    words."""
    if weight.cover_below is None or covered_of is None:
        return True
    first = first_shown()
    return first is None or covered_of(first) < weight.cover_below


def section_coverage(conn: sqlite3.Connection, query: Query, chunk_id: int) -> float:
    """The share of the query's content words in the chunk's section (confidence.coverage: any
    form the lexical channels accept)."""
    row = conn.execute(
        "SELECT s.text FROM chunks c JOIN sections s ON s.id = c.section_id WHERE c.id = ?",
        (chunk_id,),
    ).fetchone()
    return coverage(query, section_text(row[0])) if row is not None else 0.0
