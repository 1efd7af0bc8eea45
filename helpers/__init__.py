"""Building blocks with no knowledge of the service: extraction, lexical channels, text, OCR,
semantic model files, safety checks, errors. Nothing here imports a top-level module
(tests/test_architecture.py checks it), so every layer above can use any of it."""
