"""A folder of hostile files (>= 200) beside good ones, each with what a sync must do with it.

`make_hostile_corpus(root)` writes truncated and corrupt files of every binary format, zip bombs,
nested archives, XML entity bombs and XXE probes, wrong extensions, NUL bytes, invalid UTF-8,
hostile names (control characters, right-to-left overrides, very long, not UTF-8), symlink loops,
FIFOs, sockets, an unreadable file and a big single-line text file. Every case says what the sync
must do: report it failed with a reason, report it skipped, ignore it without reading it, or
index it; the good files beside them must all be indexed.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from format_fixtures import (
    make_docx,
    make_epub,
    make_ipynb,
    make_odp,
    make_ods,
    make_odt,
    make_pptx,
    make_xlsx,
    write_many_member_zip,
    write_text_pdf,
    write_zip_bomb,
)
from stress.corpora import KINDS, marker, write_document

FAILED = "failed"  # a documents row with status failed and a reason
SKIPPED = "skipped"  # a skipped_files row with its reason, no documents row
IGNORED = "ignored"  # never read, never listed (links, FIFOs, sockets, hidden files)
INDEXED = "indexed"  # a hostile *name* or harmless oddity: the content must be searchable
REPORTED = "reported"  # indexed, or failed with a reason (libraries may repair some damage)

ZIP_FORMATS = ("docx", "xlsx", "pptx", "odt", "ods", "odp", "epub")
BINARY_FORMATS = (*ZIP_FORMATS, "pdf")
TEXT_FORMATS = ("txt", "md", "csv", "json", "html", "rst", "yaml")
TRUNCATE_FRACTIONS = (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)
CORRUPT_SEEDS = range(4)
BOMB_BYTES = 8 * 1024 * 1024  # deflates ~1000:1, far over the 200:1 ratio guard
XXE_TOKEN = "xxecanary7731"  # text of a file outside the knowledge dir: must never be indexed
ENTITY_BOMB_TOKEN = "lolbomb"


@dataclass(frozen=True)
class HostileCase:
    rel_path: str  # as the index and job errors show it ('/'-separated; bytes as \\x escapes)
    category: str
    expect: str


@dataclass
class HostileCorpus:
    root: Path
    cases: list[HostileCase] = field(default_factory=list)
    good: dict[str, str] = field(default_factory=dict)  # rel path -> marker word inside it
    outside_canary: Path | None = None
    skipped_reasons: dict[str, str] = field(default_factory=dict)  # category -> why not made

    def add(self, rel: str, category: str, expect: str) -> None:
        self.cases.append(HostileCase(rel, category, expect))

    def by_expect(self, expect: str) -> list[HostileCase]:
        return [c for c in self.cases if c.expect == expect]


def _sources(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "docx": make_docx(folder / "s.docx"),
        "xlsx": make_xlsx(folder / "s.xlsx"),
        "pptx": make_pptx(folder / "s.pptx"),
        "odt": make_odt(folder / "s.odt"),
        "ods": make_ods(folder / "s.ods"),
        "odp": make_odp(folder / "s.odp"),
        "epub": make_epub(folder / "s.epub"),
        "pdf": write_text_pdf(folder / "s.pdf", [["first page words"], ["second page words"]]),
        "ipynb": make_ipynb(folder / "s.ipynb"),
    }


def _rewrite_member(source: Path, target: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            out.writestr(info, data if info.filename == member else src.read(info.filename))
    return target


# (member holding body text, the opening tag of a text node in it)
_XML_MEMBER = {
    "docx": ("word/document.xml", b"<w:t"),
    "xlsx": ("xl/worksheets/sheet1.xml", b"<t>"),
    "pptx": ("ppt/slides/slide1.xml", b"<a:t>"),
    "odt": ("content.xml", b"<text:p"),
    "ods": ("content.xml", b"<text:p"),
    "odp": ("content.xml", b"<text:p"),
    "epub": ("OEBPS/text/ch1.xhtml", b"<p>"),
}


def _doctype_into(xml: bytes, text_tag: bytes, doctype: bytes, reference: bytes) -> bytes:
    """Put a DOCTYPE before the root element and `reference` at the start of a text node."""
    if xml.startswith(b"<?xml"):
        end = xml.index(b"?>") + 2
        head, body = xml[:end], xml[end:]
    else:
        head, body = b"", xml
    root_name = body.lstrip()[1:].split(b" ", 1)[0].split(b">", 1)[0]
    tag_at = body.find(text_tag)
    if tag_at < 0:
        raise ValueError(f"no {text_tag!r} in the member")
    insert_at = body.index(b">", tag_at) + 1
    body = body[:insert_at] + reference + b" " + body[insert_at:]
    return head + b"<!DOCTYPE " + root_name + b" [" + doctype + b"]>" + body


def make_hostile_corpus(
    root: Path, big_text_bytes: int = 20 * 1024 * 1024, seed: int = 11
) -> HostileCorpus:
    """Write the corpus under `root` (created); returns every case and the good files."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    corpus = HostileCorpus(root)
    src = _sources(root.parent / f"{root.name}-sources")
    _good_files(corpus, rng)
    _truncated_and_corrupt(corpus, src, rng)
    _archives(corpus, src)
    _xml_attacks(corpus, src)
    _wrong_extensions(corpus, src)
    _bad_text(corpus)
    _hostile_names(corpus, rng)
    _special_files(corpus)
    _empty_files(corpus)
    big = root / "big" / "one-line.txt"
    big.parent.mkdir()
    write_one_line(big, big_text_bytes)
    corpus.add("big/one-line.txt", "big single-line text", REPORTED)
    return corpus


def _good_files(corpus: HostileCorpus, rng: random.Random) -> None:
    folder = corpus.root / "good"
    folder.mkdir()
    for kind in KINDS:
        write_document(folder / f"fine.{kind}", kind, 900, rng)
        corpus.good[f"good/fine.{kind}"] = marker(900, kind)


def _truncated_and_corrupt(corpus: HostileCorpus, src: dict[str, Path], rng: random.Random) -> None:
    folder = corpus.root / "damaged"
    folder.mkdir()
    for fmt in BINARY_FORMATS:
        data = src[fmt].read_bytes()
        for fraction in TRUNCATE_FRACTIONS:
            name = f"cut{int(fraction * 100):02d}.{fmt}"
            (folder / name).write_bytes(data[: int(len(data) * fraction)])
            corpus.add(f"damaged/{name}", "truncated", FAILED if fmt in ZIP_FORMATS else REPORTED)
        for n in CORRUPT_SEEDS:
            garbled = bytearray(data)
            start = len(garbled) // 4
            for _ in range(16):
                garbled[rng.randrange(start, len(garbled))] = rng.randrange(256)
            name = f"flip{n}.{fmt}"
            (folder / name).write_bytes(bytes(garbled))
            corpus.add(f"damaged/{name}", "corrupt bytes", REPORTED)
        noise = f"noise.{fmt}"
        (folder / noise).write_bytes(rng.randbytes(30_000))
        corpus.add(f"damaged/{noise}", "random bytes", FAILED)


def _archives(corpus: HostileCorpus, src: dict[str, Path]) -> None:
    folder = corpus.root / "archives"
    folder.mkdir()
    for fmt in ZIP_FORMATS:
        write_zip_bomb(folder / f"bomb.{fmt}", BOMB_BYTES)
        corpus.add(f"archives/bomb.{fmt}", "zip bomb", FAILED)
    for fmt in ("xlsx", "odt"):
        write_many_member_zip(folder / f"members.{fmt}", 10_001)
        corpus.add(f"archives/members.{fmt}", "too many members", FAILED)
    for fmt in ("docx", "pptx", "xlsx"):
        with zipfile.ZipFile(folder / f"nested101.{fmt}", "w") as archive:
            for index in range(101):
                archive.writestr(f"embeddings/{index}.zip", b"PK\x05\x06" + bytes(18))
        corpus.add(f"archives/nested101.{fmt}", "many nested archives", FAILED)
    for fmt in ("docx", "pptx", "xlsx"):
        inner = b"innermost"
        for depth in range(25):  # a zip inside a zip ... 25 deep, inside a real document
            buffer = folder / "tmp.zip"
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
                z.writestr(f"level{depth}.zip" if depth else "core.txt", inner)
            inner = buffer.read_bytes()
            buffer.unlink()
        target = folder / f"deepnest.{fmt}"
        with zipfile.ZipFile(src[fmt]) as s, zipfile.ZipFile(target, "w") as out:
            for info in s.infolist():
                out.writestr(info, s.read(info.filename))
            out.writestr("embeddings/deep.zip", inner)
        corpus.add(f"archives/deepnest.{fmt}", "deeply nested archive inside OOXML", REPORTED)


def _xml_attacks(corpus: HostileCorpus, src: dict[str, Path]) -> None:
    folder = corpus.root / "xml"
    folder.mkdir()
    outside = corpus.root.parent / f"{corpus.root.name}-outside"
    outside.mkdir(exist_ok=True)
    canary = outside / "canary.txt"
    canary.write_text(f"{XXE_TOKEN} secret outside the knowledge dir\n", encoding="utf-8")
    corpus.outside_canary = canary
    lol = (
        b'<!ENTITY l0 "'
        + ENTITY_BOMB_TOKEN.encode()
        + b'">'
        + b"".join(
            b'<!ENTITY l%d "%s">' % (i, b"".join(b"&l%d;" % (i - 1) for _ in range(10)))
            for i in range(1, 10)
        )
    )
    xxe = b'<!ENTITY xxe SYSTEM "' + canary.as_uri().encode() + b'">'
    for fmt in ZIP_FORMATS:
        member, tag = _XML_MEMBER[fmt]
        with zipfile.ZipFile(src[fmt]) as z:
            xml = z.read(member)
        lol_xml = _doctype_into(xml, tag, lol, b"&l9;")
        _rewrite_member(src[fmt], folder / f"lol.{fmt}", member, lol_xml)
        corpus.add(f"xml/lol.{fmt}", "XML entity expansion bomb", REPORTED)
        xxe_xml = _doctype_into(xml, tag, xxe, b"&xxe;")
        _rewrite_member(src[fmt], folder / f"xxe.{fmt}", member, xxe_xml)
        corpus.add(f"xml/xxe.{fmt}", "XML external entity (XXE)", REPORTED)
    for suffix in ("html", "xhtml"):
        for name, doctype, ref in (("lol", lol, b"&l9;"), ("xxe", xxe, b"&xxe;")):
            page = (
                b'<?xml version="1.0"?><!DOCTYPE html [' + doctype + b"]>"
                b'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>page ' + ref + b"</p>"
                b"</body></html>"
            )
            (folder / f"{name}.{suffix}").write_bytes(page)
            corpus.add(f"xml/{name}.{suffix}", f"XML {name} in {suffix}", REPORTED)


def _wrong_extensions(corpus: HostileCorpus, src: dict[str, Path]) -> None:
    folder = corpus.root / "renamed"
    folder.mkdir()
    pairs = [
        ("docx", "xlsx"),
        ("docx", "pptx"),
        ("docx", "odt"),
        ("docx", "pdf"),
        ("xlsx", "docx"),
        ("pptx", "xlsx"),
        ("ods", "odt"),
        ("odt", "odp"),
        ("epub", "docx"),
        ("pdf", "docx"),
        ("pdf", "xlsx"),
        ("pdf", "epub"),
        ("docx", "txt"),
        ("pdf", "md"),
        ("xlsx", "csv"),
        ("docx", "json"),
        ("pdf", "html"),
        ("ipynb", "docx"),
    ]
    for real, fake in pairs:
        name = f"{real}-as.{fake}"
        (folder / name).write_bytes(src[real].read_bytes())
        corpus.add(f"renamed/{name}", "wrong extension", REPORTED)
    png = folder / "picture-as.pdf"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(4000))
    corpus.add("renamed/picture-as.pdf", "wrong extension", FAILED)
    for fmt in ("docx", "xlsx", "pptx"):
        (folder / f"ole.{fmt}").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(4088))
        corpus.add(f"renamed/ole.{fmt}", "OLE2 (password-protected) container", FAILED)


def _bad_text(corpus: HostileCorpus) -> None:
    folder = corpus.root / "text"
    folder.mkdir()
    for fmt in TEXT_FORMATS:
        (folder / f"nul-early.{fmt}").write_bytes(b"header\x00\x00binary" + bytes(range(256)) * 8)
        corpus.add(f"text/nul-early.{fmt}", "NUL bytes", FAILED)
        (folder / f"nul-late.{fmt}").write_bytes(b"plain words " * 1200 + b"\x00 tail words\n")
        corpus.add(f"text/nul-late.{fmt}", "NUL byte past the sniffed head", REPORTED)
        (folder / f"badutf8.{fmt}").write_bytes(
            b"ok \xc3\x28 \xa0\xa1 \xf0\x28\x8c\x28 \xff\xfe" * 50
        )
        corpus.add(f"text/badutf8.{fmt}", "invalid UTF-8", REPORTED)
        (folder / f"overlong.{fmt}").write_bytes(b"a\xc0\xaf\xe0\x80\xaf\xed\xa0\x80b " * 200)
        corpus.add(f"text/overlong.{fmt}", "overlong / surrogate UTF-8", REPORTED)
        (folder / f"controls.{fmt}").write_bytes(
            b"ctl \x01\x02\x1b[31mred\x1b[0m \x7f \xe2\x80\xae override \xe2\x80\x8b zw\n" * 40
        )
        corpus.add(f"text/controls.{fmt}", "control characters in text", REPORTED)


def _hostile_names(corpus: HostileCorpus, rng: random.Random) -> None:
    folder = corpus.root / "names"
    folder.mkdir()
    names = {
        "invoice\u202efdp.md": "rtl override",
        "bidi\u2067isolate\u2069.txt": "bidi isolate",
        "ctl\x01\x02.md": "control characters",
        "tab\tname.txt": "tab",
        "new\nline.md": "newline",
        "esc\x1b[31m.md": "terminal escape",
        "zero\u200bwidth.csv": "zero width",
        "space .md": "trailing space",
        "-dash-first.md": "leading dash",
        "semi;colon'quote\".md": "quotes",
        "x" * 250 + ".md": "255-byte name",
        "я" * 124 + ".md": "255-byte Cyrillic name",
        "ไทย" * 27 + ".txt": "243-byte Thai name",
        "%2e%2e%2fescape.md": "url-encoded traversal",
        "..hidden-not.md": "name starting with dots",
    }
    for index, (name, why) in enumerate(names.items()):
        mark = f"hostilename{index:02d}"
        (folder / name).write_text(f"# Named\n\ncontent {mark}\n", encoding="utf-8")
        rel = f"names/{name}"
        if name.startswith("."):
            corpus.add(rel, f"hostile name: {why}", IGNORED)
        else:
            corpus.add(rel, f"hostile name: {why}", INDEXED)
            corpus.good[rel] = mark
    deep = folder
    for level in range(12):
        deep = deep / (f"d{level:02d}" + "q" * 200)
    deep.mkdir(parents=True)
    (deep / "deep.md").write_text("# Deep\n\ncontent deepnested01\n", encoding="utf-8")
    rel_deep = deep.relative_to(corpus.root).as_posix() + "/deep.md"
    corpus.add(rel_deep, "2.4 KB path", INDEXED)
    corpus.good[rel_deep] = "deepnested01"
    _path_max_tree(corpus, folder)
    raw_root = os.fsencode(folder)
    for raw, why in (
        (b"caf\xe9.md", "latin-1 name"),
        (b"\xff\xfe.txt", "invalid bytes"),
        (b"half\xc3.csv", "cut UTF-8 sequence"),
    ):
        with open(os.path.join(raw_root, raw), "wb") as f:
            f.write(b"# x\n\nnot utf8 name\n")
        corpus.add(_shown("names/", raw), f"non-UTF-8 name: {why}", SKIPPED)
    bad_dir = os.path.join(raw_root, b"dir\xff")
    os.mkdir(bad_dir)
    with open(os.path.join(bad_dir, b"inside.md"), "wb") as f:
        f.write(b"# inside\n\ntext\n")
    corpus.add(_shown("names/", b"dir\xff"), "non-UTF-8 folder name", SKIPPED)


def _shown(prefix: str, raw: bytes) -> str:
    """How the sync reports a non-UTF-8 name: surrogate escapes written out as text."""
    text = raw.decode("utf-8", "surrogateescape").encode("utf-8", "backslashreplace").decode()
    return prefix + text


def _path_max_tree(corpus: HostileCorpus, folder: Path) -> None:
    """A file whose path exceeds PATH_MAX (4,096 bytes), made with directory descriptors."""
    fd = os.open(folder, os.O_RDONLY)
    names = []
    try:
        for level in range(20):
            name = f"p{level:02d}" + "w" * 240
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
            names.append(name)
        leaf = os.open("toolong.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"# too long\n\ncontent\n")
        os.close(leaf)
    finally:
        os.close(fd)
    corpus.add(
        (folder / "/".join(names)).relative_to(corpus.root).as_posix() + "/toolong.md",
        "path over PATH_MAX",
        SKIPPED,  # reported at the first folder whose path is too long
    )


def _special_files(corpus: HostileCorpus) -> None:
    folder = corpus.root / "special"
    folder.mkdir()
    (folder / "loop.md").symlink_to("loop.md")
    (folder / "a.md").symlink_to("b.md")
    (folder / "b.md").symlink_to("a.md")
    (folder / "up").symlink_to("..")
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (folder / "outside-dir").symlink_to(corpus.root.parent / f"{corpus.root.name}-outside")
    (folder / "dangling.md").symlink_to("/nonexistent/file.md")
    for name in ("loop.md", "a.md", "b.md", "up", "passwd.txt", "outside-dir", "dangling.md"):
        corpus.add(f"special/{name}", "symbolic link", IGNORED)
    for name in ("pipe.txt", "pipe.md", "pipe.pdf"):
        os.mkfifo(folder / name)
        corpus.add(f"special/{name}", "FIFO", IGNORED)
    for name in ("sock.md", "sock.csv"):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(folder / name))
        server.close()
        corpus.add(f"special/{name}", "unix socket", IGNORED)
    for name in (".env", ".hidden.md", "id_rsa.txt", "ID_RSA.md", "secrets.yaml", "prod.ENV"):
        (folder / name).write_text("SECRET_TOKEN=hostilesecret99\n", encoding="utf-8")
        indexable = not name.startswith(".") and name.endswith((".txt", ".md", ".yaml"))
        corpus.add(f"special/{name}", "sensitive name", SKIPPED if indexable else IGNORED)
    ssh = folder / ".ssh"
    ssh.mkdir()
    (ssh / "config.md").write_text("Host x hostilesecret99\n", encoding="utf-8")
    corpus.add("special/.ssh/config.md", "sensitive folder", IGNORED)
    (folder / "dir.md").mkdir()
    (folder / "dir.md" / "inner.md").write_text("# inner\n\ninnerdirmark\n", encoding="utf-8")
    corpus.good["special/dir.md/inner.md"] = "innerdirmark"
    corpus.add("special/dir.md/inner.md", "folder named like a file", INDEXED)


def bind_unreadable_file(target: Path) -> bool:
    """Bind-mount this process's /proc/<pid>/mem over `target`: reading it raises EIO, even as
    root (offset 0 is never mapped). False when mounts are not allowed here."""
    target.write_bytes(b"")
    result = subprocess.run(
        ["mount", "--bind", f"/proc/{os.getpid()}/mem", str(target)], capture_output=True
    )
    return result.returncode == 0


def unbind(target: Path) -> None:
    subprocess.run(["umount", str(target)], capture_output=True)


def _empty_files(corpus: HostileCorpus) -> None:
    folder = corpus.root / "empty"
    folder.mkdir()
    for fmt in (*BINARY_FORMATS, *TEXT_FORMATS, "ipynb", "png"):
        (folder / f"empty.{fmt}").write_bytes(b"")
        corpus.add(f"empty/empty.{fmt}", "empty file", REPORTED)


def write_one_line(path: Path, size: int) -> None:
    """`size` bytes of words on one line (no newline at all)."""
    write_repeated(path, (" ".join(f"w{i % 997}" for i in range(20_000)) + " ").encode(), size)


def write_repeated(path: Path, piece: bytes, size: int) -> None:
    """`size` bytes of `piece` over and over, written in bounded pieces (never all in memory)."""
    with path.open("wb") as f:
        written = 0
        while written < size:
            chunk = piece[: size - written]
            f.write(chunk)
            written += len(chunk)
