"""E-mail: one message (.eml) or a mailbox (.mbox), with attachments as locations inside it.

A hit cites `archive.mbox, message 12, attachment report.pdf, p. 3`: messages and attachments
are `Location.message` / `Location.attachment` of the container file, never documents of their
own (their paths would not exist on disk).

- Headers: Subject is the heading of the message (the document title of an .eml); From, To,
  Cc and Date are one metadata paragraph, so a search for a sender finds the message.
- Body: text/plain preferred, else text/html through the HTML extractor.
- Attachments of supported types are written to a private temporary file and read by that
  type's guarded extractor, in this same process: the sync worker sends .eml/.mbox to the
  sandbox child, so a PDF inside a mailbox meets the same memory cap, stall timeout, size and
  text limits as a PDF on disk. Attached messages (message/rfc822) are read as messages, nested
  up to `nesting.MAX_CONTAINER_DEPTH` containers. An attachment that is too large, of an
  unsupported type, sensitive by name (`id_rsa`, `passwords.xlsx`) or unreadable is not lost
  silently: a NOTE block names it and says why, so its name is still found.
- An mbox streams: messages are split at `From ` lines (after a blank line, as mboxrd writers
  keep them) and parsed one at a time, so memory follows the largest message, not the file.
"""

from __future__ import annotations

import email.errors
import email.header
import email.policy
import logging
import mimetypes
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from email.message import EmailMessage, Message
from email.parser import BytesFeedParser
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, Location, TextBlock
from helpers.extract.common import ExtractionCancelled, ParagraphBuffer, collapse_spaces
from helpers.extract.nesting import nested

log = logging.getLogger(__name__)

# A message holding more parts than this is not correspondence; the rest are named, not read.
MAX_ATTACHMENTS_PER_MESSAGE = 100
# Real mail nests multipart/mixed > alternative > related, a forwarded message adds a few more;
# past this the message is read without its deeper parts (a hostile nesting would recurse).
MAX_MIME_DEPTH = 24
# A single attachment larger than this (decoded) is named, not read. The per-file cap applies too.
MAX_ATTACHMENT_BYTES = 64 * 1024 * 1024
BINARY_SNIFF_BYTES = 8 * 1024
READ_BYTES = 1024 * 1024
METADATA_HEADERS = ("From", "To", "Cc", "Date")
_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f/\\]+")
# compat32 keeps headers as raw strings, decoded here only where shown: policy.default's header
# registry parsed every header on access and cost ~5 ms per message (an mbox read at 0.16 MB/s).
# EmailMessage as the factory still gives get_body() and iter_attachments().
_POLICY = email.policy.compat32
NOT_MAIL_HINT = "the file has a mail extension but holds binary data; rename or exclude it"


@dataclass(frozen=True)
class _Where:
    message: int | None  # 1-based message of an mbox; None in an .eml
    attachment: str | None  # attachment path inside the message ("fwd.eml / report.pdf")

    def child(self, name: str) -> _Where:
        return replace(self, attachment=f"{self.attachment} / {name}" if self.attachment else name)

    def locate(self, location: Location) -> Location:
        return replace(location, message=self.message, attachment=self.attachment)


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    with path.open("rb") as handle:
        head = handle.read(BINARY_SNIFF_BYTES)
    if b"\x00" in head:
        raise ExtractionError("binary data: NUL bytes in the first 8 KB", NOT_MAIL_HINT)
    with tempfile.TemporaryDirectory(prefix="ragdoc-mail-") as tmp:
        reader = _MailReader(ctx, Path(tmp))
        if path.suffix.lower() == ".mbox":
            for number, raw in enumerate(iter_mbox_messages(path), start=1):
                yield from reader.guarded(raw, _Where(number, None), mbox=True)
        else:
            yield from reader.guarded(path.read_bytes(), _Where(None, None), mbox=False)


def iter_mbox_messages(path: Path) -> Iterator[bytes]:
    """Raw bytes of each message of an mbox, `>From ` unescaped (mboxrd), one at a time.

    A file that does not start with a `From ` line is taken as one message (an export that
    wrote a single message under an .mbox name)."""
    lines: list[bytes] = []
    previous_blank = True
    started = False
    with path.open("rb") as handle:
        for line in handle:
            if line.startswith(b"From ") and previous_blank:
                if lines:
                    yield b"".join(lines)
                lines, started = [], True
                previous_blank = False
                continue
            if not started and not lines and not line.strip():
                continue
            if started and re.match(rb">+From ", line):
                line = line[1:]
            lines.append(line)
            previous_blank = not line.strip()
    if lines:
        yield b"".join(lines)


def _parse(raw: bytes) -> EmailMessage:
    parser = BytesFeedParser(_factory=EmailMessage, policy=_POLICY)
    for start in range(0, len(raw), READ_BYTES):
        parser.feed(raw[start : start + READ_BYTES])
    message = parser.close()
    assert isinstance(message, EmailMessage)
    return message


def decode_words(value: object) -> str:
    """RFC 2047 encoded words (`=?utf-8?B?...?=`) decoded; a malformed one stays as written."""
    text = str(value)
    if "=?" not in text:
        return collapse_spaces(text)
    try:
        return collapse_spaces(str(email.header.make_header(email.header.decode_header(text))))
    except (ValueError, LookupError, UnicodeError, email.errors.HeaderParseError):
        return collapse_spaces(text)


def _header(message: Message, name: str) -> str:
    """A header as text (`From: <<<broken` stays findable as written)."""
    value = message.get(name)
    return decode_words(value) if value is not None else ""


def _mime_depth(message: Message, limit: int) -> int:
    """Nesting depth of the MIME tree, counted without recursion and stopping past `limit`."""
    deepest = 0
    stack: list[tuple[Message, int]] = [(message, 1)]
    while stack:
        part, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend((child, level + 1) for child in payload if isinstance(child, Message))
    return deepest


def safe_name(name: str, fallback: str) -> str:
    name = _UNSAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .")
    return name[:120] or fallback


class _MailReader:
    def __init__(self, ctx: ExtractContext, work: Path) -> None:
        self.ctx = ctx
        self.work = work
        self.written = 0  # decoded attachment bytes of this container, against the bomb cap
        self.count = 0

    def guarded(self, raw: bytes, where: _Where, *, mbox: bool) -> Iterator[TextBlock]:
        """One message; a hostile one (MIME nested past the stack) costs only itself."""
        try:
            yield from self.message(_parse(raw), where, mbox=mbox)
        except RecursionError:
            log.warning("message %s: nesting too deep to read", where.message)
            note = "(this message is nested too deeply to read)"
            yield TextBlock(note, where.locate(Location()), BlockKind.NOTE)

    def message(self, message: EmailMessage, where: _Where, *, mbox: bool) -> Iterator[TextBlock]:
        if self.ctx.should_cancel():
            raise ExtractionCancelled("extraction cancelled")
        subject = _header(message, "Subject")[:200]
        path = (subject,) if subject else ()
        at = where.locate(Location(heading_path=path))
        if subject:
            # In an .eml the subject is the title; in an mbox every message is a section.
            kind = BlockKind.PARAGRAPH if mbox or where.attachment else BlockKind.HEADING
            yield TextBlock(
                subject if kind is BlockKind.HEADING else f"Subject: {subject}", at, kind
            )
        meta = [f"{name}: {_header(message, name)}" for name in METADATA_HEADERS]
        meta = [line for line in meta if not line.endswith(": ")]
        if meta:
            yield TextBlock("\n".join(meta), at, BlockKind.NOTE)
        if _mime_depth(message, MAX_MIME_DEPTH) > MAX_MIME_DEPTH:
            log.warning("message %s: MIME nesting over %d levels", where.message, MAX_MIME_DEPTH)
            yield TextBlock(
                f"(message parts nested over {MAX_MIME_DEPTH} levels deep were not read)",
                at,
                BlockKind.NOTE,
            )
            return
        yield from self.body(message, at)
        for number, part in enumerate(message.iter_attachments(), start=1):
            if number > MAX_ATTACHMENTS_PER_MESSAGE:
                yield self.note(at, "more attachments", f"over {MAX_ATTACHMENTS_PER_MESSAGE}")
                break
            yield from self.attachment(part, number, where, at)

    def body(self, message: EmailMessage, at: Location) -> Iterator[TextBlock]:
        part = message.get_body(preferencelist=("plain", "html"))
        if part is None:
            # A multipart whose boundary never appears: its text is all preamble.
            stray = [message.preamble or "", message.epilogue or ""]
            payload = message.get_payload()
            if isinstance(payload, str):  # a multipart type over a body with no parts at all
                stray.append(payload)
            yield from _paragraphs("\n\n".join(stray).splitlines(), at)
            return
        text = _part_text(part)
        if part.get_content_subtype() == "html":
            from helpers.extract.html_page import extract_html_chunks

            for block in extract_html_chunks([text], with_lines=False):
                if block.kind is BlockKind.HEADING:
                    block = replace(block, kind=BlockKind.PARAGRAPH)  # the subject heads it
                yield replace(block, location=replace(at, heading_path=at.heading_path))
            return
        yield from _paragraphs(text.splitlines(), at)

    def note(self, at: Location, name: str, why: str) -> TextBlock:
        log.info("attachment %s not indexed: %s", name, why)
        return TextBlock(f"Attachment: {name} (not indexed: {why})", at, BlockKind.NOTE)

    def attachment(
        self, part: EmailMessage, number: int, where: _Where, at: Location
    ) -> Iterator[TextBlock]:
        from helpers.extract import registry
        from helpers.safety import rel_path_problem

        ctype = part.get_content_type()
        if ctype == "message/rfc822":
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) and inner else inner
            if not isinstance(inner, EmailMessage):
                yield self.note(at, f"message-{number}.eml", "the attached message is empty")
                return
            name = safe_name(decode_words(part.get_filename() or ""), f"message-{number}.eml")
            try:
                with nested("attached message"):
                    yield from self.message(inner, where.child(name), mbox=False)
            except ExtractionError as exc:
                if isinstance(exc, ExtractionCancelled):
                    raise
                yield self.note(at, name, exc.message)
            return
        suffix = mimetypes.guess_extension(ctype) or ""
        name = safe_name(decode_words(part.get_filename() or ""), f"part-{number}{suffix}")
        problem = rel_path_problem(name)
        if problem is None and not Path(name).suffix and suffix:
            name += suffix  # a bare `report` sent as application/pdf is read as a PDF
            problem = rel_path_problem(name)
        if problem is not None:
            yield self.note(at, name, problem)
            return
        scratch = self.work / f"attachment-{self.count}{Path(name).suffix.lower()}"
        self.count += 1
        if registry.extractor_for(scratch) is None or registry.unsupported_reason(scratch):
            yield self.note(at, name, f"{Path(name).suffix or ctype} is not a supported type")
            return
        try:
            data = part.get_payload(decode=True) or b""
        except Exception as exc:  # noqa: BLE001 - a hostile transfer encoding
            yield self.note(at, name, f"its encoding could not be decoded ({type(exc).__name__})")
            return
        cap = min(MAX_ATTACHMENT_BYTES, self.ctx.limits.max_file_bytes)
        if len(data) > cap:
            yield self.note(at, name, f"{len(data) / 1e6:.1f} MB, over the {cap / 1e6:.0f} MB cap")
            return
        self.written += len(data)
        if self.written > self.ctx.limits.max_decompressed_bytes:
            yield self.note(at, name, "the attachments of this file exceed the size budget")
            return
        scratch.write_bytes(data)
        del data
        inner_where = where.child(name)
        try:
            with nested("attachment"):
                read = registry.extractor_for(scratch)
                assert read is not None
                for block in read(scratch, self.ctx):
                    if block.kind is BlockKind.HEADING:  # never the title of the container
                        block = replace(block, kind=BlockKind.PARAGRAPH)
                    yield replace(block, location=inner_where.locate(block.location))
        except ExtractionCancelled:
            raise
        except ExtractionError as exc:
            yield self.note(at, name, f"could not be read: {exc.message}")
        finally:
            scratch.unlink(missing_ok=True)


def _part_text(part: Message) -> str:
    """The decoded text of a text part: its charset, else UTF-8, undecodable bytes replaced."""
    raw = part.get_payload(decode=True)
    if not isinstance(raw, bytes):
        return str(part.get_payload() or "")
    charset = part.get_content_charset() or "utf-8"
    try:
        return raw.decode(charset, "replace")
    except LookupError:  # an unknown charset name
        return raw.decode("utf-8", "replace")


def _paragraphs(lines: Iterable[str], at: Location) -> Iterator[TextBlock]:
    buffer = ParagraphBuffer()
    for line in lines:
        if not line.strip():
            span = buffer.flush()
            if span is not None:
                yield TextBlock(span.text, at)
            continue
        for span in buffer.add(line.rstrip()):
            yield TextBlock(span.text, at)
    span = buffer.flush()
    if span is not None:
        yield TextBlock(span.text, at)
