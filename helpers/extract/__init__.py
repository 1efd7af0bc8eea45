"""Document readers: one module per format turning a file into located text blocks
(helpers.extract.blocks), the format registry, the sandboxed child that runs them and the
archive guard.
"""
