"""Watch mode: file events on the knowledge dir start the normal detached sync of what changed.

Events come from the `watchfiles` library (inotify on Linux; its own polling mode where inotify
is unavailable, e.g. network shares, chosen by --watch-polling / RAGDOC_WATCH_POLLING or after
inotify fails to start). Changes are collected until the folder has been quiet for `QUIET_S`,
then one sync of the smallest folder holding them all is started through `start_sync` (the
service's, which owns the worker and the one-writer rule). A change during a running sync waits
for it and then queues exactly one follow-up sync for everything that changed meanwhile.
The folder may be renamed or removed: the watcher then waits (events on its nearest existing
parent) until a folder is back at the path, and syncs it whole. Logs go to stderr only: the MCP
server's stdout is its protocol channel.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import watchfiles

from helpers.config import Config
from helpers.excludes import RAGIGNORE_NAME, ExcludeRules, load_excludes
from helpers.safety import rel_path_problem

# Quiet time before a burst of changes becomes a sync: an editor's save (temp file, rename,
# chmod) lands within milliseconds, a copy of many files keeps the folder busy; 2 s keeps the
# measured save-to-searchable p95 inside 5 s (bench/bench_watch.py) with one sync per burst.
QUIET_S = 2.0
# How often the event wait returns when nothing happens, to close a quiet period and to notice
# that the folder itself was renamed or removed (a stat of one folder, not a scan).
TICK_MS = 250
POLL_DELAY_MS = 300  # watchfiles' polling mode: rescan interval (its default)
RETRY_S = 2.0  # after a watcher error that polling mode did not cure, wait before retrying

log = logging.getLogger("ragdoc.watch")


@dataclass(frozen=True)
class SyncStarted:
    """What start_sync reported: the job, and whether it was one already running."""

    job_id: str
    already_running: bool


StartSync = Callable[[str | None], SyncStarted]
JobIsActive = Callable[[str], bool]


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if os.path.isdir(path) else None


def common_scope(rel_paths: Iterable[str]) -> str:
    """The deepest folder holding the parent folder of every changed path ('' = the root)."""
    folders = [PurePosixPath(p).parent.parts for p in rel_paths]
    if not folders:
        return ""
    common: list[str] = []
    for parts in zip(*folders, strict=False):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return "/".join(p for p in common if p not in ("", "."))


class FolderWatcher:
    """One watcher of one knowledge dir; `run()` blocks until `stop()`."""

    def __init__(
        self,
        config: Config,
        start_sync: StartSync,
        job_is_active: JobIsActive,
        *,
        polling: bool = False,
        initial_sync: bool = True,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.config = config
        self.root = config.knowledge_dir
        self.polling = polling
        self.initial_sync = initial_sync
        self.quiet_s = quiet_s
        self._start_sync = start_sync
        self._job_is_active = job_is_active
        self._stop = threading.Event()
        self._pending: set[str] = set()
        self._full = False  # a rules change or a recreated folder: sync everything
        self._last_change = 0.0
        self._waiting_on: str | None = None  # job running when changes arrived
        self._rules: ExcludeRules = load_excludes(self.root, config.excludes)
        self.syncs_started: list[tuple[str, str]] = []  # (job id, scope), for callers and tests
        self.mode = "polling" if polling else "inotify"
        self._ignored_prefixes = self._inside_root(config.data_dir, config.db_path.parent)

    # -- lifecycle ------------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        log.setLevel(logging.INFO)  # its lines are the watcher's whole output (stderr)
        log.info("watching %s (%s; syncs after %.1f s quiet)", self.root, self.mode, self.quiet_s)
        if self.initial_sync and _identity(self.root) is not None:
            self._full = True
            self._last_change = 0.0
            self._maybe_sync(force=True)
        watched = _identity(self.root)
        while not self._stop.is_set():
            ident = _identity(self.root)
            if ident is None:
                self._wait_for_root()
                continue
            if ident != watched:  # renamed away, removed, or replaced by another folder
                log.info("%s is back: syncing it whole", self.root)
                self._note_full()
                watched = ident
            try:
                self._watch_root(ident)
            except (OSError, RuntimeError) as exc:
                # A new watch sees only later events: what happened meanwhile needs a full sync
                # (a no-op when nothing changed).
                self._note_full()
                if isinstance(exc, FileNotFoundError):
                    log.info("watch restarted (%s)", exc)
                    continue  # e.g. the folder went between the check and the watch
                if not self.polling:
                    log.warning("inotify unavailable (%s): switching to polling mode", exc)
                    self.polling, self.mode = True, "polling"
                    continue
                log.error("watcher error (%s); retrying in %.0f s", exc, RETRY_S)
                self._stop.wait(RETRY_S)

    # -- events ---------------------------------------------------------------------------------
    def _watch(self, path: Path, recursive: bool) -> Iterable[set[tuple[watchfiles.Change, str]]]:
        return watchfiles.watch(
            path,
            watch_filter=None,  # our own filter below: hidden, sensitive, excluded, the data dir
            stop_event=self._stop,
            rust_timeout=TICK_MS,
            yield_on_timeout=True,
            force_polling=self.polling,
            poll_delay_ms=POLL_DELAY_MS,
            recursive=recursive,
            raise_interrupt=True,  # Ctrl-C ends `rag_server.py watch`
            ignore_permission_denied=True,
        )

    def _watch_root(self, ident: tuple[int, int]) -> None:
        for changes in self._watch(self.root, recursive=True):
            if self._stop.is_set():
                return
            self._take(changes)
            if (watchfiles.Change.deleted, str(self.root)) in changes:
                # Removed and made again at once: the new folder often gets the old inode
                # number, so its identity matches while this watch still follows the deleted one
                # and would miss every later change (seen in tests/test_watch.py).
                log.info("%s was removed: watching it anew", self.root)
                self._note_full()
                return
            if _identity(self.root) != ident:
                log.info("%s was renamed or removed: waiting for it to come back", self.root)
                return
            self._maybe_sync()

    def _wait_for_root(self) -> None:
        """Block (on events of the nearest existing parent) until a folder is at the path."""
        while not self._stop.is_set() and _identity(self.root) is None:
            parent = self.root.parent
            while not parent.is_dir() and parent != parent.parent:
                parent = parent.parent
            try:
                for _changes in self._watch(parent, recursive=False):
                    if self._stop.is_set() or _identity(self.root) is not None:
                        return
                    if not parent.is_dir():
                        break  # the parent went too: climb again
            except (OSError, RuntimeError) as exc:
                log.error("cannot watch %s (%s); retrying in %.0f s", parent, exc, RETRY_S)
                self._stop.wait(RETRY_S)

    def _take(self, changes: set[tuple[watchfiles.Change, str]]) -> None:
        root = str(self.root)
        for _change, raw in changes:
            if raw != root and not raw.startswith(root + os.sep):
                continue
            rel = os.path.relpath(raw, root).replace(os.sep, "/")
            if rel == ".":
                continue
            if rel == RAGIGNORE_NAME:
                self._rules = load_excludes(self.root, self.config.excludes)
                log.info("%s changed: syncing everything with the new rules", RAGIGNORE_NAME)
                self._note_full()
                continue
            if not self._relevant(rel):
                continue
            self._pending.add(rel)
            self._last_change = time.monotonic()

    def _relevant(self, rel: str) -> bool:
        """What a sync could index or must remove: not hidden, sensitive, excluded or ours."""
        if any(rel == p or rel.startswith(p + "/") for p in self._ignored_prefixes):
            return False  # the index's own writes (a data dir inside the knowledge dir)
        if rel_path_problem(rel):
            return False
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if self._rules(prefix, True) or (i == len(parts) and self._rules(prefix, False)):
                return False
        return True

    def _note_full(self) -> None:
        self._full = True
        self._last_change = time.monotonic()

    # -- syncing --------------------------------------------------------------------------------
    def _maybe_sync(self, force: bool = False) -> None:
        if not (self._pending or self._full):
            return
        if not force and time.monotonic() - self._last_change < self.quiet_s:
            return
        if self._waiting_on is not None:
            if self._job_is_active(self._waiting_on):
                return  # the follow-up starts once that job is final
            self._waiting_on = None
        scope = "" if self._full else self._existing_scope(common_scope(self._pending))
        try:
            started = self._start_sync(scope or None)
        except Exception as exc:  # e.g. the index is busy, or the folder just went: keep them
            log.error("sync not started (%s): retrying in %.1f s", exc, self.quiet_s)
            self._full = self._full or bool(scope)  # a vanished scope folder: sync the whole
            self._last_change = time.monotonic()
            return
        if started.already_running:
            log.info("sync %s is running: one follow-up sync queued", started.job_id)
            self._waiting_on = started.job_id
            return
        log.info("sync %s started for %s", started.job_id, scope or "the whole folder")
        self.syncs_started.append((started.job_id, scope))
        self._pending.clear()
        self._full = False
        self._waiting_on = started.job_id  # changes from now on wait for this job

    def _existing_scope(self, scope: str) -> str:
        """The scope, or its nearest folder that still exists (changes may delete folders)."""
        while scope:
            path = self.root / scope
            if path.is_dir() and not path.is_symlink() and rel_path_problem(scope) is None:
                return scope
            scope = scope.rpartition("/")[0]
        return ""

    def _inside_root(self, *paths: Path) -> tuple[str, ...]:
        out = []
        for path in paths:
            try:
                rel = path.resolve().relative_to(self.root)
            except ValueError:
                continue
            out.append(rel.as_posix())
        return tuple(p for p in out if p != ".")


def start_thread(watcher: FolderWatcher) -> FolderWatcher:
    """Run the watcher on a daemon thread (the MCP server's and the console's --watch)."""

    def run() -> None:
        try:
            watcher.run()
        except Exception:  # the face goes on without watching; the reason is in its log
            log.exception("watch mode stopped")

    threading.Thread(target=run, name="watch", daemon=True).start()
    return watcher
