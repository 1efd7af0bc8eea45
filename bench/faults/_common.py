"""Put the repository and tests/ on sys.path so bench scripts share the test harness."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


def work_dir(name: str, base: str | None) -> Path:
    """A fresh scratch folder (under --work or the system temp dir)."""
    return Path(tempfile.mkdtemp(prefix=f"ragdoc-{name}-", dir=base))


def line(label: str, value: object) -> None:
    print(f"  {label:<44} {value}")
