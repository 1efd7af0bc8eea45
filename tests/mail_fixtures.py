"""Real e-mail files built with the stdlib: messages with bodies, HTML alternatives, real PDF and
DOCX attachments (made like tests/format_fixtures.py makes them), forwarded messages, mboxes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

DOCX_TYPE = ("application", "vnd.openxmlformats-officedocument.wordprocessingml.document")


def make_message(
    subject: str,
    body: str,
    *,
    sender: str = "Ann Lee <ann@example.com>",
    to: str = "bob@example.com",
    day: int = 1,
    html: str | None = None,
    attachments: Sequence[tuple[str, bytes, tuple[str, str]]] = (),
) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = to
    message["Date"] = format_datetime(dt.datetime(2026, 11, day, 9, 30, tzinfo=dt.UTC))
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, data, (maintype, subtype) in attachments:
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return message


def write_mbox(path: Path, messages: Sequence[EmailMessage]) -> Path:
    """An mboxrd file: `From ` separator lines, body lines starting with `From ` escaped."""
    with path.open("wb") as out:
        for message in messages:
            out.write(b"From ann@example.com Mon Nov  2 10:00:00 2026\n")
            raw = message.as_bytes(unixfrom=False)
            lines = raw.split(b"\n")
            escaped = [
                b">" + line if line.lstrip(b">").startswith(b"From ") else line for line in lines
            ]
            out.write(b"\n".join(escaped).rstrip(b"\n") + b"\n\n")
    return path


def nested_mime(depth: int) -> bytes:
    """A message whose multipart/mixed parts nest `depth` levels deep (hand-written MIME)."""
    head = b"From: x@example.com\nSubject: deep\nMIME-Version: 1.0\n"
    parts = [b"Content-Type: text/plain\n\ninnermost zebra text\n"]
    body = parts[0]
    for level in range(depth):
        boundary = b"b%d" % level
        body = (
            b'Content-Type: multipart/mixed; boundary="' + boundary + b'"\n\n--' + boundary
            + b"\n" + body + b"\n--" + boundary + b"--\n"
        )  # fmt: skip
    return head + body
