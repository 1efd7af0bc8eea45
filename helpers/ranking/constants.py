"""Every number that decides a ranking or a confidence band, each with its rule and reason.

rag_search (fusion, priors, ties), helpers.semantic.candidates (how many candidates) and
helpers.ranking.confidence (the band) read them from here. The measurements behind them are in
bench/RESULTS.md: "Hybrid fusion ablation", "Hub pages and the wave-2 fusion ablation",
"Answer confidence" and the section on byte-identical copies of the semantic candidates.
"""

from __future__ import annotations

# -- fusion (rag_search) -------------------------------------------------------------------
# RRF constant (Cormack et al. 2009): 60 keeps a rank-1 hit of one channel from outweighing
# consistent mid-rank agreement of the others.
RRF_K = 60
# Per-channel weights in the fused score (w x coverage / (RRF_K + rank)). A file named in the
# query is the strongest signal a user can give, so the filename channel counts double; words
# and sections read the same word-level evidence (chunk view, section view), so words counts a
# little less.
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
    "units": 1.0,  # unit-level BM25 (helpers.lexical.units; leave-one-set-out, u-lex.md)
    "semantic": 1.0,
}
# Hybrid: per query, the share of lexical evidence in a section's score (the rest is the min-max
# normalised cosine) = BASE + GAIN x (lexical margin - semantic margin), a margin being the gap
# between a side's top two sections on its 0-1 scale: the more decisive side leans the mix.
HYBRID_LEXICAL_BASE = 0.5
HYBRID_MARGIN_GAIN = 0.5
HYBRID_SHARE_BOUNDS = (0.1, 0.9)  # neither side is ever ignored
# Hybrid, semantic side: a section scores its best child's normalised cosine plus this share of
# its next SEMANTIC_CHILD_COUNT children's, so a passage whose several windows match beats one
# whose single window happens to (scaled by the part of the section they are, and by 1 - hub).
SEMANTIC_CHILD_SHARE = 0.05
SEMANTIC_CHILD_COUNT = 2
# Semantic candidates fetched from the query worker, and the distinct child texts of them handed
# to fusion (every byte-identical copy kept: copies share one vector and tie, and counted apart
# they would fill the list and cut how deep it reaches into the folder).
SEMANTIC_DEPTH = 400
SEMANTIC_DISTINCT = 100

# -- priors ------------------------------------------------------------------------------------
# A section's score is multiplied by 1 - HUB_PRIOR x hub (sections.hub, 0-1 from
# helpers.text.hubs) in every mode: a contents page, an index or a list of questions mentions
# every topic and answers none. Below 1, so a hub is lowered, never scored 0: it still ranks
# first when only hubs hold the query's words.
HUB_PRIOR = 0.9
# Candidates per requested hit looked at by the pointer prior and the tie-break (several chunks
# of one section collapse into one hit, so the head must be longer than top_k).
TIE_WINDOW_PER_HIT = 8

# -- confidence (helpers.ranking.confidence; bench/RESULTS.md "Answer confidence") --------------
# A side "agrees" when the top hit is within its first few ranks (chunk ranks inside a channel:
# several chunks of one passage often take the first places).
AGREE_RANK = 3
# Nothing really matched = neither side has evidence. Lexical: under two thirds of the query's
# content words are in the top section. Semantic: the top cosine is under COSINE_MIN or (unless
# it is COSINE_STRONG) stands less than COSINE_GAP_MIN above the median of the other hits. The
# grid point that keeps questions run against another set's documents low while marking the
# fewest correct in-domain answers low (multilingual-e5-small INT8).
COVERAGE_MIN = 2 / 3
COSINE_MIN = 0.84
COSINE_GAP_MIN = 0.02
# A top cosine this high is evidence by itself, whatever the gap: on collections of similar
# documents every hit has a high cosine, so the gap to the median is ~0 even for the right
# answer. Above every top cosine of a question run against another set's documents, with 0.02
# to spare.
COSINE_STRONG = 0.90
# A clear winner: the top fused score at least 25 % above the runner-up's (the signal whose
# best-scored queries have the highest precision@1 on every set; leave-one-set-out picks it).
MARGIN_HIGH = 0.25
# `high` also needs the semantic side to have the top hit within AGREE_RANK when it ran: most
# cross-set queries that reach the margin alone do not.
AGREE_FOR_HIGH = True
# A hub (hub score over 0.5 = over half its text in list entries) mentions every topic and
# answers none: it is never a `high` answer.
HUB_MAX_HIGH = 0.5
# A top section that matches by quoting the query in a cross-reference points at the answer:
# the largest pointer weight (0-1) a `high` top hit may carry; 0 = none.
POINTER_MAX_HIGH = 0.0
# A second route to `high` when both sides put the top hit at their top (semantic within
# AGREE_RANK, lexical within LEXICAL_AGREE_RANK, top cosine >= AGREED_COSINE_MIN): two
# independent sides naming one section is evidence a flat fused margin (converted slides,
# sheets, PDF pages) does not show. The cosine floor keeps agreement on a weak match out; it
# sits between the median top cosine of another set's questions and the in-domain one. Semantic
# and lexical mode never take it (one side only). None: no second route.
MARGIN_AGREED: float | None = 0.15
LEXICAL_AGREE_RANK = 2
AGREED_COSINE_MIN = 0.86
# Studied and off (calibration switches of bench/bench_confidence.py): the margin over the
# first hit of another document instead of the first other text, and agreement by the best
# rank of any hit of the top document.
MARGIN_BY_DOCUMENT = False
AGREE_BY_DOCUMENT = False
# The lexical side alone (lexical mode, or hybrid when the semantic side failed: no cosine):
# nothing else agrees or disagrees, so `high` asks for the fused margin over the first other
# text (by another document: ties on every set), and, when the units channel (whole pages,
# helpers.lexical.units) ran, a margin of its own between its first two documents: the page
# level is sure too. The grid point leave-one-set-out picks over the public and keyword sets
# after the per-query units weight, against the share of `high` before this wave
# (bench/notes/c-lex.md, bench/RESULTS.md "Third product wave, fourth session").
MARGIN_HIGH_LEXICAL = 0.2
MARGIN_BY_DOCUMENT_LEXICAL = False
UNIT_AGREE_LEXICAL = False  # its first document is the top hit's: no gain once units lift fusion
UNIT_MARGIN_LEXICAL = 0.2  # the units channel's margin of its first document over its second
FULL_COVERAGE_LEXICAL = False  # every content word in the top section: adds nothing there
# A second lexical route: a margin of 0.2 over the first other document suffices when the
# runner-up is a passage of the top document (two of its passages lead); None: no such route.
OWN_MARGIN_LEXICAL: float | None = 0.2
# Studied and off: beside the semantic side, when the units channel (whole pages) ran,
# UNIT_AGREE_HYBRID asks that it rank the top hit's document first for any `high` (a page-level
# BM25 that names another document is a disagreement neither side's margin shows);
# UNIT_ROUTE_HYBRID is a route to `high` for a top document it ranks first with (its own margin,
# the fused margin) at least these (None: no such route). The first raises the precision of
# `high` on every keyword set by 0.05-0.11 but cuts its share by ~0.10; no route measured gives
# the share back at that precision (bench/notes/hyb-units.md).
UNIT_AGREE_HYBRID = False
UNIT_ROUTE_HYBRID: tuple[float, float] | None = None

# -- lexical channels, pointer prior, term proximity (helpers.lexical) -------------------------
# Candidates each lexical channel contributes to fusion (helpers.lexical.common and channels).
CHANNEL_DEPTH = 200
# The fused score of a section whose best pointer span matches the query fully is multiplied by
# 1 - POINTER_PRIOR (helpers.lexical.pointers); 0.9 as HUB_PRIOR (a quoted question is an entry
# of a list of questions that happens to sit in prose). bench/RESULTS.md, "Pointer spans".
POINTER_PRIOR = 0.9
# Match (the smaller of the two shares of content words) up to this lowers nothing; from there
# to 1 the factor grows linearly. "Most" both ways, as COVERAGE_MIN: an answer often points at a
# neighbouring question or a chapter elsewhere (`section 5, "Control files and their fields"`
# inside the answer to `What is a Debian control file?`: 2/3 both ways), a pointer section
# quotes the question itself (1.0). A lower floor also lowers answers that point at a neighbour
# (bench/RESULTS.md, "Pointer spans").
MATCH_FLOOR = 2 / 3
# A pointer counts only when it holds at least this many of the query's content words: a quoted
# one-word title is a term, and a page that points at `[graph], page 98` is a page about graphs
# (a back-of-book index lists it). 2 is the smallest title; 3 would miss two-word titles
# (bench/RESULTS.md, "Pointer spans").
MIN_MATCHED_WORDS = 2
# Characters of section text the pointer prior judges per search, best candidates first (each
# section whole; the one that crosses the budget is the last). The span regex is cheap on prose
# but costly on hostile text (runs of `1 [`, `1, “`, `[`: each starts a title scan), and a
# search's window holds up to 400 candidates: the budget bounds the cost, and on the public sets
# every section the prior lowers lies well inside it (bench/RESULTS.md, "Pointer-span budget
# (wave 7)"). Cached texts count too: a ranking never depends on what an earlier search left in
# the cache.
POINTER_SCAN_BUDGET = 32_000
# Term proximity (helpers.lexical.proximity): the window is about a sentence; 10 to 30 words
# rank alike (bench/RESULTS.md, "Term proximity").
PROXIMITY_WINDOW_WORDS = 20
# Sections proximity reads per search, best lexical evidence first: a section is <= 4,000
# characters, so <= 200 KB of text a query; fewer sections rank slightly worse
# (bench/RESULTS.md, "Term proximity").
PROXIMITY_MAX_SECTIONS = 50

# -- units channel in fusion (helpers.lexical.units, rag_search; bench/notes/k-fuse.md) --------
# Chosen leave-one-set-out over every public and keyword set with no set below the rule before
# (weight 1 everywhere). A question keeps that rule on both sides: its answer is the passage
# that answers it, not the document that mentions its words most (the FAQ sets lose otherwise).
# Lexical side alone, when no single chunk holds every content word
# (helpers.lexical.channels.passage_holds_all): the unit's rank counts a little more (RRF
# weight); its score only through the gated lift below: a sum over partial matches favours
# long pages that mention many of the words (man-page descriptions).
UNIT_WEIGHT_SPREAD = 1.5
# Studied and off: its score too, the tail lift (helpers.lexical.units.tail_factors) with this
# LIFT, when the passage fusion puts first holds under UNIT_SPREAD_COVERAGE_BELOW of the
# content words (the passages have not found the query; the page that holds its words in
# title, headings and body is the better evidence). It lifts most keyword sets, but every gate
# measured costs one public set more than leave-one-set-out allows (bench/notes/lex-gap.md).
UNIT_LIFT_SPREAD = 0.0
UNIT_SPREAD_COVERAGE_BELOW = 0.6
# Under that same gate, the units channel's RRF constant instead of RRF_K (its rank 1 worth the
# same): the passage channels cast three correlated votes for the passage that holds most of the
# words, and at RRF_K a page ranked first by units barely beats one ranked tenth. Chosen
# leave-one-set-out over every public and keyword set (bench/notes/k-spread.md).
UNIT_RRF_K_SPREAD = 3
# The tail's scale is the mean excess of the ranked documents' scores over the last: from
# fewer than this many distinct scores it is no estimate (standard error ~ 1/sqrt(n), 32 % at
# 10), and the lift falls back to the relative score (three PDF manuals: bench/notes/lex-gap.md).
UNIT_TAIL_MIN_DOCUMENTS = 10
# ...when a chunk holds them all, several documents usually do and the passage channels can
# hardly tell them apart: the fused score is multiplied by 1 + LIFT x the document's best-unit
# BM25 relative to the best document's (fusion.unit_factors), so a clearly better document
# wins, a close one barely moves (the tail lift does worse here: bench/notes/lex-gap.md).
UNIT_LIFT_TOGETHER = 0.5
# Beside the semantic side the units channel is no channel score but that same bounded factor
# on the lexical evidence (fusion.unit_lift), for every query of 2-6 content words that is not
# a question: one factor per document keeps the order of its chunks, so the lexical margin
# the mix reads (a channel score gave each chunk of the top document full weight and flattened
# it: bench/notes/u-lex.md, "Hybrid"). Leave-one-set-out over ten hybrid sets.
# The factor reads the document's unit score on the tail's scale (UNIT_HYBRID_TAIL;
# helpers.lexical.units.tail_factors: 1 + LIFT for the top document, falling by a factor e per
# tail scale below it) rather than relative to the best document's, which left the first dozen
# documents of a keyword query within a few per cent of each other; leave-one-set-out over the
# hybrid sets picks the tail with LIFT 2 on every fold (the held-out losses and gains are in
# bench/notes/hyb-units.md).
UNIT_HYBRID_LIFT = 2.0
UNIT_HYBRID_TAIL = True
