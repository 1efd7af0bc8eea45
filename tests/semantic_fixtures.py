"""Build a tiny but real sentence-transformers ONNX model folder for tests.

The encoder is an embedding Gather, one MatMul and the attention mask, written with onnx.helper
and INT8-quantized by onnxruntime; the tokenizer is a SentencePiece model trained in-process
with the XLM-R id layout (<unk>=0, <s>=1, </s>=2). Same files, same code path as a real model.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from helpers.store import index_db

REAL_MODEL_DIR = Path(__file__).resolve().parents[2] / "shared/models/multilingual-e5-small-int8"
EVAL_DIR = Path(__file__).resolve().parents[2] / "shared/eval"
# Texts the tokenizers are known to treat specially: normalisation, unknown pieces, whitespace.
EDGE_CASES = [
    "π ≈ 3.1416, e ≈ 2.7183, √2 ≈ 1.4142",
    "ｆｕｌｌ　ｗｉｄｔｈ ＡＢＣ",
    "ﬁnance ligature",
    "cafe\u0301 combining accent",
    "a\u00a0non-breaking space",
    "zero\u200bwidth space",
    "emoji 😀🎉 and ✓",
    "𠀀𠀁 CJK extension B",
    "𝐀𝐁𝐂 mathematical letters",
    "  leading,   inner   and trailing spaces  ",
    "",
    "SELECT * FROM t WHERE x = '1';",
    "Ёлка и ёж, ё/е",
    "中文测试句子",
    "ค่ะ 123 ๑๒๓ กรุงเทพฯ",
]

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Reset your password with the link in the confirmation email.",
    "Lake Baikal is the deepest lake in the world.",
    "Water boils at one hundred degrees at sea level.",
    "The invoice must be paid within thirty days.",
    "Backups run every night at two o'clock.",
    "Как сбросить пароль учётной записи?",
    "Байкал — самое глубокое озеро на планете.",
    "Счёт нужно оплатить в течение тридцати дней.",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย",
    "ต้มยำกุ้งเป็นอาหารไทยที่มีชื่อเสียง",
    "query: passage: document section chapter table page slide sheet",
]
DEFAULT_PROMPTS = {"query": "query: ", "passage": "passage: "}


def real_sentences(per_set: int = 80) -> list[str]:
    """Real questions in English, Russian and Thai: up to `per_set` from each evaluation set."""
    sentences: dict[str, None] = {}  # ordered and without the sets' shared questions
    for golden in sorted(EVAL_DIR.glob("*/golden.json")):
        queries = json.loads(golden.read_text(encoding="utf-8"))["queries"]
        sentences.update((q["query"], None) for q in queries[:per_set])
    return list(sentences)


def train_sentencepiece(sentences: Sequence[str] = CORPUS, model_type: str = "unigram") -> bytes:
    """A small model (unigram unless told) with XLM-R's special-id layout, trained in memory."""
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(list(sentences) * 4),
        model_writer=buffer,
        model_type=model_type,
        vocab_size=160,
        hard_vocab_limit=False,
        character_coverage=1.0,
        normalization_rule_name="identity",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        minloglevel=2,
    )
    return buffer.getvalue()


def build_encoder_onnx(
    vocab_rows: int, dim: int, seed: int, *, with_token_type_ids: bool = True
) -> bytes:
    """Gather(embedding, input_ids) -> MatMul(W) -> * attention_mask = last_hidden_state."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    embedding = rng.standard_normal((vocab_rows, dim)).astype(np.float32)
    weight = (rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32)
    initializers = [
        numpy_helper.from_array(embedding, "embedding"),
        numpy_helper.from_array(weight, "weight"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
    ]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    nodes = [helper.make_node("Gather", ["embedding", "input_ids"], ["embedded"])]
    hidden = "embedded"
    if with_token_type_ids:  # like BERT exports: a type table row is added to every token
        type_table = rng.standard_normal((2, dim)).astype(np.float32)
        initializers.append(numpy_helper.from_array(type_table, "type_table"))
        inputs.append(
            helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "seq"])
        )
        nodes.append(helper.make_node("Gather", ["type_table", "token_type_ids"], ["typed"]))
        nodes.append(helper.make_node("Add", ["embedded", "typed"], ["embedded_t"]))
        hidden = "embedded_t"
    nodes += [
        helper.make_node("MatMul", [hidden, "weight"], ["projected"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "axis2"], ["mask_3d"]),
        helper.make_node("Mul", ["projected", "mask_3d"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_encoder",
        inputs,
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def build_tiny_model(
    folder: Path,
    *,
    seed: int = 0,
    dim: int = 32,
    prompts: dict[str, str] | None = None,
    max_seq_length: int = 64,
    onnx_name: str = "model_quantized.onnx",
    with_token_type_ids: bool = True,
) -> Path:
    """Write a sentence-transformers folder (INT8 ONNX + SentencePiece + configs) into `folder`."""
    import sentencepiece as spm
    from onnxruntime.quantization import QuantType, quantize_dynamic

    prompts = DEFAULT_PROMPTS if prompts is None else prompts
    folder.mkdir(parents=True, exist_ok=True)
    spm_bytes = train_sentencepiece()
    (folder / "sentencepiece.bpe.model").write_bytes(spm_bytes)
    pieces = spm.SentencePieceProcessor(model_proto=spm_bytes).get_piece_size()
    vocab_rows = pieces + 2  # fairseq offset (+1) and <pad>
    (folder / "onnx").mkdir(exist_ok=True)
    fp32 = folder / "onnx" / "fp32.onnx"
    fp32.write_bytes(
        build_encoder_onnx(vocab_rows, dim, seed, with_token_type_ids=with_token_type_ids)
    )
    quantize_dynamic(fp32, folder / "onnx" / onnx_name, weight_type=QuantType.QInt8)
    fp32.unlink()
    _write_json(
        folder / "config.json",
        {
            "model_type": "bert",
            "hidden_size": dim,
            "max_position_embeddings": 512,
            "tokenizer_class": "XLMRobertaTokenizer",
        },
    )
    _write_json(
        folder / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {
                "idx": 1,
                "name": "1",
                "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling",
            },
        ],
    )
    (folder / "1_Pooling").mkdir(exist_ok=True)
    _write_json(
        folder / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": dim,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_cls_token": False,
            "pooling_mode_max_tokens": False,
        },
    )
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": max_seq_length})
    _write_json(
        folder / "config_sentence_transformers.json",
        {"prompts": prompts, "default_prompt_name": None, "similarity_fn_name": "cosine"},
    )
    return folder


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")


def add_document(conn: sqlite3.Connection, path: str, texts: Sequence[str]) -> list[int]:
    """Insert one document with one section and a chunk per text; returns the chunk ids."""
    import hashlib

    conn.execute("BEGIN IMMEDIATE")
    doc = conn.execute(
        "INSERT INTO documents(path, size, mtime_ns, sha256, format, title, status, "
        "chunk_scheme, indexed_at) VALUES (?, 1, 1, 'x', 'md', ?, 'indexed', 1, ?)",
        (path, path, time.time()),
    ).lastrowid
    section = conn.execute(
        "INSERT INTO sections(document_id, ordinal, text, location) VALUES (?, 0, ?, '{}')",
        (doc, "\n".join(texts)),
    ).lastrowid
    ids = []
    for ordinal, text in enumerate(texts):
        ids.append(
            conn.execute(
                "INSERT INTO chunks(document_id, section_id, ordinal, text, norm_stored, "
                "text_hash, location) VALUES (?, ?, ?, ?, ?, ?, '{}')",
                (
                    doc,
                    section,
                    ordinal,
                    text,
                    text.lower(),
                    hashlib.sha256(text.encode("utf-8")).hexdigest(),
                ),
            ).lastrowid
        )
    index_db.index_new_chunks(conn, ids[0], ids[-1])
    conn.execute("COMMIT")
    return ids


def set_chunk_text(conn: sqlite3.Connection, chunk_id: int, text: str) -> None:
    import hashlib

    conn.execute(
        "UPDATE chunks SET text = ?, norm_stored = ?, text_hash = ? WHERE id = ?",
        (text, text.lower(), hashlib.sha256(text.encode("utf-8")).hexdigest(), chunk_id),
    )


def build_with_codes(conn: sqlite3.Connection, root: Path, **kwargs: object):  # type: ignore[no-untyped-def]
    """A real generation of `conn` with its first-pass codes stored, whatever its size."""
    from helpers.semantic.generations import build_generation

    return build_generation(
        conn,
        REAL_MODEL_DIR,
        cache_dir=root / "cache",
        log_path=root / "build.log",
        codes_min_vectors=1,
        **kwargs,
    )


def index_with_codes(root: Path, per_set: int) -> Path:
    """A real index at root/index.sqlite3 of two documents of real sentences whose one
    generation has stored codes (the caller sets the block size)."""
    if not (REAL_MODEL_DIR / "onnx").is_dir():
        raise AssertionError(f"real model folder missing: {REAL_MODEL_DIR}")
    db = root / "index.sqlite3"
    conn = index_db.open_index(db)
    try:
        sentences = real_sentences(per_set=per_set)
        add_document(conn, "a/questions.md", sentences[::2])
        add_document(conn, "b/questions.md", sentences[1::2])
        build_with_codes(conn, root)
    finally:
        conn.close()
    return db


def warm_worker(tmp_path: Path, name: str, min_vectors: int):  # type: ignore[no-untyped-def]
    """A real query worker over the real model, logging to tmp_path/NAME.log, whose first pass
    runs on generations of at least `min_vectors` vectors (a huge number: the exact scan)."""
    from helpers.semantic.client import SemanticWorker

    return SemanticWorker(
        REAL_MODEL_DIR,
        log_path=tmp_path / f"{name}.log",
        cache_dir=tmp_path / "cache",
        idle_seconds=60,
        first_pass_min_vectors=min_vectors,
    )


def chunk_ids_of(conn: sqlite3.Connection, path: str, limit: int) -> list[int]:
    """The first `limit` chunk ids of the document at `path` (a filter narrower than the index)."""
    sql = (
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id "
        "WHERE d.path = ? ORDER BY c.id LIMIT ?"
    )
    return [row[0] for row in conn.execute(sql, (path, limit))]


def copy_of(db: Path, target: Path) -> Path:
    """A consistent copy of the index `db` at target/index.sqlite3 (SQLite's backup)."""
    target.mkdir(parents=True, exist_ok=True)
    out = target / "index.sqlite3"
    source, dest = sqlite3.connect(db), sqlite3.connect(out)
    try:
        source.backup(dest)
    finally:
        source.close()
        dest.close()
    return out


def child_processes() -> list[tuple[int, list[bytes]]]:
    """(pid, argv) of every child of this test process, found through /proc: a thread or child
    that ends while the listing is read is skipped (a worker's reader thread comes and goes)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for pid in children:
            try:
                found.append((int(pid), Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")))
            except FileNotFoundError:
                continue
    return found
