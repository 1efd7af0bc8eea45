"""Optical character recognition: the tesseract engine, its settings and the optional loopback VLM
correction.
"""
