"""Build a keyword-query eval set (back-of-book index term -> the page it points to) from help
pages shipped in Debian packages.

    python bench/build_keyword_eval.py OUT --lang es|it|pt|nl|pl|ko|sv|cs|pyindex
        [--queries N] [--strip-marks] [--doc-lang es|it|pt|nl|pl|ko|sv|cs]

- LibreOffice help (`apt-get install --no-install-recommends libreoffice-help-XX
  libreoffice-help-en-us`): the index is `/usr/share/libreoffice/help/XX/bookmarks.js`
  (`{url:"XX/text/.../page.html?DbPAR=APP#bm_id", app, text:"term -- subterm"}`); the pages are
  `XX/text/**/*.html`. OUT/docs/ holds every page, cut to the help's display area (the real
  page's header, side panels and debug footer are chrome) and without its
  `<meta itemprop="keywords">` lines: those repeat the page's index terms and a reader never
  sees them. An entry whose text is the en-US entry of the same page is untranslated and dropped
  (an English query on a translated page measures English, not the language).
- Python (`python3.11-doc`): the index is `genindex-all.html` (`term (qualifier)` -> page#anchor,
  sub-entries under their parent); OUT/docs/ holds every page except the index pages and
  search.html, unchanged. The query joins the entry with its parent and drops the brackets.

A query is the entry text with `--` joins and brackets turned into spaces. Entries whose
folded text points to several pages are dropped (one relevant document per query, as in
../shared/eval/README.md). The sample is the first N entries in sha256 order of their text
(stable, blind to content). `--strip-marks` writes the same queries with combining marks
removed (NFD, drop category Mn, NFC): the accent-free variant, as people type on a keyboard
without dead keys. `--doc-lang XX` makes a cross-lingual set: the index terms of `--lang` with
OUT/docs/ holding the XX help (its pages have the same file names in every language, so the
label is exact); an entry whose text is also an XX index term of the same page is dropped (it
is not cross-lingual). The output depends only on the installed packages: two builds are
identical.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import re
import shutil
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

LIBREOFFICE_HELP = Path("/usr/share/libreoffice/help")
PYTHON_HTML = Path("/usr/share/doc/python3.11/html")
LIBREOFFICE_LANGS = ("es", "it", "pt", "nl", "pl", "ko", "sv", "cs")
PYINDEX = "pyindex"
DEFAULT_QUERIES = 500  # within 300-1,000: enough to see a 0.02 MRR change, quick to evaluate
MIN_TERM_ALNUM = 3  # "%", "=", "C" are not searches anyone types
PY_SKIPPED_PAGES = frozenset({"search.html", "py-modindex.html"})  # hubs with no content


@dataclass(frozen=True)
class Entry:
    query: str
    page: str  # path relative to docs/


def install_hint(lang: str) -> str:
    if lang == PYINDEX:
        return "apt-get install --no-install-recommends python3.11-doc"
    return f"apt-get install --no-install-recommends libreoffice-help-{lang} libreoffice-help-en-us"


def query_text(raw: str) -> str:
    """'term -- subterm', 'name() (class in mod)' -> the words a person would type."""
    text = raw.replace(" -- ", " ").replace("()", " ")
    text = re.sub(r"[()]", " ", text)
    return " ".join(text.split())


def strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    kept = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    return unicodedata.normalize("NFC", kept)


# --- LibreOffice help ----------------------------------------------------------------------

_BOOKMARK = re.compile(
    r'^\{url:"(?P<url>[^"]*)", app:"[^"]*", text:"(?P<text>(?:[^"\\]|\\.)*)"\},?$'
)
_DISPLAY_START = re.compile(r'<div id="DisplayArea"[^>]*>')
_DISPLAY_END = '<div id="SearchFrame">'
_KEYWORDS_META = re.compile(r'<meta itemprop="keywords"[^>]*>\n?')
_TITLE = re.compile(r"<title>(.*?)</title>", re.S)


def _js_string(body: str) -> str:
    try:
        return json.loads(f'"{body}"')
    except json.JSONDecodeError:
        return body


def read_bookmarks(lang_dir: Path) -> list[tuple[str, str]]:
    """(page relative to the language folder, raw index text) for every index entry."""
    out = []
    for line in (lang_dir / "bookmarks.js").read_text(encoding="utf-8").splitlines():
        match = _BOOKMARK.match(line.strip())
        if match is None:
            continue
        url = match.group("url").split("?", 1)[0].split("#", 1)[0]
        page = url.split("/", 1)[1] if "/" in url else url
        out.append((page, html.unescape(_js_string(match.group("text")))))
    return out


def clean_help_page(source: str, lang: str) -> str:
    """The page's display area as a small HTML document, without the hidden keyword list."""
    title_match = _TITLE.search(source)
    title = title_match.group(1).strip() if title_match else ""
    start = _DISPLAY_START.search(source)
    if start is None:
        body = source
    else:
        end = source.find(_DISPLAY_END, start.end())
        body = source[start.end() : end if end >= 0 else len(source)]
    body = _KEYWORDS_META.sub("", body)
    return (
        f'<!DOCTYPE html>\n<html lang="{lang}">\n<head><meta charset="utf-8">'
        f"<title>{title}</title></head>\n<body>\n{body.strip()}\n</body>\n</html>\n"
    )


def _index_terms(lang_dir: Path) -> set[tuple[str, str]]:
    """(page, folded query text) of every index entry of one language."""
    return {(page, query_text(text).casefold()) for page, text in read_bookmarks(lang_dir)}


def libreoffice_entries(lang: str, docs: Path, doc_lang: str | None = None) -> list[Entry]:
    """The index entries of `lang`; the pages written to `docs` are `doc_lang`'s (default:
    the same language)."""
    page_lang = doc_lang or lang
    lang_dir, en_dir = LIBREOFFICE_HELP / lang, LIBREOFFICE_HELP / "en-US"
    page_dir = LIBREOFFICE_HELP / page_lang
    for needed in (lang_dir / "bookmarks.js", en_dir / "bookmarks.js", page_dir / "bookmarks.js"):
        if not needed.is_file():
            hint = install_hint(page_lang if needed.is_relative_to(page_dir) else lang)
            raise SystemExit(f"error: {needed} is missing; install it: {hint}")
    for page in sorted((page_dir / "text").rglob("*.html")):
        rel = page.relative_to(page_dir)
        target = docs / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(clean_help_page(page.read_text(encoding="utf-8"), page_lang), "utf-8")
    excluded = _index_terms(en_dir)
    if doc_lang is not None:  # a term the pages' own index shares is no cross-lingual query
        excluded |= _index_terms(page_dir)
    entries = [Entry(query_text(text), page) for page, text in read_bookmarks(lang_dir)]
    return [e for e in entries if (e.page, e.query.casefold()) not in excluded]


# --- Python documentation ------------------------------------------------------------------


_QUALIFIER = re.compile(r"\s*\([^()]*\)$")  # `name() (class in mod)` -> `name()`


def _entry_text(item: dict) -> str:
    """An open <li>'s own text without the `, [1], [2]` links to its further pages."""
    text = " ".join("".join(item["text"]).split())
    return re.sub(r",\s*\[\d+\]", "", text).strip(" ,")


class _GenIndexParser(HTMLParser):
    """Sphinx genindex: `<li><a href=p#x>term</a>, <a>[1]</a><ul><li><a>(sub)</a>...`; an entry
    without its own link (`<li>term<ul>...`) only names its sub-entries."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[dict] = []  # open <li>: own text, own pages
        self.entries: list[tuple[str, tuple[str, ...]]] = []
        self.in_content = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "li":
            self.stack.append({"text": [], "pages": [], "closed": False})
        elif tag == "ul" and self.stack:
            self.stack[-1]["closed"] = True  # text after the nested list is not the entry's
        elif tag == "a" and self.stack and not self.stack[-1]["closed"]:
            href = dict(attrs).get("href") or ""
            if href and "://" not in href:
                self.stack[-1]["pages"].append(href.split("#", 1)[0])

    def handle_endtag(self, tag: str) -> None:
        if tag != "li" or not self.stack:
            return
        item = self.stack.pop()
        own = _entry_text(item)
        if own.startswith("(") and self.stack:  # `(wave.Wave_read method)` under `readframes()`
            own = f"{_QUALIFIER.sub('', _entry_text(self.stack[-1]))} {own}"
        elif self.stack:  # `target list` under `assignment`
            own = f"{_entry_text(self.stack[-1])} {own}"
        if item["pages"] and own:
            self.entries.append((own, tuple(item["pages"])))

    def handle_data(self, data: str) -> None:
        if self.stack and not self.stack[-1]["closed"]:
            self.stack[-1]["text"].append(data)


def python_entries(docs: Path) -> list[Entry]:
    index = PYTHON_HTML / "genindex-all.html"
    if not index.is_file():
        raise SystemExit(f"error: {index} is missing; install it: {install_hint(PYINDEX)}")
    for page in sorted(PYTHON_HTML.rglob("*.html")):
        rel = page.relative_to(PYTHON_HTML)
        if rel.parts[0].startswith("_") or rel.name.startswith("genindex"):
            continue
        if rel.as_posix() in PY_SKIPPED_PAGES:
            continue
        target = docs / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    parser = _GenIndexParser()
    parser.feed(index.read_text(encoding="utf-8"))
    parser.close()
    return [Entry(query_text(text), page) for text, pages in parser.entries for page in set(pages)]


# --- the set -------------------------------------------------------------------------------


def _usable(query: str) -> bool:
    return sum(1 for c in query if c.isalnum()) >= MIN_TERM_ALNUM


def select_queries(entries: list[Entry], docs: Path, lang: str, quota: int) -> Iterator[dict]:
    pages: dict[str, set[str]] = {}  # folded query -> pages
    shown: dict[str, str] = {}
    for entry in entries:
        if not _usable(entry.query):
            continue
        folded = entry.query.casefold()
        pages.setdefault(folded, set()).add(entry.page)
        shown.setdefault(folded, entry.query)
    single = [f for f, p in pages.items() if len(p) == 1 and (docs / next(iter(p))).is_file()]
    single.sort(key=lambda f: hashlib.sha256(f"{lang}\0{f}".encode()).hexdigest())
    for folded in single[:quota]:
        digest = hashlib.sha256(f"{lang}\0{folded}".encode()).hexdigest()[:10]
        yield {
            "id": f"{lang}-{digest}",
            "query": shown[folded],
            "relevant": [next(iter(pages[folded]))],
            "lang": "en" if lang == PYINDEX else lang,
            "group": "index",
        }


def set_name(lang: str, marks_stripped: bool, doc_lang: str | None = None) -> str:
    base = PYINDEX if lang == PYINDEX else f"lohelp-{lang}"
    if doc_lang is not None:
        base = f"{base}2{doc_lang}"
    return f"{base}-nomarks" if marks_stripped else base


def build(
    out: Path, lang: str, quota: int, marks_stripped: bool = False, doc_lang: str | None = None
) -> dict:
    if doc_lang is not None and (lang == PYINDEX or doc_lang == lang):
        raise SystemExit("error: --doc-lang needs a LibreOffice --lang other than itself")
    docs = out / "docs"
    if docs.exists():
        shutil.rmtree(docs)
    docs.mkdir(parents=True)
    lo_entries = libreoffice_entries  # the pages of doc_lang when given
    entries = python_entries(docs) if lang == PYINDEX else lo_entries(lang, docs, doc_lang)
    queries = list(select_queries(entries, docs, lang, quota))
    if marks_stripped:
        queries = [{**q, "query": strip_marks(q["query"])} for q in queries]
    source = (
        "python3.11-doc:" + str(PYTHON_HTML / "genindex-all.html")
        if lang == PYINDEX
        else f"libreoffice-help-{lang}:{LIBREOFFICE_HELP / lang / 'bookmarks.js'}"
    )
    if doc_lang is not None:
        source += f", pages of libreoffice-help-{doc_lang}"
    golden = {
        "name": set_name(lang, marks_stripped, doc_lang),
        "description": f"Index term -> page, built by bench/build_keyword_eval.py from {source}",
        "queries": queries,
    }
    text = json.dumps(golden, ensure_ascii=False, indent=1) + "\n"
    (out / "golden.json").write_text(text, encoding="utf-8")
    return golden


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write golden.json and docs/ into")
    parser.add_argument("--lang", required=True, choices=[*LIBREOFFICE_LANGS, PYINDEX])
    parser.add_argument("--queries", type=int, default=DEFAULT_QUERIES, help="sample size")
    parser.add_argument("--strip-marks", action="store_true", help="accent-free queries")
    parser.add_argument(
        "--doc-lang", choices=LIBREOFFICE_LANGS, help="pages in this language: cross-lingual"
    )
    args = parser.parse_args(argv)
    golden = build(args.out, args.lang, args.queries, args.strip_marks, args.doc_lang)
    pages = sum(1 for p in (args.out / "docs").rglob("*") if p.is_file())
    count = len(golden["queries"])
    sys.stderr.write(f"{args.out / 'golden.json'}: {count} queries, {pages} pages\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
