"""Extraction speed and peak memory per format, each measured in a fresh child process.

    python bench/bench_formats.py [--pages 2000] [--rows 200000] [--line-mb 200]

Targets: PDF >= 300 pages/s, peak RSS <= 600 MB for each case.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PDF_TARGET_PAGES_S = 300
RSS_TARGET_MB = 600
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
]
# The single-line text case must be read whole: lift the per-file caps for it.
UNCAPPED = {"max_file_bytes": 1 << 40, "max_text_chars": 1 << 40}


def make_inputs(work: Path, pages: int, rows: int, line_mb: int) -> dict[str, Path]:
    from tests.format_fixtures import make_big_xlsx, write_text_pdf

    pdf_pages = [
        [
            "Bench Corp - Internal Handbook",
            *(
                " ".join(WORDS[(page * 7 + line * 3 + k) % len(WORDS)] for k in range(12))
                for line in range(40)
            ),
            f"Page {page + 1} of {pages}",
        ]
        for page in range(pages)
    ]
    inputs = {
        "pdf": write_text_pdf(work / "bench.pdf", pdf_pages),
        "xlsx": make_big_xlsx(work / "bench.xlsx", rows),
    }
    line = work / "one-line.txt"
    chunk = ("lorem ipsum dolor sit amet " * 40_000).encode()  # ~1 MB
    with line.open("wb") as handle:
        for _ in range(line_mb):
            handle.write(chunk)
    inputs["txt"] = line
    return inputs


def run_one(path: Path) -> None:
    """Child mode: extract one file, print units, seconds and peak RSS as JSON."""
    from helpers.extract.blocks import ExtractContext, ExtractLimits
    from helpers.extract.registry import extractor_for

    ctx = ExtractContext(limits=ExtractLimits(**UNCAPPED))
    extractor = extractor_for(path)
    assert extractor is not None
    start = time.perf_counter()
    blocks = chars = 0
    units: set[object] = set()
    for block in extractor(path, ctx):
        blocks += 1
        chars += len(block.text)
        units.add(block.location.page or block.location.cell_range or blocks)
    seconds = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"blocks": blocks, "chars": chars, "units": len(units), "s": seconds,
                      "rss_mb": rss_mb}))  # fmt: skip


def measure(path: Path) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, __file__, "--one", str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--line-mb", type=int, default=200)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    with tempfile.TemporaryDirectory(prefix="bench-formats-") as tmp:
        started = time.perf_counter()
        inputs = make_inputs(Path(tmp), args.pages, args.rows, args.line_mb)
        print(f"inputs built in {time.perf_counter() - started:.1f} s")
        pdf = measure(inputs["pdf"])
        pages_s = args.pages / pdf["s"]
        print(
            f"PDF  {args.pages} pages: {pdf['s']:.2f} s = {pages_s:.0f} pages/s "
            f"(target >= {PDF_TARGET_PAGES_S}), peak RSS {pdf['rss_mb']:.0f} MB, "
            f"{pdf['blocks']} blocks"
        )
        xlsx = measure(inputs["xlsx"])
        print(
            f"XLSX {args.rows} rows: {xlsx['s']:.2f} s = {args.rows / xlsx['s']:.0f} rows/s, "
            f"peak RSS {xlsx['rss_mb']:.0f} MB, {xlsx['blocks']} blocks"
        )
        txt = measure(inputs["txt"])
        print(
            f"TXT  {args.line_mb} MB on one line: {txt['s']:.2f} s = "
            f"{args.line_mb / txt['s']:.0f} MB/s, peak RSS {txt['rss_mb']:.0f} MB, "
            f"{txt['blocks']} blocks, {txt['chars']} chars"
        )
        worst = max(pdf["rss_mb"], xlsx["rss_mb"], txt["rss_mb"])
        print(f"worst peak RSS {worst:.0f} MB (target <= {RSS_TARGET_MB})")


if __name__ == "__main__":
    main()
