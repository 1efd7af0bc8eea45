"""The query the embedding model reads, spelled as the folder spells it: marks put back on the
words a user typed without them (`bunky formatovani` → `buňky formátování`, `strasse` →
`straße`).

The lexical side matches without marks already (chunks.norm is folded), but the model reads
`formatovani` and `formátování` as different tokens: accent-free Czech keyword queries scored
0.15 MRR@10 below the same queries with marks on the semantic side (bench/RESULTS.md). A word is
respelled only when far more of the folder's own passages holding it (by its folded form,
sampled across the folder) write it with marks than without, so an English `resume` among
English pages stays as typed, and a word the folder does not hold is never touched.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter

from helpers.text.normalize import compatible, fold

# Passages read per query word, and the stretches of the folder (chunk id order) they are drawn
# from: the first passages alone come from a few neighbouring files, which may write the word
# their own way (an untranslated page, a function name); a spread sample is deterministic and
# costs one index seek per stretch.
PASSAGES_PER_STRETCH = 4
STRETCHES = 8
# A marked spelling replaces the typed one only when this many times more sampled passages use
# it: a typed form the folder itself writes often is a word of its own (Swedish `andra` beside
# `ändra`, Polish `tabele` beside `tabelę`).
MARKED_MAJORITY = 5
# A query of more words than this is left alone: a pasted paragraph is not typed, and its words
# cost a lookup each.
MAX_WORDS = 12
_WORD = re.compile(r"[^\W\d_]+")
# Shorter words are left as typed: function words whose marked twin is another word (Portuguese
# e / é, Spanish si / sí) carry little of a keyword query's meaning.
MIN_LETTERS = 3
# Letters whose marks people leave out (helpers.text.normalize folds the same ones): Latin and
# Greek, basic and extended.
_MARKABLE = re.compile("[a-z\u00c0-\u024f\u0370-\u03ff\u1e00-\u1fff]+")
# A word joined to another by `.` or `_` (`DIAS.LAB`, `C.REEEL.DEEL`, `os_walk`) is part of a
# name the software spells, usually without marks, whatever the prose around it writes.
_NAME_JOINERS = "._"
# Two subqueries: SQLite reads MIN and MAX of the key in one seek each only when each is alone in
# its SELECT (together they scan the table).
_ID_RANGE = "SELECT (SELECT MIN(id) FROM chunks), (SELECT MAX(id) FROM chunks)"


def with_folder_marks(conn: sqlite3.Connection, query_text: str) -> str:
    """`query_text` with each unmarked word respelled as the passages holding it mostly write it;
    unchanged when no word has a marked spelling in the folder."""
    words = [m.group() for m in _WORD.finditer(query_text)]
    if not words or len(words) > MAX_WORDS:
        return query_text
    names = _name_starts(query_text)
    prose = {m.group() for m in _WORD.finditer(query_text) if m.start() not in names}  # no names
    unmarked = [
        typed
        for typed in sorted({w for w in prose if len(w) >= MIN_LETTERS})
        if fold(typed.lower()) == typed.lower() and _MARKABLE.fullmatch(typed.lower())
    ]  # typed with marks, or in a script whose marks make other letters: as typed
    id_range = conn.execute(_ID_RANGE).fetchone() if unmarked else None
    if not id_range or id_range[0] is None:
        return query_text
    spelled: dict[str, str] = {}
    for typed in unmarked:
        word = typed.lower()
        capital = _is_capitalised(typed) and (typed != words[0] or words.count(typed) > 1)
        form = _folder_spelling(conn, word, id_range, capital=capital)
        if form != word:
            spelled[typed] = _cased_as(typed, form)
    if not spelled:
        return query_text
    return _WORD.sub(
        lambda m: m.group() if m.start() in names else spelled.get(m.group(), m.group()),
        query_text,
    )


def _name_starts(text: str) -> set[int]:
    return {m.start() for m in _WORD.finditer(text) if _in_name(text, *m.span())}


def _in_name(text: str, start: int, end: int) -> bool:
    before = text[start - 2 : start] if start >= 2 else ""
    after = text[end : end + 2]
    return (len(before) == 2 and before[1] in _NAME_JOINERS and before[0].isalnum()) or (
        len(after) == 2 and after[0] in _NAME_JOINERS and after[1].isalnum()
    )


def _is_capitalised(token: str) -> bool:
    """`Drive`, not `drive` or `DRIVE`: a capital mid-query is often a name, which the folder
    writes with its capital too (`Google Drive` beside Czech `dříve`); the first word's capital
    is as often the typist's sentence case, and counts every spelling."""
    return token[:1].isupper() and not token[1:].isupper()


def _folder_spelling(
    conn: sqlite3.Connection, word: str, id_range: tuple[int, int], *, capital: bool
) -> str:
    """The spelling of `word` (lower case, marks kept) that most sampled passages holding it
    use; `word` itself unless a marked spelling is used by MARKED_MAJORITY times more of them.
    With `capital`, only the passages' capitalised tokens count. Sampling stops once no marked
    spelling can win (an English word among English pages: after two stretches)."""
    forms: Counter[str] = Counter()
    stretches = _stretches(id_range)
    seen: set[int] = set()
    for done, start in enumerate(stretches, start=1):
        passages = _passages_from(conn, word, start)
        for chunk_id, text in passages:
            if chunk_id in seen:
                continue  # a stretch with few passages reads into the next one's
            seen.add(chunk_id)
            forms.update(_spellings_in(text, word, capital=capital))
        if len(passages) < PASSAGES_PER_STRETCH:
            break  # no passage after this one's holds the word: the later stretches are read
        unread = (len(stretches) - done) * PASSAGES_PER_STRETCH
        marked = max((n for f, n in forms.items() if f != word), default=0)
        if marked + unread <= MARKED_MAJORITY * forms[word]:
            return word
    if not forms:
        return word
    best = max(sorted(forms), key=lambda f: forms[f])
    return best if best != word and forms[best] > MARKED_MAJORITY * forms[word] else word


def _spellings_in(text: str, word: str, *, capital: bool) -> set[str]:
    """The spellings of `word` a passage uses: one vote each, a page that repeats a word is one
    voice."""
    used = set()
    for match in _WORD.finditer(text):
        token = match.group()
        if len(token) < len(word) - 1 or len(token) > len(word) + 1:
            continue  # ß → ss, æ → ae: a spelling differs by one letter at most
        if capital and not _is_capitalised(token):
            continue
        form = compatible(token).lower()
        if (form == word or fold(form) == word) and not _in_name(text, *match.span()):
            used.add(form)  # a name's part votes for no spelling of the prose word
    return used


def _stretches(id_range: tuple[int, int]) -> list[int]:
    """The first chunk id of each of STRETCHES equal stretches (fewer in a tiny folder)."""
    low, high = id_range
    return sorted({low + i * (high - low + 1) // STRETCHES for i in range(STRETCHES)})


def _passages_from(conn: sqlite3.Connection, word: str, start: int) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT c.id, c.text FROM chunks_words w JOIN chunks c ON c.id = w.rowid "
        "WHERE chunks_words MATCH ? AND w.rowid >= ? ORDER BY w.rowid LIMIT ?",
        ('"' + word + '"', start, PASSAGES_PER_STRETCH),
    )
    return [(row[0], row[1]) for row in rows]


def _cased_as(typed: str, form: str) -> str:
    if typed.isupper() and len(typed) > 1:
        return form.upper()
    if typed[:1].isupper():
        return form[:1].upper() + form[1:]
    return form
