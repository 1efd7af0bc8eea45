"""Build a Japanese or Chinese man-page eval set the way shared/eval/manru was built.

    python bench/build_man_eval.py OUT --lang ja|zh|zh-tw [--man-root DIR] [--limit 400]

The query is the NAME-line description of a man page (`ls \\- ディレクトリの内容をリスト表示する`
gives `ディレクトリの内容をリスト表示する`); the relevant document is that page with its NAME
section removed, one relevant document per query. Pages come from Debian's `manpages-ja`
(/usr/share/man/ja) or `manpages-zh` (/usr/share/man/zh_CN, simplified Chinese; `--lang zh-tw`
takes /usr/share/man/zh_TW, the same pages in traditional characters: a check of the script, not
a second independent set). Without --man-root the package is fetched with `apt-get download`
and unpacked with `dpkg -x`.

A page is rendered to one line of plain text as the manru docs are: roff requests dropped,
macro arguments kept, escapes resolved, whitespace collapsed; source lines are joined without a
space between two CJK characters (a line break inside CJK text is not a word break). Kept:
pages whose description is in the target script (at least MIN_CJK Han/Kana characters and no
more Latin letters than CJK ones), whose body has at least MIN_BODY_CJK CJK characters (the
body was translated), and whose description no other page shares. Selected: the first --limit
by sha256 of the page id (`ls.1`), so the output is deterministic.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PACKAGES = {
    "ja": ("manpages-ja", "ja"),
    "zh": ("manpages-zh", "zh_CN"),
    "zh-tw": ("manpages-zh", "zh_TW"),  # the zh_CN pages in traditional characters
}
DEFAULT_LIMIT = 400  # 300-500 queries, the size of the other public sets
MIN_CJK = 2  # a description with fewer Han/Kana characters is untranslated
MIN_BODY_CJK = 50  # a body with fewer is an untranslated page with a translated NAME line
NAME_HEADINGS = re.compile(r"^(name|名前|名称|名稱|名字)\b|^name\s*[(（]?\s*名", re.IGNORECASE)
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f]")
LATIN = re.compile(r"[A-Za-z]")
MORE_ENTRIES = re.compile(r"[\w.+-]+(?:\s*,\s*[\w.+-]+)*\s+(?:-|—|–|－)\s")
# Requests that carry no text (layout, definitions, registers, fonts).
SILENT = {
    "ad", "bp", "br", "ce", "de", "ds", "fi", "ft", "hy", "ie", "if", "el", "in", "ll", "na", "ne",
    "nf", "nh", "nr", "ns", "pc", "pl", "po", "ps", "rm", "rn", "rr", "so", "sp", "ta", "ti", "tr",
    "vs", "cc", "ec", "eo", "ev", "mk", "rt", "ig", "am", "as", "ch", "wh", "lf", "ss", "cs",
    "PP", "LP", "P", "HP", "RS", "RE", "IX", "PD", "UC", "DT", "EX", "EE", "Id", "Rs", "Re",
    "Bl", "El", "Bd", "Ed", "Pp", "Lp", "Dd", "Os", "Ek", "Bk", "Sm", "TS", "TE",
}  # fmt: skip
NAMED = {
    "-": "-", "em": "—", "en": "–", "aq": "'", "dq": '"', "lq": "“", "rq": "”", "oq": "‘",
    "cq": "’", "bu": "•", "co": "©", "rg": "®", "tm": "™", "mu": "×", "di": "÷", "+-": "±",
    "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<-": "←", "hy": "-", "ti": "~", "ha": "^",
    "rs": "\\", "ga": "`", "aa": "´", "de": "°", "sc": "§", "ps": "¶", "lh": "☜", "rh": "☞",
    "R": "®", "Tm": "™", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "ba": "|", "or": "|",
    "pl": "+", "mi": "-", "eq": "=", "sl": "/", "at": "@", "sh": "#", "Do": "$", "ct": "¢",
}  # fmt: skip
ESCAPE = re.compile(
    r"\\(?:"
    r"f(?:\[[^\]]*\]|\(..|.)"  # font
    r"|s[+-]?(?:\[[^\]]*\]|\(..|\d+)"  # size
    r"|\*(?:\[(?P<s1>[^\]]*)\]|\((?P<s2>..)|(?P<s3>.))"  # string
    r"|\((?P<c2>..)|\[(?P<c1>[^\]]*)\]"  # named character
    r"|[nkgmMY](?:\[[^\]]*\]|\(..|.)"  # registers, colours
    r"|[hvwoxlLNbDRSXZ]'[^']*'"  # motions, widths
    r"|(?P<one>.)"
    r")"
)
ONE = {"-": "-", "e": "\\", "\\": "\\", "&": "", "c": "", ",": "", "/": "", "|": "", "^": "",
       "0": " ", "~": " ", " ": " ", "%": "", ".": ".", "'": "´", "`": "`", "t": " ", "d": "",
       "u": "", "p": "", "a": "", "z": "", "{": "", "}": "", "!": "", "r": "", ":": "",
       '"': ""}  # fmt: skip
STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "S": "", "Lq": "“", "Rq": "”"}


@dataclass(frozen=True)
class Page:
    page_id: str  # "ls.1"
    description: str  # the query
    body: str  # the document text, NAME section removed


def unescape(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if (name := match.group("c1") or match.group("c2")) is not None:
            return NAMED.get(name, "")
        if (name := match.group("s1") or match.group("s2") or match.group("s3")) is not None:
            return STRINGS.get(name, "")
        if (char := match.group("one")) is not None:
            return ONE.get(char, char)
        return ""

    return ESCAPE.sub(one, text)


def split_args(rest: str) -> list[str]:
    """Macro arguments: blank-separated, double quotes group ("" inside is a quote)."""
    args, current, quoted, i = [], "", False, 0
    while i < len(rest):
        char = rest[i]
        if char == '"':
            if quoted and rest[i + 1 : i + 2] == '"':
                current += '"'
                i += 1
            else:
                quoted = not quoted
        elif char in " \t" and not quoted:
            if current:
                args.append(current)
            current = ""
        else:
            current += char
        i += 1
    if current:
        args.append(current)
    return args


def join_cjk(parts: list[str]) -> str:
    """Join text lines: no space where both sides of the break are CJK characters."""
    out = ""
    for part in parts:
        part = part.strip()
        if not part:
            continue
        if out and not (CJK.match(out[-1]) and CJK.match(part[0])):
            out += " "
        out += part
    return re.sub(r"\s+", " ", out).strip()


def parse(source: str) -> tuple[str | None, list[tuple[str | None, list[str]]]]:
    """(first .Nm name, sections as (heading, text lines)); the first section is the preamble."""
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    skip_until: str | None = None
    first_name: str | None = None
    for raw in source.splitlines():
        if skip_until is not None:
            if raw.strip() == skip_until:
                skip_until = None
            continue
        if raw.startswith(('.\\"', "'\\\"", '.\\"', '\\"')) or raw.strip() in {".", "'"}:
            continue
        if raw[:1] not in {".", "'"}:
            sections[-1][1].append(unescape(raw))
            continue
        match = re.match(r"^[.']\s*(\S+)\s*(.*)$", raw)
        if match is None:
            continue
        macro, rest = match.groups()
        if macro in {"de", "am", "ig", "de1"}:
            skip_until = ".." if macro != "ig" or not rest.strip() else "." + rest.strip()
            continue
        if macro.lower() in {"sh"}:
            sections.append((join_cjk([unescape(a) for a in split_args(rest)]), []))
            continue
        if macro in SILENT or macro.startswith("\\"):
            continue
        args = [unescape(a) for a in split_args(rest)]
        if macro in {"BR", "RB", "IR", "RI", "BI", "IB"}:
            sections[-1][1].append("".join(args))  # alternating fonts, no space between
        elif macro == "Nm" and not args and first_name is not None:
            sections[-1][1].append(first_name)
        elif macro == "Nd":
            sections[-1][1].append("\\- " + " ".join(args))
        else:
            if macro == "Nm" and args and first_name is None:
                first_name = args[0]
            if macro in {"TP", "IP"} and args and re.fullmatch(r"[\d.]+[nmi]?", args[-1]):
                args = args[:-1]  # the indent, not text
            sections[-1][1].append(" ".join(a for a in args if a not in {",", "Ns"}))
    return first_name, sections


def read_page(path: Path, page_id: str) -> Page | None:
    source = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
    _, sections = parse(source)
    name_at = next(
        (i for i, (head, _) in enumerate(sections) if head and NAME_HEADINGS.search(head)), None
    )
    if name_at is None:
        return None
    name_line = join_cjk(sections[name_at][1])
    found = re.search(r"\s(?:\\-|-|—|–|－)\s*(.+)$", name_line) or re.search(
        r"(?:\\-|—|－)\s*(.+)$", name_line
    )
    if found is None:
        return None
    description = found.group(1).strip()
    if MORE_ENTRIES.search(description):
        return None  # a NAME section with a description per command: not one query
    rest = [sections[0]] + [s for i, s in enumerate(sections) if i not in {0, name_at}]
    body = join_cjk([line for head, lines in rest for line in ([head] if head else []) + lines])
    return Page(page_id, description, body)


def in_target_language(page: Page) -> bool:
    cjk = len(CJK.findall(page.description))
    return (
        cjk >= MIN_CJK
        and len(LATIN.findall(page.description)) <= cjk
        and len(CJK.findall(page.body)) >= MIN_BODY_CJK
    )


def collect(man_dir: Path) -> list[Page]:
    pages: dict[str, Page] = {}
    for path in sorted(man_dir.glob("man*/*.gz")):
        if path.is_symlink():
            continue  # an alias of another page
        page_id = path.name[: -len(".gz")]
        page = read_page(path, page_id)
        if page is not None and page_id not in pages:
            pages[page_id] = page
    kept = [page for page in pages.values() if in_target_language(page)]
    by_description: dict[str, int] = {}
    for page in kept:
        key = re.sub(r"\s+", "", page.description)
        by_description[key] = by_description.get(key, 0) + 1
    return [p for p in kept if by_description[re.sub(r"\s+", "", p.description)] == 1]


def fetch_package(package: str, work: Path) -> Path:
    subprocess.run(["apt-get", "download", package], cwd=work, check=True, capture_output=True)
    deb = next(work.glob(f"{package}_*.deb"))
    subprocess.run(["dpkg", "-x", str(deb), str(work / "root")], check=True)
    return work / "root" / "usr" / "share" / "man"


def build(out: Path, lang: str, man_root: Path | None, limit: int) -> dict:
    package, subdir = PACKAGES[lang]
    with tempfile.TemporaryDirectory(prefix="ragdoc-man-") as work:
        root = man_root if man_root is not None else fetch_package(package, Path(work))
        pages = collect(root / subdir)
    pages.sort(key=lambda p: hashlib.sha256(p.page_id.encode()).hexdigest())
    chosen = sorted(pages[:limit], key=lambda p: p.page_id)
    docs = out / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for stale in docs.glob("*.md"):
        stale.unlink()
    for page in chosen:
        (docs / f"{page.page_id}.md").write_text(page.body + "\n", encoding="utf-8")
    golden = {
        "name": f"man{lang.replace('-', '')}",
        "queries": [
            {"id": p.page_id, "query": p.description, "relevant": [f"{p.page_id}.md"], "lang": lang}
            for p in chosen
        ],
    }
    (out / "golden.json").write_text(
        json.dumps(golden, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    return {"eligible": len(pages), "queries": len(chosen)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lang", choices=sorted(PACKAGES), required=True)
    parser.add_argument("--man-root", type=Path, help="an unpacked usr/share/man (else apt)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
    args = parser.parse_args(argv)
    counts = build(args.out, args.lang, args.man_root, args.limit)
    print(f"{args.out}: {counts['queries']} queries of {counts['eligible']} eligible pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
