"""Whole-document BM25 over dictionary-tokenised Japanese / Chinese text, beside textbook BM25.

    python bench/cjk_tokenizer_bm25.py GOLDEN DOCS --data-dir DIR --tokenizer NAME [--json]
        [--fuse OURS.json]

Everything but the tokenisation is bench/textbook_bm25.py's: the same text (title + sections of
the index rag_eval.py --sync built in DIR), one FTS5 row per document with its tokenize string,
the OR of the query's distinct tokens, FTS5 bm25() (k1 = 1.2, b = 0.75), the same metrics. Text
and query are NFKC-normalised, cut at blanks into pieces of at most PIECE_CHARS characters (the
dictionaries have input limits), tokenised by the dictionary, casefolded, and the tokens holding
a letter or digit are joined by spaces. `bigram` is textbook_bm25's own tokenisation (the
control). Tokenizers (bench-only dependencies: pip install sudachipy sudachidict_core fugashi
unidic-lite janome jieba rjieba):

    bigram                      NFKC + overlapping CJK bigrams (textbook_bm25.tokenizer)
    sudachi-A|B|C[-norm]        SudachiPy + sudachidict_core, split mode A/B/C, surface or
                                normalized_form (-norm)
    fugashi[-base]              fugashi (MeCab) + unidic-lite, surface or orthBase (-base)
    janome[-base]               janome, surface or base_form (-base)
    jieba[-search]              jieba.cut (HMM on) or jieba.cut_for_search
    rjieba[-search]             rjieba (jieba-rs binding: the same dictionary, in a wheel)
    NAME+bigram                 the dictionary tokens and the bigrams, both in one row

--fuse takes a `rag_eval.py --details --k 10 --json` report of our search on the same set and adds
the reciprocal-rank fusion (RRF_K) of our document list with this BM25 list: what a channel of
this kind could add to our lexical side (run it with `bigram` too, to separate the tokenisation
from whole-document BM25 itself). The report adds the cost: load time (import to first token),
tokenisation time, characters and tokens per second over the documents.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import textbook_bm25  # noqa: E402  (bench/textbook_bm25.py: text, tokenize string, metrics)

PIECE_CHARS = 2_000  # SudachiPy refuses inputs over 49,149 bytes; pieces bound MeCab/janome too
RRF_K = 60  # Cormack, Clarke & Buettcher 2009, "Reciprocal rank fusion outperforms Condorcet"
_HAS_WORD = re.compile(r"[^\W_]")
Segmenter = Callable[[str], list[str]]


def _sudachi(mode: str, norm: bool) -> Segmenter:
    from sudachipy import Dictionary, SplitMode

    split = {"A": SplitMode.A, "B": SplitMode.B, "C": SplitMode.C}[mode]
    tokenizer = Dictionary(dict="core").tokenizer(split)
    if norm:
        return lambda text: [m.normalized_form() for m in tokenizer.tokenize(text)]
    return lambda text: [m.surface() for m in tokenizer.tokenize(text)]


def _fugashi(base: bool) -> Segmenter:
    import fugashi

    tagger = fugashi.Tagger()  # unidic-lite, found by fugashi itself
    if base:
        return lambda text: [w.feature.orthBase or w.surface for w in tagger(text)]
    return lambda text: [w.surface for w in tagger(text)]


def _janome(base: bool) -> Segmenter:
    from janome.tokenizer import Tokenizer

    tokenizer = Tokenizer()
    if base:
        return lambda text: [t.base_form for t in tokenizer.tokenize(text)]
    return lambda text: list(tokenizer.tokenize(text, wakati=True))


def _jieba(search: bool) -> Segmenter:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # it logs its dictionary load at INFO on stderr
    jieba.initialize()
    if search:
        return lambda text: list(jieba.cut_for_search(text))
    return lambda text: list(jieba.cut(text))


def _rjieba(search: bool) -> Segmenter:
    import rjieba  # jieba-rs, the jieba dictionary and HMM built into an abi3 wheel

    return rjieba.cut_for_search if search else lambda text: rjieba.cut(text, True)


def segmenter(name: str) -> Segmenter:
    """One selector for the tokenizers of the module docstring."""
    if name.startswith("sudachi-"):
        mode, _, norm = name.removeprefix("sudachi-").partition("-")
        return _sudachi(mode, norm == "norm")
    factories = {
        "fugashi": lambda: _fugashi(False),
        "fugashi-base": lambda: _fugashi(True),
        "janome": lambda: _janome(False),
        "janome-base": lambda: _janome(True),
        "jieba": lambda: _jieba(False),
        "jieba-search": lambda: _jieba(True),
        "rjieba": lambda: _rjieba(False),
        "rjieba-search": lambda: _rjieba(True),
    }
    if name not in factories:
        raise SystemExit(f"unknown tokenizer {name!r}; see the module docstring")
    return factories[name]()


def pieces(text: str) -> list[str]:
    """Cut at blanks into pieces of at most PIECE_CHARS (a longer blank-free run is cut hard)."""
    out: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > PIECE_CHARS:
            out.append(word[:PIECE_CHARS])
            word = word[PIECE_CHARS:]
        if current and len(current) + 1 + len(word) > PIECE_CHARS:
            out.append(current)
            current = ""
        current = f"{current} {word}" if current else word
    if current:
        out.append(current)
    return out


def dictionary_tokens(segment: Segmenter) -> Callable[[str], list[str]]:
    def tokens(text: str) -> list[str]:
        normal = unicodedata.normalize("NFKC", text)
        found = (t.casefold() for piece in pieces(normal) for t in segment(piece))
        return [t for t in (t.strip() for t in found) if _HAS_WORD.search(t)]

    return tokens


def rank_documents(
    golden: dict, documents: dict[str, str], tokens: Callable[[str], list[str]]
) -> tuple[dict[str, list[str]], dict]:
    """Query id -> top MRR_DEPTH paths by BM25, and the tokenisation cost."""
    started = time.perf_counter()
    rows = [(path, " ".join(tokens(text))) for path, text in sorted(documents.items())]
    tokenize_s = time.perf_counter() - started
    chars = sum(len(text) for text in documents.values())
    count = sum(len(body.split()) for _, body in rows)
    con = sqlite3.connect(":memory:")
    con.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, body, tokenize = "
        + textbook_bm25._quoted(textbook_bm25.FTS_TOKENIZE)
        + ")"
    )
    con.executemany("INSERT INTO docs(path, body) VALUES (?, ?)", rows)
    ranked: dict[str, list[str]] = {}
    for query in golden["queries"]:
        terms = list(dict.fromkeys(tokens(query["query"])))
        ranked[query["id"]] = (
            [
                row[0]
                for row in con.execute(
                    "SELECT path FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), path LIMIT ?",
                    (
                        " OR ".join(textbook_bm25._quoted(t) for t in terms),
                        textbook_bm25.MRR_DEPTH,
                    ),
                )
            ]
            if terms
            else []
        )
    con.close()
    cost = {
        "tokenize_seconds": round(tokenize_s, 2),
        "chars": chars,
        "tokens": count,
        "chars_per_second": round(chars / tokenize_s) if tokenize_s else None,
        "tokens_per_second": round(count / tokenize_s) if tokenize_s else None,
    }
    return ranked, cost


def rrf(*lists: list[str]) -> list[str]:
    score: dict[str, float] = {}
    for ranked in lists:
        for i, path in enumerate(ranked):
            score[path] = score.get(path, 0.0) + 1.0 / (RRF_K + i + 1)
    return sorted(score, key=lambda p: (-score[p], p))[: textbook_bm25.MRR_DEPTH]


def first_ranks(golden: dict, ranked: dict[str, list[str]]) -> dict[str, int | None]:
    """Query id -> rank of its relevant document in the list (None: not in it)."""
    ranks: dict[str, int | None] = {}
    for query in golden["queries"]:
        relevant = {r if isinstance(r, str) else r["path"] for r in query["relevant"]}
        found = ranked.get(query["id"], [])
        ranks[query["id"]] = next((i + 1 for i, p in enumerate(found) if p in relevant), None)
    return ranks


def metrics(golden: dict, ranked: dict[str, list[str]]) -> dict:
    ranks = first_ranks(golden, ranked)
    items = [(ranks[q["id"]], not ranked.get(q["id"])) for q in golden["queries"]]
    return {**textbook_bm25._metrics(items), "ranks": ranks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("golden", type=Path)
    parser.add_argument("docs", type=Path, help="the knowledge dir (its index is in --data-dir)")
    parser.add_argument("--data-dir", type=Path, required=True, help="rag_eval.py --sync index")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--fuse", type=Path, help="rag_eval --details --k 10 --json of ours")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    golden = json.loads(args.golden.read_text(encoding="utf-8"))
    documents = textbook_bm25.read_documents(args.data_dir / "index.sqlite3")
    lang = golden["queries"][0].get("lang", "und")
    started = time.perf_counter()
    name, _, plus = args.tokenizer.partition("+")
    if name == "bigram":
        tokens = textbook_bm25.tokenizer(lang)
    elif plus == "bigram":
        words, pairs = dictionary_tokens(segmenter(name)), textbook_bm25.tokenizer(lang)
        tokens = lambda text: words(text) + pairs(text)  # noqa: E731
    else:
        tokens = dictionary_tokens(segmenter(name))
    tokens("テスト 测试")  # the first call loads what the tokenizer loads lazily
    load_s = time.perf_counter() - started
    ranked, cost = rank_documents(golden, documents, tokens)
    report = {
        "name": golden.get("name", ""),
        "mode": f"bm25-{args.tokenizer}",
        **metrics(golden, ranked),
        "documents": len(documents),
        "cost": {"load_seconds": round(load_s, 3), **cost},
    }
    if args.fuse is not None:
        ours = json.loads(args.fuse.read_text(encoding="utf-8"))
        mine = {d["id"]: d["top"] for d in ours["details"]}
        fused = {qid: rrf(mine.get(qid, []), found) for qid, found in ranked.items()}
        report["ours"] = metrics(golden, mine)
        report["fused_with_ours"] = metrics(golden, fused)
    if args.json:
        print(json.dumps(report, ensure_ascii=False, indent=1))
    else:
        line = (
            f"{report['name']} {report['mode']}: MRR@10 {report['mrr@10']:.4f} "
            f"R@8 {report['recall@8']:.4f}; load {report['cost']['load_seconds']} s, "
            f"{report['cost']['tokens_per_second']} tokens/s"
        )
        if "fused_with_ours" in report:
            line += (
                f"; RRF with ours {report['fused_with_ours']['mrr@10']:.4f} "
                f"(ours {report['ours']['mrr@10']:.4f})"
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
