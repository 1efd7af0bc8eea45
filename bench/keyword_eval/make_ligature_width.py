"""Write the ligature/width keyword set: documents whose words are in compatibility forms
(U+FB01/U+FB02 ligatures, fullwidth Latin and digits, halfwidth katakana), queries in the plain
forms people type. NFKC maps every such form to its plain one.

    python bench/keyword_eval/make_ligature_width.py [OUT]  (default: beside this file)

Each target document writes its query's words only in the compatibility form; a plain-text
distractor shares one query word in the plain form, so a search that does not fold the forms
ranks the distractor first. The texts were written for this set (no source licence).
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent / "ligature-width"
LIGATURES = {"fi": "\ufb01", "fl": "\ufb02"}
_MARKED = re.compile(r"\{([^{}]*)\}")  # {span} is written in the compatibility form


def _halfwidth_kana() -> dict[str, str]:
    """Fullwidth katakana -> halfwidth (a voiced kana becomes base + halfwidth sound mark)."""
    plain = {unicodedata.normalize("NFKC", chr(c)): chr(c) for c in range(0xFF61, 0xFFA0)}
    out = dict(plain)
    for code in range(0x30A0, 0x3100):
        kana = chr(code)
        base, *marks = unicodedata.normalize("NFD", kana)
        if marks and base in plain:
            sound = {"\u3099": "\uff9e", "\u309a": "\uff9f"}.get(marks[0])
            if sound:
                out[kana] = plain[base] + sound
    return out


HALFWIDTH = _halfwidth_kana()


def ligatures(text: str) -> str:
    return re.sub("fi|fl", lambda m: LIGATURES[m.group()], text)


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def halfwidth(text: str) -> str:
    return "".join(HALFWIDTH.get(c, c) for c in text)


FORMS = {"ligature": ligatures, "fullwidth": fullwidth, "halfwidth-kana": halfwidth}

# [{group, query, target (text with {spans} in the compatibility form), distractor (plain)}]
ITEMS_PATH = Path(__file__).resolve().parent / "ligature_width_items.json"


def render(group: str, text: str) -> str:
    return _MARKED.sub(lambda m: FORMS[group](m.group(1)), text)


def build(out: Path) -> dict:
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    queries = []
    items = json.loads(ITEMS_PATH.read_text(encoding="utf-8"))
    for number, item in enumerate(items, start=1):
        group, query = item["group"], item["query"]
        target, distractor = item["target"], item["distractor"]
        name = f"note-{number:02d}.txt"
        (docs / name).write_text(render(group, target) + "\n", encoding="utf-8")
        (docs / f"note-{number:02d}b.txt").write_text(distractor + "\n", encoding="utf-8")
        lang = "en" if group == "ligature" else "ja"
        queries.append(
            {"id": f"lw-{number:02d}", "query": query, "relevant": [name], "lang": lang,
             "group": group}
        )  # fmt: skip
    golden = {
        "name": "ligature-width",
        "description": "Compatibility forms in documents, plain forms in queries: written by "
        "bench/keyword_eval/make_ligature_width.py",
        "queries": queries,
    }
    (out / "golden.json").write_text(
        json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    return golden


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
