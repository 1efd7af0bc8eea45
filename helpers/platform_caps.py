"""What the operating system offers the sandbox and the job bookkeeping, with portable fallbacks.

Linux gives a kernel memory cap (RLIMIT_AS), a parent-death signal (prctl PR_SET_PDEATHSIG) and
/proc. macOS has none of them in a usable form (RLIMIT_AS is accepted but not enforced), so there
the extraction child's memory is watched from the parent (`ps`), the child polls its parent and
exits when it is orphaned, and a zombie check falls back to `ps`. rag_health names what is missing.

`RAGDOC_SIMULATE_MISSING=prctl,rlimit_as,proc` makes this process and its children behave as if
those were absent: the tests run the real fallbacks on Linux with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SIMULATE_ENV = "RAGDOC_SIMULATE_MISSING"
FEATURES = ("prctl", "rlimit_as", "proc")
PS_TIMEOUT_S = 5.0


def _simulated(name: str) -> bool:
    return name in {p.strip() for p in os.environ.get(SIMULATE_ENV, "").split(",")}


def has_prctl() -> bool:
    """PR_SET_PDEATHSIG: the kernel kills the extraction child when the worker dies."""
    return sys.platform.startswith("linux") and not _simulated("prctl")


def has_rlimit_as() -> bool:
    """An address-space cap the kernel enforces (Linux; macOS accepts it and ignores it)."""
    import resource

    return (
        sys.platform.startswith("linux")
        and hasattr(resource, "RLIMIT_AS")
        and not _simulated("rlimit_as")
    )


def has_proc() -> bool:
    return Path("/proc/self/status").exists() and not _simulated("proc")


def rss_bytes(pid: int) -> int | None:
    """Resident memory of `pid` (None when it is gone or cannot be read)."""
    if has_proc():
        try:
            for line in Path(f"/proc/{pid}/status").read_text(errors="replace").splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            return None
        return None
    out = _ps(pid, "rss=")
    try:
        return int(out) * 1024 if out else None  # ps reports kilobytes on Linux and macOS
    except ValueError:
        return None


def is_zombie(pid: int) -> bool | None:
    """True when `pid` has exited but is not yet reaped; None when that cannot be told."""
    if has_proc():
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
        except (OSError, IndexError):
            return None
    out = _ps(pid, "stat=")
    return out.startswith("Z") if out else None


def _ps(pid: int, field: str) -> str:
    try:
        done = subprocess.run(
            ["ps", "-o", field, "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=PS_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()


def missing_warnings() -> list[str]:
    """One line per missing feature, for rag_health: what is lost and what stands in for it."""
    warnings = []
    if not has_rlimit_as():
        warnings.append(
            "no kernel memory cap on this platform (RLIMIT_AS): the extraction child's memory "
            "is checked from outside twice a second instead, so a bomb may overshoot briefly"
        )
    if not has_prctl():
        warnings.append(
            "no parent-death signal on this platform (prctl): an extraction child whose worker "
            "was killed notices within a second and exits"
        )
    if not has_proc():
        warnings.append("no /proc on this platform: process checks use `ps` (slower, same result)")
    return warnings
