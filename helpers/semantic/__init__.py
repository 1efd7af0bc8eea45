"""Semantic model files: discovery and fingerprint, explicit fetch, and the packed float16 vector
store.
"""
