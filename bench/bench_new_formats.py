"""Extraction speed and peak memory of the newer formats, each in a fresh child process, as a
ratio to plain text of the same words measured in the same run (run by hand).

    python bench/bench_new_formats.py [--mb 40] [--small-files 300]

Cases: an mbox of many messages (streaming: peak RSS must not follow the file size), LaTeX,
Python, XML, RTF and a gzipped log of about `--mb` MB each; and `--small-files` small .py files
read in process versus through the sandbox child (why code is read in process).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
UNCAPPED = {"max_file_bytes": 1 << 40, "max_text_chars": 1 << 40}


def sentence(i: int) -> str:
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12))


def make_inputs(work: Path, mb: int) -> dict[str, Path]:
    from tests.mail_fixtures import make_message

    lines = mb * 1024 * 1024 // 80
    text = "".join(f"{sentence(i)} {i}.\n" + ("\n" if i % 5 == 4 else "") for i in range(lines))
    out = {"txt": work / "base.txt"}
    out["txt"].write_text(text, "utf-8")
    tex = work / "paper.tex"
    with tex.open("w", encoding="utf-8") as handle:
        for i, para in enumerate(text.split("\n\n")):
            if i % 50 == 0:
                handle.write(f"\\section{{Part {i}}}\\label{{s{i}}}\n")
            handle.write(para.replace("alpha", "\\emph{alpha}") + " % note\n\n")
    out["tex"] = tex
    py = work / "module.py"
    py.write_text("".join(f"x{i} = '{line}'\n" for i, line in enumerate(text.splitlines())))
    out["py"] = py
    xml = work / "dump.xml"
    with xml.open("w", encoding="utf-8") as handle:
        handle.write("<records>\n")
        for para in text.split("\n\n"):
            handle.write(f"<record><title>r</title><p>{para}</p></record>\n")
        handle.write("</records>\n")
    out["xml"] = xml
    rtf = work / "memo.rtf"
    body = text.replace("\n\n", "\\par\n").replace("\n", " ")
    rtf.write_text("{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Arial;}}\\f0 " + body + "}", "ascii")
    out["rtf"] = rtf
    gz = work / "server.log.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    out["gz"] = gz
    mbox = work / "archive.mbox"
    with mbox.open("wb") as handle:
        for i, para in enumerate(text.split("\n\n")):
            message = make_message(f"Status {i}", para, day=1 + i % 28)
            handle.write(b"From a@example.com Mon Nov  2 10:00:00 2026\n")
            handle.write(message.as_bytes(unixfrom=False) + b"\n")
    out["mbox"] = mbox
    return out


def run_one(path: Path) -> None:
    from helpers.extract.blocks import ExtractContext, ExtractLimits
    from helpers.extract.registry import extractor_for

    ctx = ExtractContext(limits=ExtractLimits(**UNCAPPED))
    extract = extractor_for(path)
    assert extract is not None
    start = time.perf_counter()
    chars = sum(len(block.text) for block in extract(path, ctx))
    seconds = time.perf_counter() - start
    # VmHWM, not ru_maxrss: ru_maxrss survives exec, so it would report the parent's peak.
    status = Path("/proc/self/status").read_text()
    rss = int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) / 1024
    print(json.dumps({"s": seconds, "chars": chars, "rss_mb": rss}))


def measure(path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def small_files(work: Path, count: int) -> str:
    from helpers.extract.blocks import ExtractContext, ExtractLimits
    from helpers.extract.registry import extractor_for
    from helpers.extract.sandbox import SandboxedExtractor

    folder = work / "code"
    folder.mkdir()
    paths = []
    for i in range(count):
        path = folder / f"m{i}.py"
        path.write_text("".join(f"def f{k}():\n    return '{sentence(k)}'\n\n" for k in range(60)))
        paths.append(path)
    start = time.perf_counter()
    for path in paths:
        extract = extractor_for(path)
        assert extract is not None
        list(extract(path, ExtractContext()))
    in_process = time.perf_counter() - start
    box = SandboxedExtractor(ExtractLimits(), None)
    try:
        list(box.extract(paths[0], lambda: None))  # the child's start-up is not per file
        start = time.perf_counter()
        for path in paths:
            list(box.extract(path, lambda: None))
        sandboxed = time.perf_counter() - start
    finally:
        box.close()
    return (
        f"{count} small .py files: in process {in_process:.2f} s, through the sandbox "
        f"{sandboxed:.2f} s ({sandboxed / in_process:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=40)
    parser.add_argument("--small-files", type=int, default=300)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    with tempfile.TemporaryDirectory(prefix="bench-new-formats-") as tmp:
        inputs = make_inputs(Path(tmp), args.mb)
        base = measure(inputs["txt"])
        size = inputs["txt"].stat().st_size / 1e6
        print(f"txt  {size:.0f} MB: {base['s']:.2f} s, peak RSS {base['rss_mb']:.0f} MB (baseline)")
        for name in ("tex", "py", "xml", "rtf", "gz", "mbox"):
            result = measure(inputs[name])
            mb = inputs[name].stat().st_size / 1e6
            print(
                f"{name:4} {mb:.0f} MB: {result['s']:.2f} s = {result['s'] / base['s']:.1f}x "
                f"plain text, peak RSS {result['rss_mb']:.0f} MB, {result['chars']} chars"
            )
        print(small_files(Path(tmp), args.small_files))


if __name__ == "__main__":
    main()
