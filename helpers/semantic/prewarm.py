"""The sync's semantic build worker, spawned ahead of the semantic phase.

A build worker's fixed start (spawn, imports, ONNX sessions, the passage tokenizer) is ~0.7 s of
CPU, 2-5 s of wall on a loaded 2-core box: most of a small semantic phase. The sync job spawns
the worker while its lexical phase runs, so the first embed request finds the model loaded
(`bench/RESULTS.md`, "Semantic phase as the user sees it"); a sync whose files all turn out
to hold the bytes already indexed (touched, checked out again) spawns none.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.errors import RagError
from helpers.semantic import generations
from helpers.semantic.client import DEFAULT_THREADS, SemanticWorker
from helpers.semantic.model import check_availability, load_model_info
from helpers.skips import SkipReason

if TYPE_CHECKING:
    from helpers.config import Config

log = logging.getLogger(__name__)
# rag_sync outcomes of a file read into new text (unchanged, failed and skipped files bring
# nothing to embed).
NEW_TEXT_OUTCOMES = frozenset({"added", "updated"})


class WorkerPrewarm:
    """A build worker (`--preload-passages`) that loads while the lexical phase runs.

    Nothing is spawned before `start()`. A build takes the worker with `take()` and closes it
    when it ends; `close()` ends it in every case (job end, cancel, error). A sync process that
    dies closes the worker's stdin, and the worker exits at that EOF: it never outlives its job.
    While it waits it holds one loaded model (~340 MiB RSS) and no CPU.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        log_path: Path,
        cache_dir: Path | None,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        self.worker = SemanticWorker(
            model_dir,
            log_path=log_path,
            cache_dir=cache_dir,
            threads=threads,
            preload_passages=True,
        )
        self.started_at: float | None = None  # time.monotonic() of the spawn
        self.closed = False
        # The sync's index and folder, for PlanWatch to tell a file that may hold the indexed
        # bytes from one that cannot (set by prewarm_for_sync).
        self.index: tuple[sqlite3.Connection, Path] | None = None
        # paths skipped after reading by the last sync (mostly secret): read at job start,
        # before this sync's skip list replaces theirs
        self.skipped_after_reading: frozenset[str] = frozenset()
        self._hashing: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.worker.pid

    def start(self, why: str) -> None:
        """Spawn now (once; never after close). A spawn failure is logged, not raised: the
        build then starts its own worker and reports what is wrong."""
        if self.started_at is not None or self.closed:
            return
        self.started_at = time.monotonic()
        try:
            self.worker.start()
        except OSError as exc:
            log.warning("semantic worker not started ahead (%s): %s", why, exc)
            return
        log.info("semantic worker %s started ahead: %s", self.worker.pid, why)
        # The build's fingerprint hashes the model files once per cache (0.3-1 s for 118 MB on
        # a fresh one); hashlib releases the GIL, so that runs beside the lexical phase too.
        self._hashing = threading.Thread(target=self._hash_model, name="model-hash", daemon=True)
        self._hashing.start()

    def _hash_model(self) -> None:
        try:
            load_model_info(self.worker.model_dir, self.worker.cache_dir)
        except (RagError, OSError) as exc:  # the build reports it
            log.info("model not hashed ahead: %s", exc)

    def wait_for_hashes(self) -> None:
        """Let the hashing started with the worker finish (the build reuses its cache)."""
        if self._hashing is not None:
            self._hashing.join()

    def take(self, model_dir: Path, threads: int, timeout_s: float) -> SemanticWorker | None:
        """The started worker when it runs this model with these threads (the caller closes
        it), else None: the caller spawns its own."""
        w = self.worker
        if self.started_at is None or self.closed or w.model_dir != Path(model_dir):
            return None
        if w.threads != threads:
            return None
        w.timeout_s = timeout_s
        return w

    def watch(self, observer: object) -> PlanWatch:
        """`observer` (the job's sync observer) that also starts this prewarm at the first
        file that changes chunks (PlanWatch)."""
        return PlanWatch(observer, self)

    def close(self) -> None:
        """Quit the worker (killed if it does not exit within CLOSE_WAIT_S); idempotent."""
        self.closed = True
        self.worker.close()


def prewarm_for_sync(conn: sqlite3.Connection, config: Config) -> WorkerPrewarm | None:
    """The build worker of this sync, to spawn before the semantic phase (WorkerPrewarm).

    None when semantic search is off or no model is usable. Spawned at once when the vectors
    are already behind the chunks (no generation, or another count: semantic switched on, a
    cancelled or failed build); else by `PlanWatch` at the first file that changes chunks, so
    a sync that reads nothing, or only bytes already indexed, spawns nothing. The model is not
    hashed here (that would delay the lexical phase on a fresh cache): a model change alone is
    left to the build, which spawns its worker as before. Never raises: a prewarm is only a
    head start.
    """
    try:
        cache_dir = config.data_dir / generations.CACHE_SUBDIR
        found = check_availability(
            config.semantic_model_dir,
            enabled=config.semantic,
            cache_dir=cache_dir,
            with_fingerprint=False,
        )
        if found.state != "ready" or found.model is None:
            return None
        prewarm = WorkerPrewarm(
            found.model.model_dir,
            log_path=config.logs_dir / generations.WORKER_LOG,
            cache_dir=cache_dir,
        )
        prewarm.index = (conn, config.knowledge_dir)
        prewarm.skipped_after_reading = _skipped_after_reading(conn)
        current = generations.latest_ready_generation(conn)
        (chunks,) = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
        if chunks and (current is None or current.vector_count != chunks):
            prewarm.start("the vectors are behind the chunks")
        return prewarm
    except Exception as exc:  # best effort: the semantic phase itself reports a real problem
        log.warning("semantic worker not started ahead: %s", exc)
        return None


class PlanWatch:
    """A sync observer that starts the prewarm at the first file that changes chunks, and
    passes every call on to the job's own observer.

    A new file or one of another size than indexed starts it as the file starts: at once, for
    a normal sync. A file of the indexed size may hold the indexed bytes (touched, checked out
    again), one skipped last time (a secret) may be skipped again, a failed one may fail again,
    and one of an older chunk scheme may keep its OCR text as is: those start it only when
    their outcome says they were read into new text."""

    def __init__(self, observer: object, prewarm: WorkerPrewarm) -> None:
        self._observer = observer
        self._prewarm = prewarm

    def on_file_start(self, rel_path: str) -> None:
        if self._prewarm.started_at is None:
            why = self._cannot_be_same(rel_path)
            if why:
                self._prewarm.start(f"{rel_path} {why}")
        self._observer.on_file_start(rel_path)  # type: ignore[attr-defined]

    def on_file_done(self, rel_path: str, outcome: str, size: int, error: str | None) -> None:
        if outcome in NEW_TEXT_OUTCOMES:
            self._prewarm.start(f"{rel_path} was {outcome}")
        self._observer.on_file_done(rel_path, outcome, size, error)  # type: ignore[attr-defined]

    def _cannot_be_same(self, rel_path: str) -> str | None:
        """Why `rel_path` will change chunks whatever its bytes, None when it may not."""
        if self._prewarm.index is None:
            return "is to read"
        conn, root = self._prewarm.index
        try:
            row = conn.execute("SELECT size FROM documents WHERE path = ?", (rel_path,)).fetchone()
        except sqlite3.Error as exc:  # a head start only: the sync itself meets the problem
            return f"is to read ({exc})"
        if row is None:
            if rel_path in self._prewarm.skipped_after_reading:
                return None  # skipped last time (a secret, say): its outcome tells
            return "is new"
        try:
            size = (root / rel_path).stat().st_size
        except OSError:
            return None  # its own turn reports it
        if size != row[0]:
            return "changed size"
        # An older chunk scheme is left to its outcome too: OCR text kept as is (no engine
        # here) comes out unchanged, and a re-chunked file starts it when it is written.
        return None

    def __getattr__(self, name: str) -> object:
        return getattr(self._observer, name)


def _skipped_after_reading(conn: sqlite3.Connection) -> frozenset[str]:
    try:
        rows = conn.execute(
            "SELECT path FROM skipped_files WHERE reason = ?", (str(SkipReason.SECRET),)
        ).fetchall()
    except sqlite3.Error:  # an index from before skipped_files: nothing known
        return frozenset()
    return frozenset(path for (path,) in rows)
