"""EPUB (zipfile + lxml): chapters in spine order, each read by the HTML extractor.

The heading path starts with the chapter's table-of-contents title (EPUB 3 nav or EPUB 2 NCX),
so a hit reads "Chapter 3 > Section heading". Entities are never expanded: XML is parsed with
resolve_entities=False and no network, chapters by the HTML extractor (DOCTYPE subsets skipped).
"""

from __future__ import annotations

import codecs
import posixpath
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

from lxml import etree

from helpers.extract.archive_guard import check_archive
from helpers.extract.blocks import ExtractContext, ExtractionError, TextBlock
from helpers.extract.common import ExtractionCancelled, collapse_spaces
from helpers.extract.html_page import SKIPPED_TAGS, extract_html_chunks
from helpers.extract.textio import detect_encoding

CONTAINER = "META-INF/container.xml"
ENCRYPTION = "META-INF/encryption.xml"
NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "ncx": "http://www.daisy.org/z3986/2005/ncx/",
    "xhtml": "http://www.w3.org/1999/xhtml",
    "epub": "http://www.idpf.org/2007/ops",
    "enc": "http://www.w3.org/2001/04/xmlenc#",
}
HTML_TYPES = frozenset({"application/xhtml+xml", "text/html", "application/x-dtbook+xml"})
# Font obfuscation is listed in encryption.xml too, but only hides fonts, never text.
FONT_OBFUSCATION = frozenset(
    {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
)
_SAFE_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, huge_tree=False, recover=True
)
_XML_DECL_ENCODING = re.compile(rb"^\s*<\?xml[^>]*encoding=[\"']([A-Za-z0-9._-]+)[\"']")
# EPUB 3 wraps chapter titles in <header>; only navigation chrome is dropped.
EPUB_SKIPPED_TAGS = SKIPPED_TAGS - {"header", "footer"}
BROKEN_HINT = "the EPUB is damaged; re-export it or convert it with Calibre"


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    check_archive(path, ctx.limits)
    with zipfile.ZipFile(path) as archive:
        opf_path = _rootfile(archive)
        opf = _parse(archive, opf_path)
        base = posixpath.dirname(opf_path)
        manifest = _manifest(opf, base)
        titles = _toc_titles(archive, opf, manifest, base)
        encrypted = _encrypted_members(archive)
        spine = opf.findall("opf:spine/opf:itemref", NS)
        if not spine:
            raise ExtractionError("EPUB has no spine (no reading order)", BROKEN_HINT)
        for number, itemref in enumerate(spine, start=1):
            if ctx.should_cancel():
                raise ExtractionCancelled("extraction cancelled")
            item = manifest.get(itemref.get("idref") or "")
            if item is None or item[1] not in HTML_TYPES:
                continue
            member = item[0]
            if member in encrypted:
                raise ExtractionError(
                    "DRM-protected EPUB: chapters are encrypted",
                    "only DRM-free EPUBs can be indexed",
                )
            try:
                data = archive.read(member)
            except KeyError:
                continue  # a spine entry pointing at a missing file: skip that chapter
            title = titles.get(member) or f"Chapter {number}"
            text = data.decode(_xml_encoding(data), errors="replace")
            yield from extract_html_chunks(
                [text], (title,), with_lines=False, skipped_tags=EPUB_SKIPPED_TAGS
            )


def _parse(archive: zipfile.ZipFile, member: str) -> etree._Element:
    try:
        data = archive.read(member)
    except KeyError as exc:
        raise ExtractionError(f"EPUB is missing {member}", BROKEN_HINT) from exc
    root = etree.fromstring(data, _SAFE_PARSER)
    if root is None:
        raise ExtractionError(f"EPUB {member} is not XML", BROKEN_HINT)
    return root


def _rootfile(archive: zipfile.ZipFile) -> str:
    container = _parse(archive, CONTAINER)
    rootfile = container.find("c:rootfiles/c:rootfile", NS)
    full_path = rootfile.get("full-path") if rootfile is not None else None
    if not full_path:
        raise ExtractionError("EPUB container names no package file", BROKEN_HINT)
    return full_path


def _join(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))


def _manifest(opf: etree._Element, base: str) -> dict[str, tuple[str, str, str]]:
    """id -> (member path, media type, properties)."""
    items: dict[str, tuple[str, str, str]] = {}
    for item in opf.findall("opf:manifest/opf:item", NS):
        item_id, href = item.get("id"), item.get("href")
        if item_id and href:
            items[item_id] = (
                _join(base, href),
                item.get("media-type", ""),
                item.get("properties", ""),
            )
    return items


def _toc_titles(
    archive: zipfile.ZipFile,
    opf: etree._Element,
    manifest: dict[str, tuple[str, str, str]],
    base: str,
) -> dict[str, str]:
    """member path -> first table-of-contents title pointing into it."""
    titles: dict[str, str] = {}
    for member, _, properties in manifest.values():
        if "nav" in properties.split():
            root = _try_parse(archive, member)
            if root is not None:
                nav_base = posixpath.dirname(member)
                for link in root.iter("{http://www.w3.org/1999/xhtml}a"):
                    href = link.get("href")
                    text = _plain_text(link)
                    if href and text:
                        titles.setdefault(_join(nav_base, href), text)
    spine = opf.find("opf:spine", NS)
    ncx_id = spine.get("toc") if spine is not None else None
    if ncx_id and ncx_id in manifest:
        member = manifest[ncx_id][0]
        root = _try_parse(archive, member)
        if root is not None:
            ncx_base = posixpath.dirname(member)
            for point in root.iter("{http://www.daisy.org/z3986/2005/ncx/}navPoint"):
                label = point.find("ncx:navLabel/ncx:text", NS)
                content = point.find("ncx:content", NS)
                if label is not None and content is not None and content.get("src"):
                    text = _plain_text(label)
                    if text:
                        titles.setdefault(_join(ncx_base, content.get("src") or ""), text)
    return titles


def _plain_text(element: etree._Element) -> str:
    """The element's text nodes only: an entity reference (kept unexpanded by _SAFE_PARSER, so
    no file is read) would otherwise show as "&name;"."""
    return collapse_spaces("".join(element.xpath(".//text()")))


def _try_parse(archive: zipfile.ZipFile, member: str) -> etree._Element | None:
    try:
        return etree.fromstring(archive.read(member), _SAFE_PARSER)
    except (KeyError, etree.XMLSyntaxError):
        return None  # a broken table of contents only costs chapter titles


def _encrypted_members(archive: zipfile.ZipFile) -> frozenset[str]:
    root = _try_parse(archive, ENCRYPTION) if ENCRYPTION in archive.namelist() else None
    if root is None:
        return frozenset()
    members = set()
    for data in root.iter("{http://www.w3.org/2001/04/xmlenc#}EncryptedData"):
        method = data.find("enc:EncryptionMethod", NS)
        if method is not None and method.get("Algorithm") in FONT_OBFUSCATION:
            continue
        ref = data.find("enc:CipherData/enc:CipherReference", NS)
        if ref is not None and ref.get("URI"):
            members.add(posixpath.normpath(unquote(ref.get("URI") or "")))
    return frozenset(members)


def _xml_encoding(data: bytes) -> str:
    """XHTML is UTF-8 unless a BOM or the XML declaration says otherwise."""
    declared = _XML_DECL_ENCODING.match(data[:200])
    if declared:
        name = declared.group(1).decode("ascii")
        try:
            codecs.lookup(name)
            return name
        except LookupError:
            pass
    return detect_encoding(data[:65536], whole_file=len(data) <= 65536)
