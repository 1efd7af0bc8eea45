"""Every tool argument's bounds, defined once: the MCP tools' `Field(...)` annotations
(rag_server) and the service's checks (rag_service) both read them, so the schema an agent sees
and the error it gets can never disagree."""

from __future__ import annotations

QUERY_MAX_CHARS = 1000  # longer "queries" are documents pasted by mistake
TOP_K_MIN, TOP_K_MAX = 1, 50  # more than 50 hits floods an agent's context for no gain
TOP_K_DEFAULT = 8  # suits most questions
# rag_search's response budget (characters of the serialised structured content): eight hits
# with their matched passages verbatim plus per-hit metadata (bench/bench_answer_size.py).
ANSWER_MAX_CHARS_DEFAULT = 8_000
ANSWER_MAX_CHARS_CAP = 60_000  # fifteen whole 4,000-character sections: still one tool call
ANSWER_MAX_CHARS_MIN = 1_000  # below this not even one hit with its citation fits
NEIGHBOURS_MAX = 20  # rag_read's sections before/after a hit: more is a whole-document read
NEIGHBOURS_DEFAULT = 1
LIST_LIMIT_MIN, LIST_LIMIT_MAX = 1, 1000  # one rag_list page
LIST_LIMIT_DEFAULT = 100
OFFSET_MAX = 10**9  # far past any real folder; keeps SQLite's INTEGER from overflowing
WAIT_SECONDS_MAX = 30.0  # a sync_status wait stays under clients' usual 60 s request timeout
