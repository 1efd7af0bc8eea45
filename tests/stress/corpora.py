"""Folders of real documents for fault and load runs, made with the real format libraries.

Every file carries a unique marker word (`mk<set><kind>`), so a search can prove the file is
indexed and a dump comparison can tell every document apart.
"""

from __future__ import annotations

import random
from pathlib import Path

from conftest import WORDS  # one business vocabulary for every generated corpus
from format_fixtures import write_text_pdf

KINDS = ("docx", "xlsx", "pptx", "pdf", "odt", "md", "csv")


def _sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def marker(set_no: int, kind: str) -> str:
    return f"mk{set_no:03d}{kind}"


def write_docx(path: Path, title: str, paragraphs: list[str]) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for text in paragraphs:
        document.add_paragraph(text)
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Key", "Value"
    table.cell(1, 0).text, table.cell(1, 1).text = title, str(len(paragraphs))
    document.save(str(path))
    return path


def write_xlsx(path: Path, title: str, rows: list[list[object]]) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Data"
    sheet.append(["id", "name", "note"])
    sheet.append([0, title, "header row"])
    for row in rows:
        sheet.append(row)
    book.save(str(path))
    return path


def write_pptx(path: Path, title: str, bullets: list[str]) -> Path:
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = title
    body = slide.placeholders[1].text_frame
    body.text = bullets[0]
    for text in bullets[1:]:
        body.add_paragraph().text = text
    slide.notes_slide.notes_text_frame.text = f"notes for {title}"
    deck.save(str(path))
    return path


def write_odt(path: Path, title: str, paragraphs: list[str]) -> Path:
    from odf import text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    document.text.addElement(text.H(outlinelevel=1, text=title))
    for value in paragraphs:
        document.text.addElement(text.P(text=value))
    document.save(str(path))
    return path


def write_document(path: Path, kind: str, set_no: int, rng: random.Random) -> Path:
    """One document of `kind` holding its marker and a few hundred random business words."""
    mark = marker(set_no, kind)
    paragraphs = [_sentence(rng, 20) for _ in range(rng.randint(3, 12))] + [f"tag {mark}"]
    if kind == "docx":
        return write_docx(path, f"Report {mark}", paragraphs)
    if kind == "xlsx":
        rows = [[i, _sentence(rng, 3), _sentence(rng, 6)] for i in range(1, rng.randint(5, 40))]
        return write_xlsx(path, mark, rows)
    if kind == "pptx":
        return write_pptx(path, f"Deck {mark}", paragraphs)
    if kind == "pdf":
        pages = [[_sentence(rng, 10) for _ in range(8)] for _ in range(rng.randint(1, 4))]
        pages[-1].append(f"tag {mark}")
        return write_text_pdf(path, pages)
    if kind == "odt":
        return write_odt(path, f"Memo {mark}", paragraphs)
    if kind == "md":
        body = "\n\n".join(f"## Part {i}\n\n{p}" for i, p in enumerate(paragraphs))
        path.write_text(f"# Note {mark}\n\n{body}\n", encoding="utf-8")
        return path
    if kind == "csv":
        lines = ["id,name,amount"] + [f"{i},{_sentence(rng, 3)},{i * 7}" for i in range(40)]
        lines.append(f"999,{mark},1")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path
    raise ValueError(f"unknown kind {kind}")


def make_mixed_corpus(root: Path, sets: int = 3, seed: int = 0) -> list[Path]:
    """`sets` folders, each with one docx/xlsx/pptx/pdf/odt/md/csv (7 * sets files)."""
    rng = random.Random(seed)
    paths: list[Path] = []
    for set_no in range(sets):
        folder = root / f"set{set_no:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            paths.append(write_document(folder / f"doc{set_no:03d}.{kind}", kind, set_no, rng))
    return paths


def mutate_corpus(root: Path, seed: int = 1) -> None:
    """A deterministic round of edits: change, grow, replace, delete and add files."""
    rng = random.Random(seed)
    sets = sorted(p for p in root.iterdir() if p.is_dir())
    for index, folder in enumerate(sets):
        md = folder / f"doc{index:03d}.md"
        if md.exists():
            md.write_text(md.read_text(encoding="utf-8") + "\n\nappended line\n", "utf-8")
        csv = folder / f"doc{index:03d}.csv"
        if index % 2 == 0 and csv.exists():
            csv.unlink()
        docx = folder / f"doc{index:03d}.docx"
        if docx.exists():
            write_document(docx, "docx", 500 + index, rng)
        write_document(folder / f"new{index:03d}.md", "md", 700 + index, rng)


def make_small_files(root: Path, count: int, per_folder: int = 500, seed: int = 3) -> None:
    """`count` tiny Markdown files spread over folders of `per_folder` (a big-folder bench)."""
    rng = random.Random(seed)
    for i in range(count):
        folder = root / f"f{i // per_folder:04d}"
        if i % per_folder == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i:06d}.md").write_text(
            f"# n{i}\n\n{_sentence(rng, 15)} marker{i:06d}\n", encoding="utf-8"
        )


def make_long_pdf(path: Path, pages: int, lines_per_page: int = 30, seed: int = 5) -> Path:
    """A real text PDF with `pages` pages of varied lines (a 2,000-page manual)."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [
        [f"page {n} line {k}: {_sentence(rng, 9)}" for k in range(lines_per_page)]
        for n in range(1, pages + 1)
    ]
    return write_text_pdf(path, body)
