"""Chinese, Japanese and Korean text as overlapping character bigrams.

These scripts write words without spaces (Korean attaches particles to them), so SQLite's
word tokenizer sees a whole clause as one token and the trigram index cannot match the
two-character words that most of their vocabulary is made of. The classic answer (Lucene's
CJKBigramFilter) is to index every pair of adjacent CJK characters as a token: a two-character
word is then an exact token, and a longer word or a question is an OR of its pairs ranked by BM25.
No dictionary is needed, so it is the same for every CJK language and every domain.
"""

from __future__ import annotations

import re

# Hangul jamo, compatibility jamo and syllables.
_HANGUL = "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"
# Han (BMP, compatibility and supplementary planes), kana and the iteration marks 々〆〇.
_HAN_KANA = (
    "\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
# Full-width Latin letters and digits are not CJK: they stay words.
CJK_CHARS = _HANGUL + _HAN_KANA  # for a character class
CJK_RUN = re.compile(f"[{CJK_CHARS}]+")
HANGUL_RUN = re.compile(f"[{_HANGUL}]+")


def has_cjk(text: str) -> bool:
    return CJK_RUN.search(text) is not None


def is_hangul(run: str) -> bool:
    """Korean only: written in space-separated words (with particles), unlike Chinese/Japanese."""
    return HANGUL_RUN.fullmatch(run) is not None


def bigrams(run: str) -> list[str]:
    """Adjacent pairs of a CJK run, in order (a single character yields nothing: one character
    alone is too common to rank by, the short-term channel looks for it)."""
    return [run[i : i + 2] for i in range(len(run) - 1)]


def index_text(norm: str) -> str:
    """The bigram document of a chunk's folded text ("" when it has no CJK pair)."""
    return " ".join(gram for run in CJK_RUN.findall(norm) for gram in bigrams(run))


def split_runs(token: str) -> list[tuple[str, bool]]:
    """(piece, is_cjk) in order: "python编程语言" → [("python", False), ("编程语言", True)]."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for match in CJK_RUN.finditer(token):
        if match.start() > position:
            pieces.append((token[position : match.start()], False))
        pieces.append((match.group(0), True))
        position = match.end()
    if position < len(token):
        pieces.append((token[position:], False))
    return pieces
