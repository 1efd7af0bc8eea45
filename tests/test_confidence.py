"""helpers.ranking.confidence on a real synced index with the real model: a clear answer both sides
agree on is `high`, a hub on top never is (search carries each hit's hub score), a winner the
semantic side does not back is `medium`, a question nothing answers is `low` in every mode."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import SHARED, make_config

import rag_service
from helpers.config import Config
from helpers.ranking import confidence

MODEL = SHARED / "models" / "multilingual-e5-small-int8"

ANSWERS = {
    "scanner.md": "The scanner driver comes with the SANE backends. Install the driver package, "
    "add your account to the scanner group and log in again. When the scanner is still not "
    "found, try another USB port; the driver itself rarely needs any settings.",
    "printer.md": "Print jobs wait in the printer queue that CUPS keeps for each printer. "
    "Configure the queue in the CUPS web page on port 631: pick the model, set the paper size "
    "and print a test page. A stuck queue is cleared with cancel -a.",
    "quokka.md": "The quokka is a small wallaby that lives on Rottnest Island near Perth. "
    "Visitors photograph the quokka because it seems to smile.",
    # the only place that names the greenhouse heater quotes the question in a cross-reference
    # one document, two sections on one topic: the runner-up is the same document
    "lawn.md": "# Mowing the lawn\n\nMow the lawn once a week in summer and leave the clippings "
    "on the grass; never cut more than a third of the blade length.\n\n# Mower blades\n\n"
    "Sharpen the lawn mower blade twice a season with a file; a dull mower blade tears the grass "
    "and leaves brown tips on the lawn.",
    "shed.md": "The garden shed was repainted last spring and the roof felt replaced; see "
    "Section 4.2, “How do I replace the greenhouse heater fuse?” for the heater itself.",
}
POINTED_AT = "How do I replace the greenhouse heater fuse?"
# A list of questions (a FAQ's contents page): the only place that names the projector lamp.
QUESTIONS = [
    "Replacing the projector lamp",
    "Ordering office supplies",
    "Booking a meeting room",
    "Joining the wireless network",
    "Installing the scanner driver",
    "Configuring the printer queue",
    "Nightly backups with rsync",
    "Setting up the mail relay",
]


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Config:
    assert MODEL.is_dir(), f"the real test model is missing: {MODEL}"
    root = tmp_path_factory.mktemp("confidence")
    docs = root / "docs"
    docs.mkdir()
    for name, text in ANSWERS.items():
        (docs / name).write_text(f"{text}\n", "utf-8")
    questions = " ".join(f"How do I handle {q.lower()}?" for q in QUESTIONS)
    (docs / "faq.md").write_text(f"Office FAQ {questions}\n", "utf-8")
    config = make_config(docs, root / "state", semantic=True, semantic_model_dir=MODEL)
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=300)
    assert view.state == "succeeded", view.to_dict()
    return config


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_clear_answer_is_high(config: Config, mode: str) -> None:
    result = rag_service.search(config, "how do I install the scanner driver", mode=mode)
    ev = confidence.evidence(result)
    assert result.hits[0].path == "scanner.md" and result.hits[0].hub == 0.0
    assert ev.margin >= confidence.MARGIN_HIGH
    assert result.confidence == "high"
    assert (ev.cosine is not None) == (mode == "hybrid")
    if mode == "hybrid":
        assert ev.semantic  # the semantic side has the same section near its top


def test_a_winner_the_semantic_side_does_not_back_is_medium(config: Config) -> None:
    ev = confidence.evidence(
        rag_service.search(config, "how do I install the scanner driver", mode="hybrid")
    )
    assert confidence.band(ev) == "high"
    assert confidence.band(replace(ev, semantic=False)) == "medium"
    # without the agreement rule the same evidence would be high: the rule is what decides
    assert confidence.band(replace(ev, semantic=False), agree_for_high=False) == "high"
    # lexical mode has no semantic side to ask: the margin alone decides (no units channel here)
    alone = replace(ev, semantic=False, cosine=None, units_ran=False, unit_margin=0.0)
    assert confidence.band(alone) == "high"
    below = confidence.MARGIN_HIGH - 0.01
    assert confidence.band(replace(ev, margin=below), margin_agreed=None) == "medium"


def test_a_narrower_winner_both_sides_put_on_top_is_high(config: Config) -> None:
    """The second route: a margin between MARGIN_AGREED and MARGIN_HIGH is `high` only when
    the lexical side has the top hit within LEXICAL_AGREE_RANK, the semantic side within
    AGREE_RANK, and the top cosine is at least AGREED_COSINE_MIN; never without a semantic
    side (lexical mode) and never below MARGIN_AGREED."""
    ev = confidence.evidence(
        rag_service.search(config, "how do I install the scanner driver", mode="hybrid")
    )
    assert ev.lexical_rank == 1 and ev.semantic_rank == 1 and ev.semantic and ev.lexical
    assert ev.cosine >= confidence.AGREED_COSINE_MIN
    assert confidence.MARGIN_AGREED is not None
    narrow = replace(ev, margin=(confidence.MARGIN_AGREED + confidence.MARGIN_HIGH) / 2)
    assert confidence.band(narrow) == "high"
    assert confidence.band(narrow, margin_agreed=None) == "medium"  # the route decides
    far = replace(narrow, lexical_rank=confidence.LEXICAL_AGREE_RANK + 1)
    assert confidence.band(far) == "medium"
    assert confidence.band(replace(narrow, lexical_rank=None)) == "medium"
    assert confidence.band(replace(narrow, semantic=False)) == "medium"
    unsure = replace(narrow, cosine=confidence.AGREED_COSINE_MIN - 0.01)
    assert confidence.band(unsure) == "medium"
    # without a cosine the lexical rule alone decides: the agreement route does not apply, so
    # a margin under the lexical rule's own is not enough there
    alone = replace(narrow, cosine=None, semantic=False, doc_margin=narrow.margin)
    assert confidence.band(alone, margin_high_lexical=narrow.margin + 0.01) == "medium"
    below = replace(narrow, margin=confidence.MARGIN_AGREED - 0.01)
    assert confidence.band(below) == "medium"
    assert confidence.band(replace(narrow, hub=1.0)) == "medium"
    assert confidence.band(replace(narrow, pointer=1.0)) == "medium"


def test_document_level_evidence_when_two_sections_of_one_document_lead(config: Config) -> None:
    """Both lawn sections match: the runner-up is the same document, so the margin over the
    first hit of another document is larger, and the document's best ranks are its sections'."""
    result = rag_service.search(config, "sharpen the lawn mower blade", mode="hybrid")
    ev = confidence.evidence(result)
    top, second = result.hits[0], result.hits[1]
    assert top.path == second.path == "lawn.md", [h.path for h in result.hits]
    assert top.section_id != second.section_id
    assert ev.doc_margin > ev.margin
    other = next(h for h in result.hits if h.path != "lawn.md")
    assert ev.doc_margin == pytest.approx((top.score - other.score) / top.score)
    own = [h for h in result.hits if h.path == "lawn.md"]
    assert ev.doc_semantic_rank == min(h.channels["semantic"].rank for h in own)
    lexical = [c.rank for h in own for n, c in h.channels.items() if n != "semantic"]
    assert ev.doc_lexical_rank == min(lexical) and ev.lexical_rank >= ev.doc_lexical_rank
    assert ev.semantic_rank == top.channels["semantic"].rank
    # measured by document, the same evidence may only gain: never a lower band
    order = ["low", "medium", "high"]
    by_doc = confidence.band(ev, margin_by_document=True, agree_by_document=True)
    assert order.index(by_doc) >= order.index(confidence.band(ev))


def test_a_hub_on_top_is_never_high(config: Config) -> None:
    """Only the question list names the projector lamp: it is the single lexical hit (margin
    1.0), a clear winner by score, but a hub answers nothing."""
    result = rag_service.search(config, "projector lamp", mode="lexical")
    ev = confidence.evidence(result)
    assert [h.path for h in result.hits] == ["faq.md"]
    assert result.hits[0].hub > confidence.HUB_MAX_HIGH and ev.hub == result.hits[0].hub
    assert ev.margin == 1.0 and ev.coverage == 1.0
    assert result.confidence == "medium"
    assert confidence.band(replace(ev, hub=0.0)) == "high"  # the hub score decides


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_a_section_that_only_points_at_the_answer_is_never_high(config: Config, mode) -> None:
    """The shed note is the only section with the heater question's words (it quotes it whole
    in `see Section 4.2, “…”`): it still ranks first, lowered by the pointer prior to about the
    runner-up, and even as a clear winner by score it would point at an answer elsewhere."""
    result = rag_service.search(config, POINTED_AT, mode=mode)
    ev = confidence.evidence(result)
    assert result.hits[0].path == "shed.md", [h.path for h in result.hits]
    assert ev.pointer == pytest.approx(1.0)
    assert result.confidence != "high"
    if mode == "lexical":
        assert ev.coverage == 1.0 and result.confidence == "medium"
        clear = replace(ev, margin=1.0)
        assert confidence.band(clear) == "medium"
        assert confidence.band(replace(clear, pointer=0.0)) == "high"  # the pointer decides


def test_a_clear_answer_carries_no_pointer_weight(config: Config) -> None:
    ev = confidence.evidence(
        rag_service.search(config, "how do I install the scanner driver", mode="hybrid")
    )
    assert ev.pointer == 0.0


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
@pytest.mark.parametrize("query", ["volcano eruption seismology", "извержение вулкана"])
def test_a_question_nothing_answers_is_low(config: Config, mode: str, query: str) -> None:
    assert rag_service.search(config, query, mode=mode).confidence == "low"


def test_the_hub_score_is_not_part_of_any_response_shape(config: Config) -> None:
    result = rag_service.search(config, "projector lamp", mode="lexical", detail="full")
    assert result.hits[0].hub > 0
    assert "hub" not in result.to_dict()["hits"][0]


def test_an_empty_result_is_low() -> None:
    ev = confidence.Evidence(0, 0.0, False, False, None, 0.0, 0.0)
    assert confidence.band(ev) == "low"


def test_bench_calibration_runs_on_real_rows(config: Config, tmp_path: Path) -> None:
    """bench_confidence's grid and leave-one-out see the same bands as search."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import bench_confidence as bench

    rows = []
    for query, path in (
        ("how do I install the scanner driver", "scanner.md"),
        ("configure the printer queue", "printer.md"),
        ("projector lamp", None),
    ):
        result = rag_service.search(config, query, mode="hybrid")
        ev = confidence.evidence(result)
        rows.append(bench.Row("s", "s", True, ev, result.confidence, result.hits[0].path == path))
    point = bench.grid_point({"s": rows}, [], bench.constants_point("hybrid"))
    report = bench.band_report(rows, [r.band for r in rows])
    assert point["sets"]["s"]["share"] == report["high"]["share"]
    assert point["sets"]["s"]["p_at_1"] == report["high"]["p_at_1"]
    # every grid point is a set of band's keyword arguments, in both modes
    for mode in ("hybrid", "lexical"):
        assert bench.constants_point(mode) in bench.grid(mode)
    # a --dump file gives the same rows back (recalibration without searching again)
    dump = tmp_path / "ev.jsonl"
    with dump.open("w", encoding="utf-8") as out:
        for r in rows:
            line = {"q": "s", "d": "s", "ok": r.correct, "in_domain": True, "band": r.band}
            line["mode"] = "hybrid"
            out.write(json.dumps(line | dataclasses.asdict(r.evidence)) + "\n")
    again = [dataclasses.replace(r, searched_band=r.band) for r in rows]
    assert bench.from_dump(dump, "s", "s", True, "hybrid") == again
    assert bench.from_dump(dump, "s", "s", False, "hybrid") == []
    assert bench.from_dump(dump, "s", "s", True, "lexical") == []  # another mode's rows


def test_a_strong_cosine_is_evidence_without_a_gap(config: Config) -> None:
    """On similar documents every hit has a high cosine, so the gap to the others is ~0 even
    for the right answer: a top cosine of COSINE_STRONG keeps it out of `low`."""
    ev = confidence.evidence(
        rag_service.search(config, "volcano eruption seismology", mode="hybrid")
    )
    assert ev.coverage < confidence.COVERAGE_MIN and confidence.band(ev) == "low"
    flat = replace(ev, cosine_gap=0.0)
    assert confidence.band(replace(flat, cosine=confidence.COSINE_STRONG)) != "low"
    assert confidence.band(replace(flat, cosine=confidence.COSINE_STRONG - 0.01)) == "low"


def test_a_query_that_names_the_file_is_not_low(tmp_path: Path) -> None:
    """The filename channel matched the path, not the text: nothing there says "no match"."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kt-4410.md").write_text("Torque values for the rear axle bolts.\n", "utf-8")
    (docs / "other.md").write_text("Opening hours of the workshop in winter.\n", "utf-8")
    config = make_config(docs, tmp_path / "state")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.state == "succeeded", view.to_dict()
    result = rag_service.search(config, "kt-4410.md", mode="lexical", detail="full")
    assert result.hits[0].path == "kt-4410.md" and "filename" in result.hits[0].channels
    assert confidence.evidence(result).coverage == 1.0
    assert result.confidence != "low"
    # a query that names no file still needs its words in the text
    assert rag_service.search(config, "volcano eruption", mode="lexical").confidence == "low"


SPANISH = {
    "imprimir.md": "# Imprimir documentos\n\nPara imprimir un documento, abra el menú Archivo y "
    "elija Imprimir. En el diálogo puede elegir la impresora, el número de copias y las páginas "
    "que se imprimirán. Las impresoras de red aparecen en la lista cuando el servidor de "
    "impresión está disponible.",
    "guardar.md": "# Guardar archivos\n\nLos archivos se guardan con la orden Guardar del menú "
    "Archivo. Al guardar por primera vez, escriba el nombre del archivo y elija la carpeta. La "
    "copia de seguridad automática guarda una versión anterior del documento.",
    "tablas.md": "# Insertar tablas\n\nUna tabla nueva se inserta desde el menú Tabla. Elija el "
    "número de filas y de columnas; las celdas se pueden combinar y dividir más tarde. Las "
    "tablas anidadas se insertan dentro de una celda.",
}


@pytest.mark.parametrize(
    ("query", "path"),
    [("guardando archivos", "guardar.md"), ("combinando celdas", "tablas.md")],
)
def test_a_top_section_holding_every_word_by_its_stem_in_the_index_language_is_not_low(
    tmp_path: Path, query: str, path: str
) -> None:
    """Coverage accepts the forms the lexical channels accept: the stems in the index's
    languages (here Spanish), not only the English ones; every content word held means the
    query matched, so the response is not `low`."""
    from helpers.lexical.query_terms import Query

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in SPANISH.items():
        (docs / name).write_text(f"{text}\n", "utf-8")
    config = make_config(docs, tmp_path / "state")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=60)
    assert view.state == "succeeded", view.to_dict()
    result = rag_service.search(config, query, mode="lexical", detail="full")
    assert result.hits[0].path == path
    text = result.sections[result.hits[0].section_id]
    # the English-only stems miss a word ("guardando" is not "guard..."); the index's hold all
    assert confidence.coverage(Query.parse(query), text) < confidence.COVERAGE_MIN
    assert confidence.evidence(result).coverage == 1.0
    assert result.confidence != "low"


def test_full_coverage_is_never_low_whatever_the_coverage_threshold(config: Config) -> None:
    """The rule holds for any calibration of COVERAGE_MIN: a top section with every content
    word of the query is not `low`, even when the semantic side has nothing to say."""
    ev = confidence.evidence(
        rag_service.search(config, "configure the printer queue", mode="lexical")
    )
    assert ev.coverage == 1.0 and ev.cosine is None
    assert confidence.band(ev, coverage_min=1.5) != "low"
    assert confidence.band(replace(ev, coverage=0.5), coverage_min=1.5) == "low"


def test_the_sample_folders_retention_clause_is_not_low_when_it_holds_every_word(
    tmp_path: Path,
) -> None:
    """The sample folder (rag_document/) synced for real: the retention clause of the contract
    holds every content word of the query, so it is not `low` in lexical mode."""
    sample = Path(__file__).resolve().parents[1] / "rag_document"
    config = make_config(sample, tmp_path / "state")
    view = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=120)
    assert view.state == "succeeded", view.to_dict()
    result = rag_service.search(config, "are signed contracts kept", mode="lexical", detail="full")
    assert "Signed contracts are kept" in result.sections[result.hits[0].section_id]
    assert confidence.evidence(result).coverage == 1.0
    assert result.confidence != "low"


def test_the_units_channels_rank_and_margin_reach_the_evidence(config: Config) -> None:
    """Lexical mode: the units channel (whole documents) ranks the printer page first and the
    shed note (`replace`) second; the band sees that rank and the channel's margin of its first
    document over its second (the scores the hits carry from it); a query only one document
    answers has margin 1. Beside the semantic side the channel is a lift of the lexical
    evidence, not a ranked channel: no hit carries a units rank there, but the band still sees
    the channel's rank of the top hit's document."""
    result = rag_service.search(config, "replace the printer queue", mode="lexical")
    ev = confidence.evidence(result)
    top = result.hits[0]
    assert top.path == "printer.md" and ev.units_ran and ev.unit_rank == 1
    units = [h.channels["units"] for h in result.hits if "units" in h.channels]
    second = next(u.score for u in units if u.rank == 2)
    first = top.channels["units"].score
    assert ev.unit_margin == pytest.approx((first - second) / first)
    assert 0.0 < ev.unit_margin < 1.0
    alone = rag_service.search(config, "sharpen the lawn mower blade", mode="lexical")
    assert {h.path for h in alone.hits} == {"lawn.md"}
    assert confidence.evidence(alone).unit_margin == 1.0
    searched = rag_service.search(config, "replace the printer queue", mode="hybrid")
    hybrid = confidence.evidence(searched)
    assert not any("units" in h.channels for h in searched.hits)
    assert searched.hits[0].path == "printer.md"
    assert hybrid.units_ran and hybrid.unit_rank == 1
    assert hybrid.unit_margin == pytest.approx(ev.unit_margin)


def test_the_units_margin_is_over_the_second_document() -> None:
    from helpers.lexical.common import ChannelResult

    two_docs = ChannelResult("units", [(7, 4.0), (8, 4.0), (9, 3.0)], ranks=(1, 1, 2))
    assert confidence.unit_margin([two_docs]) == pytest.approx(0.25)
    assert confidence.unit_margin([ChannelResult("units", [(7, 4.0)], ranks=(1,))]) == 1.0
    assert confidence.unit_margin([ChannelResult("bm25", [(7, 4.0), (9, 3.0)])]) == 0.0


def test_the_lexical_side_alone_takes_its_own_rule(config: Config) -> None:
    """Without a cosine (lexical mode) `high` is decided by the *_lexical rule alone: its own
    margin (by text or by document), the units channel's first document and margin when that
    channel ran, and full coverage when asked; the hybrid rule's margin does not apply."""
    ev = confidence.evidence(
        rag_service.search(config, "how do I install the scanner driver", mode="lexical")
    )
    assert ev.cosine is None and ev.units_ran and ev.unit_rank == 1 and ev.coverage == 1.0
    assert confidence.band(ev) == "high"
    assert confidence.band(ev, margin_high=2.0) == "high"
    lexical = {"margin_by_document_lexical": False}
    assert confidence.band(ev, margin_high_lexical=ev.margin + 0.01, **lexical) == "medium"
    agree = {"unit_agree_lexical": True}
    assert confidence.band(replace(ev, unit_rank=2), **agree) == "medium"
    assert confidence.band(replace(ev, unit_rank=2), unit_agree_lexical=False) == "high"
    alone = replace(ev, units_ran=False, unit_rank=None, unit_margin=0.0)
    assert confidence.band(alone, **agree, unit_margin_lexical=0.5) == "high"  # nothing to ask
    assert confidence.band(ev, unit_margin_lexical=ev.unit_margin + 0.01) == "medium"
    partial = replace(ev, coverage=0.9)
    assert confidence.band(partial, full_coverage_lexical=True) == "medium"
    assert confidence.band(partial, full_coverage_lexical=False) == "high"


def test_two_passages_of_the_top_document_leading_is_the_second_lexical_route(
    config: Config,
) -> None:
    """Both lawn sections lead (the runner-up is the top document's own passage): in lexical
    mode the margin over the first other document then needs only OWN_MARGIN_LEXICAL; the same
    margin with the runner-up in another document does not reach `high`."""
    result = rag_service.search(config, "sharpen the lawn mower blade", mode="lexical")
    ev = confidence.evidence(result)
    assert [h.path for h in result.hits[:2]] == ["lawn.md", "lawn.md"]
    assert ev.doc_margin > ev.margin and ev.cosine is None
    assert confidence.OWN_MARGIN_LEXICAL is not None
    own = replace(ev, margin=0.0, doc_margin=confidence.OWN_MARGIN_LEXICAL)
    assert confidence.band(own) == "high"
    assert confidence.band(own, own_margin_lexical=None) == "medium"  # the route decides
    below = replace(own, doc_margin=confidence.OWN_MARGIN_LEXICAL - 0.01)
    assert confidence.band(below) == "medium"
    other = replace(own, margin=own.doc_margin)  # the runner-up is another document's
    assert confidence.band(other, margin_high_lexical=own.doc_margin + 0.01) == "medium"


def test_beside_the_semantic_side_the_units_channel_can_back_or_veto_high(config: Config) -> None:
    """Hybrid mode: a top document the units channel ranks first by a margin of its own reaches
    `high` on a narrower fused margin (unit_route_hybrid), and one it ranks lower does not reach
    it at all (unit_agree_hybrid); a query the channel did not run for is judged as before."""
    ev = confidence.evidence(rag_service.search(config, "replace the printer queue", mode="hybrid"))
    assert ev.cosine is not None and ev.units_ran and ev.unit_rank == 1
    plain = {"unit_agree_hybrid": False, "unit_route_hybrid": None}
    narrow = replace(ev, margin=0.06, doc_margin=0.06, semantic=False, unit_margin=0.3)
    assert confidence.band(narrow, **plain) == "medium"
    route = {"unit_agree_hybrid": False, "unit_route_hybrid": (0.2, 0.05)}
    assert confidence.band(narrow, **route) == "high"
    assert confidence.band(replace(narrow, unit_rank=2), **route) == "medium"
    assert confidence.band(replace(narrow, unit_margin=0.1), **route) == "medium"
    assert confidence.band(replace(narrow, margin=0.04), **route) == "medium"
    assert confidence.band(ev, **plain) == "high"
    second = replace(ev, unit_rank=2)
    assert confidence.band(second, **plain) == "high"
    assert confidence.band(second, unit_agree_hybrid=True, unit_route_hybrid=None) == "medium"
    alone = replace(second, units_ran=False, unit_rank=None, unit_margin=0.0)
    assert confidence.band(alone, unit_agree_hybrid=True, unit_route_hybrid=(0.0, 0.0)) == "high"
    assert confidence.band(replace(alone, semantic=False), unit_route_hybrid=(0.0, 0.0)) == "medium"
