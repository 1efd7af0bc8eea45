"""Every document format the index reads, one record each: its suffixes, the extractor that reads
it, its MIME type, whether the sync worker reads it itself or in the sandbox, and what to install
when its library is missing. Sync (registry, rag_sync), the console (web_ui) and rag_health
derive their tables from FORMATS; nothing else lists suffixes.

Pure data and name rules: importing it costs nothing and imports no extractor.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Format:
    """One format. `mime` is the original's registered type as the console serves it ('' when
    it serves none: the file downloads as application/octet-stream)."""

    name: str
    suffixes: tuple[str, ...]
    module: str  # under helpers/extract/, with an `extract(path, ctx)` generator
    mime: str = ""
    # Read by our own streaming Python code (bounded memory, no C library that could hang or
    # balloon): the sync worker may read it in process; every other format goes to the sandbox.
    in_process: bool = False
    # The console shows the original as plain text (browsers download text/markdown or text/csv
    # instead of showing them, and plain text is never interpreted).
    shown_as_text: bool = False
    inline: bool = False  # the console shows the original in the browser instead of downloading
    library: str = ""  # import name of the third-party library its extractor needs
    install: str = ""  # what to run when that library is missing
    # Version of its reader's output, stored with each document: bump it when the reader's
    # output changes, and the next sync reads that format's documents again and no others.
    # 1 for YAML and JSON: OpenAPI / Swagger specs are read by operation (helpers.extract.openapi).
    reader_version: int = 0


_TEXT = {"in_process": True, "shown_as_text": True, "inline": True}
_OFFICE = "application/vnd.openxmlformats-officedocument."

# Source code and config files, read as text with line ranges (helpers/extract/source_code.py).
SOURCE_CODE_SUFFIXES = (
    # programming languages
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".java",
    ".kt", ".kts", ".swift", ".scala", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh",
    ".hxx", ".cs", ".fs", ".vb", ".rb", ".php", ".pl", ".pm", ".lua", ".r", ".jl", ".m",
    ".dart", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj", ".el", ".lisp", ".scm", ".groovy",
    ".gradle", ".vue", ".svelte", ".css", ".scss", ".less", ".zig", ".nim", ".v", ".vhd",
    ".f90", ".asm", ".s", ".proto", ".graphql", ".tf", ".cmake", ".mk", ".bat", ".ps1",
    # shells and queries
    ".sh", ".bash", ".zsh", ".fish", ".sql",
    # config
    ".toml", ".ini", ".cfg", ".conf", ".properties", ".desktop", ".service",
)  # fmt: skip

FORMATS: tuple[Format, ...] = (
    Format("text", (".txt", ".text", ".log"), "plain_text", "text/plain", **_TEXT),
    Format("yaml", (".yaml", ".yml"), "yaml_text", "application/yaml", reader_version=1,
           **_TEXT),
    Format("markdown", (".md", ".markdown"), "markdown", "text/markdown", **_TEXT),
    Format("rst", (".rst",), "rst", "text/x-rst", **_TEXT),
    Format("csv", (".csv",), "delimited", "text/csv", **_TEXT),
    Format("tsv", (".tsv",), "delimited", "text/tab-separated-values", **_TEXT),
    Format("json", (".json",), "json_text", "application/json", shown_as_text=True, inline=True,
           reader_version=1),
    Format("ipynb", (".ipynb",), "ipynb", "application/x-ipynb+json", shown_as_text=True,
           inline=True),
    Format("html", (".html", ".htm"), "html_page", "text/html", in_process=True, inline=True),
    Format("xhtml", (".xhtml",), "html_page", "application/xhtml+xml", inline=True),
    Format("pdf", (".pdf",), "pdf", "application/pdf", inline=True, library="pypdfium2",
           install="pip install pypdfium2"),
    Format("docx", (".docx",), "docx", _OFFICE + "wordprocessingml.document", library="docx",
           install="pip install python-docx"),
    Format("xlsx", (".xlsx",), "xlsx", _OFFICE + "spreadsheetml.sheet", library="openpyxl",
           install="pip install openpyxl"),
    Format("xlsm", (".xlsm",), "xlsx", "application/vnd.ms-excel.sheet.macroEnabled.12",
           library="openpyxl", install="pip install openpyxl"),
    Format("pptx", (".pptx",), "pptx", _OFFICE + "presentationml.presentation", library="pptx",
           install="pip install python-pptx"),
    Format("odt", (".odt",), "odt", "application/vnd.oasis.opendocument.text", library="odf",
           install="pip install odfpy"),
    Format("ods", (".ods",), "ods", "application/vnd.oasis.opendocument.spreadsheet",
           library="odf", install="pip install odfpy"),
    Format("odp", (".odp",), "odp", "application/vnd.oasis.opendocument.presentation",
           library="odf", install="pip install odfpy"),
    Format("doc", (".doc",), "legacy", "application/msword"),
    Format("xls", (".xls",), "legacy", "application/vnd.ms-excel"),
    Format("ppt", (".ppt",), "legacy", "application/vnd.ms-powerpoint"),
    Format("epub", (".epub",), "epub", "application/epub+zip"),
    Format("png", (".png",), "image", "image/png", inline=True, library="PIL",
           install="pip install pillow"),
    Format("jpeg", (".jpg", ".jpeg"), "image", "image/jpeg", inline=True, library="PIL",
           install="pip install pillow"),
    Format("tiff", (".tif", ".tiff"), "image", "image/tiff", library="PIL",
           install="pip install pillow"),
    Format("bmp", (".bmp",), "image", "image/bmp", inline=True, library="PIL",
           install="pip install pillow"),
    Format("webp", (".webp",), "image", "image/webp", inline=True, library="PIL",
           install="pip install pillow"),
    Format("latex", (".tex", ".ltx"), "latex", in_process=True),
    Format("asciidoc", (".adoc", ".asciidoc"), "asciidoc", in_process=True),
    Format("org", (".org",), "org", in_process=True),
    Format("xml", (".xml",), "xml_text"),  # expat, a C parser: sandboxed
    Format("gzip", (".gz",), "gzip_file"),
    Format("rtf", (".rtf",), "rtf", library="striprtf", install="pip install striprtf"),
    Format("mail", (".eml", ".mbox"), "mail"),
    Format("source code", SOURCE_CODE_SUFFIXES, "source_code", in_process=True),
)  # fmt: skip

BY_SUFFIX: dict[str, Format] = {s: f for f in FORMATS for s in f.suffixes}
SUPPORTED_SUFFIXES: frozenset[str] = frozenset(BY_SUFFIX)
# Suffixes the sync worker may read in process (rag_sync: when the file is small).
IN_PROCESS_SUFFIXES: frozenset[str] = frozenset(s for s, f in BY_SUFFIX.items() if f.in_process)
# Import name of a third-party library -> what to install when it is missing.
INSTALL_HINTS: dict[str, str] = {f.library: f.install for f in FORMATS if f.library}


def format_for(path: Path) -> Format | None:
    """The record of `path`'s suffix, or None when the index does not read it."""
    return BY_SUFFIX.get(path.suffix.lower())


def format_of(path: Path) -> str:
    """The format name stored for a document: its suffix without the dot, lower-case."""
    return path.suffix.lower().lstrip(".")


def format_version(path: Path | str) -> int:
    """The reader version of `path`'s format (documents.format_version; 0 when unread)."""
    found = BY_SUFFIX.get(Path(path).suffix.lower())
    return found.reader_version if found else 0


def gzip_inner_suffix(path: Path) -> str:
    """`.md` for `notes.md.gz`; '' when the name says nothing about the inner type."""
    return Path(path.stem).suffix.lower()


def unsupported_reason(path: Path) -> str | None:
    """Why a file with a registered suffix still cannot be read (`bundle.tar.gz`), or None."""
    suffix = path.suffix.lower()
    if suffix not in (".gz", ".tgz"):
        return None
    inner = gzip_inner_suffix(path)
    if suffix == ".tgz" or inner == ".tar":
        return "a .tar.gz is an archive of many files, not one gzipped document: not supported"
    if inner == ".gz":
        return "a gzip file inside a gzip file: not supported"
    return None
