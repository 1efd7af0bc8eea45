"""Evaluation's pure parts: the golden-file parser and the retrieval metrics of rag_eval.py."""
