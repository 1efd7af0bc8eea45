"""Trusted configuration: launch arguments and RAGDOC_* environment variables, never tool input."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from helpers.excludes import split_exclude_env
from helpers.extract.blocks import DEFAULT_MAX_FILE_MB, max_file_bytes

REPO_DIR = Path(__file__).resolve().parents[1]  # where the top-level modules are


def bundled_dir(name: str, package: str, marker: str) -> Path:
    """`ui/` or the sample folder: beside the modules in a clone; in an installed wheel, the data
    package it was built into (`package`, see pyproject.toml), so site-packages gets no bare
    `ui/`. `marker` (a file inside) tells our folder from a stranger's of the same name."""
    beside = REPO_DIR / name
    if (beside / marker).exists():
        return beside
    spec = importlib.util.find_spec(package)
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / marker).exists():
            return Path(location)
    return beside


SAMPLE_DIR = bundled_dir("rag_document", "ragdoc_sample", "contracts")
DEFAULT_KNOWLEDGE_DIR = SAMPLE_DIR  # only for `demo`: a server needs --knowledge-dir
LEGACY_DATA_DIR = REPO_DIR / "state"  # the default before ~/.mcp-ragdoc (clones)
DATA_HOME_NAME = ".mcp-ragdoc"  # under the home dir: one sub-folder per knowledge dir
SLUG_MAX_CHARS = 40
PATH_HASH_CHARS = 10  # of sha256: 40 bits, no collision between one user's folders
LEGACY_MATCH_SAMPLE = 50  # indexed paths checked when deciding if state/ is this folder's index
DB_FILENAME = "index.sqlite3"
# Large enough for real manuals and decks; an accidental disk image or video is refused fast.
# Writers hold the SQLite lock for one document at a time (well under a second); 30 s lets a
# cancel or a second sync_kb queue behind a slow document before it is reported as busy.
DEFAULT_BUSY_TIMEOUT_S = 30.0
BUSY_TIMEOUT_MAX_S = 3600.0  # past an hour a caller is better told the index is busy


@dataclass(frozen=True)
class Config:
    knowledge_dir: Path
    data_dir: Path
    db_path: Path
    semantic: bool = True  # try semantic search when a model is found
    semantic_model_dir: Path | None = None
    max_file_bytes: int = max_file_bytes(DEFAULT_MAX_FILE_MB)
    ocr_langs: str = "eng+tha+rus"
    ocr_cmd: str = "tesseract"
    ocr_vlm_url: str | None = None
    ocr_vlm_model: str | None = None
    instructions_append: str = ""
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S  # wait for another writer before IndexBusy
    read_only: bool = False  # serve an index without ever writing to the data dir
    knowledge_dir_given: bool = True  # False: no --knowledge-dir, a config problem (not demo)
    # gitignore-style globs left out of the index, beside <knowledge-dir>/.ragignore
    excludes: tuple[str, ...] = ()
    watch: bool = False  # MCP server / console: sync on file changes (helpers.index.watch)
    watch_polling: bool = False  # watchfiles' polling mode instead of inotify (network shares)

    @property
    def busy_timeout_ms(self) -> int:
        return int(self.busy_timeout_s * 1000)

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def lock_path(self) -> Path:
        return self.data_dir / "sync.lock"

    def to_json(self) -> str:
        data = asdict(self)
        return json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in data.items()})

    @classmethod
    def from_json(cls, text: str) -> Config:
        data = json.loads(text)
        for key in ("knowledge_dir", "data_dir", "db_path", "semantic_model_dir"):
            if data.get(key) is not None:
                data[key] = Path(data[key])
        if "excludes" in data:
            data["excludes"] = tuple(data["excludes"])
        return cls(**data)


def _env(name: str) -> str | None:
    value = os.environ.get(f"RAGDOC_{name}")
    return value if value not in (None, "") else None


def add_config_arguments(parser: argparse.ArgumentParser, exclude_dest: str = "exclude") -> None:
    """The launch arguments shared by the MCP server, CLI, console and eval. A flag not given is
    the parser's `argument_default` (None: read RAGDOC_*; a command's copy uses SUPPRESS so it
    never overwrites a value given before the command). A command's copy stores `--exclude` under
    its own `exclude_dest`, so the globs given before and after the command can be joined (argparse
    would replace the earlier list with the later one)."""
    parser.add_argument("--knowledge-dir", help="folder of documents to index (read-only)")
    parser.add_argument("--data-dir", help="private folder for the index, logs and locks")
    parser.add_argument("--db", help="SQLite index file (default: <data-dir>/index.sqlite3)")
    parser.add_argument("--semantic", choices=["on", "off"], help="semantic search (default on)")
    parser.add_argument("--semantic-model-dir", help="sentence-transformers model folder (ONNX)")
    parser.add_argument("--max-file-mb", type=int, help="skip files larger than this")
    parser.add_argument("--ocr-langs", help="tesseract languages, e.g. eng+tha+rus")
    parser.add_argument("--ocr-cmd", help="tesseract executable")
    parser.add_argument("--ocr-vlm-url", help="loopback OpenAI-compatible URL for OCR correction")
    parser.add_argument("--ocr-vlm-model", help="model name for --ocr-vlm-url")
    parser.add_argument("--instructions-append", help="extra line for the MCP server instructions")
    parser.add_argument(
        "--busy-timeout-s", type=float, help="seconds to wait for another writer (default 30)"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=parser.argument_default,
        help="never write to the data dir: search a copied or mounted index; sync is refused",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        default=parser.argument_default,
        help="MCP server / console: sync changed files automatically (RAGDOC_WATCH)",
    )
    parser.add_argument(
        "--watch-polling",
        action="store_true",
        default=parser.argument_default,
        help="watch by polling instead of inotify, e.g. on network shares (RAGDOC_WATCH_POLLING)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        dest=exclude_dest,
        metavar="GLOB",
        help="leave matching files out of the index (gitignore syntax, repeatable; added to "
        "<knowledge-dir>/.ragignore and RAGDOC_EXCLUDE)",
    )


def data_home() -> Path:
    """`~/.mcp-ragdoc` (the private state root of the design)."""
    return Path.home() / DATA_HOME_NAME


def default_data_dir(knowledge: Path) -> Path:
    """`~/.mcp-ragdoc/<folder name>-<hash of its resolved path>`: readable, and two folders
    (even with the same name) never share an index. A clone's `state/` that already indexes
    this folder is kept (see the README's migration note)."""
    if _legacy_index_matches(knowledge):
        return LEGACY_DATA_DIR
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", knowledge.name).strip("-.")[:SLUG_MAX_CHARS]
    digest = hashlib.sha256(str(knowledge).encode("utf-8", "surrogateescape")).hexdigest()
    return data_home() / f"{slug or 'root'}-{digest[:PATH_HASH_CHARS]}"


def _legacy_index_matches(knowledge: Path) -> bool:
    """Whether `state/` next to the code holds an index of `knowledge`: the index stores paths
    relative to the folder, so most of a sample of them must exist there."""
    db = LEGACY_DATA_DIR / DB_FILENAME
    if not db.is_file():
        return False
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT path FROM documents ORDER BY id LIMIT ?", (LEGACY_MATCH_SAMPLE,)
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    found = sum((knowledge / row[0]).is_file() for row in rows if isinstance(row[0], str))
    return bool(rows) and 2 * found > len(rows)


def config_from_args(args: argparse.Namespace, demo: bool = False) -> Config:
    """Arguments win over RAGDOC_* variables, which win over the defaults. Without a
    knowledge dir only `demo` runs (on the sample folder); everything else reports it."""

    def pick(attr: str, env: str) -> str | None:
        value = getattr(args, attr, None)
        return value if value not in (None, "") else _env(env)

    given = pick("knowledge_dir", "KNOWLEDGE_DIR")
    knowledge = Path(given or SAMPLE_DIR).expanduser().resolve()
    data_arg = pick("data_dir", "DATA_DIR")
    data = Path(data_arg).expanduser().resolve() if data_arg else default_data_dir(knowledge)
    db = pick("db", "DB")
    model_dir = pick("semantic_model_dir", "SEMANTIC_MODEL_DIR")
    max_mb = getattr(args, "max_file_mb", None) or int(_env("MAX_FILE_MB") or DEFAULT_MAX_FILE_MB)
    busy = getattr(args, "busy_timeout_s", None)
    if busy is None:
        busy = _float_env("BUSY_TIMEOUT_S", DEFAULT_BUSY_TIMEOUT_S)
    read_only = getattr(args, "read_only", None)
    if read_only is None:
        read_only = (_env("READ_ONLY") or "0").lower() in ("1", "true", "yes", "on")
    excludes = split_exclude_env(_env("EXCLUDE") or "") + tuple(
        getattr(args, "exclude", None) or ()
    )
    return Config(
        excludes=excludes,
        watch=_flag(args, "watch", "WATCH"),
        watch_polling=_flag(args, "watch_polling", "WATCH_POLLING"),
        knowledge_dir=knowledge,
        data_dir=data,
        db_path=Path(db).expanduser().resolve() if db else data / DB_FILENAME,
        semantic=(pick("semantic", "SEMANTIC") or "on") == "on",
        semantic_model_dir=Path(model_dir).expanduser().resolve() if model_dir else None,
        max_file_bytes=max_file_bytes(max_mb),
        ocr_langs=pick("ocr_langs", "OCR_LANGS") or "eng+tha+rus",
        ocr_cmd=pick("ocr_cmd", "OCR_CMD") or "tesseract",
        ocr_vlm_url=pick("ocr_vlm_url", "OCR_VLM_URL"),
        ocr_vlm_model=pick("ocr_vlm_model", "OCR_VLM_MODEL"),
        instructions_append=pick("instructions_append", "INSTRUCTIONS_APPEND") or "",
        busy_timeout_s=busy,
        read_only=bool(read_only),
        knowledge_dir_given=bool(given) or demo,
    )


def _flag(args: argparse.Namespace, attr: str, env: str) -> bool:
    value = getattr(args, attr, None)
    if value is None:
        value = (_env(env) or "0").lower() in ("1", "true", "yes", "on")
    return bool(value)


def _float_env(name: str, default: float) -> float:
    raw = _env(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ValueError(f"RAGDOC_{name}={raw!r} is not a number of seconds") from exc


def config_problems(config: Config) -> list[str]:
    """Settings out of range, each with the fix (paths are checked by rag_service)."""
    if not config.knowledge_dir_given:
        return [
            "no knowledge dir: pass --knowledge-dir /path/to/documents (or set "
            "RAGDOC_KNOWLEDGE_DIR); `demo` alone runs on the bundled sample folder"
        ]
    if not 0 < config.busy_timeout_s <= BUSY_TIMEOUT_MAX_S:
        return [
            f"--busy-timeout-s {config.busy_timeout_s} is out of range: "
            f"pass a number of seconds above 0 and at most {BUSY_TIMEOUT_MAX_S:.0f}"
        ]
    return []


def with_overrides(config: Config, **changes: object) -> Config:
    return replace(config, **changes)
