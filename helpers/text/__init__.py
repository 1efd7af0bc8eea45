"""Language and text handling shared by indexing and queries: normalisation, Thai segmentation, CJK
runs, stemming, token estimates and chunking.
"""
