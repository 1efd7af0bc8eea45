"""E-mail (.eml, .mbox): headers, bodies, attachments as locations inside the container file."""

from __future__ import annotations

import os
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest
from format_fixtures import make_docx, make_xlsx, write_text_pdf
from mail_fixtures import DOCX_TYPE, make_message, nested_mime, write_mbox

from helpers.extract import mail
from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, TextBlock
from helpers.extract.nesting import MAX_CONTAINER_DEPTH
from helpers.extract.registry import extractor_for
from helpers.extract.sandbox import SandboxedExtractor


def extract(path: Path, ctx: ExtractContext | None = None) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx or ExtractContext()))


def by_text(blocks: list[TextBlock], needle: str) -> TextBlock:
    return next(b for b in blocks if needle in b.text)


@pytest.fixture()
def attachments(tmp_path: Path) -> list[tuple[str, bytes, tuple[str, str]]]:
    pdf = write_text_pdf(
        tmp_path / "r.pdf", [["Quarterly report, first page"], ["the zebrafish budget is 42"]]
    )
    docx = make_docx(tmp_path / "m.docx")
    return [
        ("report.pdf", pdf.read_bytes(), ("application", "pdf")),
        ("memo.docx", docx.read_bytes(), DOCX_TYPE),
        ("bundle.zip", b"PK\x03\x04 not read", ("application", "zip")),
        ("id_rsa", b"-----BEGIN OPENSSH PRIVATE KEY-----", ("application", "octet-stream")),
    ]


def test_an_eml_has_subject_title_metadata_body_and_located_attachments(
    tmp_path: Path, attachments: list
):
    message = make_message(
        "Pump budget Q4",
        "Hi Bob,\n\nThe pump budget is attached.\n\nAnn",
        html="<p>HTML twin that must not be read</p>",
        attachments=attachments,
    )
    path = tmp_path / "budget.eml"
    path.write_bytes(message.as_bytes())
    blocks = extract(path)
    assert blocks[0].kind is BlockKind.HEADING and blocks[0].text == "Pump budget Q4"
    meta = blocks[1].text
    assert "From: Ann Lee <ann@example.com>" in meta and "To: bob@example.com" in meta
    assert "Date: Sun, 01 Nov 2026 09:30:00 +0000" in meta
    body = by_text(blocks, "pump budget is attached")
    assert body.location.heading_path == ("Pump budget Q4",) and body.location.attachment is None
    assert "HTML twin" not in "\n".join(b.text for b in blocks)  # text/plain is preferred
    page = by_text(blocks, "zebrafish budget")
    assert (page.location.attachment, page.location.page) == ("report.pdf", 2)
    assert page.location.label() == "attachment report.pdf, p. 2"
    row = by_text(blocks, "Москва")
    assert row.kind is BlockKind.TABLE_ROW and row.location.attachment == "memo.docx"
    assert row.location.heading_path == ("Annual Report", "Figures")
    notes = [b.text for b in blocks if b.text.startswith("Attachment:")]
    assert notes[0] == "Attachment: bundle.zip (not indexed: .zip is not a supported type)"
    assert notes[1].startswith("Attachment: id_rsa (not indexed: sensitive-looking name")
    assert "OPENSSH" not in "\n".join(b.text for b in blocks)


def test_an_mbox_numbers_messages_and_locates_attachment_pages(tmp_path: Path, attachments: list):
    messages = [
        make_message(f"Weekly status {n}", f"Status number {n}.\nFrom here on, all good.", day=n)
        for n in range(1, 12)
    ]
    messages.append(make_message("Report", "See the report.", attachments=attachments[:1]))
    path = write_mbox(tmp_path / "archive.mbox", messages)
    assert b"\n>From here on" in path.read_bytes()  # the writer escaped the body line
    blocks = extract(path)
    assert not [b for b in blocks if b.kind is BlockKind.HEADING]  # the title stays the file
    status = by_text(blocks, "Status number 7.")
    assert status.text == "Status number 7.\nFrom here on, all good."  # unescaped again
    assert status.location.message == 7
    assert status.location.label() == "message 7, Weekly status 7"
    page = by_text(blocks, "zebrafish")
    assert page.location.label() == "message 12, attachment report.pdf, p. 2"


def test_an_html_only_message_is_read_through_the_html_extractor(tmp_path: Path):
    message = EmailMessage()
    message["Subject"] = "Newsletter"
    message.set_content(
        "<html><head><style>p{}</style></head><body><h1>News</h1>"
        "<p>Rates fell <b>3%</b> in November.</p><script>zebra()</script></body></html>",
        subtype="html",
    )
    path = tmp_path / "news.eml"
    path.write_bytes(message.as_bytes())
    blocks = extract(path)
    assert by_text(blocks, "Rates fell").text == "Rates fell 3% in November."
    assert "zebra" not in "\n".join(b.text for b in blocks)


def test_a_forwarded_message_is_read_with_its_attachment_path(tmp_path: Path, attachments: list):
    inner = make_message("Original", "The original text.", attachments=attachments[:1])
    outer = make_message("Fwd: Original", "See below.")
    outer.add_attachment(inner, filename="original.eml")
    path = tmp_path / "fwd.eml"
    path.write_bytes(outer.as_bytes())
    blocks = extract(path)
    assert by_text(blocks, "The original text.").location.attachment == "original.eml"
    page = by_text(blocks, "zebrafish")
    assert page.location.label() == "attachment original.eml / report.pdf, p. 2"


def test_attachments_nested_past_the_limit_are_named_not_read(tmp_path: Path):
    message = make_message("level 0", "innermost zebra")
    for level in range(1, MAX_CONTAINER_DEPTH + 3):
        outer = make_message(f"level {level}", f"body {level}")
        outer.add_attachment(message, filename=f"level{level - 1}.eml")
        message = outer
    path = tmp_path / "deep.eml"
    path.write_bytes(message.as_bytes())
    blocks = extract(path)
    text = "\n".join(b.text for b in blocks)
    assert "innermost zebra" not in text
    assert "containers deep" in by_text(blocks, "not indexed: attached message is nested").text


def test_deeply_nested_mime_is_reported_and_the_mailbox_goes_on(tmp_path: Path):
    good = make_message("After the bomb", "still read")
    path = tmp_path / "box.mbox"
    with path.open("wb") as out:
        out.write(b"From x Mon Nov  2 10:00:00 2026\n" + nested_mime(sys.getrecursionlimit()))
        out.write(b"\n\nFrom x Mon Nov  2 10:00:00 2026\n" + good.as_bytes() + b"\n")
    blocks = extract(path)
    note = by_text(blocks, "nested")
    assert note.kind is BlockKind.NOTE and note.location.message == 1
    assert by_text(blocks, "still read").location.message == 2


def test_a_truncated_mbox_keeps_every_whole_message(tmp_path: Path, attachments: list):
    messages = [make_message(f"m{n}", f"message body {n}") for n in range(1, 4)]
    messages.append(make_message("cut", "cut body", attachments=attachments[:1]))
    path = write_mbox(tmp_path / "full.mbox", messages)
    data = path.read_bytes()
    cut = tmp_path / "cut.mbox"
    cut.write_bytes(data[: len(data) - 800])  # ends inside the base64 of the PDF
    blocks = extract(cut)
    assert {b.location.message for b in blocks if "message body" in b.text} == {1, 2, 3}
    assert by_text(blocks, "cut body").location.message == 4
    assert "could not be read" in by_text(blocks, "Attachment: report.pdf").text


def test_malformed_mime_is_read_as_far_as_it_goes(tmp_path: Path):
    raw = (
        b"Subject: =?utf-8?B?broken base64?=\nFrom: <<<not an address\n"
        b"Date: yesterday-ish\nMIME-Version: 1.0\n"
        b'Content-Type: multipart/mixed; boundary="never-used"\n\n'
        b"preamble zebra text without any boundary\n"
        b"Content-Transfer-Encoding: base64\n"
    )
    path = tmp_path / "bad.eml"
    path.write_bytes(raw)
    blocks = extract(path)
    text = "\n".join(b.text for b in blocks)
    assert "From: <<<not an address" in text and "Date: yesterday-ish" in text
    assert "preamble zebra text" in text
    raw2 = (
        b"Subject: odd charset\nContent-Type: text/plain; charset=x-no-such-charset\n\nplain words"
    )
    path.write_bytes(raw2)
    assert by_text(extract(path), "plain words").location.heading_path == ("odd charset",)


def test_binary_garbage_named_mbox_is_refused(tmp_path: Path):
    path = tmp_path / "mail.mbox"
    path.write_bytes(os.urandom(30_000) + b"\x00")
    with pytest.raises(ExtractionError, match="binary data"):
        extract(path)


def test_mbox_messages_stream_one_at_a_time(tmp_path: Path):
    path = write_mbox(
        tmp_path / "many.mbox", [make_message(f"s{n}", f"body {n}") for n in range(2000)]
    )
    reader = mail.iter_mbox_messages(path)
    first = next(reader)
    assert b"body 0" in first and b"body 1\n" not in first
    assert sum(1 for _ in reader) == 1999


def test_an_attachment_over_the_cap_is_named_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    xlsx = make_xlsx(tmp_path / "p.xlsx", rows=200)
    message = make_message(
        "Prices",
        "attached",
        attachments=[("prices.xlsx", xlsx.read_bytes(), ("application", "vnd.ms-excel"))],
    )
    path = tmp_path / "prices.eml"
    path.write_bytes(message.as_bytes())
    assert "Tea" in "\n".join(b.text for b in extract(path))  # under the cap it is read
    monkeypatch.setattr(mail, "MAX_ATTACHMENT_BYTES", xlsx.stat().st_size - 1)
    blocks = extract(path)
    note = by_text(blocks, "Attachment: prices.xlsx").text
    assert "over the" in note and "MB cap" in note
    assert not [b for b in blocks if b.location.attachment]


def test_the_sandbox_child_reads_a_mailbox_with_its_attachments(tmp_path: Path, attachments: list):
    messages = [
        make_message("one", "first"),
        make_message("two", "second", attachments=attachments),
    ]
    path = write_mbox(tmp_path / "box.mbox", messages)
    sandbox = SandboxedExtractor(ExtractContext().limits, None)
    try:
        blocks = list(sandbox.extract(path, lambda: None))
    finally:
        sandbox.close()
    assert by_text(blocks, "zebrafish").location.label() == "message 2, attachment report.pdf, p. 2"
    assert by_text(blocks, "Москва").location.attachment == "memo.docx"


def test_encoded_subjects_senders_and_attachment_names_are_decoded(tmp_path: Path):
    pdf = write_text_pdf(tmp_path / "r.pdf", [["страница отчёта zebra"]])
    message = make_message(
        "Отчёт за ноябрь — ภาษาไทย",
        "Текст письма.",
        sender="Иван Петров <ivan@example.com>",
        attachments=[("отчёт.pdf", pdf.read_bytes(), ("application", "pdf"))],
    )
    raw = message.as_bytes()
    assert b"=?utf-8?" in raw  # the writer encoded the headers (RFC 2047 / 2231)
    path = tmp_path / "ru.eml"
    path.write_bytes(raw)
    blocks = extract(path)
    assert blocks[0].text == "Отчёт за ноябрь — ภาษาไทย"
    assert "From: Иван Петров <ivan@example.com>" in blocks[1].text
    assert by_text(blocks, "zebra").location.label() == "attachment отчёт.pdf, p. 1"
