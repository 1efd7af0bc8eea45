"""The C binding of Snowball (PyStemmer) stems as the pure-Python snowballstemmer modules do.

snowballstemmer hands out PyStemmer's stemmers when it is installed. The unit table is
contentless: its rows are deleted with tokens recomputed later, so a binding that stemmed one
word differently from the modules the rows were written with would need UNIT_TOKENS_VERSION
bumped (bench/notes/s-fast.md checks 3.8 million words of every eval set; this test a sample).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from conftest import needs_tool

from helpers.text import stemming
from helpers.text.normalize import fold_marked
from helpers.text.unit_tokens import _SCRIPT_OF, _TOKEN, _script

EVAL = Path(__file__).resolve().parents[2] / "shared/eval"
SAMPLE_WORDS = 1500  # per script: every language's pure-Python stemmer runs over the sample


def _binding() -> bool:
    return importlib.util.find_spec("Stemmer") is not None


def _pure_python(language: str) -> object:
    """The snowballstemmer module's own class for `language`, whatever the package hands out."""
    module = importlib.import_module(f"snowballstemmer.{language}_stemmer")
    return getattr(module, f"{language.capitalize()}Stemmer")()


def _words_by_script() -> dict[str, list[str]]:
    words: set[str] = set()
    for name in ("manru", "debfaq-en", "pyfaq-en"):
        for path in sorted((EVAL / name / "docs").iterdir()):
            words.update(_TOKEN.findall(fold_marked(path.read_text(errors="replace"))))
    by_script: dict[str, list[str]] = {}
    for word in sorted(words):
        by_script.setdefault(_script(word[0]), []).append(word)
    return {s: w[:: max(1, len(w) // SAMPLE_WORDS)] for s, w in by_script.items()}


@needs_tool(_binding, "PyStemmer", "pip install -r requirements.txt")
@needs_tool((EVAL / "manru").is_dir, "the manru evaluation set", f"put shared/eval at {EVAL}")
def test_the_binding_stems_real_words_as_the_pure_python_modules_do() -> None:
    words = _words_by_script()
    assert len(words["LATIN"]) >= 1000 and len(words["CYRILLIC"]) >= 1000
    for language in sorted(set(stemming.SNOWBALL_BY_ISO.values())):
        sample = words.get(_SCRIPT_OF.get(language, "LATIN"), [])
        binding = stemming.snowball(language)
        assert type(binding).__module__ == "Stemmer", language
        pure = _pure_python(language)
        assert binding.stemWords(sample) == [pure.stemWord(w) for w in sample], language
