"""Lexical search: query terms, the FTS5 channels (words, trigram BM25, exact, short, variants,
OCR-fuzzy, CJK pairs, filename) and snippets.
"""
