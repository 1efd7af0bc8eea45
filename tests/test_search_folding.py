"""What people type finds what documents write: marks, ligatures, widths and word forms are
folded alike on both sides (helpers.text.normalize.fold), and query words are stemmed in the
languages the index is written in (helpers.lexical.index_terms). Lexical mode on a real synced
folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_config

import rag_service
from helpers.config import Config
from helpers.text.normalize import fold

# Documents long enough for the language identifier, each about one thing a query names (the
# others share none of its words), under names that match no query (no filename-channel help).
DOCUMENTS = {
    "fr-1.md": (
        "# Compte rendu\n\nVoici le résumé de la réunion du conseil municipal. Les membres "
        "du conseil ont discuté des travaux de la bibliothèque et du budget de l'année "
        "prochaine. La séance a été levée à vingt heures après un long débat sur les écoles.\n"
    ),
    "fr-2.md": (
        "# Le quartier\n\nAu coin de la rue, le café ouvre tôt le matin pour les ouvriers. "
        "On y sert aussi des croissants et du jus d'orange frais, et le patron connaît "
        "chacun de ses clients par leur prénom depuis plus de vingt ans.\n"
    ),
    "es-1.md": (
        "# Música\n\nEsta es la canción del niño que cantaba todas las mañanas en la plaza "
        "del pueblo. Sus vecinos escuchaban la melodía desde las ventanas y muchos "
        "aprendieron la letra de memoria durante aquel verano tan caluroso.\n"
    ),
    "es-2.md": (
        "# Comercio\n\nEl mercado abre los sábados por la mañana. Los agricultores traen "
        "frutas, verduras y quesos de las granjas cercanas, y las familias compran allí "
        "lo necesario para toda la semana mientras conversan con los vendedores.\n"
    ),
    "de-1.md": (
        "# Öffentliche Einrichtungen\n\nDie Bücherei der Stadt liegt in der Straße hinter "
        "dem Rathaus. Sie hat montags geschlossen, und die Ausleihe der Bücher ist für alle "
        "Einwohner kostenlos. Die Kinderabteilung wurde im letzten Jahr vollständig erneuert.\n"
    ),
    "de-2.md": (
        "# Bauen\n\nIn diesem Viertel stehen alte Häuser aus dem neunzehnten Jahrhundert. "
        "Jedes Haus wurde sorgfältig restauriert, und die Fassaden zeigen noch heute die "
        "ursprünglichen Verzierungen, die Handwerker damals aus Sandstein gefertigt haben.\n"
    ),
    "en-1.md": (
        "# Settings\n\nThe conﬁguration ﬁle lives in the home directory and is read once at "
        "start-up; every option has a default that the ﬁle may override.\n"
    ),
    "ja-1.md": "# 会社\n\nＡＢＣ社の新製品を紹介します。ﾃｽﾄ版は来月から配布されます。\n",
    "ja-2.md": "# 接続\n\nこのポートはＵＳＢ ３．０に対応しています。\n",
    "ja-3.md": "# 付属品\n\nUSB メモリは別売りです。\n",
    "th-1.md": "# น้ำ\n\nการประปานครหลวงจัดส่งน้ำประปาให้ประชาชนทุกวันตลอดปี\n",
    "ru-1.md": (
        "# Молочные продукты\n\nЙогурт делают из молока и закваски. Ёжик в тумане не ест "
        "йогурт, а в магазине рядом с домом продают свежий кефир и творог каждое утро.\n"
    ),
}


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Config:
    root = tmp_path_factory.mktemp("folding")
    knowledge = root / "knowledge"
    knowledge.mkdir()
    for name, text in DOCUMENTS.items():
        (knowledge / name).write_text(text, "utf-8")
    config = make_config(knowledge, root / "data")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    return config


def first_path(config: Config, query: str) -> str | None:
    hits = rag_service.search(config, query, mode="lexical").hits
    return hits[0].path if hits else None


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("resume reunion", "fr-1.md"),
        ("résumé réunion", "fr-1.md"),
        ("cafe", "fr-2.md"),
        ("cancion nino", "es-1.md"),
        ("Bucherei", "de-1.md"),
        ("Buecherei", "de-1.md"),
        ("Strasse", "de-1.md"),
        ("STRASSE", "de-1.md"),
        ("configuration file", "en-1.md"),
        ("ABC社", "ja-1.md"),
        ("テスト", "ja-1.md"),
        ("ﾃｽﾄ", "ja-1.md"),
        ("USB 3.0", "ja-2.md"),  # ＵＳＢ ３．０に対応: fullwidth, and glued to the Japanese
        ("น้ำประปา", "th-1.md"),
        ("йогурт", "ru-1.md"),
        ("ежик", "ru-1.md"),
    ],
)
def test_a_query_typed_without_marks_or_in_another_width_finds_its_document_first(
    synced: Config, query: str, path: str
):
    assert first_path(synced, query) == path


@pytest.mark.parametrize(
    ("query", "path"),
    [
        ("Häusern", "de-2.md"),  # German stem haus: Häuser, Haus
        ("Einwohnern", "de-1.md"),  # einwohn: Einwohner
        ("municipaux", "fr-1.md"),  # French stem municipa: municipal
        ("vecinas", "es-1.md"),  # Spanish stem vecin: vecinos
    ],
)
def test_a_word_form_of_another_language_of_the_index_finds_its_document(
    synced: Config, query: str, path: str
):
    assert first_path(synced, query) == path


def test_latin_and_greek_marks_ligatures_and_widths_fold_to_what_people_type():
    assert fold("Résumé de la RÉUNION") == "resume de la reunion"
    assert fold("Œuvre, Æsir, Łódź, København") == "oeuvre, aesir, lodz, kobenhavn"
    assert fold("Ἀθῆναι ΆΣΟΣ") == "αθηναι ασοσ"  # tonos and breathings off, final sigma
    assert fold("conﬁguration ﬁle") == "configuration file"
    assert fold("ＡＢＣ社 ﾃｽﾄ") == "abc 社 テスト"  # a Latin word against CJK text is a word
    assert fold("Tiếng Việt") == "tieng viet"


def test_thai_sara_am_and_cyrillic_short_i_keep_their_letters():
    assert fold("น้ำ") == "น้ำ"  # NFKC alone would split SARA AM into NIKHAHIT + SARA AA
    assert fold("Йогурт") == "йогурт"  # й is its own letter, not и with a mark
    assert fold("ёж") == "еж"
    assert fold("ガギグ") == "ガギグ" and fold("ｶﾞｷﾞ") == "ガギ"
    assert fold("한국어") == "한국어"


def test_a_query_with_marks_ranks_the_exact_form_above_the_form_without_marks(tmp_path: Path):
    knowledge = tmp_path / "knowledge"
    knowledge.mkdir()
    # the unmarked word is the denser match, so only the marks can put the other one first
    (knowledge / "plain.md").write_text("# Notes\n\nresume resume resume of the week\n", "utf-8")
    (knowledge / "marked.md").write_text(
        "# Notes\n\nle résumé est prêt, avec des notes longues sur la semaine passée\n", "utf-8"
    )
    config = make_config(knowledge, tmp_path / "data")
    rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert first_path(config, "résumé") == "marked.md"
    paths = [h.path for h in rag_service.search(config, "resume", mode="lexical").hits]
    assert set(paths) == {"plain.md", "marked.md"}
