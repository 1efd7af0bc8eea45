"""Text-like formats through the registry: encodings, headings, code, tables, lines, streaming."""

from __future__ import annotations

import base64
import codecs
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from helpers.extract.blocks import (
    BlockKind,
    ExtractContext,
    ExtractionError,
    ExtractLimits,
    TextBlock,
)
from helpers.extract.registry import SUPPORTED_SUFFIXES, extractor_for, format_of

CTX = ExtractContext()
RUSSIAN = "Съешь же ещё этих мягких французских булок, да выпей чаю."
THAI = "ภาษาไทยเป็นภาษาราชการของประเทศไทย การค้นหาเอกสารต้องทำงานได้"
REPO = Path(__file__).resolve().parents[1]


def extract(path: Path, ctx: ExtractContext = CTX) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None
    return list(extractor(path, ctx))


def joined(blocks: list[TextBlock]) -> str:
    return "\n".join(block.text for block in blocks)


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# -- registry ----------------------------------------------------------------------------------


def test_registry_knows_every_promised_suffix_and_rejects_others() -> None:
    for suffix in (".txt", ".md", ".rst", ".csv", ".tsv", ".json", ".yaml", ".html", ".pdf"):
        assert suffix in SUPPORTED_SUFFIXES
    for suffix in (".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp", ".doc", ".epub", ".png"):
        assert suffix in SUPPORTED_SUFFIXES
    assert extractor_for(Path("a.exe")) is None
    assert extractor_for(Path("README")) is None
    assert extractor_for(Path("Report.PDF")) is not None
    assert format_of(Path("Report.PDF")) == "pdf"
    assert format_of(Path("notes.tar.gz")) == "gz"


def test_importing_the_registry_does_not_import_document_libraries() -> None:
    code = (
        "import sys, helpers.extract.registry\n"
        "heavy = [m for m in ('pypdfium2', 'openpyxl', 'docx', 'pptx', 'odf', 'PIL') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_a_file_over_the_size_cap_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "big.txt", "x" * 5000)
    ctx = ExtractContext(limits=ExtractLimits(max_file_bytes=1000))
    with pytest.raises(ExtractionError) as err:
        extract(path, ctx)
    assert err.value.message == "file is 0.0 MB, over the 0 MB limit"  # MB = 2**20 bytes
    assert "--max-file-mb" in err.value.hint


def test_extraction_stops_after_max_text_chars(tmp_path: Path) -> None:
    path = write(tmp_path, "long.txt", "\n\n".join(f"paragraph {i} " * 20 for i in range(500)))
    ctx = ExtractContext(limits=ExtractLimits(max_text_chars=10_000))
    text = joined(extract(path, ctx))
    assert 5_000 < len(text) <= 10_000
    assert "paragraph 0 " in text and "paragraph 499" not in text


# -- encodings and binary data -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "text"),
    [
        ("utf-8", f"Hello\n{RUSSIAN}\n{THAI}"),
        ("utf-8-sig", f"Hello\n{RUSSIAN}"),
        ("utf-16", f"Hello\n{RUSSIAN}\n{THAI}"),
        ("cp1251", f"Привет\n{RUSSIAN}\nEnglish words too"),
        ("cp874", f"{THAI}\nsome English 123"),
        ("cp1252", "Déjà vu: the café served crème brûlée.\nAn ordinary line."),
    ],
)
def test_plain_text_in_each_supported_encoding_decodes_intact(
    tmp_path: Path, encoding: str, text: str
) -> None:
    path = write(tmp_path, "doc.txt", text.encode(encoding))
    out = joined(extract(path))
    assert out.replace("\ufeff", "") == text


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        ("Привет", "cp1251"),
        ("Жёлтый", "cp1251"),
        ("ЁЛКИ ПАЛКИ", "cp1251"),
        ("ภาษาไทย", "cp874"),
        ("น้ำ", "cp874"),
        ("เมืองไทย 2024", "cp874"),
        ("Ärger über Öl", "cp1252"),
    ],
)
def test_even_a_single_word_file_gets_the_right_code_page(
    tmp_path: Path, text: str, encoding: str
) -> None:
    assert joined(extract(write(tmp_path, "w.txt", text.encode(encoding)))) == text


def test_a_long_cp1251_russian_file_is_not_mistaken_for_thai_or_latin(tmp_path: Path) -> None:
    path = write(tmp_path, "ru.log", ((RUSSIAN + "\n") * 3000).encode("cp1251"))
    assert RUSSIAN in joined(extract(path))


def test_nul_bytes_in_a_text_file_are_refused_as_binary(tmp_path: Path) -> None:
    path = write(tmp_path, "fake.txt", b"PK\x03\x04" + bytes(range(256)) * 4)
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "binary data" in err.value.message and err.value.hint


def test_undecodable_bytes_without_nul_are_refused_as_binary(tmp_path: Path) -> None:
    noise = bytes((i * 37 + 11) % 255 + 1 for i in range(20_000))
    path = write(tmp_path, "noise.md", noise)
    with pytest.raises(ExtractionError) as err:
        extract(path)
    assert "binary data" in err.value.message


def test_crlf_line_ends_give_lines_and_paragraphs_split_at_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "a.txt", b"first line\r\nsecond line\r\n\r\nthird\r\n")
    blocks = extract(path)
    assert [b.text for b in blocks] == ["first line\nsecond line", "third"]
    assert (blocks[0].location.line_start, blocks[0].location.line_end) == (1, 2)
    assert (blocks[1].location.line_start, blocks[1].location.line_end) == (4, 4)


def test_a_huge_single_line_streams_in_bounded_pieces(tmp_path: Path) -> None:
    path = tmp_path / "one-line.log"
    word = "lorem ipsum dolor sit amet "
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(20):
            handle.write(word * 20_000)  # ~0.5 MB per write, ~11 MB on one line
        handle.write("\nTHE END\n")
    ctx = ExtractContext(limits=ExtractLimits(max_line_chars=100_000))
    tracemalloc.start()
    count = 0
    last: TextBlock | None = None
    for block in extractor_for(path)(path, ctx):  # type: ignore[misc]
        count += 1
        assert len(block.text) <= 4000
        last = block
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert count > 2500
    assert last is not None and last.text.endswith("THE END")
    assert peak < 8 * 1024 * 1024, f"peak traced memory {peak} bytes"


# -- Markdown ----------------------------------------------------------------------------------

MARKDOWN = """# Guide

Intro paragraph.

## Install

Run the installer.
Second line of the same paragraph.

```bash
# not a heading
pip install thing
```

Setext Title
============

| Name | Price |
|------|------:|
| Apple | 1 \\| 2 |
| Груша | 3 |

After the table.

## Usage
Use it.
"""


def test_markdown_headings_code_and_tables_keep_structure_and_lines(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path, "guide.md", MARKDOWN))
    headings = [(b.text, b.location.heading_path) for b in blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Guide", ("Guide",)),
        ("Install", ("Guide", "Install")),
        ("Setext Title", ("Setext Title",)),
        ("Usage", ("Setext Title", "Usage")),
    ]
    code = [b for b in blocks if b.kind is BlockKind.CODE]
    assert len(code) == 1 and code[0].text == "# not a heading\npip install thing"
    assert code[0].location.heading_path == ("Guide", "Install")
    para = next(b for b in blocks if b.text.startswith("Run the installer"))
    assert para.text.endswith("Second line of the same paragraph.")
    assert (para.location.line_start, para.location.line_end) == (7, 8)
    rows = [b for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert [r.text for r in rows] == ["| Apple | 1 \\| 2 |", "| Груша | 3 |"]
    assert rows[0].table_header == "| Name | Price |\n|---|---|"
    assert rows[1].location.line_start == 21
    assert rows[0].location.heading_path == ("Setext Title",)
    after = next(b for b in blocks if b.text == "After the table.")
    assert after.kind is BlockKind.PARAGRAPH


def test_markdown_inline_base64_image_is_dropped_and_alt_text_kept(tmp_path: Path) -> None:
    payload = base64.b64encode(bytes(range(256)) * 20_000).decode()  # ~6.8 MB on one line
    uri = "data:image/png;base64," + payload
    text = f"# Pics\n\nBefore ![Diagram of the пайплайн]({uri}) after\n"
    ctx = ExtractContext(limits=ExtractLimits(max_line_chars=50_000))
    blocks = extract(write(tmp_path, "pics.md", text), ctx)
    body = [b for b in blocks if b.kind is BlockKind.PARAGRAPH]
    assert [b.text for b in body] == ["Before Diagram of the пайплайн after"]
    assert body[0].location.line_start == 3


# -- reStructuredText --------------------------------------------------------------------------

RST = """=======
 Title
=======

Intro text.

Section A
---------

Alpha body.

Sub A1
~~~~~~

Deep body.

Section B
---------

Beta body.
"""


def test_rst_heading_levels_follow_the_order_of_underline_styles(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path, "doc.rst", RST))
    headings = [b.location.heading_path for b in blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Title",),
        ("Title", "Section A"),
        ("Title", "Section A", "Sub A1"),
        ("Title", "Section B"),
    ]
    deep = next(b for b in blocks if b.text == "Deep body.")
    assert deep.location.heading_path == ("Title", "Section A", "Sub A1")
    assert deep.location.line_start == 15


# -- CSV / TSV ---------------------------------------------------------------------------------


def test_csv_rows_repeat_the_header_and_keep_their_line_range(tmp_path: Path) -> None:
    text = 'name;city;note\nИван;Москва;"multi\nline note"\n\n;;\nSomchai;กรุงเทพ;ok\n'
    blocks = extract(write(tmp_path, "people.csv", text))
    assert [b.text for b in blocks] == [
        "| Иван | Москва | multi line note |",
        "| Somchai | กรุงเทพ | ok |",
    ]
    assert all(b.kind is BlockKind.TABLE_ROW for b in blocks)
    assert {b.table_header for b in blocks} == {"| name | city | note |\n|---|---|---|"}
    assert (blocks[0].location.line_start, blocks[0].location.line_end) == (2, 3)
    assert blocks[1].location.line_start == 6


def test_tsv_uses_tabs_and_a_header_only_file_still_yields_its_row(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path, "t.tsv", "a,b\tc\n1,2\t3\n"))
    assert [b.text for b in blocks] == ["| 1,2 | 3 |"]
    only = extract(write(tmp_path, "h.csv", "alpha,beta\n"))
    assert [b.text for b in only] == ["| alpha | beta |"]


def test_malformed_csv_raises_an_extraction_error(tmp_path: Path) -> None:
    huge_field = '"' + "x" * 3000 + "\n" + "y" * 3000  # an unclosed quote swallowing the file
    ctx = ExtractContext(limits=ExtractLimits(max_line_chars=2000))
    with pytest.raises(ExtractionError) as err:
        extract(write(tmp_path, "bad.csv", "h1,h2\n" + huge_field), ctx)
    assert "CSV" in err.value.message


# -- JSON / YAML -------------------------------------------------------------------------------


def test_pretty_json_is_read_as_lines_and_minified_json_as_key_paths(tmp_path: Path) -> None:
    pretty = extract(write(tmp_path, "p.json", '{\n  "server": {\n    "port": 8080\n  }\n}\n'))
    assert '"port": 8080' in joined(pretty)
    assert pretty[0].location.line_start == 1
    items = ",".join(f'{{"id":{i},"name":"item {i}"}}' for i in range(30))
    minified = extract(write(tmp_path, "m.json", f'{{"server":{{"port":8080}},"items":[{items}]}}'))
    text = joined(minified)
    assert "server.port: 8080" in text and "items[29].name: item 29" in text


def test_yaml_is_read_as_text_lines(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path, "c.yml", "a: 1\nb:\n  - Привет\n\nc: end\n"))
    assert [b.text for b in blocks] == ["a: 1\nb:\n  - Привет", "c: end"]
    assert blocks[1].location.line_start == 5


# -- HTML --------------------------------------------------------------------------------------

HTML = """<!doctype html>
<html><head><title>Doc &amp; Title</title><style>p { color: red }</style>
<script>var secret = "no";</script></head>
<body>
<nav>Home | About</nav>
<header>Site banner</header>
<h1>Main</h1>
<p>First <b>bold</b> paragraph.</p>
<h2>Prices</h2>
<table>
<thead><tr><th>Item</th><th>Cost</th></tr></thead>
<tr><td>Tea</td><td>3 &euro;</td></tr>
<tr><td>Чай</td><td>ชา</td></tr>
</table>
<p>Logo <img alt="Company logo" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAE="> end</p>
<ul><li>one</li><li>two</li></ul>
<pre>line 1
  line 2</pre>
<h2>Other</h2><p>Tail.</p>
<footer>Copyright</footer>
<noscript>Enable JS</noscript>
</body></html>
"""


def test_html_keeps_visible_text_headings_and_table_rows_only(tmp_path: Path) -> None:
    blocks = extract(write(tmp_path, "page.html", HTML))
    text = joined(blocks)
    hidden_parts = ("secret", "color: red", "Home", "Site banner", "Copyright", "Enable JS")
    for hidden in (*hidden_parts, "iVBOR"):
        assert hidden not in text
    assert blocks[0].text == "Doc & Title"
    heads = [b.location.heading_path for b in blocks if b.kind is BlockKind.HEADING]
    assert heads == [("Main",), ("Main", "Prices"), ("Main", "Other")]
    first = next(b for b in blocks if "bold" in b.text)
    assert first.text == "First bold paragraph." and first.location.heading_path == ("Main",)
    rows = [b for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert [r.text for r in rows] == ["| Tea | 3 € |", "| Чай | ชา |"]
    assert rows[0].table_header == "| Item | Cost |\n|---|---|"
    assert rows[0].location.heading_path == ("Main", "Prices")
    assert rows[1].location.line_start == 13
    assert "Logo Company logo end" in text
    assert "- one" in text and "- two" in text
    code = next(b for b in blocks if b.kind is BlockKind.CODE)
    assert code.text == "line 1\n  line 2"
    tail = next(b for b in blocks if b.text == "Tail.")
    assert tail.location.heading_path == ("Main", "Other")


def test_html_in_cp1251_without_a_meta_charset_decodes(tmp_path: Path) -> None:
    html = f"<html><body><h1>Заголовок</h1><p>{RUSSIAN}</p></body></html>"
    blocks = extract(write(tmp_path, "ru.htm", html.encode("cp1251")))
    assert [b.text for b in blocks] == ["Заголовок", RUSSIAN]


def test_utf16_bom_is_detected_before_the_nul_check(tmp_path: Path) -> None:
    path = write(tmp_path, "w.txt", codecs.BOM_UTF16_LE + "Hi там".encode("utf-16-le"))
    assert joined(extract(path)) == "Hi там"
