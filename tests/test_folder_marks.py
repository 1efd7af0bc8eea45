"""The query the embedding model reads, spelled as the folder spells it
(helpers.semantic.folder_marks): a keyword typed without marks reaches the model with the marks
the folder's passages give it, so an accent-free query finds what the marked one finds."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import numpy as np
import pytest
from conftest import make_config, synced_folder
from semantic_fixtures import REAL_MODEL_DIR

import rag_service
from helpers.config import Config
from helpers.semantic.folder_marks import with_folder_marks
from helpers.semantic.generations import SemanticWorker
from helpers.store.fold_sql import register_fold

FILES = {
    "cs/bunky.md": "# Formátování buněk\n\nFormátování buněk mění vzhled buněk v listu. "
    "Vyberte buňky a zvolte Formát.\n",
    "cs/tisk.md": "# Tisk listu\n\nTisk vybraného listu se spouští z nabídky Soubor.\n",
    "de/strasse.md": "# Straßen\n\nDie Straße ist gesperrt. Jede Straße hat einen Namen.\n",
    "en/jobs.md": "# Applying\n\nSend your resume by mail. A resume lists your jobs; a short "
    "resume is best. (French: résumé.)\n",
    "en/pdf.md": "# Setup\n\nEdit the conﬁguration ﬁle, then restart.\n",
    "es/dias.md": "# Función DIAS.LAB\n\nDevuelve los días laborables entre dos fechas; "
    "la función no cuenta los días festivos.\n",
    "cs/ulozeni.md": "# Uložení\n\nSoubory se dříve ukládaly jinak než dnes.\n",
    "cs/export.md": "# Export\n\nExport se dříve spouštěl z nabídky Soubor.\n",
    "cs/cloud.md": "# Vzdálené soubory\n\nSoubory lze otevřít z Google Drive.\n",
}


@pytest.fixture(scope="module")
def lexical(tmp_path_factory: pytest.TempPathFactory) -> sqlite3.Connection:
    config = synced_folder(tmp_path_factory.mktemp("marks"), FILES)
    conn = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
    register_fold(conn)
    yield conn
    conn.close()


def test_unmarked_words_take_the_marks_the_folder_writes(lexical: sqlite3.Connection):
    assert with_folder_marks(lexical, "formatovani bunek") == "formátování buněk"
    assert with_folder_marks(lexical, "Tisk vybraneho listu") == "Tisk vybraného listu"
    assert with_folder_marks(lexical, "Strasse gesperrt") == "Straße gesperrt"  # ß typed as ss
    assert with_folder_marks(lexical, "FORMATOVANI") == "FORMÁTOVÁNÍ"


def test_names_keep_the_spelling_they_were_typed_in(lexical: sqlite3.Connection):
    # a word joined by `.` or `_` is part of a function's name, whatever the prose writes
    assert with_folder_marks(lexical, "funcion DIAS.LAB dias") == "función DIAS.LAB días"
    # a capitalised word is read against the folder's capitalised spellings: `Google Drive`
    assert with_folder_marks(lexical, "Google Drive soubory") == "Google Drive soubory"
    # typed in lower case it is read against every spelling: one passage in three writes `drive`,
    # too many for `dříve` to be what was meant
    assert with_folder_marks(lexical, "soubory drive") == "soubory drive"


def test_words_typed_as_the_folder_writes_them_stay_as_typed(lexical: sqlite3.Connection):
    # `resume` is written without marks more often than with them here
    assert with_folder_marks(lexical, "send resume") == "send resume"
    # a query with marks, a word the folder does not hold, and no ligature put back
    assert with_folder_marks(lexical, "formátování buněk") == "formátování buněk"
    assert with_folder_marks(lexical, "formatovanim kavarna") == "formatovanim kavarna"
    assert with_folder_marks(lexical, "configuration file") == "configuration file"
    # a pasted paragraph is not respelled word by word
    long_query = " ".join(["bunek"] * 20)
    assert with_folder_marks(lexical, long_query) == long_query


@pytest.fixture(scope="module")
def semantic(tmp_path_factory: pytest.TempPathFactory) -> Config:
    if not REAL_MODEL_DIR.is_dir():
        pytest.fail(f"the real test model is missing: {REAL_MODEL_DIR}")
    root = tmp_path_factory.mktemp("marks-semantic")
    for rel, text in FILES.items():
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / rel).write_text(text, encoding="utf-8")
    config = make_config(
        root / "docs", root / "state", semantic=True, semantic_model_dir=REAL_MODEL_DIR
    )
    view = rag_service.sync_kb_blocking(config)
    assert view.state == "succeeded" and view.semantic["done"] == view.semantic["total"] > 0
    return config


def test_an_accent_free_query_ranks_as_the_marked_one_on_the_semantic_side(semantic: Config):
    with SemanticWorker(REAL_MODEL_DIR, log_path=semantic.logs_dir / "e.log") as worker:
        bare, marked = worker.embed(["formatovani bunek", "formátování buněk"], "query").vectors
    assert not np.array_equal(bare, marked)  # the model reads the two spellings apart
    found = {
        query: [
            (h.path, round(h.score, 6))
            for h in rag_service.search(semantic, query, mode="semantic").hits
        ]
        for query in ("formatovani bunek", "formátování buněk")
    }
    assert found["formatovani bunek"] == found["formátování buněk"]
    assert found["formatovani bunek"][0][0] == "cs/bunky.md"
    with closing(sqlite3.connect(semantic.db_path)) as conn:  # nothing written by a search
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == len(FILES)


def test_the_folder_is_sampled_across_its_length(tmp_path):
    # a few untranslated pages come first (chunk ids follow the sync's file order): read alone,
    # they would outvote the translation that the rest of the folder holds
    files = {
        f"a{n:02}/old.md": f"# Tabulky {n}\n\nZmena tabulky {n} se ukládá.\n" for n in range(6)
    }
    files |= {
        f"b{n:02}/new.md": f"# Tabulky {n}\n\nZměna tabulky {n} se ukládá hned.\n"
        for n in range(44)
    }
    config = synced_folder(tmp_path, files)
    with closing(sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)) as conn:
        register_fold(conn)
        assert with_folder_marks(conn, "zmena tabulky") == "změna tabulky"


def test_a_capital_on_the_first_word_is_sentence_case(tmp_path):
    # the folder writes the word in lower case only; typed first with a capital it is the same
    # word, mid-query a capital asks for the folder's capitalised spellings
    files = {
        f"n{n}.md": f"# Nápověda {n}\n\nZde se mění formátování buněk {n}.\n" for n in range(6)
    }
    config = synced_folder(tmp_path, files)
    with closing(sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)) as conn:
        register_fold(conn)
        assert with_folder_marks(conn, "Formatovani bunek") == "Formátování buněk"
        assert with_folder_marks(conn, "bunek Formatovani") == "buněk Formatovani"
