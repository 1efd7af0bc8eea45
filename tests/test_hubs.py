"""The hub detector (helpers.text.hubs) on generated contents pages, indexes, question and link
lists, with and without line breaks, against prose that is full of lists and numbers."""

from __future__ import annotations

import html
import subprocess
from pathlib import Path

import pytest

from helpers.text.hubs import hub_score, hub_signals

TOPICS = [
    "Installing the scanner driver",
    "Configuring the printer queue",
    "Nightly backups with rsync",
    "Setting up the mail relay",
    "Replacing the projector lamp",
    "Resetting a forgotten password",
    "Joining the wireless network",
    "Ordering office supplies",
    "Booking a meeting room",
    "Reporting a security incident",
]


def _dot_leader_contents() -> list[str]:
    lines = ["Contents"]
    for n, topic in enumerate(TOPICS, start=1):
        lines.append(f"{n} {topic} " + ". " * (40 - len(topic) // 2) + str(3 * n + 1))
        lines.append(f"{n}.1 Before you start " + ". " * 30 + str(3 * n + 2))
    return lines


def _numbered_contents() -> list[str]:
    lines = []
    for n, topic in enumerate(TOPICS, start=1):
        lines.append(f"{n}. {topic}")
        lines.append(f"{n}.1. What do I need for {topic.lower()}?")
        lines.append(f"{n}.2. Who can help with {topic.lower()}?")
    return lines


def _back_of_book_index() -> list[str]:
    terms = ["backup, nightly", "CUPS", "driver", "lamp", "mail relay", "network, wireless"]
    terms += ["password", "postfix", "printer queue", "projector", "rsync", "SANE", "scanner"]
    return [f"{term}, {7 * i + 3}, {9 * i + 11}-{9 * i + 13}" for i, term in enumerate(terms)]


CASES_HUB = {
    "dot-leader contents": "\n".join(_dot_leader_contents()),
    "dot-leader contents, flattened": " ".join(_dot_leader_contents()),
    "dot-leader contents, leaders of dots": "\n".join(
        f"{topic} {'.' * 30} {n * 4}" for n, topic in enumerate(TOPICS, start=1)
    ),
    "numbered contents": "\n".join(_numbered_contents()),
    "numbered contents, flattened": "Table of Contents " + " ".join(_numbered_contents()),
    "question list, flattened": "Office FAQ "
    + " ".join(f"How do I handle {t.lower()}?" for t in TOPICS),
    "back-of-book index": "Index\n" + "\n".join(_back_of_book_index()),
    "back-of-book index, flattened": "Index " + " ".join(_back_of_book_index()),
    "markdown link list": "\n".join(
        f"- [{t}](https://intranet.example.com/{t.split()[0].lower()})" for t in TOPICS
    ),
    "link list, flattened": " ".join(
        f"https://intranet.example.com/help/{t.replace(' ', '-').lower()}" for t in TOPICS
    ),
    "title list (HTML list of links, text only)": "Help topics\n" + "\n".join(TOPICS),
    "navigation bar": " | ".join(["Home", "Products", "Support", "Downloads", "About us"])
    + " | "
    + " | ".join(TOPICS),
}

PROSE = (
    "The scanner driver ships with the SANE backends. Install the package, add your user to "
    "the scanner group and log in again, so that the new group takes effect. If the scanner "
    "is still not found, check the USB cable first: most problems we see are loose cables, "
    "not software. The driver reads its settings from a file in /etc/sane.d; leave them alone "
    "unless the vendor tells you otherwise. Version 1.2 fixed the colour calibration on "
    "the model 3000, which older releases got wrong. Why does this matter? Because a wrong "
    "calibration makes every scan slightly blue, and nobody notices until the prints come back."
)

CASES_PROSE = {
    "prose paragraph": PROSE,
    "prose wrapped into PDF lines": "\n".join(PROSE[i : i + 70] for i in range(0, len(PROSE), 70)),
    "prose index.md (an index file that holds prose)": "# Welcome\n\n" + PROSE,
    "a how-to with numbered steps and explanations": "\n".join(
        f"{n}. {topic}: open the settings page, choose the entry for it and press Save. "
        "The change takes effect at once, and the old value is kept in the history."
        for n, topic in enumerate(TOPICS[:6], start=1)
    ),
    "a bullet list of sentences": "\n".join(
        f"- {topic} is handled by the help desk. Write to them with the details."
        for topic in TOPICS
    ),
    "a man page's option list": (
        "DESCRIPTION\n       List information about the FILEs (the current directory by "
        "default).\n\n"
        + "\n".join(
            f"       -{c}, --{word}\n              {desc}"
            for c, word, desc in [
                ("a", "all", "do not ignore entries starting with ."),
                ("A", "almost-all", "do not list implied . and .."),
                ("b", "escape", "print C-style escapes for nongraphic characters"),
                ("B", "ignore-backups", "do not list implied entries ending with ~"),
                ("d", "directory", "list directories themselves, not their contents"),
                ("h", "human-readable", "with -l and -s, print sizes like 1K 234M 2G etc."),
                ("i", "inode", "print the index number of each file"),
                ("r", "reverse", "reverse order while sorting"),
                ("s", "size", "print the allocated size of each file, in blocks"),
            ]
        )
    ),
    "Thai prose without sentence punctuation": " ".join(
        ["ทุกคนมีสิทธิในการศึกษา การศึกษาจะต้องให้เปล่าอย่างน้อยในชั้นประถมศึกษาและชั้นพื้นฐาน"] * 4
    ),
    "a character table with Russian quotes": " ".join(
        f"{200 + i} {128 + i} {80 + i:X} КИРИЛЛИЧЕСКАЯ ЗАГЛАВНАЯ БУКВА «ДЕ»" for i in range(20)
    ),
    "a page ending in a prev/next footer": PROSE
    + " Chapter 9. Keeping your system up to date Chapter 11. Customizing your system",
}


@pytest.mark.parametrize("name", sorted(CASES_HUB))
def test_listing_pages_score_as_hubs(name: str) -> None:
    signals = hub_signals(CASES_HUB[name])
    assert signals.score >= 0.8, (name, signals)


@pytest.mark.parametrize("name", sorted(CASES_PROSE))
def test_prose_scores_zero(name: str) -> None:
    signals = hub_signals(CASES_PROSE[name])
    assert signals.score == 0.0, (name, signals)


def test_a_real_option_list_is_not_a_hub() -> None:
    """`ls --help` from this machine's coreutils: an option list written by others."""
    text = subprocess.run(
        ["ls", "--help"], capture_output=True, text=True, check=True, env={"LC_ALL": "C"}
    ).stdout
    assert len(text) > 2000
    assert hub_score(text) == 0.0


def test_a_flattened_contents_page_scores_like_its_multi_line_twin() -> None:
    lines = _numbered_contents()
    assert hub_score(" ".join(lines)) == hub_score("\n".join(lines)) == 1.0


def test_prose_before_a_contents_list_lowers_the_score_in_proportion() -> None:
    contents = " ".join(_numbered_contents())
    full = hub_score(contents)
    mixed = hub_score(PROSE + " " + contents)
    mostly_prose = hub_score(PROSE * 4 + " " + contents)
    assert full == 1.0 and 0.0 < mixed < full and mostly_prose < mixed


def test_short_text_and_a_pair_of_questions_are_not_judged() -> None:
    assert hub_score("Contents") == 0.0
    assert hub_score("Why is the sky blue? Why is grass green? " + PROSE) == 0.0
    assert hub_score("") == 0.0


# -- every hub kind in every format, through the real extractor and chunker ----------------------
def _write(path: Path, lines: list[str]) -> Path:
    import docx
    from format_fixtures import write_text_pdf

    if path.suffix == ".pdf":
        return write_text_pdf(path, [lines])
    if path.suffix == ".docx":
        document = docx.Document()
        for line in lines:
            document.add_paragraph(line)
        document.save(str(path))
        return path
    if path.suffix == ".html":
        items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
        path.write_text(f"<html><body><main><ul>{items}</ul></main></body></html>", "utf-8")
        return path
    path.write_text("\n\n".join(lines) + "\n", "utf-8")
    return path


KINDS = {
    "contents": [line.replace(". ", ".") for line in _dot_leader_contents()],
    "index": ["Index", *_back_of_book_index()],
    "links": [f"{t} https://intranet.example.com/{t.split()[0].lower()}" for t in TOPICS],
    "questions": [f"How do I handle {t.lower()}?" for t in TOPICS],
    "prose": [PROSE[i : i + 80] for i in range(0, len(PROSE), 80)],
}


@pytest.mark.parametrize("suffix", [".pdf", ".docx", ".html", ".md"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_hub_kind_scores_in_every_format(tmp_path: Path, kind: str, suffix: str) -> None:
    from helpers.extract import registry
    from helpers.extract.blocks import ExtractContext
    from helpers.text.chunking import build_sections

    path = _write(tmp_path / f"page{suffix}", KINDS[kind])
    extract = registry.extractor_for(path)
    assert extract is not None
    sections = list(build_sections(extract(path, ExtractContext())))
    assert sections
    scores = [hub_score(s.text) for s in sections]
    if kind == "prose":
        assert max(scores) == 0.0, (suffix, scores, sections[0].text[:300])
    else:
        assert min(scores) >= 0.8, (kind, suffix, scores, sections[0].text[:300])
