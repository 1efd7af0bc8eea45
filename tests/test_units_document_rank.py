"""Beside the semantic side the top hit may be a passage no lexical channel found: the band still
reads the units channel's rank of its document (helpers.lexical.units.document_rank)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from conftest import synced_written

from helpers.config import Config
from helpers.lexical.common import ChannelResult, Filters, SearchContext
from helpers.lexical.query_terms import Query
from helpers.lexical.units import channel_units, document_rank
from helpers.store.open_index import read_conn

# The kiln page is long enough for several chunks; only its first names the query's words.
KILN = (
    "# Kiln firing\n\nThe glaze kiln reaches cone six overnight.\n\n## Cooling\n\n"
    + "Let the chamber cool slowly with the door shut and the vents closed. " * 40
    + "\n\n## Loading\n\n"
    + "Stack the shelves on posts of equal height and leave a finger's gap. " * 40
    + "\n"
)


def _write(docs: Path) -> None:
    docs.mkdir(parents=True)
    (docs / "kiln.md").write_text(KILN, "utf-8")
    (docs / "wheel.md").write_text("# Wheel\n\nCentre the clay before the glaze.\n", "utf-8")
    (docs / "garden.md").write_text("# Garden\n\nWater the roses at dawn.\n", "utf-8")


@pytest.fixture
def synced(tmp_path: Path) -> Config:
    return synced_written(tmp_path, _write)


def _chunks(conn: sqlite3.Connection, path: str) -> list[int]:
    sql = (
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.path = ? "
        "ORDER BY c.id"
    )
    return [row[0] for row in conn.execute(sql, (path,))]


def test_a_chunk_the_channel_did_not_list_takes_its_documents_rank(synced: Config) -> None:
    with closing(read_conn(synced)) as conn:
        kiln, wheel, garden = (_chunks(conn, p) for p in ("kiln.md", "wheel.md", "garden.md"))
        assert len(kiln) >= 3
        ctx = SearchContext(conn, Query.parse("glaze kiln"), Filters())
        units = channel_units(ctx, found=[kiln[0], wheel[0]])
        listed = {cid for cid, _ in units.ranked}
        assert kiln[0] in listed and kiln[-1] not in listed
        assert document_rank(conn, units, kiln[0]) == 1
        assert document_rank(conn, units, kiln[-1]) == 1  # a later chunk of the same page
        assert document_rank(conn, units, wheel[0]) == 2
        assert document_rank(conn, units, garden[0]) is None  # a page it did not rank
        assert document_rank(conn, None, kiln[0]) is None
        assert document_rank(conn, ChannelResult("units", []), kiln[0]) is None
