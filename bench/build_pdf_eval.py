"""Build the page-level PDF eval set from real manuals shipped in Debian documentation packages.

    python bench/build_pdf_eval.py OUT [--golden bench/eval/debian-pdf/golden.json] [--check]

Needs `apt-get install --no-install-recommends octave-doc gnuplot-doc asymptote-doc qpdf`.
Writes OUT/docs/ (plain copies of the manuals: the sync never follows symlinks),
OUT/docs-nooutline/ (the same PDFs with the outline removed by qpdf, page labels kept) and
OUT/golden.json. Everything is derived mechanically and deterministically from the PDFs:

- A term or title whose pages (over every manual) exceed MAX_TERM_PAGES is dropped.
- "index" queries: entries of each manual's back-of-book index (`term . . . 12, 45` or
  `term, 12, 45`), relevant = the pages the entry lists, printed page numbers mapped to PDF pages
  through /PageLabels (no labels: printed n = page n, checked below);
- "bookmark" queries: outline titles without their section numbers, relevant = the page the
  bookmark points to;
- "hubs": the contents pages (before the first bookmark) and index pages (from the first
  top-level "...Index" bookmark on) whose lines are mostly `entry ... number` lines.

A term or title found in several manuals is one query whose relevant pages are the union. The
sample per manual is the first QUOTA items in sha256 order of their text (stable, blind to
content). `--check` compares the result with the committed golden file and exits 1 on a change.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_raw

REPO_DIR = Path(__file__).resolve().parents[1]
GOLDEN_PATH = REPO_DIR / "bench" / "eval" / "debian-pdf" / "golden.json"
INSTALL_HINT = "apt-get install --no-install-recommends octave-doc gnuplot-doc asymptote-doc qpdf"


@dataclass(frozen=True)
class Manual:
    package: str
    source: Path
    name: str  # file name in the knowledge dir


MANUALS = (
    Manual("octave-doc", Path("/usr/share/doc/octave/octave.pdf"), "octave.pdf"),
    Manual("octave-doc", Path("/usr/share/doc/octave/liboctave.pdf"), "liboctave.pdf"),
    Manual("gnuplot-doc", Path("/usr/share/doc/gnuplot/gnuplot.pdf"), "gnuplot.pdf"),
    Manual("asymptote-doc", Path("/usr/share/doc/asymptote/asymptote.pdf"), "asymptote.pdf"),
)
INDEX_QUOTA = 60  # index terms per manual (fewer when its index is smaller)
BOOKMARK_QUOTA = 40  # bookmark titles per manual
MIN_TERM_ALNUM = 3  # "!", "#", "x" are not searches anyone types
MAX_TERM_PAGES = 3  # a term listed on many pages is found by chance on one of them
MAX_RANGE_PAGES = 5  # "65–67" expands; a longer range is a chapter, not a place
HUB_MIN_LINES = 8  # a contents/index page has many lines...
HUB_ENTRY_SHARE = 0.5  # ...and most of them end in page numbers
# The printed-number → page mapping is right when the terms mostly sit on the pages they list.
MIN_TERM_FOUND_SHARE = 0.7

# `term . . . . 12, 45` (texinfo) or `term, 12, 45` / `term, 65–67` (makeindex)
_NUMS = r"\d{1,4}(?:\s*[–-]\s*\d{1,4})?(?:\s*,\s*\d{1,4}(?:\s*[–-]\s*\d{1,4})?)*"
_INDEX_LINE = re.compile(rf"^(?P<term>.*?\S)\s*(?:(?:\.\s*){{2,}}|,\s+)(?P<pages>{_NUMS})$")
_ENTRY_LINE = re.compile(r"\S.*\D\s*\d{1,4}$")
_SECTION_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*\.?)\s+(?=\S)")
_TOP_PREFIX = re.compile(r"^(?:[IVX]+|[A-H])\s+(?=[A-Z])")  # "I Gnuplot", "F Grammar and Parser"
_ALNUM = re.compile(r"[^\W_]", re.UNICODE)


def page_label(pdf: pdfium.PdfDocument, index: int) -> str | None:
    size = pdfium_raw.FPDF_GetPageLabel(pdf.raw, index, None, 0)
    if size <= 2:
        return None
    buffer = ctypes.create_string_buffer(size)
    pdfium_raw.FPDF_GetPageLabel(pdf.raw, index, buffer, size)
    return buffer.raw[: size - 2].decode("utf-16-le")


def _dest_index(bookmark: pdfium.PdfOutlineItem) -> int | None:
    dest = bookmark.get_dest()
    return None if dest is None else dest.get_index()


def page_texts(pdf: pdfium.PdfDocument) -> list[str]:
    texts = []
    for index in range(len(pdf)):
        page = pdf[index]
        textpage = page.get_textpage()
        texts.append(textpage.get_text_range().replace("\r\n", "\n").replace("\r", "\n"))
        textpage.close()
        page.close()
    return texts


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def _entry_share(text: str) -> float:
    lines = _lines(text)
    if len(lines) < HUB_MIN_LINES:
        return 0.0
    return sum(1 for line in lines if _ENTRY_LINE.match(line)) / len(lines)


@dataclass(frozen=True)
class ManualData:
    manual: Manual
    pages: int
    contents_pages: tuple[int, ...]  # 1-based
    index_pages: tuple[int, ...]
    index_terms: dict[str, tuple[int, ...]]  # term -> 1-based pages
    bookmarks: dict[str, tuple[int, ...]]  # title -> 1-based pages
    term_found_share: float


def _expand(numbers: str) -> list[str]:
    out: list[str] = []
    for part in numbers.split(","):
        bounds = [b.strip() for b in re.split(r"[–-]", part)]
        if len(bounds) == 2:
            low, high = int(bounds[0]), int(bounds[1])
            if not 0 <= high - low < MAX_RANGE_PAGES:
                return []
            out += [str(n) for n in range(low, high + 1)]
        else:
            out.append(bounds[0])
    return out


def _clean_title(title: str, level: int) -> str:
    title = " ".join(title.split())
    title = _SECTION_NUMBER.sub("", title)
    if level == 0:
        title = _TOP_PREFIX.sub("", title)
    return title


def read_manual(manual: Manual, path: Path) -> ManualData:
    pdf = pdfium.PdfDocument(str(path))
    try:
        texts = page_texts(pdf)
        labels = [page_label(pdf, i) for i in range(len(pdf))]
        dests = [(b.level, b.get_title(), _dest_index(b)) for b in pdf.get_toc()]
    finally:
        pdf.close()
    by_label: dict[str, int] = {}
    for index, label in enumerate(labels):
        by_label.setdefault(label if label is not None else str(index + 1), index + 1)
    first_body = min((i for _, _, i in dests if i is not None), default=0)
    index_start = min(
        (i for lvl, t, i in dests if lvl == 0 and i is not None and t.lower().endswith("index")),
        default=len(texts),
    )
    contents = tuple(i + 1 for i in range(first_body) if _entry_share(texts[i]) >= HUB_ENTRY_SHARE)
    index_pages = tuple(
        i + 1 for i in range(index_start, len(texts)) if _entry_share(texts[i]) >= HUB_ENTRY_SHARE
    )
    hub_set = set(contents) | set(index_pages)
    terms: dict[str, set[int]] = {}
    for number in index_pages:
        for line in _lines(texts[number - 1]):
            match = _INDEX_LINE.match(line)
            if match is None:
                continue
            term = " ".join(match.group("term").split()).rstrip(".").strip()
            printed = _expand(match.group("pages"))
            pages = [by_label.get(p) for p in printed]
            if not printed or any(p is None for p in pages):
                continue
            terms.setdefault(term, set()).update(p for p in pages if p is not None)
    found = sum(1 for term, pages in terms.items() if _on_page(term, [texts[p - 1] for p in pages]))
    bookmarks: dict[str, set[int]] = {}
    for level, title, index in dests:
        if index is None or index + 1 in hub_set:
            continue
        clean = _clean_title(title, level)
        if clean:
            bookmarks.setdefault(clean, set()).add(index + 1)
    return ManualData(
        manual,
        len(texts),
        contents,
        index_pages,
        {t: tuple(sorted(p)) for t, p in terms.items()},
        {t: tuple(sorted(p)) for t, p in bookmarks.items()},
        found / len(terms) if terms else 0.0,
    )


def _on_page(term: str, texts: list[str]) -> bool:
    """The term's longest word is on one of its pages (entries are often `object, property`)."""
    word = max(re.findall(r"[^\W_]+", term.casefold()), key=len, default="")
    return any(word in " ".join(text.casefold().split()) for text in texts)


def _usable(text: str, pages: tuple[int, ...]) -> bool:
    return len(_ALNUM.findall(text)) >= MIN_TERM_ALNUM and 0 < len(pages) <= MAX_TERM_PAGES


def _sample(items: dict[str, tuple[int, ...]], quota: int, salt: str) -> list[str]:
    keys = [k for k, pages in items.items() if _usable(k, pages)]
    keys.sort(key=lambda k: hashlib.sha256(f"{salt}\0{k}".encode()).hexdigest())
    return keys[:quota]


def _queries(data: list[ManualData], group: str, quota: int) -> Iterator[dict]:
    chosen: dict[str, dict[str, tuple[int, ...]]] = {}  # folded text -> manual name -> pages
    shown: dict[str, str] = {}
    for item in data:
        items = item.index_terms if group == "index" else item.bookmarks
        for text in _sample(items, quota, f"{group}:{item.manual.name}"):
            folded = text.casefold()
            shown.setdefault(folded, text)
            chosen.setdefault(folded, {})
    for item in data:  # the same text elsewhere counts too: union of every manual's pages
        items = item.index_terms if group == "index" else item.bookmarks
        for text, pages in items.items():
            if text.casefold() in chosen:
                merged = set(chosen[text.casefold()].get(item.manual.name, ())) | set(pages)
                chosen[text.casefold()][item.manual.name] = tuple(sorted(merged))
    for folded in sorted(chosen, key=lambda f: hashlib.sha256(f.encode()).hexdigest()):
        if sum(len(pages) for pages in chosen[folded].values()) > MAX_TERM_PAGES:
            continue  # common to several manuals: found by chance on one of many pages
        relevant = [
            {"path": name, "location": {"page": page}}
            for name, pages in sorted(chosen[folded].items())
            for page in pages
        ]
        digest = hashlib.sha256(f"{group}\0{folded}".encode()).hexdigest()[:10]
        yield {
            "id": f"{group}-{digest}",
            "query": shown[folded],
            "lang": "en",
            "group": group,
            "relevant": relevant,
        }


def build_golden(data: list[ManualData]) -> dict:
    queries = [*_queries(data, "index", INDEX_QUOTA), *_queries(data, "bookmark", BOOKMARK_QUOTA)]
    hubs = [
        {"path": d.manual.name, "location": {"page": page}, "kind": kind}
        for d in data
        for kind, pages in (("contents", d.contents_pages), ("index", d.index_pages))
        for page in pages
    ]
    return {
        "name": "debian-pdf",
        "description": (
            "Page-level set built by bench/build_pdf_eval.py from "
            + ", ".join(f"{d.manual.package}:{d.manual.source}" for d in data)
        ),
        "manuals": [
            {
                "path": d.manual.name,
                "package": d.manual.package,
                "pages": d.pages,
                "contents_pages": list(d.contents_pages),
                "index_pages": list(d.index_pages),
                "index_terms": len(d.index_terms),
                "bookmarks": len(d.bookmarks),
                "index_terms_on_listed_page": round(d.term_found_share, 3),
            }
            for d in data
        ],
        "hubs": hubs,
        "queries": queries,
    }


def copy_manuals(out: Path) -> tuple[Path, Path]:
    docs, bare = out / "docs", out / "docs-nooutline"
    docs.mkdir(parents=True, exist_ok=True)
    bare.mkdir(parents=True, exist_ok=True)
    qpdf = shutil.which("qpdf")
    if qpdf is None:
        raise SystemExit(f"error: qpdf is missing; install it: {INSTALL_HINT}")
    for manual in MANUALS:
        if not manual.source.is_file():
            raise SystemExit(f"error: {manual.source} is missing; install it: {INSTALL_HINT}")
        shutil.copyfile(manual.source, docs / manual.name)
        # --empty --pages copies the pages (and their labels) but not the catalog's /Outlines
        subprocess.run(
            [qpdf, "--empty", "--pages", str(manual.source), "1-z", "--", str(bare / manual.name)],
            check=True,
        )
    return docs, bare


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to build docs/, docs-nooutline/, golden")
    parser.add_argument("--golden", type=Path, default=GOLDEN_PATH, help="committed golden file")
    parser.add_argument("--check", action="store_true", help="exit 1 if it differs from --golden")
    parser.add_argument("--write", action="store_true", help="also write it to --golden")
    args = parser.parse_args(argv)
    docs, _bare = copy_manuals(args.out)
    data = [read_manual(m, docs / m.name) for m in MANUALS]
    for d in data:
        if d.index_terms and d.term_found_share < MIN_TERM_FOUND_SHARE:
            sys.stderr.write(
                f"error: {d.manual.name}: only {d.term_found_share:.0%} of index terms sit on "
                "a page they list: the printed page mapping is wrong\n"
            )
            return 2
    golden = build_golden(data)
    text = json.dumps(golden, ensure_ascii=False, indent=1) + "\n"
    (args.out / "golden.json").write_text(text, encoding="utf-8")
    groups: dict[str, int] = {}
    for q in golden["queries"]:
        groups[q["group"]] = groups.get(q["group"], 0) + 1
    sys.stderr.write(f"{args.out / 'golden.json'}: {groups}, {len(golden['hubs'])} hub pages\n")
    if args.write:
        args.golden.parent.mkdir(parents=True, exist_ok=True)
        args.golden.write_text(text, encoding="utf-8")
    if args.check and args.golden.read_text(encoding="utf-8") != text:
        sys.stderr.write(f"error: the built set differs from {args.golden}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
