"""The schema in one place: numbered migrations, each its SQL and the backfills it needs.

A step's SQL is idempotent (IF NOT EXISTS, INSERT OR IGNORE) where SQLite allows; index_db.migrate
applies each newer step in one transaction and re-reads the version under the lock, because
ALTER TABLE is not. `backfill` runs in that transaction (what SQL cannot compute); `resumable`
are the long rewrites left to run batch by batch after it (helpers.store.backfill). A new
migration is one more SQL string and one more line in MIGRATIONS.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from helpers.store.backfill import (
    COMPACT_CHUNKS,
    COMPACT_SECTIONS,
    FOLD_CHUNKS,
    TRIGRAM_REBUILD,
    UNITS_REBUILD,
    Resumable,
    backfill_cjk,
    backfill_hubs,
)
from helpers.store.units import start_rebuild


@dataclass(frozen=True)
class Migration:
    """One numbered step of the schema."""

    version: int
    sql: str
    backfill: Callable[[sqlite3.Connection], None] | None = None
    resumable: tuple[Resumable, ...] = ()


_BASE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,          -- relative to the knowledge dir, '/'-separated
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    format TEXT NOT NULL,               -- file suffix without the dot, e.g. 'pdf'
    title TEXT NOT NULL,
    status TEXT NOT NULL,               -- indexed | failed | needs_ocr
    error TEXT,                         -- reason when failed (with hint)
    chunk_scheme INTEGER NOT NULL,      -- chunking version that produced the rows
    ocr_engine TEXT,
    ocr_pages TEXT,                     -- JSON list of OCRed page numbers
    needs_ocr_pages TEXT,               -- JSON list of pages without text and without OCR
    section_count INTEGER NOT NULL DEFAULT 0,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    indexed_at REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS sections (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    location TEXT NOT NULL              -- JSON of helpers.extract.blocks.Location
);
CREATE INDEX IF NOT EXISTS sections_document ON sections(document_id, ordinal);

CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    section_id INTEGER NOT NULL REFERENCES sections(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,                 -- breadcrumb + content, as embedded and shown
    norm TEXT NOT NULL,                 -- helpers.text.normalize.fold(text): short-query scans
    text_hash TEXT NOT NULL,            -- sha256 of text: semantic vectors are reused by it
    location TEXT NOT NULL,
    ocr INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS chunks_document ON chunks(document_id, ordinal);
CREATE INDEX IF NOT EXISTS chunks_section ON chunks(section_id);

-- Folded title/path/body; rowid = chunks.id. A plain (not contentless) table, because SQLite
-- 3.40 cannot delete rows from a contentless one.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, path, body, tokenize = 'trigram case_sensitive 0'
);

CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,                -- queued|running|cancelling|cancelled|succeeded|failed
    phase TEXT NOT NULL,                -- prepare|files|cleanup|semantic|done
    scope TEXT NOT NULL DEFAULT '',     -- sub-folder the job covers ('' = whole knowledge dir)
    pid INTEGER,
    heartbeat REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    total_files INTEGER NOT NULL DEFAULT 0,
    completed_files INTEGER NOT NULL DEFAULT 0,
    total_bytes INTEGER NOT NULL DEFAULT 0,
    done_bytes INTEGER NOT NULL DEFAULT 0,
    current_file TEXT,
    added INTEGER NOT NULL DEFAULT 0,
    updated INTEGER NOT NULL DEFAULT 0,
    unchanged INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    semantic_done INTEGER NOT NULL DEFAULT 0,
    semantic_total INTEGER NOT NULL DEFAULT 0,
    message TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    updated_at REAL NOT NULL,
    finished_at REAL
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at);

CREATE TABLE IF NOT EXISTS job_errors (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_errors_job ON job_errors(job_id);

-- Semantic vectors: one generation per (model fingerprint, build); search reads the newest
-- generation with ready = 1, so a failed or cancelled build is never seen.
CREATE TABLE IF NOT EXISTS semantic_generations (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    model_name TEXT NOT NULL,
    dim INTEGER NOT NULL,
    ready INTEGER NOT NULL DEFAULT 0,
    vector_count INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    finished_at REAL
);

-- Vectors packed BLOCK_SIZE to a row (float16, row-major) for fast streaming scans;
-- chunk_ids is a little-endian int64 array and text_hashes concatenated 16-byte digests, both
-- parallel to the vectors.
CREATE TABLE IF NOT EXISTS semantic_blocks (
    generation_id INTEGER NOT NULL REFERENCES semantic_generations(id) ON DELETE CASCADE,
    block_no INTEGER NOT NULL,
    count INTEGER NOT NULL,
    chunk_ids BLOB NOT NULL,
    text_hashes BLOB NOT NULL,
    vectors BLOB NOT NULL,
    PRIMARY KEY (generation_id, block_no)
);
"""

# Lexical channels (rag_search). Every statement is idempotent and the backfill reads only
# what a version-1 index already holds, so an existing index upgrades in place.
_LEXICAL_CHANNELS = """
-- File names for the filename channel: fold()ed, with _ - . / backslash and whitespace as one
-- space (helpers.lexical.filename.path_key).
CREATE TABLE IF NOT EXISTS doc_names (
    doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    name_key TEXT NOT NULL,             -- file name ("sales report 2026 txt")
    stem_key TEXT NOT NULL,             -- file name without its extension
    path_key TEXT NOT NULL              -- the whole relative path
);
CREATE INDEX IF NOT EXISTS doc_names_name ON doc_names(name_key);
CREATE INDEX IF NOT EXISTS doc_names_stem ON doc_names(stem_key);
CREATE VIRTUAL TABLE IF NOT EXISTS doc_names_fts USING fts5(
    path_key, content = 'doc_names', content_rowid = 'doc_id', tokenize = 'trigram case_sensitive 0'
);
CREATE TRIGGER IF NOT EXISTS doc_names_ai AFTER INSERT ON doc_names BEGIN
    INSERT INTO doc_names_fts(rowid, path_key) VALUES (new.doc_id, new.path_key);
END;
CREATE TRIGGER IF NOT EXISTS doc_names_ad AFTER DELETE ON doc_names BEGIN
    INSERT INTO doc_names_fts(doc_names_fts, rowid, path_key)
    VALUES ('delete', old.doc_id, old.path_key);
END;
CREATE TRIGGER IF NOT EXISTS doc_names_au AFTER UPDATE ON doc_names BEGIN
    INSERT INTO doc_names_fts(doc_names_fts, rowid, path_key)
    VALUES ('delete', old.doc_id, old.path_key);
    INSERT INTO doc_names_fts(rowid, path_key) VALUES (new.doc_id, new.path_key);
END;
-- Backfill from the folded path every chunk row of version 1 carries in chunks_fts; runs of
-- separators collapse to one space (5 rounds of '  ' -> ' ' cover up to 32).
INSERT OR IGNORE INTO doc_names(doc_id, name_key, stem_key, path_key)
SELECT doc_id,
       trim(replace(replace(replace(replace(replace(
            replace(replace(replace(replace(replace(replace(
                name, '_', ' '), '-', ' '), '.', ' '), '/', ' '), char(92), ' '), char(9), ' '),
            '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' ')),
       trim(replace(replace(replace(replace(replace(
            replace(replace(replace(replace(replace(replace(
                stem, '_', ' '), '-', ' '), '.', ' '), '/', ' '), char(92), ' '), char(9), ' '),
            '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' ')),
       trim(replace(replace(replace(replace(replace(
            replace(replace(replace(replace(replace(replace(
                folded_path, '_', ' '), '-', ' '), '.', ' '), '/', ' '), char(92), ' '),
                char(9), ' '),
            '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' '), '  ', ' '))
FROM (
    SELECT doc_id, folded_path, name,
           CASE WHEN instr(name, '.') > 1
                THEN substr(rtrim(name, replace(name, '.', '')), 1,
                            length(rtrim(name, replace(name, '.', ''))) - 1)
                ELSE name END AS stem  -- without the last ".ext"; ".bashrc" keeps its name
    FROM (
        SELECT doc_id, folded_path,
               replace(folded_path, rtrim(folded_path, replace(folded_path, '/', '')), '') AS name
        FROM (
            SELECT c.document_id AS doc_id, f.path AS folded_path
            FROM chunks c JOIN chunks_fts f ON f.rowid = c.id
            WHERE c.id IN (SELECT MIN(id) FROM chunks GROUP BY document_id)
        )
    )
);

-- Word-level BM25 (unicode61) over chunks.norm: English and Russian rank better by words than by
-- trigrams, and fts5vocab gives document frequencies. External content: no second text copy.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_words USING fts5(
    norm, content = 'chunks', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_words_vocab USING fts5vocab(chunks_words, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_words_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_words_au AFTER UPDATE OF norm ON chunks BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO chunks_words(rowid, norm) VALUES (new.id, new.norm);
END;
INSERT INTO chunks_words(chunks_words) VALUES ('rebuild');

-- Trigram index of OCR-derived chunks only: the fuzzy channel looks for misread words there.
CREATE INDEX IF NOT EXISTS chunks_ocr ON chunks(id) WHERE ocr = 1;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_ocr_fts USING fts5(
    norm, content = 'chunks', content_rowid = 'id', tokenize = 'trigram case_sensitive 0'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_ocr_vocab USING fts5vocab(chunks_ocr_fts, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_ocr_ai AFTER INSERT ON chunks WHEN new.ocr = 1 BEGIN
    INSERT INTO chunks_ocr_fts(rowid, norm) VALUES (new.id, new.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_ad AFTER DELETE ON chunks WHEN old.ocr = 1 BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_au AFTER UPDATE OF norm, ocr ON chunks BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm)
    SELECT 'delete', old.id, old.norm WHERE old.ocr = 1;
    INSERT INTO chunks_ocr_fts(rowid, norm) SELECT new.id, new.norm WHERE new.ocr = 1;
END;
INSERT INTO chunks_ocr_fts(chunks_ocr_fts) VALUES ('delete-all');
INSERT INTO chunks_ocr_fts(rowid, norm) SELECT id, norm FROM chunks WHERE ocr = 1;
"""

_PHASE_STARTED = """
-- When the job entered its current phase: the ETA of a phase comes from that phase's own rate
-- (the semantic phase is a tenth of the bar but can take most of the time).
ALTER TABLE jobs ADD COLUMN phase_started_at REAL;
"""

_CJK_AND_FILE_PROGRESS = """
-- Character bigrams of the chunks that hold Chinese, Japanese or Korean text (helpers.text.cjk),
-- for the cjk channel. helpers.index.document_write adds a chunk's row next to its chunks_fts
-- row; the trigger deletes it with the chunk (cascades included). Chunks without CJK text have
-- no row.
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_cjk USING fts5(
    grams, tokenize = 'unicode61 remove_diacritics 0'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_cjk_vocab USING fts5vocab(chunks_cjk, 'row');
CREATE TRIGGER IF NOT EXISTS chunks_cjk_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM chunks_cjk WHERE rowid = old.id;
END;

-- Progress inside the file being read, as JSON {"done", "total", "unit"} ("page" or "chunks
-- written"); NULL between files. Pollers get numbers, not a sentence to parse.
ALTER TABLE jobs ADD COLUMN file_progress TEXT;
"""

_SECTION_HUBS = """
-- How much a section reads like a contents page, an index or a list of links or questions
-- (helpers.text.hubs, 0 = prose .. 1 = hub): search lowers such sections as a bounded prior.
-- helpers.index.document_write fills it for every new section; the backfill scores the
-- existing ones.
ALTER TABLE sections ADD COLUMN hub REAL NOT NULL DEFAULT 0;
"""

_REDACTIONS = """
-- helpers.secrets: how many secret spans each document had redacted, and the detector version
-- its text was read with. Rows of older indexes get 0: they are read again on the next sync, so
-- a secret indexed before the detector existed leaves the index.
ALTER TABLE documents ADD COLUMN redactions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN detector_version INTEGER NOT NULL DEFAULT 0;
"""

_SKIPPED_FILES = """
-- Every file the last sync of its folder saw and did not index, with the reason
-- (helpers.skips.SkipReason) and the sentence shown; a skipped folder is one row (is_dir = 1).
-- Refreshed per synced scope by the worker; read by rag_list(status='skipped') and rag_health.
CREATE TABLE IF NOT EXISTS skipped_files (
    path TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    detail TEXT,
    ext TEXT NOT NULL DEFAULT '',       -- '.gz', '' for none or a folder
    is_dir INTEGER NOT NULL DEFAULT 0,
    job_id TEXT,
    recorded_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS skipped_files_reason ON skipped_files(reason, ext);

-- A job's skips as JSON {reason: {"count", "label", "examples"}}: sync_status shows the
-- breakdown without one job error per skipped file.
ALTER TABLE jobs ADD COLUMN skipped_detail TEXT;
"""

_ONE_TEXT_COPY = """
-- Each text stored once: the trigram index reads chunks.norm (external content) instead of
-- keeping its own copy of it, and no longer indexes the document's title and path again in
-- every chunk row (the filename channel has them once per document in doc_names_fts;
-- bench/RESULTS.md "Lexical sync speed and index size"). The old table goes at once; its rows
-- come back batch by batch (helpers.store.backfill.TRIGRAM_REBUILD, from the id in meta
-- 'trigram_backfill_next'), so no reader
-- or cancel waits behind one long transaction. Until then the triggers (and index_new_chunks)
-- leave rows at or past that id to the backfill.
DROP TABLE IF EXISTS chunks_fts;

-- chunks.norm becomes a generated column: norm_stored holds fold(text) only where SQLite's
-- lower(text) (ASCII A-Z) would not give it, else '' (helpers.index.document_write.stored_norm),
-- so English text is not stored twice. Rows written before keep their stored copy until
-- re-synced. The delete and update triggers are recreated over the generated column. New
-- chunks enter chunks_words, chunks_ocr_fts and chunks_fts through index_db.index_new_chunks,
-- one INSERT ... SELECT per write, not through insert triggers: FTS5 flushes its pending terms
-- at every trigger statement, which slows a first sync (bench/RESULTS.md "Lexical sync speed
-- and index size").
DROP TRIGGER IF EXISTS chunks_words_ai;
DROP TRIGGER IF EXISTS chunks_words_ad;
DROP TRIGGER IF EXISTS chunks_words_au;
DROP TRIGGER IF EXISTS chunks_ocr_ai;
DROP TRIGGER IF EXISTS chunks_ocr_ad;
DROP TRIGGER IF EXISTS chunks_ocr_au;
ALTER TABLE chunks RENAME COLUMN norm TO norm_stored;
ALTER TABLE chunks ADD COLUMN norm TEXT GENERATED ALWAYS AS (
    CASE WHEN norm_stored = '' THEN lower(text) ELSE norm_stored END
) VIRTUAL;
CREATE TRIGGER IF NOT EXISTS chunks_words_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_words_au AFTER UPDATE OF norm_stored, text ON chunks BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO chunks_words(rowid, norm) VALUES (new.id, new.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_ad AFTER DELETE ON chunks WHEN old.ocr = 1 BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_au AFTER UPDATE OF norm_stored, text, ocr ON chunks BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm)
    SELECT 'delete', old.id, old.norm WHERE old.ocr = 1;
    INSERT INTO chunks_ocr_fts(rowid, norm) SELECT new.id, new.norm WHERE new.ocr = 1;
END;

CREATE VIRTUAL TABLE chunks_fts USING fts5(
    norm, content = 'chunks', content_rowid = 'id', tokenize = 'trigram case_sensitive 0'
);
CREATE TRIGGER IF NOT EXISTS chunks_fts_ad AFTER DELETE ON chunks WHEN NOT EXISTS (
    SELECT 1 FROM meta WHERE key = 'trigram_backfill_next' AND CAST(value AS INTEGER) <= old.id
) BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_au AFTER UPDATE OF norm_stored, text ON chunks
WHEN NOT EXISTS (
    SELECT 1 FROM meta WHERE key = 'trigram_backfill_next' AND CAST(value AS INTEGER) <= old.id
) BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO chunks_fts(rowid, norm) VALUES (new.id, new.norm);
END;
INSERT INTO meta(key, value)
SELECT 'trigram_backfill_next', '0' WHERE EXISTS (SELECT 1 FROM chunks);
"""

_COMPACT_ROWS = """
-- Each text stored compactly (helpers.store.codec): sections.text zlib-compressed where that
-- is smaller, chunks.location only where it differs from its section's, and no chunks.text_hash
-- ('': the semantic build hashes the text, as fast as reading 64 stored hex digits;
-- bench/RESULTS.md, "Index size, migration 9"). No column changes: every new encoding tells
-- itself apart from schema 8's, so readers take old and new rows alike and the rows an older
-- program wrote are converted batch by batch (helpers.store.backfill.COMPACT_SECTIONS and
-- COMPACT_CHUNKS, from the ids in meta 'compact_sections_next' and 'compact_chunks_next').
-- The version bump keeps schema-8 programs, which would show the compressed bytes, away from
-- the file.
INSERT INTO meta(key, value)
SELECT 'compact_sections_next', '0' WHERE EXISTS (SELECT 1 FROM sections);
INSERT INTO meta(key, value)
SELECT 'compact_chunks_next', '0' WHERE EXISTS (SELECT 1 FROM chunks);
"""

_FORMAT_VERSION = """
-- The version of its format's reader a document was read with
-- (helpers.extract.formats.format_version): when one format's reader changes, the next sync
-- reads that format's documents again and no others. Older rows get 0.
ALTER TABLE documents ADD COLUMN format_version INTEGER NOT NULL DEFAULT 0;
"""

_UNITS = """
-- Retrieval units for the unit-level BM25 channel (helpers.store.units, helpers.lexical.units):
-- a run of a document's consecutive sections on one page, else the whole document. units_fts is
-- contentless (no second copy of the text): helpers.store.units deletes a row with the tokens
-- recomputed from the sections before they go, and rebuilds the table when meta
-- 'unit_tokens_version' names another tokenizer (SQLite 3.40 has no contentless_delete).
CREATE TABLE IF NOT EXISTS units (
    id INTEGER PRIMARY KEY,
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    first_ordinal INTEGER NOT NULL,     -- sections.ordinal range of the unit, inclusive
    last_ordinal INTEGER NOT NULL,
    page INTEGER,                       -- its first page; NULL: the whole document
    lang TEXT NOT NULL DEFAULT ''       -- Snowball stemmer of its tokens ('' = none)
);
CREATE INDEX IF NOT EXISTS units_document ON units(document_id, first_ordinal);
CREATE VIRTUAL TABLE IF NOT EXISTS units_fts USING fts5(
    tokens, content = '', tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
);
-- How many units hold each token: a query word's forms in several languages are searched by
-- the one most units hold (helpers.lexical.units).
CREATE VIRTUAL TABLE IF NOT EXISTS units_vocab USING fts5vocab(units_fts, 'row');
"""


_FOLD_IN_SQL = """
-- chunks.norm without a second copy of the text where SQL can fold it: norm_stored = char(1)
-- (helpers.store.fold_sql.FOLDED_MARK) reads as rag_fold(text), the program's fold() registered
-- on every connection it opens. Since the marks-free fold, text with any accent stored its whole
-- folded copy (bench/notes/n-size.md, "Index size"). A connection without rag_fold (the
-- sqlite3 shell) reads every other column and runs MATCH, but cannot read norm, change or delete
-- chunks, or run PRAGMA integrity_check (SQLite compiles the column into each). The triggers are
-- those of migration 8, recreated over the new column; an update that leaves norm as it was (the
-- backfill below) no longer rewrites the full-text rows. Rows of older programs are converted
-- batch by batch (helpers.store.backfill.FOLD_CHUNKS, from the id in meta 'fold_chunks_next');
-- until then they read their stored copy, which is the same text.
DROP TRIGGER IF EXISTS chunks_words_ad;
DROP TRIGGER IF EXISTS chunks_words_au;
DROP TRIGGER IF EXISTS chunks_ocr_ad;
DROP TRIGGER IF EXISTS chunks_ocr_au;
DROP TRIGGER IF EXISTS chunks_fts_ad;
DROP TRIGGER IF EXISTS chunks_fts_au;
ALTER TABLE chunks DROP COLUMN norm;
ALTER TABLE chunks ADD COLUMN norm TEXT GENERATED ALWAYS AS (
    CASE norm_stored WHEN '' THEN lower(text) WHEN char(1) THEN rag_fold(text)
    ELSE norm_stored END
) VIRTUAL;
CREATE TRIGGER IF NOT EXISTS chunks_words_ad AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_words_au AFTER UPDATE OF norm_stored, text ON chunks
WHEN old.norm IS NOT new.norm BEGIN
    INSERT INTO chunks_words(chunks_words, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO chunks_words(rowid, norm) VALUES (new.id, new.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_ad AFTER DELETE ON chunks WHEN old.ocr = 1 BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_ocr_au AFTER UPDATE OF norm_stored, text, ocr ON chunks
WHEN old.norm IS NOT new.norm OR old.ocr IS NOT new.ocr BEGIN
    INSERT INTO chunks_ocr_fts(chunks_ocr_fts, rowid, norm)
    SELECT 'delete', old.id, old.norm WHERE old.ocr = 1;
    INSERT INTO chunks_ocr_fts(rowid, norm) SELECT new.id, new.norm WHERE new.ocr = 1;
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_ad AFTER DELETE ON chunks WHEN NOT EXISTS (
    SELECT 1 FROM meta WHERE key = 'trigram_backfill_next' AND CAST(value AS INTEGER) <= old.id
) BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_au AFTER UPDATE OF norm_stored, text ON chunks
WHEN old.norm IS NOT new.norm AND NOT EXISTS (
    SELECT 1 FROM meta WHERE key = 'trigram_backfill_next' AND CAST(value AS INTEGER) <= old.id
) BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, norm) VALUES ('delete', old.id, old.norm);
    INSERT INTO chunks_fts(rowid, norm) VALUES (new.id, new.norm);
END;
INSERT INTO meta(key, value)
SELECT 'fold_chunks_next', '0' WHERE EXISTS (SELECT 1 FROM chunks WHERE norm_stored <> '');

-- A document's file-name row enters doc_names_fts from the writer (document_write), not through
-- a trigger: each trigger statement made FTS5 write out the pending terms of every full-text
-- table in the transaction, once per document of a group of small files. Update and delete
-- keep their triggers.
DROP TRIGGER IF EXISTS doc_names_ai;
"""


# --- migration 13 (helpers/semantic/code_store.py, owned by the semantic side) ---------------
_FIRST_PASS_CODES = """
-- The vector first pass's RaBitQ codes, a derived cache of each generation's vectors
-- (helpers.semantic.code_store): one semantic_codes row per semantic_blocks row (same block_no,
-- count and row order; code_size bytes a vector, crc32 checksum), and one semantic_code_sets row
-- with the centroid they were computed against. Written before the generation is published,
-- deleted with it; a reader that finds a row missing or damaged encodes it from the vectors.
CREATE TABLE IF NOT EXISTS semantic_code_sets (
    generation_id INTEGER PRIMARY KEY REFERENCES semantic_generations(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,           -- helpers.semantic.rabitq.CODES_VERSION
    dim INTEGER NOT NULL,
    code_size INTEGER NOT NULL,         -- bytes per vector
    vector_count INTEGER NOT NULL,
    block_count INTEGER NOT NULL,
    centroid BLOB NOT NULL,             -- float32 [dim], little-endian
    fit_count INTEGER NOT NULL,         -- vectors the centroid was fit on
    drift INTEGER NOT NULL,             -- vectors encoded against it since
    checksum INTEGER NOT NULL           -- crc32 of the fields above
);
CREATE TABLE IF NOT EXISTS semantic_codes (
    generation_id INTEGER NOT NULL REFERENCES semantic_generations(id) ON DELETE CASCADE,
    block_no INTEGER NOT NULL,
    count INTEGER NOT NULL,
    codes BLOB NOT NULL,
    checksum INTEGER NOT NULL,          -- crc32 of codes
    PRIMARY KEY (generation_id, block_no)
);
"""
MIGRATION_13 = Migration(13, _FIRST_PASS_CODES)

_LINE_LANGUAGES = """
-- The stemming language of each line of a unit (helpers.text.unit_tokens.encode_runs: '' when
-- every line has units.lang, else runs 'language*lines'): a unit's tokens are recomputed from
-- them, never from the language identifier again, when its row of units_fts is deleted.
-- The backfill rebuilds every unit with its lines stemmed each in its own language, batch by
-- batch (helpers.store.units.start_rebuild).
ALTER TABLE units ADD COLUMN lang_runs TEXT NOT NULL DEFAULT '';
"""


_UNIT_INSTANCES = """
-- Each occurrence of a token in units_fts (an fts5vocab table: a view of the FTS5 index, no
-- rows of its own): how often a unit holds each form of a query word whose forms differ by the
-- units' languages, so the word is one BM25 term there (helpers.lexical.unit_words).
CREATE VIRTUAL TABLE IF NOT EXISTS units_instances USING fts5vocab(units_fts, 'instance');
"""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, _BASE),
    Migration(2, _LEXICAL_CHANNELS),
    Migration(3, _PHASE_STARTED),
    Migration(4, _CJK_AND_FILE_PROGRESS, backfill=backfill_cjk),
    Migration(5, _SECTION_HUBS, backfill=backfill_hubs),
    Migration(6, _REDACTIONS),
    Migration(7, _SKIPPED_FILES),
    Migration(8, _ONE_TEXT_COPY, resumable=(TRIGRAM_REBUILD,)),
    Migration(9, _COMPACT_ROWS, resumable=(COMPACT_SECTIONS, COMPACT_CHUNKS)),
    Migration(10, _FORMAT_VERSION),
    Migration(11, _UNITS),  # its rows are written by migration 14's backfill
    Migration(12, _FOLD_IN_SQL, resumable=(FOLD_CHUNKS,)),
    MIGRATION_13,
    Migration(14, _LINE_LANGUAGES, backfill=start_rebuild, resumable=(UNITS_REBUILD,)),
    Migration(15, _UNIT_INSTANCES),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
# Oldest schema a read-only reader can use as it is: later migrations only add columns and tables
# that readers look up with a fallback (jobs.phase_started_at and jobs.file_progress, see
# helpers.store.job_rows; chunks_cjk, see helpers.lexical; sections.hub, see rag_search;
# skipped_files and jobs.skipped_detail, see helpers.store.skipped_files; migration 8 keeps
# chunks_fts's name and MATCH syntax, and the channels rank it with default bm25 weights;
# migration 9's encodings are told apart from the older ones row by row, see helpers.store.codec;
# documents.format_version is read only by the sync's plan; units and units_fts, see
# helpers.lexical.units, which finds nothing without them; migration 12 changes how chunks.norm
# is stored, not what it reads as, and this program's connections all register rag_fold;
# semantic_code_sets and semantic_codes, see helpers.semantic.code_store, which encodes the
# codes from the vectors without them; units.lang_runs is read only by writers; units_instances,
# see helpers.lexical.unit_words, which takes a word's best form in a unit without it).
READABLE_FROM_VERSION = 2
