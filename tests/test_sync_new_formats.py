"""Every new format through the real sync path (detached worker, sandbox child for mail, XML,
RTF and gzip) and search: hits carry their location labels, bad files are reported per file."""

from __future__ import annotations

import gzip
import os
import tarfile
from pathlib import Path

from format_fixtures import make_docx, write_text_pdf
from mail_fixtures import DOCX_TYPE, make_message, write_mbox

import rag_service
from helpers.config import Config


def _write_folder(root: Path, work: Path) -> None:
    pdf = write_text_pdf(work / "r.pdf", [["Quarterly report"], ["the zebrafish budget is 42"]])
    docx = make_docx(work / "m.docx")
    messages = [make_message(f"Weekly status {n}", f"Nothing new in week {n}.") for n in range(11)]
    messages.append(
        make_message(
            "Budget report",
            "The report is attached.",
            attachments=[
                ("report.pdf", pdf.read_bytes(), ("application", "pdf")),
                ("memo.docx", docx.read_bytes(), DOCX_TYPE),
            ],
        )
    )
    write_mbox(root / "archive.mbox", messages)
    one = make_message("Gasket order", "Order 40 nitrile gaskets before Friday.")
    (root / "order.eml").write_bytes(one.as_bytes())
    (root / "paper.tex").write_text(
        "\\section{Heat Transfer}\nThe quokkaflux coefficient is measured.\n", "utf-8"
    )
    (root / "guide.adoc").write_text("= Guide\n\n== Wombatsetup\n\nRun it twice.\n", "utf-8")
    (root / "notes.org").write_text("* Numbatplan\nBuy seeds.\n", "utf-8")
    (root / "pump.xml").write_text(
        "<manual><title>Pump</title><para>Platypusvalve torque 12 Nm.</para></manual>", "utf-8"
    )
    (root / "memo.rtf").write_text(r"{\rtf1\ansi Echidnaclause applies.\par}", "ascii")
    filler = "".join(f"value_{i} = compute_value({i}, scale=2)\n" for i in range(1, 400))
    code = filler + "\n\ndef bilbyscan():\n    return 1\n"  # the def is line 402
    (root / "tool.py").write_text(code, "utf-8")
    (root / "app.ini").write_text("[database]\nhost = dingohost\n", "utf-8")
    with gzip.open(root / "server.log.gz", "wb") as out:
        out.write(b"".join(b"line %d ok\n" % i for i in range(100)) + b"kookaburra failure\n")
    # hostile and refused ones: each is reported, the job goes on
    (root / "broken.tex").write_bytes(os.urandom(20_000))
    (root / "cut.xml").write_text("<a><b>never closed", "utf-8")
    with gzip.open(root / "bomb.txt.gz", "wb") as out:
        for _ in range(8):
            out.write(bytes(1024 * 1024))
    member = work / "a.txt"
    member.write_text("inside", "utf-8")
    with tarfile.open(root / "bundle.tar.gz", "w:gz") as tar:
        tar.add(member, arcname="a.txt")
    with gzip.open(root / "passwords.txt.gz", "wb") as out:
        out.write(b"hunter2\n")


def test_new_formats_sync_and_search_with_locations(config: Config, knowledge: Path, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    _write_folder(knowledge, work)
    job = rag_service.wait_for_job(config, rag_service.start_sync(config).job_id, timeout_s=240)
    assert job.state == "succeeded", job
    errors = {e["path"]: e["message"] for e in job.errors}
    errors.pop("passwords.txt.gz", None)  # a sensitive name: skipped by the walk, never read
    assert set(errors) == {"broken.tex", "cut.xml", "bomb.txt.gz", "bundle.tar.gz"}, errors
    assert "binary data" in errors["broken.tex"] and "malformed XML" in errors["cut.xml"]
    assert (
        "zip bomb" in errors["bomb.txt.gz"] and "archive of many files" in errors["bundle.tar.gz"]
    )

    def top(query: str) -> tuple[str, str]:
        hits = rag_service.search(config, query, mode="lexical").hits
        assert hits, query
        return hits[0].path, hits[0].location_label

    assert top("zebrafish budget") == (
        "archive.mbox",
        "message 12, attachment report.pdf, p. 2",
    )
    path, label = top("Москва")
    assert path == "archive.mbox" and label.startswith("message 12, attachment memo.docx")
    assert top("nitrile gaskets") == ("order.eml", "Gasket order")
    assert top("quokkaflux") == ("paper.tex", "Heat Transfer, line 2")
    assert top("Wombatsetup")[0] == "guide.adoc"
    assert top("Numbatplan")[0] == "notes.org"
    assert top("Platypusvalve") == ("pump.xml", "Pump, line 1")
    assert top("Echidnaclause") == ("memo.rtf", "line 1")
    path, label = top("bilbyscan")
    first, last = (int(n) for n in label.removeprefix("lines ").split("-"))
    assert path == "tool.py" and first <= 402 <= last and last - first < 120, label
    assert top("dingohost") == ("app.ini", "database, line 2")
    assert top("kookaburra")[0] == "server.log.gz"
    assert not rag_service.search(config, "hunter2", mode="lexical").hits

    listing = {i["path"]: i for i in rag_service.list_documents(config)["items"]}
    assert listing["order.eml"]["title"] == "Gasket order"
    assert listing["archive.mbox"]["title"] == "archive"
    assert "passwords.txt.gz" not in listing
    read = rag_service.read_document(
        config,
        "archive.mbox",
        location={"message": 12, "attachment": "report.pdf", "page": 2},
        before=0,
        after=0,
    )
    [section] = read["sections"]
    assert "zebrafish" in section["text"]
    assert section["location_label"] == "message 12, attachment report.pdf, p. 2"
