"""OCR speed and word recall: run by hand, report the numbers (tests never assert timings).

1. Seconds per full 300-DPI A4 page by language mix (eng, rus, tha, mixed), pages rendered from
   real text of the eval sets (debfaq-en, manru, udhr-th2th) and lightly degraded like a scan.
2. Word recall on the image-only PDFs of debfaq-en-mixed: pages rendered with pypdfium2 at
   300 DPI, OCR'd, and compared with the same document's text in debfaq-en/docs (same stem).

    python bench/bench_ocr.py [--repeat 2] [--eval-root /work/shared/eval]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pypdfium2 as pdfium  # noqa: E402
from PIL import Image  # noqa: E402

from helpers.ocr.engine import OcrConfig, make_ocr_function, ocr_status  # noqa: E402
from tests.ocr_fixtures import degrade, render_page, word_recall, wrap_text  # noqa: E402

DPI = 300
A4_IN = (8.27, 11.69)
MARGIN_IN = 0.8
BODY_PT = {"eng": 11.0, "rus": 11.0, "tha": 16.0, "mixed": 12.0}  # Thai is set larger
TEXT_WIDTH_IN = A4_IN[0] - 2 * MARGIN_IN
PAGE_CHARS = 6000  # more than a page holds; wrapped lines past the page height are dropped


def corpus_text(eval_root: Path, lang: str, chars: int) -> str:
    """Real prose from the eval sets, in file order, up to `chars` characters."""
    folder = {"eng": "debfaq-en", "rus": "manru", "tha": "udhr-th2th"}[lang]
    parts: list[str] = []
    total = 0
    for path in sorted((eval_root / folder / "docs").glob("*.md")):
        text = " ".join(path.read_text(encoding="utf-8").split())
        parts.append(text)
        total += len(text)
        if total >= chars:
            break
    return " ".join(parts)[:chars]


def page_lines(eval_root: Path, mix: str) -> list[str]:
    """As many wrapped lines of real text as fit on an A4 page at the mix's point size."""
    line_height_in = BODY_PT[mix] * 1.7 / 72  # render_page's line spacing
    fits = int((A4_IN[1] - 2 * MARGIN_IN) / line_height_in)
    if mix != "mixed":
        text = corpus_text(eval_root, mix, PAGE_CHARS)
        return wrap_text(text, TEXT_WIDTH_IN, DPI, BODY_PT[mix])[:fits]
    per_lang = {
        lang: wrap_text(corpus_text(eval_root, lang, PAGE_CHARS), TEXT_WIDTH_IN, DPI, BODY_PT[mix])
        for lang in ("eng", "tha", "rus")
    }
    mixed = [per_lang[lang][row] for row in range(fits) for lang in ("eng", "tha", "rus")]
    return mixed[:fits]


def bench_speed(eval_root: Path, repeat: int) -> None:
    ocr = make_ocr_function(OcrConfig())
    assert ocr is not None
    print(f"## seconds per {DPI}-DPI A4 page (langs eng+tha+rus, OMP_THREAD_LIMIT=1)")
    print("mix    lines  size        wall s/page (runs)     cpu s  word recall")
    for mix in ("eng", "rus", "tha", "mixed"):
        lines = page_lines(eval_root, mix)
        page = render_page(
            lines, dpi=DPI, font_pt=BODY_PT[mix], margin_in=MARGIN_IN, width_in=A4_IN[0]
        )
        canvas = Image.new("L", (round(A4_IN[0] * DPI), round(A4_IN[1] * DPI)), 255)
        canvas.paste(page, (0, 0))
        canvas.info["dpi"] = (DPI, DPI)
        scan = degrade(canvas, rotate_deg=0.4, blur_radius=0.5, noise_sigma=8, jpeg_quality=70)
        times: list[float] = []
        cpu: list[float] = []
        text = ""
        for _ in range(repeat):
            start, cpu_start = time.perf_counter(), _child_cpu_s()
            text = ocr(scan).text
            times.append(time.perf_counter() - start)
            cpu.append(_child_cpu_s() - cpu_start)
        recall = word_recall("\n".join(lines), text)
        size = f"{scan.width}x{scan.height}"
        median = statistics.median(times)
        runs = ", ".join(f"{t:.2f}" for t in times)
        cpu_median = statistics.median(cpu)
        print(
            f"{mix:6} {len(lines):5}  {size:10}  {median:6.2f} ({runs})  {cpu_median:6.2f}  "
            f"{recall:.3f}"
        )


def _child_cpu_s() -> float:
    """CPU seconds used by finished child processes (tesseract): immune to a busy shared box."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_scanned_pdfs(eval_root: Path) -> None:
    ocr = make_ocr_function(OcrConfig())
    assert ocr is not None
    docs = eval_root / "debfaq-en-mixed" / "docs"
    truth = eval_root / "debfaq-en" / "docs"
    print(f"\n## image-only PDFs in {docs} (rendered at {DPI} DPI, grayscale)")
    print("file                      pages  render s  ocr s   word recall")
    recalls: list[float] = []
    ocr_seconds: list[float] = []
    for path in sorted(docs.glob("*.pdf")):
        pdf = pdfium.PdfDocument(path)
        try:
            pages = [pdf[i] for i in range(len(pdf))]
            if any(page.get_textpage().count_chars() for page in pages):
                continue  # has a text layer: not a scan
            texts: list[str] = []
            render_s = ocr_s = 0.0
            for page in pages:
                start = time.perf_counter()
                image = page.render(scale=DPI / 72, grayscale=True).to_pil()
                image.info["dpi"] = (DPI, DPI)
                render_s += time.perf_counter() - start
                start = time.perf_counter()
                texts.append(ocr(image).text)
                ocr_s += time.perf_counter() - start
            ocr_seconds.append(ocr_s / len(pages))
        finally:
            pdf.close()
        expected = (truth / f"{path.stem}.md").read_text(encoding="utf-8")
        recall = word_recall(expected, "\n".join(texts))
        recalls.append(recall)
        print(f"{path.name:25} {len(pages):5}  {render_s:8.2f}  {ocr_s:5.2f}  {recall:.3f}")
    if recalls:
        print(
            f"mean word recall {statistics.mean(recalls):.3f} over {len(recalls)} documents, "
            f"{statistics.mean(ocr_seconds):.2f} s OCR per page"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--eval-root", type=Path, default=Path("/work/shared/eval"))
    args = parser.parse_args()
    status = ocr_status(OcrConfig())
    if not status.available:
        sys.exit(f"tesseract unavailable: {status.hint}")
    print(f"tesseract {status.version}, langs {'+'.join(status.langs_available)}")
    bench_speed(args.eval_root, args.repeat)
    bench_scanned_pdfs(args.eval_root)


if __name__ == "__main__":
    main()
