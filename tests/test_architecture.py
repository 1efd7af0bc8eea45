"""The design's import rules, stated as data and checked on the real source with `ast`.

Every import counts, module-level or inside a function (a lazy import breaks a rule just the
same). A violation is reported as `file:line imports X: rule`, all of them at once.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOP_LEVEL = frozenset(p.stem for p in REPO.glob("*.py"))

# rag_http (the Streamable HTTP transport) and rag_resources (documents as MCP resources) are
# parts of the MCP server's face.
FACES = frozenset(
    {"rag_server", "rag_cli", "rag_http", "rag_resources", "web_ui", "main", "rag_eval"}
)
SHARED = frozenset({"rag_config", "rag_errors", "rag_results", "rag_mcp_models"})
SERVICE = "rag_service"
# What each face may import of ours besides rag_service and the shared modules.
FACE_EXTRAS: dict[str, frozenset[str]] = {
    "rag_server": frozenset({"rag_cli", "rag_http", "rag_resources"}),  # the server's own parts
    "main": frozenset({"web_ui", "helpers.web_guard"}),  # the console's launcher
    # The Host/Origin checks the console and the HTTP transport share (pure functions).
    "web_ui": frozenset({"helpers.web_guard"}),
    "rag_http": frozenset({"helpers.web_guard"}),
    "rag_eval": frozenset({"helpers.eval_metrics", "helpers.eval_golden"}),
}
WORKER = "sync_job_worker"
SEMANTIC_WORKER = "semantic_worker"
ML_RUNTIMES = frozenset({"onnxruntime", "sentencepiece"})
# What the service leaves to the layers below it: lexical SQL to rag_search, the semantic model
# and vectors to rag_semantic.
SERVICE_FORBIDDEN = ("helpers.lexical", "helpers.semantic")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module: "rag_cli", "helpers.extract.docx"
    line: int
    target: str  # what it imports, dotted: "helpers.semantic.fetch", "rag_jobs", "numpy"
    lazy: bool  # inside a function or method

    def __str__(self) -> str:
        where = " (inside a function)" if self.lazy else ""
        return f"{self.module.replace('.', '/')}.py:{self.line}{where} imports {self.target}"


def _source_files() -> list[Path]:
    return sorted([*REPO.glob("*.py"), *(REPO / "helpers").rglob("*.py")])


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Import(module, child.lineno, a.name, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against the importing package
                    package = module.split(".")[: -child.level or None]
                    base = ".".join([*package, base] if base else package)
                found.extend(
                    Import(module, child.lineno, f"{base}.{a.name}" if base else a.name, lazy)
                    for a in child.names
                )
            visit(child, inner)

    visit(tree, False)
    return found


def _ours(target: str) -> bool:
    root = target.split(".")[0]
    return root in TOP_LEVEL or root == "helpers"


def _top(target: str) -> str | None:
    """The top-level module `target` names (a `from rag_x import y` names rag_x), or None."""
    root = target.split(".")[0]
    return root if root in TOP_LEVEL else None


def _under(target: str, package: str) -> bool:
    return target == package or target.startswith(package + ".")


def violations(imports: list[Import]) -> list[str]:
    """Every broken rule, one readable line each."""
    out: list[str] = []
    for imp in imports:
        src, target, top = imp.module, imp.target, _top(imp.target)
        if src in FACES and _ours(target):
            allowed = sorted({SERVICE, *SHARED, *FACE_EXTRAS.get(src, ())})
            if not any(_under(target, a) for a in allowed):
                out.append(f"{imp}: a face may import only {', '.join(allowed)}")
        if src not in FACES and top in FACES:
            out.append(f"{imp}: nothing below the faces imports a face")
        if src not in FACES and top == SERVICE:
            out.append(f"{imp}: only the faces call the service boundary")
        if src.startswith("helpers") and top is not None:
            out.append(
                f"{imp}: helpers/ imports no top-level module (move the shared bit into helpers/)"
            )
        if src in SHARED and top is not None and top not in SHARED:
            out.append(f"{imp}: a shared config/error/result module imports only shared modules")
        if src == WORKER and _under(target, "helpers"):
            out.append(
                f"{imp}: the worker drives rag_sync (extraction, OCR) and rag_semantic; "
                "it builds none of their parts itself"
            )
        if src == SEMANTIC_WORKER and top is not None:
            out.append(
                f"{imp}: the semantic worker is its own process and imports only helpers/ "
                "(shared code lives in helpers/semantic/)"
            )
        if target.split(".")[0] in ML_RUNTIMES and src != SEMANTIC_WORKER:
            out.append(f"{imp}: only semantic_worker.py imports onnxruntime/sentencepiece")
        if src == SERVICE and any(_under(target, f) for f in SERVICE_FORBIDDEN):
            out.append(
                f"{imp}: the service leaves lexical SQL to rag_search and the semantic "
                "model to rag_semantic"
            )
    return out


def _all_imports() -> list[Import]:
    return [imp for path in _source_files() for imp in _imports(path)]


def test_the_import_rules_hold():
    found = violations(_all_imports())
    assert not found, "import rules broken:\n  " + "\n  ".join(found)


def test_the_checker_sees_module_level_and_lazy_imports_and_reports_them():
    """The rules catch what they must: the checker itself cannot pass by seeing nothing."""
    imports = _all_imports()
    assert any(i.lazy and i.target == "onnxruntime" for i in imports)  # semantic_worker's lazy one
    assert any(not i.lazy and i.module == "rag_server" and i.target == SERVICE for i in imports)
    # "module: target", with "lazily" for an import inside a function: one per rule.
    bad = _parsed(
        "rag_cli: rag_jobs.FINAL_STATES",
        "web_ui lazily: helpers.safety.resolve_inside",
        "helpers.semantic.vector_pack lazily: rag_db.connect_read_only",
        "semantic_worker: rag_semantic_client.LineReader",
        "sync_job_worker: helpers.extract.sandbox.SandboxedExtractor",
        "rag_search lazily: onnxruntime",
        "rag_service: helpers.lexical.common.STAGING_RANGE",
        "rag_eval: rag_cli.progress_line",
        "rag_sync: rag_service",
    )
    reported = violations(bad)
    assert len(reported) == len(bad), reported
    assert "web_ui.py:2 (inside a function) imports helpers.safety.resolve_inside" in reported[1]
    fine = _parsed(
        "rag_server lazily: rag_cli",
        "main: web_ui",
        "rag_eval: helpers.eval_metrics.QueryOutcome",
        "rag_cli: rag_errors.RagError",
        "rag_errors: helpers.errors.RagError",
        "semantic_worker: helpers.semantic.lines.LineReader",
    )
    assert violations(fine) == []


def _parsed(*specs: str) -> list[Import]:
    out = []
    for line, spec in enumerate(specs, 1):
        source, target = spec.split(": ")
        module, _, lazy = source.partition(" ")
        out.append(Import(module, line, target, lazy == "lazily"))
    return out
