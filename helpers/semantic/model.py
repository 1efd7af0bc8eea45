"""Find, validate and fingerprint a sentence-transformers ONNX model folder without loading it.

The server imports this module, so it never imports onnxruntime or sentencepiece: those live
only in `semantic_worker.py`, which runs as a subprocess.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import platform
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from helpers.errors import RagError

DEFAULT_REPO_ID = "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2"
# Bump when tokenisation, pooling or normalisation code changes: old vectors must not be mixed
# with new ones, and the fingerprint is what decides reuse.
EMBED_PIPELINE_VERSION = 1
# sentence-transformers' own default when sentence_bert_config.json is absent, capped by the
# model's position table (XLM-R counts two padding positions: 514 -> 512 usable).
DEFAULT_MAX_SEQ_LENGTH = 512
TOKENIZER_FILE = "sentencepiece.bpe.model"
HASH_CACHE_FILE = "model_hashes.json"
# Under the data dir: model file hashes (hashing a 118 MB model on every call is slow) and the
# query tokenizer index (~15 MB), both rebuilt when missing.
CACHE_SUBDIR = "cache"
# Preferred ONNX files, best first, with the CPU feature each needs (None = any CPU). The
# per-ISA files are what the hub's sentence-transformers exports publish.
ONNX_CANDIDATES: tuple[tuple[str, str | None], ...] = (
    ("model_qint8_avx512_vnni.onnx", "avx512_vnni"),
    ("model_qint8_avx512.onnx", "avx512f"),
    ("model_quint8_avx2.onnx", "avx2"),
    ("model_qint8_arm64.onnx", "arm64"),
    ("model_quantized.onnx", None),
    ("model.onnx", None),
)
REQUIRED_FILES = ("config.json", "modules.json", TOKENIZER_FILE)
RUNTIME_MODULES = ("numpy", "onnxruntime", "sentencepiece")

INSTALL_HINT = "pip install onnxruntime sentencepiece numpy"
FETCH_HINT = (
    "run `ragdoc model fetch` (from a clone: `python rag_server.py model fetch`) to download "
    f"{DEFAULT_REPO_ID}, or pass --semantic-model-dir DIR "
    "(a sentence-transformers folder with onnx/)"
)
OFF_HINT = "semantic search is switched off: start with --semantic on (or RAGDOC_SEMANTIC=on)"


class ModelError(RagError):
    """A model folder that cannot be used; `hint` says what to do about it."""

    code = "model_unusable"


@dataclass(frozen=True)
class ModelInfo:
    """Everything the worker and the index need to know about one model folder."""

    model_dir: Path
    onnx_file: Path
    tokenizer_file: Path
    name: str
    fingerprint: str
    dim: int
    max_seq_length: int
    query_prompt: str
    passage_prompt: str

    @property
    def prompts(self) -> dict[str, str]:
        return {"query": self.query_prompt, "passage": self.passage_prompt}


@dataclass(frozen=True)
class SemanticAvailability:
    """Whether the semantic channel can run, and if not, why and how to enable it."""

    state: Literal["ready", "unavailable", "off"]
    reason: str
    hint: str
    model: ModelInfo | None = None


def hf_hub_cache_root() -> Path:
    """The Hugging Face hub cache, resolved the way huggingface_hub does."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(var)
        if value:
            return Path(value).expanduser()
    hf_home = os.environ.get("HF_HOME")
    if hf_home:
        return Path(hf_home).expanduser() / "hub"
    return Path("~/.cache/huggingface/hub").expanduser()


def repo_cache_dir(cache_root: Path, repo_id: str = DEFAULT_REPO_ID) -> Path:
    return cache_root / ("models--" + repo_id.replace("/", "--"))


def find_in_hf_cache(repo_id: str = DEFAULT_REPO_ID, cache_root: Path | None = None) -> Path | None:
    """The snapshot `refs/main` points at if it is complete, else the newest complete one."""
    repo_dir = repo_cache_dir(cache_root or hf_hub_cache_root(), repo_id)
    snapshots = repo_dir / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates: list[Path] = []
    ref = repo_dir / "refs" / "main"
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip())
    others = sorted(
        (p for p in snapshots.iterdir() if p.is_dir()),
        key=lambda p: p.stat().st_mtime_ns,
        reverse=True,
    )
    candidates.extend(others)
    for candidate in candidates:
        if candidate.is_dir() and not missing_files(candidate):
            return candidate
    return None


def discover_model_dir(explicit: Path | None, repo_id: str = DEFAULT_REPO_ID) -> Path | None:
    """An explicit folder wins (even if broken, so its errors are reported); else the HF cache."""
    if explicit is not None:
        return Path(explicit).expanduser().resolve()
    return find_in_hf_cache(repo_id)


@functools.cache  # the CPU does not change under a running process; reading /proc costs ~0.4 ms
def cpu_features() -> frozenset[str]:
    """x86 `flags` or ARM `Features` from /proc/cpuinfo, plus the machine name (e.g. arm64)."""
    features: set[str] = set()
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        features.add("arm64")
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset(features)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            features.update(value.split())
            break
    return frozenset(features)


def choose_onnx_file(model_dir: Path, features: frozenset[str] | None = None) -> Path | None:
    """The best INT8 file this CPU can run, else the generic quantized one, else fp32."""
    features = cpu_features() if features is None else features
    onnx_dir = model_dir / "onnx"
    for name, needs in ONNX_CANDIDATES:
        path = onnx_dir / name
        if path.is_file() and (needs is None or needs in features):
            return path
    return None


def _pooling_dir(model_dir: Path) -> Path:
    """The Pooling module's folder from modules.json (usually 1_Pooling)."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return model_dir / "1_Pooling"
    for module in modules if isinstance(modules, list) else []:
        if str(module.get("type", "")).endswith("Pooling"):
            return model_dir / str(module.get("path") or "1_Pooling")
    return model_dir / "1_Pooling"


def missing_files(model_dir: Path) -> list[str]:
    """Relative names of the files a usable folder lacks (empty = complete)."""
    missing = [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]
    pooling = _pooling_dir(model_dir) / "config.json"
    if not pooling.is_file():
        missing.append(str(pooling.relative_to(model_dir)))
    if choose_onnx_file(model_dir) is None:
        missing.append("onnx/" + " | onnx/".join(name for name, _ in ONNX_CANDIDATES))
    return missing


def _read_json(path: Path, *, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ModelError(f"model file missing: {path}", FETCH_HINT)
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read {path}: {exc}", FETCH_HINT) from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object", FETCH_HINT)
    return data


def model_name(model_dir: Path) -> str:
    """'org/name' for a hub cache snapshot, else the folder name."""
    match = re.search(r"models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$", model_dir.as_posix())
    return f"{match.group(1)}/{match.group(2)}" if match else model_dir.name


def _prompts(st_config: dict[str, Any]) -> tuple[str, str]:
    """(query, passage) prompts; `document` is the other common name for the passage side."""
    prompts = st_config.get("prompts") or {}
    if not isinstance(prompts, dict):
        prompts = {}
    default = prompts.get(st_config.get("default_prompt_name") or "", "")
    query = prompts.get("query", default)
    passage = prompts.get("passage", prompts.get("document", default))
    return str(query), str(passage)


class _HashCache:
    """sha256 of big files keyed by (path, size, mtime_ns): hashing 118 MB per query is slow."""

    def __init__(self, cache_dir: Path | None) -> None:
        self.path = cache_dir / HASH_CACHE_FILE if cache_dir else None
        self.entries: dict[str, Any] = {}
        if self.path and self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
                self.entries = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self.entries = {}
        self.dirty = False

    def sha256(self, file: Path) -> str:
        st = file.stat()
        key = str(file.resolve())
        entry = self.entries.get(key)
        if (
            isinstance(entry, dict)
            and entry.get("size") == st.st_size
            and entry.get("mtime_ns") == st.st_mtime_ns
        ):
            return str(entry["sha256"])
        digest = hashlib.sha256()
        with file.open("rb") as fh:
            for piece in iter(lambda: fh.read(1 << 20), b""):
                digest.update(piece)
        value = digest.hexdigest()
        self.entries[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": value}
        self.dirty = True
        return value

    def save(self) -> None:
        if not (self.path and self.dirty):
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Unique per thread too: a worker hashes its tokenizer and its encoder side by side.
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(self.entries, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)


def load_model_info(
    model_dir: Path, cache_dir: Path | None = None, *, with_fingerprint: bool = True
) -> ModelInfo:
    """Validate the folder and compute its fingerprint; raises ModelError naming what is wrong.

    `with_fingerprint=False` skips hashing (fingerprint "") for a worker that only embeds.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ModelError(f"model folder not found: {model_dir}", FETCH_HINT)
    missing = missing_files(model_dir)
    if missing:
        raise ModelError(
            f"model folder {model_dir} is incomplete; missing: {', '.join(missing)}", FETCH_HINT
        )
    onnx_file = choose_onnx_file(model_dir)
    assert onnx_file is not None  # missing_files checked it
    config = _read_json(model_dir / "config.json", required=True)
    pooling = _read_json(_pooling_dir(model_dir) / "config.json", required=True)
    st_config = _read_json(model_dir / "config_sentence_transformers.json", required=False)
    sbert = _read_json(model_dir / "sentence_bert_config.json", required=False)
    if not pooling.get("pooling_mode_mean_tokens", False):
        raise ModelError(
            f"{model_dir}: only mean pooling is supported (pooling config: {pooling})",
            "use a sentence-transformers model with mean pooling, e.g. " + DEFAULT_REPO_ID,
        )
    dim = int(pooling.get("word_embedding_dimension") or config.get("hidden_size") or 0)
    if dim <= 0:
        raise ModelError(f"{model_dir}: embedding dimension unknown", FETCH_HINT)
    positions = int(config.get("max_position_embeddings") or DEFAULT_MAX_SEQ_LENGTH)
    max_seq = int(sbert.get("max_seq_length") or min(DEFAULT_MAX_SEQ_LENGTH, positions))
    query_prompt, passage_prompt = _prompts(st_config)
    tokenizer = model_dir / TOKENIZER_FILE
    fingerprint = ""
    if with_fingerprint:
        fingerprint = _fingerprint(
            onnx_file, tokenizer, cache_dir, pooling, dim, max_seq, query_prompt, passage_prompt
        )
    return ModelInfo(
        model_dir=model_dir,
        onnx_file=onnx_file,
        tokenizer_file=tokenizer,
        name=model_name(model_dir),
        fingerprint=fingerprint,
        dim=dim,
        max_seq_length=max_seq,
        query_prompt=query_prompt,
        passage_prompt=passage_prompt,
    )


def _fingerprint(
    onnx_file: Path,
    tokenizer: Path,
    cache_dir: Path | None,
    pooling: dict[str, Any],
    dim: int,
    max_seq: int,
    query_prompt: str,
    passage_prompt: str,
) -> str:
    """sha256 over everything that changes a vector: weights, tokenizer, pooling, dim, prompts."""
    hashes = _HashCache(cache_dir)
    material = {
        "pipeline": EMBED_PIPELINE_VERSION,
        "onnx_sha256": hashes.sha256(onnx_file),
        "tokenizer_sha256": hashes.sha256(tokenizer),
        "pooling": pooling,
        "dim": dim,
        "max_seq_length": max_seq,
        "prompts": [query_prompt, passage_prompt],
    }
    with contextlib.suppress(OSError):  # a read-only cache dir only costs speed
        hashes.save()
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


def file_sha256(file: Path, cache_dir: Path | None) -> str:
    """sha256 of a model file, through the same (path, size, mtime) cache as the fingerprint."""
    hashes = _HashCache(cache_dir)
    value = hashes.sha256(file)
    with contextlib.suppress(OSError):  # a read-only cache dir only costs speed
        hashes.save()
    return value


def missing_runtime_modules() -> list[str]:
    """Python packages the worker needs that are not importable (checked without importing)."""
    return [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]


def check_availability(
    model_dir: Path | None,
    *,
    enabled: bool,
    cache_dir: Path | None,
    with_fingerprint: bool = True,
) -> SemanticAvailability:
    """off / unavailable (with the exact fix) / ready (with the model's info). Without the
    fingerprint (empty) nothing is hashed: a fresh cache costs ~0.3-1 s for a 118 MB model."""
    if not enabled:
        return SemanticAvailability("off", "semantic search is disabled", OFF_HINT)
    missing = missing_runtime_modules()
    if missing:
        return SemanticAvailability(
            "unavailable", f"python packages not installed: {', '.join(missing)}", INSTALL_HINT
        )
    found = discover_model_dir(model_dir)
    if found is None:
        return SemanticAvailability(
            "unavailable",
            f"no model folder given and none in the Hugging Face cache ({hf_hub_cache_root()})",
            FETCH_HINT,
        )
    try:
        info = load_model_info(found, cache_dir, with_fingerprint=with_fingerprint)
    except ModelError as exc:
        return SemanticAvailability("unavailable", exc.message, exc.hint)
    return SemanticAvailability("ready", f"model {info.name} ({info.onnx_file.name})", "", info)
