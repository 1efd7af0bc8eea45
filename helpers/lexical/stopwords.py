"""Built-in stop words: function words that never decide which document a query means.

They are dropped from ranking when a query has other words, and do not count toward "all terms"
in the exact channel. The lists are short on purpose (articles, pronouns, auxiliaries,
prepositions, conjunctions, question words): a content word wrongly listed here is lost for good.
English: the classic SMART/Lucene core; Russian: the Snowball Russian list minus its rarer
adverbs. Thai has none: its function words (การ, ความ, ที่) also start compounds that
substring matching needs, and dropping them ranks Thai text worse (bench/RESULTS.md, "Stop
words").
All entries are in fold() form (lower case, ё as е).
"""

from __future__ import annotations

_EN_TEXT = """
a about an and are as at be been being but by can could did do does doing for from had has
have having he her here hers him his how i if in into is it its itself may me might my no
nor not of off on once one only or other our ours out over own shall she should so some such
than that the their theirs them then there these they this those through to too under until
up upon very was we were what when where which while who whom whose why will with would you
your yours
"""

_RU_TEXT = """
а без более бы был была были было быть в вам вас весь во вот все всего всех вы где да даже
для до его ее ей ему если есть еще же за здесь и из или им их к как какая какой когда кто ли
либо между меня мне много может мы на над надо наш не него нее нет ни них но ну о об однако
он она они оно от очень по под при про с со так также такой там то того тоже той только том
ты у уже чем через что чтобы чье эта эти это этого этой этом этот я
"""


STOP_EN = frozenset(_EN_TEXT.split())
STOP_RU = frozenset(_RU_TEXT.split())
STOP_WORDS = STOP_EN | STOP_RU


def is_stop_word(term: str) -> bool:
    return term in STOP_WORDS
