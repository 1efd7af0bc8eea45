"""LaTeX, AsciiDoc, Org, XML and source/config files: headings, line ranges, hostile input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers.extract.blocks import BlockKind, ExtractContext, ExtractionError, TextBlock
from helpers.extract.formats import IN_PROCESS_SUFFIXES
from helpers.extract.registry import SUPPORTED_SUFFIXES, extractor_for
from helpers.safety import rel_path_problem

LATEX = r"""\documentclass[11pt]{article}
\usepackage[utf8]{inputenc} % encoding
\title{Thermal Analysis of the \emph{Widget}}
\begin{document}
\maketitle
\section{Introduction}\label{sec:intro}
We measure heat flow~\cite{smith2020} in the widget. 50\% of energy is lost.
% a comment: zebracomment must not be indexed
Energy $E = mc^2$ and $\alpha + \beta$ matter --- see Table~\ref{t}.

\subsection[Short]{Long
  Title Split}
\begin{itemize}
\item first point about caf\'e
\item second \textbf{bold} point
\end{itemize}
\begin{verbatim}
raw \section{not a heading} % kept as code
\end{verbatim}
\begin{comment}
zebradropped text
\end{comment}
\end{document}
"""


def extract(path: Path) -> list[TextBlock]:
    extractor = extractor_for(path)
    assert extractor is not None, path
    return list(extractor(path, ExtractContext()))


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def by_text(blocks: list[TextBlock], needle: str) -> TextBlock:
    return next(b for b in blocks if needle in b.text)


def test_latex_sections_are_headings_and_markup_is_gone(tmp_path: Path):
    blocks = extract(write(tmp_path, "paper.tex", LATEX))
    headings = [(b.text, b.location.heading_path) for b in blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Thermal Analysis of the Widget", ("Thermal Analysis of the Widget",)),
        ("Introduction", ("Thermal Analysis of the Widget", "Introduction")),
        (
            "Long Title Split",
            ("Thermal Analysis of the Widget", "Introduction", "Long Title Split"),
        ),
    ]
    body = by_text(blocks, "heat flow")
    assert body.text.startswith("We measure heat flow in the widget. 50% of energy is lost.")
    assert "E = mc^2" in body.text and "α + β" in body.text and "—" in body.text
    assert (body.location.line_start, body.location.line_end) == (7, 9)
    items = by_text(blocks, "first point")
    assert items.text == "- first point about café\n- second bold point"
    code = by_text(blocks, "not a heading")
    assert code.kind is BlockKind.CODE and code.location.line_start == 18
    text = "\n".join(b.text for b in blocks)
    for gone in ("zebracomment", "zebradropped", "\\cite", "smith2020", "usepackage", "sec:intro"):
        assert gone not in text


def test_asciidoc_titles_listing_blocks_and_comments(tmp_path: Path):
    doc = """= Operator Guide
:toc: left
// zebracomment line

== Installation

Run the installer as root.

[source,bash]
----
== not a heading
./install.sh --prefix /opt
----

=== Upgrades
Keep the config file.
////
zebracomment block
////
"""
    blocks = extract(write(tmp_path, "guide.adoc", doc))
    headings = [b.location.heading_path for b in blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Operator Guide",),
        ("Operator Guide", "Installation"),
        ("Operator Guide", "Installation", "Upgrades"),
    ]
    code = by_text(blocks, "install.sh")
    assert code.kind is BlockKind.CODE and "== not a heading" in code.text
    assert code.location.heading_path == ("Operator Guide", "Installation")
    assert by_text(blocks, "config file").location.line_start == 16
    text = "\n".join(b.text for b in blocks)
    assert "zebracomment" not in text and ":toc:" not in text and "[source,bash]" in text


def test_org_outline_drops_keywords_tags_and_drawers(tmp_path: Path):
    doc = """#+TITLE: Lab Notebook
#+OPTIONS: toc:nil
* TODO [#A] Budget review :work:finance:
  :PROPERTIES:
  :ID: zebradrawer
  :END:
The budget grew by 12 percent.
** Travel
# zebracomment
#+BEGIN_SRC python
* not a heading
print("hi")
#+END_SRC
"""
    blocks = extract(write(tmp_path, "notes.org", doc))
    headings = [b.location.heading_path for b in blocks if b.kind is BlockKind.HEADING]
    assert headings == [
        ("Lab Notebook",),
        ("Lab Notebook", "Budget review"),
        ("Lab Notebook", "Budget review", "Travel"),
    ]
    assert by_text(blocks, "12 percent").location.line_start == 7
    code = by_text(blocks, "print")
    assert code.kind is BlockKind.CODE and "* not a heading" in code.text
    text = "\n".join(b.text for b in blocks)
    assert "zebra" not in text and "toc:nil" not in text


def test_xml_text_titles_and_lines_without_entity_expansion(tmp_path: Path):
    secret = tmp_path / "outside.txt"
    secret.write_text("zebrasecret from outside", "utf-8")
    doc = f"""<?xml version="1.0"?>
<!DOCTYPE book [
  <!ENTITY xxe SYSTEM "{secret.as_uri()}">
  <!ENTITY lol "zebralol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<book xmlns:db="http://docbook.org/ns/docbook">
  <db:title>Pump <emphasis>Manual</emphasis></db:title>
  <chapter>
    <title>Maintenance</title>
    <para>Replace the <b>gasket</b> every 500 hours. &xxe; &lol3;</para>
    <para>Torque is 12 Nm.</para>
  </chapter>
</book>
"""
    blocks = extract(write(tmp_path, "manual.xml", doc))
    assert [(b.kind, b.text) for b in blocks] == [
        (BlockKind.HEADING, "Pump Manual"),
        (BlockKind.HEADING, "Maintenance"),
        (BlockKind.PARAGRAPH, "Replace the gasket every 500 hours."),
        (BlockKind.PARAGRAPH, "Torque is 12 Nm."),
    ]
    assert blocks[2].location.heading_path == ("Pump Manual", "Maintenance")
    assert blocks[3].location.line_start == 13


def test_malformed_and_binary_xml_is_reported(tmp_path: Path):
    cut = write(tmp_path, "cut.xml", "<a><b>text that never closes")
    with pytest.raises(ExtractionError, match="malformed XML"):
        extract(cut)
    garbage = tmp_path / "garbage.xml"
    garbage.write_bytes(os.urandom(20_000))
    with pytest.raises(ExtractionError, match="malformed XML"):
        extract(garbage)


def test_binary_garbage_named_tex_is_refused_as_binary(tmp_path: Path):
    for name in ("thesis.tex", "notes.org", "guide.adoc", "main.py"):
        path = tmp_path / name
        path.write_bytes(os.urandom(50_000))
        with pytest.raises(ExtractionError, match="binary data"):
            extract(path)


def test_an_unclosed_latex_heading_is_kept_as_prose(tmp_path: Path):
    doc = "\\section{Never closed\n" + "".join(f"line {i} zebra\n" for i in range(20))
    blocks = extract(write(tmp_path, "open.tex", doc))
    assert not [b for b in blocks if b.kind is BlockKind.HEADING]
    assert "Never closed" in blocks[0].text and "line 19 zebra" in "\n".join(b.text for b in blocks)


def test_source_code_keeps_narrow_line_ranges(tmp_path: Path):
    dense = "".join(f"x{i} = compute({i})\n" for i in range(1, 101))
    blocks = extract(write(tmp_path, "dense.py", "import os\n\n" + dense))
    assert all(b.kind is BlockKind.CODE for b in blocks)
    assert (blocks[0].location.line_start, blocks[0].location.line_end) == (1, 1)
    spans = [(b.location.line_start, b.location.line_end) for b in blocks[1:]]
    assert spans == [(3, 42), (43, 82), (83, 102)]
    hit = by_text(blocks, "x57 = compute(57)")
    assert hit.location.label() == "lines 43-82"


def test_ini_and_toml_sections_are_headings(tmp_path: Path):
    ini = "; settings\n[database]\nhost = db.local\nport = 5432\n\n[cache]\nttl = 60\n"
    blocks = extract(write(tmp_path, "app.ini", ini))
    port = by_text(blocks, "port = 5432")
    assert port.location.label() == "database, lines 3-4"
    assert by_text(blocks, "ttl").location.heading_path == ("cache",)
    toml = '[tool.ruff]\nline-length = 100\n\n[[servers]]\nname = "alpha"\n'
    blocks = extract(write(tmp_path, "pyproject.toml", toml))
    assert by_text(blocks, "alpha").location.heading_path == ("servers",)


def test_listed_code_and_config_suffixes_are_registered_and_read_in_process():
    listed = ".py .js .ts .go .rs .java .c .h .cpp .hpp .cs .rb .php .sh .bash .sql .toml .ini"
    listed += " .cfg .conf .properties .kt .swift .scala .lua .pl .r .tex .adoc .asciidoc .org"
    for suffix in listed.split():
        assert suffix in SUPPORTED_SUFFIXES and suffix in IN_PROCESS_SUFFIXES, suffix
    assert ".xml" in SUPPORTED_SUFFIXES and ".xml" not in IN_PROCESS_SUFFIXES  # expat: sandboxed


def test_sensitive_config_names_stay_refused():
    for name in (".env", "prod.env", "credentials.ini", "secrets.toml", "server.key", ".pgpass"):
        assert rel_path_problem(name) is not None, name
    assert rel_path_problem("settings.ini") is None and rel_path_problem("deploy.sh") is None


@pytest.mark.parametrize(
    ("name", "marker"), [("notes.md", "#"), ("notes.org", "*"), ("guide.adoc", "=")]
)
def test_a_heading_line_of_spaces_is_read_in_linear_time(tmp_path: Path, name: str, marker: str):
    # `(.*?)[ \t]*$` patterns backtracked quadratically here: 20,000 spaces took 4.5-10 s, so
    # these 300,000 would have taken hours.
    line = f"{marker} start" + " " * 300_000 + "end\n\nafter\n"
    blocks = extract(write(tmp_path, name, line))
    heading = blocks[0]
    assert heading.kind is BlockKind.HEADING and heading.text.startswith("start")
    assert any(b.text.endswith("end") for b in blocks) and blocks[-1].text == "after"


def test_markdown_table_and_image_lines_of_spaces_are_read_in_linear_time(tmp_path: Path):
    spaces = " " * 200_000  # 20,000 took 3.6 s (table separator) and 1.4 s (emptied image)
    doc = f"| a | b |\n|-{spaces}x\n\n![alt]( {spaces}x\n\n| h1 | h2 |\n|---|:-:|\n| c | d |\n"
    blocks = extract(write(tmp_path, "t.md", doc))
    rows = [b for b in blocks if b.kind is BlockKind.TABLE_ROW]
    assert [r.text for r in rows] == ["| c | d |"] and rows[0].table_header.startswith(
        "| h1 | h2 |"
    )


def test_an_ini_line_of_spaces_inside_brackets_is_read_in_linear_time(tmp_path: Path):
    doc = "[" + " " * 200_000 + "x\n[real]\nkey = 1\n"  # the old pattern never finished this
    blocks = extract(write(tmp_path, "odd.ini", doc))
    assert blocks[-1].location.label() == "real, line 3"


def test_xml_external_dtds_and_parameter_entities_are_never_read(tmp_path: Path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY leak "zebradtd">', "utf-8")
    external = (
        f'<?xml version="1.0"?>\n<!DOCTYPE r SYSTEM "{dtd.as_uri()}">\n<r><p>a &leak; b</p></r>'
    )
    parameter = (
        f'<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY % p SYSTEM "{dtd.as_uri()}"> %p;]>\n'
        "<r><p>c &leak; d</p></r>"
    )
    for name, doc in (("external.xml", external), ("parameter.xml", parameter)):
        text = "\n".join(b.text for b in extract(write(tmp_path, name, doc)))
        assert "zebradtd" not in text and text.replace(" ", "") in ("ab", "cd"), text
