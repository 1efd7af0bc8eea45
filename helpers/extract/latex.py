"""LaTeX (.tex .ltx): sectioning commands as the heading path, markup stripped, comments removed.

No TeX engine runs: the source is read line by line. `\\title`, `\\part` ... `\\subparagraph`
become headings (a title split over lines is joined, up to `MAX_HEADING_LINES`); commands keep
the text of their arguments (`\\emph{x}` -> x) except the ones that hold no prose (`\\label`,
`\\cite`, `\\usepackage`, `\\includegraphics` ...), which go whole; `%` comments and the
`comment` environment are dropped; verbatim/listing environments are kept as CODE; math is kept
as text without its markup (`$\\alpha + x^2$` -> `α + x^2`), so formulas stay findable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from helpers.extract.blocks import BlockKind, ExtractContext, TextBlock
from helpers.extract.line_markup import HeadedLines
from helpers.extract.textio import iter_line_pieces

HEADING_LEVELS = {
    "title": 0,
    "part": 1,
    "chapter": 2,
    "section": 3,
    "subsection": 4,
    "subsubsection": 5,
    "paragraph": 6,
    "subparagraph": 7,
}
# A heading argument left open this many lines is not a real heading: its text is kept as prose.
MAX_HEADING_LINES = 8
VERBATIM_ENVS = frozenset({"verbatim", "verbatim*", "Verbatim", "lstlisting", "minted", "alltt"})
DROPPED_ENVS = frozenset({"comment", "filecontents", "filecontents*", "tikzpicture", "figure*"})
# Commands whose arguments are references, layout or configuration, never prose.
DROPPED_COMMANDS = frozenset(
    {
        "label", "ref", "eqref", "pageref", "autoref", "cref", "Cref", "nameref", "cite",
        "citep", "citet", "citeauthor", "citeyear", "nocite", "include", "input", "includeonly",
        "usepackage", "RequirePackage", "documentclass", "includegraphics", "bibliography",
        "bibliographystyle", "addbibresource", "newcommand", "renewcommand", "providecommand",
        "newenvironment", "renewenvironment", "DeclareMathOperator", "def", "let",
        "vspace", "hspace", "setlength", "addtolength", "setcounter", "addtocounter",
        "pagestyle", "thispagestyle", "pagenumbering", "geometry", "hypersetup",
        "graphicspath", "color", "definecolor", "index", "lstset", "newtheorem",
        "numberwithin", "captionsetup", "bibitem", "linespread", "fontsize", "selectfont",
    }
)  # fmt: skip
_ARG = r"\{(?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*\}"  # a braced argument, two nesting levels
_OPT = r"\[[^\[\]]*\]"
_DROPPED = re.compile(
    r"\\(?:" + "|".join(sorted(DROPPED_COMMANDS, key=len, reverse=True)) + r")(?![A-Za-z])\*?"
    rf"(?:\s*(?:{_OPT}|{_ARG}|\\[A-Za-z]+))*"
)
_HEADING = re.compile(r"\\(" + "|".join(HEADING_LEVELS) + r")\*?\s*(?:\[[^\]]*\])?\s*\{")
_ENV = re.compile(r"\\(begin|end)\s*\{([^{}]*)\}((?:\s*" + _OPT + r")*(?:\s*" + _ARG + r")?)")
_HREF = re.compile(r"\\href\s*\{[^{}]*\}")
_ITEM = re.compile(r"\\item(?![A-Za-z])\s*(?:\[([^\]]*)\])?")
_ACCENT = re.compile(r"\\([`'^\"~=.]|[cvuHk](?![A-Za-z]))\s*\{?([A-Za-z])\}?")
_ACCENTS = {
    "`": "\u0300", "'": "\u0301", "^": "\u0302", "~": "\u0303", "=": "\u0304", ".": "\u0307",
    '"': "\u0308", "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b", "k": "\u0328",
}  # fmt: skip
_SYMBOLS = {
    "\\\\": "\n", "\\&": "&", "\\%": "%", "\\$": "$", "\\#": "#", "\\_": "_", "\\{": "{",
    "\\}": "}", "\\ ": " ", "\\,": " ", "\\;": " ", "\\:": " ", "\\!": "", "\\-": "",
    "\\@": "", "\\/": "", "\\(": "", "\\)": "", "\\[": "", "\\]": "",
}  # fmt: skip
_SYMBOL = re.compile(r"\\\\|\\[&%$#_{} ,;:!\-@/()\[\]]")
_COMMAND = re.compile(r"\\([A-Za-z]+)\*?\s*(?:\[[^\[\]]*\])?")
_DASHES = (("---", "\u2014"), ("--", "\u2013"), ("``", "\u201c"), ("''", "\u201d"))
_SPACES = re.compile(r"[ \t]{2,}")


def strip_comment(line: str) -> str:
    """The line without its `%` comment (`\\%` is a percent sign, `\\\\%` a comment again)."""
    i = line.find("%")
    while i != -1:
        backslashes = len(line[:i]) - len(line[:i].rstrip("\\"))
        if backslashes % 2 == 0:
            return line[:i]
        i = line.find("%", i + 1)
    return line


def _greek_or_drop(match: re.Match[str]) -> str:
    name = match.group(1)
    case = "CAPITAL" if name[0].isupper() else "SMALL"
    try:
        letter = unicodedata.lookup(f"GREEK {case} LETTER {name.upper()}")
        return letter + " " if match.group().endswith((" ", "\t")) else letter
    except KeyError:
        return ""  # formatting (\textbf, \hline, \noindent ...): the argument text stays


def detex(text: str) -> str:
    """Plain text of a LaTeX fragment: commands gone, argument text kept."""
    text = _DROPPED.sub("", text)
    text = _HREF.sub("", text)  # \href{url}{text} -> text
    text = _ENV.sub(" ", text)
    text = _ITEM.sub(lambda m: "- " + (m.group(1) + " " if m.group(1) else ""), text)
    text = _ACCENT.sub(
        lambda m: unicodedata.normalize("NFC", m.group(2) + _ACCENTS[m.group(1)]), text
    )
    text = _SYMBOL.sub(lambda m: _SYMBOLS[m.group()], text)
    text = _COMMAND.sub(_greek_or_drop, text)
    text = text.replace("{", "").replace("}", "").replace("$", "").replace("~", " ")
    text = text.replace("&", " | ")
    for tex, char in _DASHES:
        text = text.replace(tex, char)
    return _SPACES.sub(" ", text)


def heading_argument(text: str, start: int) -> tuple[str, int] | None:
    """(argument, index after its closing brace) for the `{` before `start`, or None if open."""
    depth = 1
    for i in range(start, len(text)):
        char = text[i]
        if char == "{" and text[i - 1] != "\\":
            depth += 1
        elif char == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start:i], i + 1
    return None


class _LatexState:
    def __init__(self) -> None:
        self.out = HeadedLines()
        self.code = HeadedLines(BlockKind.CODE)
        self.code.headings = self.out.headings
        self.env: str | None = None  # open verbatim or dropped environment
        self.pending: tuple[int, str, int] | None = None  # heading start line, text, lines

    def line(self, line_no: int, raw: str) -> Iterator[TextBlock]:
        if self.env is not None:
            if re.search(r"\\end\s*\{" + re.escape(self.env) + r"\}", raw):
                self.env = None
                yield from self.code.blank()
            elif self.env in VERBATIM_ENVS:
                yield from self.code.text(line_no, raw.rstrip())
            return
        text = strip_comment(raw)
        if self.pending is not None:
            start, held, count = self.pending
            text, self.pending = held + " " + text.strip(), None
            if count >= MAX_HEADING_LINES:
                yield from self.prose(start, text)
                return
            yield from self.scan(start, text, count + 1)
            return
        begin = re.match(r"\s*\\begin\s*\{([^{}]+)\}", text)
        if begin and (begin.group(1) in VERBATIM_ENVS or begin.group(1) in DROPPED_ENVS):
            yield from self.out.blank()
            self.env = begin.group(1)
            return
        if not text.strip():
            if not raw.strip():
                yield from self.out.blank()  # a blank line ends a paragraph; a comment does not
            return
        yield from self.scan(line_no, text, 1)

    def scan(self, line_no: int, text: str, count: int) -> Iterator[TextBlock]:
        heading = _HEADING.search(text)
        if heading is None:
            yield from self.prose(line_no, text)
            return
        found = heading_argument(text, heading.end())
        if found is None:
            self.pending = (line_no, text, count)
            return
        yield from self.prose(line_no, text[: heading.start()])
        title, after = found
        yield from self.out.heading(HEADING_LEVELS[heading.group(1)], detex(title), line_no)
        yield from self.scan(line_no, text[after:], count)

    def prose(self, line_no: int, text: str) -> Iterator[TextBlock]:
        for part in detex(text).split("\n"):
            if part.strip():
                yield from self.out.text(line_no, part.strip())

    def finish(self) -> Iterator[TextBlock]:
        if self.pending is not None:
            start, held, _ = self.pending
            self.pending = None
            yield from self.prose(start, held)
        yield from self.code.blank()
        yield from self.out.blank()


def extract(path: Path, ctx: ExtractContext) -> Iterator[TextBlock]:
    state = _LatexState()
    held: tuple[int, str] | None = None  # a line cut into pieces is joined (bounded by the cap)
    for line_no, piece, complete in iter_line_pieces(path, ctx):
        if held is not None:
            line_no, piece = held[0], held[1] + piece
            held = None
        if not complete and len(piece) < ctx.limits.max_line_chars:
            held = (line_no, piece)
            continue
        yield from state.line(line_no, piece)
    if held is not None:
        yield from state.line(*held)
    yield from state.finish()
