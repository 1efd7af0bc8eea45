"""Trusted configuration: launch arguments and RAGDOC_* environment variables, never tool input."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent
DEFAULT_KNOWLEDGE_DIR = REPO_DIR / "rag_document"
DEFAULT_DATA_DIR = REPO_DIR / "state"
DB_FILENAME = "index.sqlite3"
# Large enough for real manuals and decks; an accidental disk image or video is refused fast.
DEFAULT_MAX_FILE_MB = 200


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
    return Config(
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
    )


def with_overrides(config: Config, **changes: object) -> Config:
    return replace(config, **changes)
