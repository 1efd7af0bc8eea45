"""Ad-hoc: recall@400 of the first pass when the centroid was fit on another mix of vectors.

    python bench/bench_first_pass_refit.py     (reads /tmp/v-store/{manru,debfaq-en,pyfaq-en})

100k synthetic vectors (bench_scale.synthesise): half from the Russian set's real vectors, half
from the two English sets'; 30 real golden queries. The centroid fit on all of them, on the
Russian half only (what an incremental sync keeps while REFIT_SHARE = 0.5 allows it), and zero.
"""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
import semantic_worker
from bench.bench_scale import real_vectors, synthesise
from helpers.semantic import first_pass, rabitq

S = Path("/tmp/v-store")
E = Path("/work/shared/eval")
w = semantic_worker.Worker(
    Path("/work/shared/models/multilingual-e5-small-int8"), 2, S / "fp" / "cache", warm=True
)
emb = w.embedder(for_query=True)
texts = [
    q["query"]
    for s in ("manru", "debfaq-en", "pyfaq-en")
    for q in json.loads((E / s / "golden.json").read_text())["queries"]
]
rng = np.random.default_rng(3)
qs = emb.embed([texts[i] for i in rng.permutation(len(texts))[:30]], "query")[0].astype(np.float32)
ru = real_vectors([S / "manru/index.sqlite3"])
en = real_vectors([S / "debfaq-en/index.sqlite3", S / "pyfaq-en/index.sqlite3"])
n = 100_000
a, b = synthesise(ru, n // 2, rng), synthesise(en, n // 2, rng)
x = np.concatenate([a, b])
k = 400
want = first_pass.candidates(k, n)
exact = [set(np.argsort(-(x.astype(np.float32) @ q), kind="stable")[:k]) for q in qs]
for name, c in (
    ("fit on all", rabitq.fit_centroid(x)),
    ("fit on the first half (Russian only)", rabitq.fit_centroid(a)),
    ("zero centroid", np.zeros(384, np.float32)),
):
    idx = rabitq.index_from_codes(rabitq.encode(x, c, 2), c, x)
    _, found = idx.search(qs, want)
    r = [len(set(f) & e) / k for f, e in zip(found, exact, strict=True)]
    print(
        json.dumps(
            {
                "centroid": name,
                "dist_to_mean": round(float(np.linalg.norm(c - x.astype(np.float64).mean(0))), 4),
                "recall@400": [round(float(np.mean(r)), 4), round(float(np.min(r)), 4)],
                "candidates": want,
            }
        ),
        flush=True,
    )
