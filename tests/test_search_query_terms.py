"""Query analysis: what each channel is asked to look for."""

from __future__ import annotations

from helpers.lexical.filename import name_keys, path_key, query_keys
from helpers.lexical.query_terms import parse_query
from helpers.text import thai
from helpers.text.stemming import stem


def _groups(query: str) -> list[tuple[str, str, bool]]:
    return [(g.text, g.kind, g.stop) for g in parse_query(query).groups]


def test_identifiers_keep_their_whole_form_and_their_parts() -> None:
    groups = {g.text: g for g in parse_query("getUserName e-mail x86_64 HTTPServer C++").groups}
    assert groups["getusername"].parts == ("get", "user", "name")
    assert groups["e-mail"].parts == ("e", "mail")
    assert groups["x86_64"].parts == ("x86", "64")
    assert groups["httpserver"].parts == ("http", "server")
    assert groups["c++"].kind == "symbol"
    assert "get user name" in groups["getusername"].substrings()


def test_stop_words_are_marked_and_never_the_only_content() -> None:
    assert _groups("What is the FAQ?") == [
        ("what", "word", True),
        ("is", "word", True),
        ("the", "word", True),
        ("faq", "word", False),
    ]
    assert [g.text for g in parse_query("to be or not to be").content] == ["to", "be", "or", "not"]
    assert [g.text for g in parse_query("отчёт о продажах").content] == ["отчет", "продажах"]


def test_questions_are_recognised_in_all_three_languages() -> None:
    assert parse_query("How do I copy a list?").question
    assert parse_query("как скопировать список").question
    assert parse_query("ทำไม ต้อง สำรอง ข้อมูล").question
    assert not parse_query("payment terms").question


def test_possessives_and_typographic_apostrophes_do_not_split_words() -> None:
    assert [g.text for g in parse_query("the Foundation’s GNU project").content] == [
        "foundation",
        "gnu",
        "project",
    ]


def test_snowball_stems_are_prefixes_of_the_word() -> None:
    assert stem("отчетов") == "отчет"
    assert stem("databases") == "databas"
    assert stem("happy") == "happ"  # "happi" is not a prefix: the shared part is kept
    assert stem("им") is None and stem("data") is None


def test_thai_is_segmented_decompounded_and_spelling_variants_are_unified() -> None:
    groups = parse_query("อนุญาติให้ส่งอีเมล์ ความเป็นทาส").groups
    texts = [g.text for g in groups]
    assert "อนุญาต" in texts and "อีเมล" in texts and "ความเป็นทาส" in texts
    by_text = {g.text: g for g in groups}
    assert "อีเมล์" in by_text["อีเมล"].spellings
    assert "ทาส" in by_text["ความเป็นทาส"].extra
    assert "ความ" not in by_text["ความเป็นทาส"].extra  # a function piece alone matches too much
    assert thai.decompound("ทาส") == ()


def test_thai_digits_sara_am_and_zero_width_fold_like_documents() -> None:
    plain = parse_query("๑๒๐ การทำงาน")
    odd = parse_query("\u0e51\u0e52\u0e50 การท\u0e4d\u0e32\u200bงาน")
    assert [g.text for g in plain.groups] == [g.text for g in odd.groups]
    assert plain.groups[0].text == "120"


def test_file_name_keys_ignore_case_separators_and_extension() -> None:
    keys = name_keys("Reports/Sales_Report-2026.TXT")
    assert (keys.name_key, keys.stem_key, keys.path_key) == (
        "sales report 2026 txt",
        "sales report 2026",
        "reports sales report 2026 txt",
    )
    assert path_key("sales  report--2026") == "sales report 2026"
    assert name_keys(".bashrc").stem_key == "bashrc"
    assert query_keys("open budget.csv please")[1:] == ["budget csv"]
