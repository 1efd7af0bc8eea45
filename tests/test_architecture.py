"""The design's layout and import rules, stated as data and checked on the real source with `ast`.

Every import counts, module-level, inside a function or under `TYPE_CHECKING` (a lazy import
breaks a rule and closes a cycle just the same). A violation is reported as
`file:line imports X: rule`, all of them at once.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# The design's top level (README "Module map"): at most 13 modules, each in exactly one layer.
FACES = frozenset({"rag_server", "rag_cli", "rag_resources", "web_ui", "main", "rag_eval"})
SERVICE = "rag_service"
SEARCH = "rag_search"
WORKER = "sync_job_worker"
SYNC = "rag_sync"
SEMANTIC_WORKER = "semantic_worker"
TOP_LEVEL_LAYOUT = FACES | {SERVICE, SEARCH, WORKER, SYNC, SEMANTIC_WORKER}
MAX_TOP_LEVEL = 13
MAX_MODULE_LINES = 600  # one concern a module; split by concern past this

# What a face may import of ours: the service, the records and errors every face shares, and
# its own parts.
FACE_SHARED = ("helpers.bounds", "helpers.config", "helpers.errors", "helpers.results")
FACE_EXTRAS: dict[str, tuple[str, ...]] = {
    "rag_server": (
        "rag_cli",
        "rag_resources",
        "helpers.web.http_transport",
        "helpers.web.mcp_models",
    ),
    "rag_resources": ("helpers.web.mcp_models",),
    "main": ("web_ui", "helpers.web.guard"),
    "web_ui": ("helpers.web.guard", "helpers.extract.formats"),  # originals served by format
    "rag_eval": ("helpers.eval",),
}
# Who may import each top-level module below the faces (the layers, top to bottom).
IMPORTED_BY: dict[str, frozenset[str]] = {
    SERVICE: FACES,
    SEARCH: frozenset({SERVICE}),
    WORKER: frozenset({SERVICE}),  # sync_kb_blocking runs it in-process; else it is spawned
    SYNC: frozenset({WORKER}),
    SEMANTIC_WORKER: frozenset(),  # its own process, spawned by path
}
ML_RUNTIMES = frozenset({"onnxruntime", "sentencepiece"})
# A search is one call into rag_search: lexical SQL and semantic candidates are its concern, so
# the service imports neither package (only the model download, which is no search).
SEARCH_ONLY = ("helpers.lexical", "helpers.semantic")
SERVICE_MAY_IMPORT = frozenset({"helpers.semantic.generations.fetch_model"})


@dataclass(frozen=True)
class Import:
    module: str  # the importing module: "rag_cli", "helpers.extract.docx"
    line: int
    target: str  # what it imports, dotted: "helpers.semantic.fetch", "helpers.store.job_rows.X"
    lazy: bool  # inside a function or method, or under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        where = " (inside a function)" if self.lazy else ""
        return f"{self.module.replace('.', '/')}.py:{self.line}{where} imports {self.target}"


def _source_files() -> list[Path]:
    return sorted([*REPO.glob("*.py"), *(REPO / "helpers").rglob("*.py")])


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = frozenset(_module_name(p) for p in _source_files())
TOP_LEVEL = frozenset(m for m in MODULES if "." not in m and m != "helpers")


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or _is_type_checking(child)
            inner = inner or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Import(module, child.lineno, a.name, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: resolve against the importing package
                    package = module.split(".")
                    drop = child.level - (1 if is_package else 0)
                    package = package[: len(package) - drop] if drop else package
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


def _module_of(target: str) -> str | None:
    """The module a dotted import target lands in: `helpers.store.job_rows.JobView` names
    helpers.store.job_rows; `from helpers.extract import registry` names the submodule."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        if name in MODULES:
            return name
    return None


def violations(imports: list[Import]) -> list[str]:
    """Every broken import rule, one readable line each."""
    out: list[str] = []
    for imp in imports:
        src, target, top = imp.module, imp.target, _top(imp.target)
        if src in FACES and _ours(target):
            allowed = sorted({SERVICE, *FACE_SHARED, *FACE_EXTRAS.get(src, ())})
            if not any(_under(target, a) for a in allowed):
                out.append(f"{imp}: a face may import only {', '.join(allowed)}")
        if src not in FACES and top in FACES:
            out.append(f"{imp}: nothing below the faces imports a face")
        if top in IMPORTED_BY and src != top and src not in IMPORTED_BY[top]:
            who = ", ".join(sorted(IMPORTED_BY[top])) or "nothing (it is spawned)"
            out.append(f"{imp}: {top} is imported only by {who}")
        if src.startswith("helpers") and top is not None:
            out.append(
                f"{imp}: helpers/ imports no top-level module (move the shared bit into helpers/)"
            )
        if src == SEMANTIC_WORKER and top is not None:
            out.append(f"{imp}: the semantic worker is its own process and imports only helpers/")
        if (
            src == SERVICE
            and any(_under(target, p) for p in SEARCH_ONLY)
            and target not in SERVICE_MAY_IMPORT
        ):
            out.append(f"{imp}: lexical channels and semantic candidates belong to rag_search")
        if target.split(".")[0] in ML_RUNTIMES and src != SEMANTIC_WORKER:
            out.append(f"{imp}: only semantic_worker.py imports onnxruntime/sentencepiece")
    return out


def import_graph(imports: list[Import]) -> dict[str, set[str]]:
    """Our modules and what each imports of ours (a package's __init__ counts as its own node)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in imports:
        target = _module_of(imp.target)
        if target is not None and target != imp.module:
            graph.setdefault(imp.module, set()).add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest import chain (an acyclic graph's longest path), for the note and the README."""
    memo: dict[str, list[str]] = {}

    def walk(node: str, seen: frozenset[str]) -> list[str]:
        if node in memo:
            return memo[node]
        best: list[str] = []
        for nxt in sorted(graph.get(node, ())):
            if nxt not in seen:
                path = walk(nxt, seen | {nxt})
                if len(path) > len(best):
                    best = path
        memo[node] = [node, *best]
        return memo[node]

    return max((walk(m, frozenset({m})) for m in sorted(graph)), key=len)


def _all_imports() -> list[Import]:
    return [imp for path in _source_files() for imp in _imports(path)]


def test_the_top_level_is_the_design_layout():
    assert len(TOP_LEVEL) <= MAX_TOP_LEVEL, sorted(TOP_LEVEL)
    assert TOP_LEVEL == TOP_LEVEL_LAYOUT, sorted(TOP_LEVEL ^ TOP_LEVEL_LAYOUT)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    missing = [m for m in sorted(TOP_LEVEL) if f"`{m}.py`" not in readme]
    assert not missing, f"the README's module map does not name {missing}"
    assert (REPO / "ARCHITECTURE.md").is_file()


def test_the_import_rules_hold():
    found = violations(_all_imports())
    assert not found, "import rules broken:\n  " + "\n  ".join(found)


def test_there_is_no_import_cycle_lazy_and_type_only_imports_included():
    found = cycles(import_graph(_all_imports()))
    assert not found, "import cycles:\n  " + "\n  ".join(" <-> ".join(c) for c in found)


def test_no_product_module_is_over_the_line_budget():
    long = {
        str(p.relative_to(REPO)): n
        for p in _source_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_the_checker_sees_module_level_lazy_and_type_only_imports_and_reports_them():
    """The rules catch what they must: the checker itself cannot pass by seeing nothing."""
    imports = _all_imports()
    assert any(i.lazy and i.target == "onnxruntime" for i in imports)  # semantic_worker's lazy one
    assert any(not i.lazy and i.module == "rag_server" and i.target == SERVICE for i in imports)
    # "module: target", with "lazily" for an import inside a function: one per rule.
    bad = _parsed(
        "rag_cli: helpers.store.job_rows.FINAL_STATES",
        "web_ui lazily: helpers.safety.resolve_inside",
        "helpers.semantic.vector_pack lazily: rag_search.search",
        "semantic_worker: rag_sync.sync_folder",
        "rag_search lazily: onnxruntime",
        "rag_eval: rag_cli.progress_line",
        "rag_sync: rag_service",
        "rag_cli: rag_search.search",
        "rag_service lazily: helpers.semantic.candidates",
        "rag_service: helpers.lexical.common.Filters",
    )
    unreported = [str(imp) for imp in bad if not violations([imp])]
    assert not unreported, unreported
    reported = violations(bad[1:2])
    assert reported[0].startswith("web_ui.py:2 (inside a function) imports helpers.safety.")
    fine = _parsed(
        "rag_server lazily: rag_cli",
        "main: web_ui",
        "rag_eval: helpers.eval.metrics.QueryOutcome",
        "rag_cli: helpers.errors.RagError",
        "rag_service lazily: sync_job_worker",
        "semantic_worker: helpers.semantic.lines.LineReader",
        "rag_service lazily: helpers.semantic.generations.fetch_model",
        "rag_search: helpers.semantic.candidates",
    )
    assert violations(fine) == []


def test_the_cycle_finder_sees_a_cycle_closed_by_a_lazy_import():
    graph = import_graph(
        _parsed("helpers.store.index_db: helpers.store.backfill.run", "rag_sync: helpers.safety")
        + _parsed("helpers.store.backfill lazily: helpers.store.index_db.connect")
    )
    assert cycles(graph) == [["helpers.store.backfill", "helpers.store.index_db"]]


def _parsed(*specs: str) -> list[Import]:
    out = []
    for line, spec in enumerate(specs, 1):
        source, target = spec.split(": ")
        module, _, lazy = source.partition(" ")
        out.append(Import(module, line, target, lazy == "lazily"))
    return out


# Lab notes belong in bench/RESULTS.md: product code names no eval set and no measured delta.
LAB_NOTE = re.compile(
    r"debfaq|pyfaq|manru|udhr|debian-pdf|lohelp|\d\.\d+ ?(?:->|→) ?\d\.\d+", re.IGNORECASE
)


def test_product_code_carries_no_lab_notes():
    found = [
        f"{p.relative_to(REPO)}:{n}: {line.strip()}"
        for p in _source_files()
        if "eval" not in p.relative_to(REPO).parts[:2] and p.name != "rag_eval.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if LAB_NOTE.search(line)
    ]
    assert not found, "move these to bench/RESULTS.md:\n  " + "\n  ".join(found)
