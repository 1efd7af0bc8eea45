"""Textbook BM25 over whole documents, beside our numbers: the yardstick a keyword set is read
against.

    python bench/textbook_bm25.py GOLDEN DOCS [--lang xx] [--data-dir DIR] [--json]

The text is our extractor's: the sections of an index built by `rag_eval.py --sync` (given
with --data-dir, or built lexically into a temporary folder), title + sections concatenated per
document, so both sides see identical text. Each document is one row of SQLite FTS5
`tokenize = "unicode61 remove_diacritics 2"` (marks kept inside words) after this
pre-tokenisation (the same for queries): NFKC, casefold, words of letters and digits; runs of
Han, Kana and Hangul as overlapping bigrams (a one-character run as itself); Thai runs segmented
by pythainlp newmm; every other word stemmed by Snowball where Snowball has the language. The
query is the OR of its distinct tokens; the ranking is FTS5's bm25() (Robertson-Walker Okapi
BM25, k1 = 1.2, b = 0.75). Prints MRR@10 and Recall@1/3/8 in rag_eval's JSON shape, document level.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import snowballstemmer

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_DIR))

from helpers.store.codec import section_text  # noqa: E402  (sections.text may be compressed)

EVAL_SCRIPT = REPO_DIR / "rag_eval.py"
K = 8  # Recall@8 and the top of the list, as rag_eval reports
MRR_DEPTH = 10
SNOWBALL = {
    "cs": "czech", "da": "danish", "de": "german", "en": "english", "es": "spanish",
    "fi": "finnish", "fr": "french", "hu": "hungarian", "it": "italian", "nl": "dutch",
    "no": "norwegian", "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sv": "swedish", "tr": "turkish",
}  # fmt: skip
# Han, Hiragana, Katakana, Hangul syllables and jamo: scripts written without spaces
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u1100-\u11ff\u3130-\u318f"
    r"\uac00-\ud7af]+"
)
_THAI = re.compile(r"[\u0e00-\u0e7f]+")
_WORD = re.compile(rf"{_THAI.pattern}|[^\W_]+")  # Thai vowel signs are marks, not \w
# Marks (Thai vowels and tone marks) are part of a word; the default "L* N* Co" splits on them.
FTS_TOKENIZE = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"


def _thai_words() -> Callable[[str], list[str]]:
    from pythainlp.tokenize import word_tokenize

    return lambda run: [w for w in word_tokenize(run, engine="newmm") if w.strip()]


def tokenizer(lang: str) -> Callable[[str], list[str]]:
    """The pre-tokenisation of the module docstring, for documents and queries alike."""
    stemmer = snowballstemmer.stemmer(SNOWBALL[lang]) if lang in SNOWBALL else None
    thai: Callable[[str], list[str]] | None = None

    def run_tokens(word: str) -> Iterator[str]:
        nonlocal thai
        pos = 0
        for match in re.finditer(f"{_CJK.pattern}|{_THAI.pattern}", word):
            if match.start() > pos:
                yield from _stem(word[pos : match.start()])
            run = match.group()
            if _THAI.fullmatch(run):
                thai = thai or _thai_words()
                yield from thai(run)
            elif len(run) == 1:
                yield run
            else:
                yield from (run[i : i + 2] for i in range(len(run) - 1))
            pos = match.end()
        if pos < len(word):
            yield from _stem(word[pos:])

    def _stem(word: str) -> Iterator[str]:
        yield stemmer.stemWord(word) if stemmer is not None else word

    def tokens(text: str) -> list[str]:
        folded = unicodedata.normalize("NFKC", text).casefold()
        return [t for word in _WORD.findall(folded) for t in run_tokens(word)]

    return tokens


def read_documents(db: Path) -> dict[str, str]:
    """path -> title + sections in order, as our extractor wrote them into the index."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT d.path, d.title, s.text FROM documents d JOIN sections s "
            "ON s.document_id = d.id WHERE d.status = 'indexed' ORDER BY d.path, s.ordinal"
        ).fetchall()
    finally:
        con.close()
    docs: dict[str, list[str]] = {}
    for path, title, text in rows:
        docs.setdefault(path, [title]).append(section_text(text))
    return {path: "\n".join(parts) for path, parts in docs.items()}


def sync_index(golden: Path, docs: Path, data_dir: Path) -> Path:
    subprocess.run(
        [
            sys.executable, str(EVAL_SCRIPT), str(golden), "--knowledge-dir", str(docs),
            "--data-dir", str(data_dir), "--mode", "lexical", "--semantic", "off", "--sync",
            "--json",
        ],
        check=True, cwd=REPO_DIR, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return data_dir / "index.sqlite3"


def _quoted(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def evaluate(golden: dict, documents: dict[str, str], lang: str) -> dict:
    tokens = tokenizer(lang)
    con = sqlite3.connect(":memory:")
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize = "
        + _quoted(FTS_TOKENIZE)
        + ")"
    )
    con.executemany(
        "INSERT INTO docs(path, body) VALUES (?, ?)",
        ((path, " ".join(tokens(text))) for path, text in sorted(documents.items())),
    )
    started = time.perf_counter()
    per_lang: dict[str, list[tuple[int | None, bool]]] = {}
    per_group: dict[str, list[tuple[int | None, bool]]] = {}
    for query in golden["queries"]:
        terms = list(dict.fromkeys(tokens(query["query"])))
        ranked: list[str] = []
        if terms:
            ranked = [
                row[0]
                for row in con.execute(
                    "SELECT path FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), path LIMIT ?",
                    (" OR ".join(_quoted(t) for t in terms), MRR_DEPTH),
                )
            ]
        relevant = {r if isinstance(r, str) else r["path"] for r in query["relevant"]}
        rank = next((i + 1 for i, path in enumerate(ranked) if path in relevant), None)
        per_lang.setdefault(query.get("lang", "und"), []).append((rank, not ranked))
        if query.get("group"):
            per_group.setdefault(query["group"], []).append((rank, not ranked))
    con.close()
    everything = [item for items in per_lang.values() for item in items]
    report = {
        "name": golden.get("name", ""),
        "mode": "textbook-bm25",
        "lang": lang,
        **_metrics(everything),
        "by_lang": {code: _metrics(items) for code, items in sorted(per_lang.items())},
        "by_group": {name: _metrics(items) for name, items in sorted(per_group.items())},
        "documents": len(documents),
        "eval_seconds": round(time.perf_counter() - started, 2),
    }
    return report


def _metrics(items: list[tuple[int | None, bool]]) -> dict:
    n = len(items)

    def recall(k: int) -> float:
        return round(sum(1 for rank, _ in items if rank is not None and rank <= k) / n, 4)

    return {
        "queries": n,
        "recall@1": recall(1),
        "recall@3": recall(3),
        "recall@8": recall(K),
        "mrr@10": round(sum(1 / rank for rank, _ in items if rank is not None) / n, 4),
        "zero_results": sum(1 for _, empty in items if empty),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("docs", type=Path, help="the knowledge dir")
    parser.add_argument("--lang", help="stemmer/segmenter language (default: the queries' own)")
    parser.add_argument("--data-dir", type=Path, help="an index rag_eval.py --sync built")
    parser.add_argument("--json", action="store_true", help="print the JSON report")
    args = parser.parse_args(argv)
    golden = json.loads(args.golden.read_text(encoding="utf-8"))
    langs = Counter(q.get("lang", "und") for q in golden["queries"])
    lang = args.lang or langs.most_common(1)[0][0]
    if args.data_dir is not None:
        documents = read_documents(args.data_dir / "index.sqlite3")
    else:
        with tempfile.TemporaryDirectory(prefix="ragdoc-bm25-") as work:
            documents = read_documents(sync_index(args.golden, args.docs, Path(work)))
    report = evaluate(golden, documents, lang)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
    else:
        print(
            f"{report['name']} textbook BM25 ({lang}, {report['documents']} docs): "
            f"MRR@10 {report['mrr@10']:.4f} R@8 {report['recall@8']:.4f} "
            f"({report['queries']} queries)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
