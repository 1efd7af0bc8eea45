"""Trusted configuration: launch arguments and RAGDOC_* environment variables, never tool input."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from helpers.excludes import split_exclude_env

REPO_DIR = Path(__file__).resolve().parent
DEFAULT_KNOWLEDGE_DIR = REPO_DIR / "rag_document"
DEFAULT_DATA_DIR = REPO_DIR / "state"
DB_FILENAME = "index.sqlite3"
# Large enough for real manuals and decks; an accidental disk image or video is refused fast.
DEFAULT_MAX_FILE_MB = 200
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
    max_file_bytes: int = DEFAULT_MAX_FILE_MB * 1024 * 1024
    ocr_langs: str = "eng+tha+rus"
    ocr_cmd: str = "tesseract"
    ocr_vlm_url: str | None = None
    ocr_vlm_model: str | None = None
    instructions_append: str = ""
    busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S  # wait for another writer before IndexBusy
    read_only: bool = False  # serve an index without ever writing to the data dir
    # gitignore-style globs left out of the index, beside <knowledge-dir>/.ragignore
    excludes: tuple[str, ...] = ()
    watch: bool = False  # MCP server / console: sync on file changes (rag_watch)
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


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """The launch arguments shared by the MCP server, CLI, console and eval."""
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
        default=None,
        help="never write to the data dir: search a copied or mounted index; sync is refused",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        default=None,
        help="MCP server / console: sync changed files automatically (RAGDOC_WATCH)",
    )
    parser.add_argument(
        "--watch-polling",
        action="store_true",
        default=None,
        help="watch by polling instead of inotify, e.g. on network shares (RAGDOC_WATCH_POLLING)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        metavar="GLOB",
        help="leave matching files out of the index (gitignore syntax, repeatable; added to "
        "<knowledge-dir>/.ragignore and RAGDOC_EXCLUDE)",
    )


def config_from_args(args: argparse.Namespace) -> Config:
    """Arguments win over RAGDOC_* variables, which win over the defaults."""

    def pick(attr: str, env: str) -> str | None:
        value = getattr(args, attr, None)
        return value if value not in (None, "") else _env(env)

    knowledge = Path(pick("knowledge_dir", "KNOWLEDGE_DIR") or DEFAULT_KNOWLEDGE_DIR)
    data = Path(pick("data_dir", "DATA_DIR") or DEFAULT_DATA_DIR)
    knowledge = knowledge.expanduser().resolve()
    data = data.expanduser().resolve()
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
        max_file_bytes=max_mb * 1024 * 1024,
        ocr_langs=pick("ocr_langs", "OCR_LANGS") or "eng+tha+rus",
        ocr_cmd=pick("ocr_cmd", "OCR_CMD") or "tesseract",
        ocr_vlm_url=pick("ocr_vlm_url", "OCR_VLM_URL"),
        ocr_vlm_model=pick("ocr_vlm_model", "OCR_VLM_MODEL"),
        instructions_append=pick("instructions_append", "INSTRUCTIONS_APPEND") or "",
        busy_timeout_s=busy,
        read_only=bool(read_only),
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
    if not 0 < config.busy_timeout_s <= BUSY_TIMEOUT_MAX_S:
        return [
            f"--busy-timeout-s {config.busy_timeout_s} is out of range: "
            f"pass a number of seconds above 0 and at most {BUSY_TIMEOUT_MAX_S:.0f}"
        ]
    return []


def with_overrides(config: Config, **changes: object) -> Config:
    return replace(config, **changes)
