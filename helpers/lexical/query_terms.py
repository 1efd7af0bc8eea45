"""A raw query → term groups: what each lexical channel searches for.

One group per word the user meant. Thai runs are segmented into words (newmm, via
helpers.text.thai); a Chinese / Japanese / Korean run is one group that the bigram channel splits
(helpers.text.cjk); identifiers (camelCase, snake_case, kebab-case, e-mail) keep their whole form
plus joined and spaced forms; words carry a Snowball stem (English or Russian here; in the
index's languages once fitted to an index, helpers.lexical.index_terms). Documents and queries
share fold(), so case, marks of Latin and Greek letters, compatibility forms (ﬁ, ＡＢＣ, ﾃｽﾄ),
ё/е, Thai digits, SARA AM and zero-width characters agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from helpers.lexical.stopwords import is_stop_word
from helpers.text import cjk, stemming, thai
from helpers.text.normalize import clean_text, compatible, fold, has_thai

# A token: letters/digits (Thai included), optionally joined by identifier punctuation
# (foo-bar, x86_64, a.b, user@host, don't) and ending in + or # (C++, C#).
_TOKEN = re.compile(r"[\w\u0e00-\u0e7f]+(?:[-._/@&'][\w\u0e00-\u0e7f]+)*[+#]*")
_POSSESSIVE = re.compile(r"(?<=[^\W\d_])'s?(?![^\W_])")  # Foundation's → Foundation
_JOINERS = re.compile(r"[-._/@&'+#]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_CHARS = re.compile(r"^[^\W_]+$")
TRIGRAM_MIN_CHARS = 3  # FTS5 trigram cannot match shorter terms (they silently match nothing)
MAX_GROUPS = 32  # a pasted paragraph is cut here: more terms add cost, not precision
# A substring (trigram) form is searched by at most its first TRIGRAM_FORM_MAX_CHARS characters:
# FTS5 reads one posting list per trigram of a phrase, so a run like "inginging..." of common
# trigrams cost seconds, while a longer prefix names hardly fewer chunks (a superset is found
# and ranked). Longer than any real word or identifier seen in queries (bench/notes/s-scale.md).
TRIGRAM_FORM_MAX_CHARS = 64

_QUESTION_TEXT = """
are can could did do does how is may might shall should was were what when where which who
whom whose why will would где зачем как какая какие каков какое какой когда кто ли отчего
почему сколько что ทำไม ที่ไหน หรือไม่ อย่างไร อะไร เมื่อไร ใคร ไหม
"""
QUESTION_WORDS = frozenset(_QUESTION_TEXT.split())


@dataclass(frozen=True)
class TermGroup:
    """One word of the query and every form that counts as that word."""

    text: str  # folded, as the user wrote it ("e-mail", "getusername", "отчетов")
    kind: str  # "word" (letters/digits), "symbol" (has punctuation), "thai", "cjk"
    stop: bool
    stem: str | None = None  # Snowball prefix stem (word kind only)
    parts: tuple[str, ...] = ()  # identifier parts: ("get", "user", "name"), ("e", "mail")
    spellings: tuple[str, ...] = ()  # other accepted spellings (Thai alias table)
    # Recall-only substrings (Thai): pieces of a dictionary compound, pairs of those pieces, and
    # this word joined with the next one (catches two-letter words trigrams cannot see alone).
    extra: tuple[str, ...] = ()

    @property
    def joined(self) -> str:
        return "".join(self.parts) if self.parts else self.text

    @property
    def cut(self) -> bool:
        """Whether substrings() shortens one of its forms (TRIGRAM_FORM_MAX_CHARS)."""
        return any(len(f) > TRIGRAM_FORM_MAX_CHARS for f in self._forms(True))

    def substrings(self, recall: bool = True) -> tuple[str, ...]:
        """Forms a substring (trigram) search may look for, most specific first; `recall=False`
        leaves out the looser `extra` forms (for "contains this word" tests); each is cut to
        TRIGRAM_FORM_MAX_CHARS."""
        forms = (f[:TRIGRAM_FORM_MAX_CHARS] for f in self._forms(recall))
        return tuple(dict.fromkeys(f for f in forms if len(f) >= TRIGRAM_MIN_CHARS))

    def _forms(self, recall: bool) -> list[str]:
        forms = [self.text, *self.spellings]
        if self.parts:
            forms += ["".join(self.parts), " ".join(self.parts), "_".join(self.parts)]
        if self.stem:
            forms.append(self.stem)
        if recall:
            forms += self.extra
        return forms


@dataclass(frozen=True)
class Query:
    raw: str
    folded: str
    groups: tuple[TermGroup, ...]
    question: bool  # phrased as a question (its exact words are rarely in the answer)

    @classmethod
    def parse(cls, raw: str) -> Query:
        return parse_query(raw)

    @property
    def terms(self) -> tuple[str, ...]:
        """Every folded form worth marking in a snippet (deduplicated, in query order)."""
        seen: dict[str, None] = {}
        for group in self.groups:
            pairs = cjk.bigrams(group.text) if group.kind == "cjk" else []
            for form in (group.text, *group.spellings, *group.parts, group.stem or "", *pairs):
                if form:
                    seen.setdefault(form, None)
        return tuple(seen)

    @property
    def content(self) -> tuple[TermGroup, ...]:
        """Groups that decide relevance: all non-stop words, or every group if all are stop."""
        kept = tuple(g for g in self.groups if not g.stop)
        return kept or self.groups

    @property
    def has_thai(self) -> bool:
        return has_thai(self.folded)

    def phrase_tokens(self) -> tuple[str, ...]:
        """The query as a word sequence (for exact-phrase matching)."""
        return tuple(g.text for g in self.groups)


def parse_query(raw: str) -> Query:
    cleaned = _POSSESSIVE.sub("", compatible(clean_text(raw)).replace("\u2019", "'")).strip()
    folded = fold(cleaned)
    groups: list[TermGroup] = []
    seen: set[str] = set()
    for match in _TOKEN.finditer(cleaned):
        for group in _groups_of(match.group(0)):
            if group.text not in seen and len(groups) < MAX_GROUPS:
                seen.add(group.text)
                groups.append(group)
    first = groups[0].text if groups else ""
    question = folded.rstrip().endswith(("?", "？")) or first in QUESTION_WORDS
    return Query(raw, folded, tuple(groups), question)


def _groups_of(token: str) -> list[TermGroup]:
    if has_thai(token):
        return _thai_groups(fold(token))
    if cjk.has_cjk(token):
        return _cjk_groups(token)
    folded = fold(token)
    camel = [p for p in _CAMEL.split(token) if p] if _WORD_CHARS.match(token) else []
    pieces = [p for p in _JOINERS.split(folded) if p]
    if len(camel) > 1 and min(len(p) for p in camel) >= 2:  # not "IPv4" → I + Pv4
        return [_identifier(folded, tuple(fold(p) for p in camel))]
    if len(pieces) > 1 or "_" in folded:
        parts = tuple(p for piece in pieces for p in piece.split("_") if p)
        return [_identifier(folded, parts)]
    if not _WORD_CHARS.match(folded):  # c++, c#: letters plus a suffix only a substring finds
        return [TermGroup(folded, "symbol", False)]
    return [TermGroup(folded, "word", is_stop_word(folded), stemming.stem(folded))]


def _identifier(folded: str, parts: tuple[str, ...]) -> TermGroup:
    kind = "word" if _WORD_CHARS.match(folded) else "symbol"
    return TermGroup(folded, kind, False, None, parts)


def _cjk_groups(token: str) -> list[TermGroup]:
    """A CJK run is one group (the bigram channel splits it); other pieces are words."""
    groups: list[TermGroup] = []
    for piece, is_cjk in cjk.split_runs(token):
        if is_cjk:
            groups.append(TermGroup(fold(piece), "cjk", False))
        else:
            groups.extend(g for t in _TOKEN.findall(piece) for g in _groups_of(t))
    return groups


def _thai_groups(folded: str) -> list[TermGroup]:
    """Thai words of a token (non-Thai pieces inside it become their own groups)."""
    text, spellings = thai.canonical_spelling(folded)
    words = [w.strip() for w in thai.segment(text) if w.strip()]
    groups: list[TermGroup] = []
    for index, word in enumerate(words):
        if not has_thai(word):
            groups.extend(g for t in _TOKEN.findall(word) for g in _groups_of(t))
            continue
        variants = tuple(s for s in spellings.pop(word, ()) if s != word)
        pieces = thai.decompound(word)
        pairs = [a + b for a, b in zip(pieces, pieces[1:], strict=False)]
        extra = [p for p in (*pieces, *pairs) if not thai.is_function_piece(p)]
        following = words[index + 1] if index + 1 < len(words) else ""
        if has_thai(following):
            extra.append(word + following)
        extra_forms = tuple(dict.fromkeys(e for e in extra if e != word))
        groups.append(TermGroup(word, "thai", is_stop_word(word), None, (), variants, extra_forms))
    for canonical, group in spellings.items():  # a spelling the segmenter cut into pieces
        groups.append(TermGroup(canonical, "thai", False, None, (), group[1:]))
    return groups
