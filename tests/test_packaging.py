"""The installable package: a wheel built from this checkout, installed into a fresh venv outside
it, gives working `mcp-ragdoc`, `ragdoc`, `ragdoc-console` and `ragdoc-eval` commands.

The venv sees the dependencies of the interpreter running the tests (a .pth file naming its
site-packages), so nothing is downloaded, and a virtualenv running the tests works like the system
interpreter (`--system-site-packages` would give the *base* interpreter's packages instead); the
wheel is built with --no-build-isolation for the same reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from conftest import REPO
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.slow
# What a source checkout holds that an installed copy never needs.
NOT_PACKAGED = (
    ".git",
    "tests",
    "bench",
    "state",
    "__pycache__",
    "*.egg-info",
    "build",
    "dist",
    ".ci",
    ".venv",
    "test-artifacts",
    ".pytest_cache",
    ".ruff_cache",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_top_level_module_and_helpers_package_is_in_the_package():
    """A module added beside the others but not to pyproject.toml would be missing from every
    installed copy: the wheel test would only notice if its code path ran."""
    tool = _pyproject()["tool"]["setuptools"]
    modules = {p.stem for p in REPO.glob("*.py")}
    assert set(tool["py-modules"]) == modules
    packages = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "helpers").rglob("__init__.py")
    }
    assert packages <= set(tool["packages"])


@dataclass(frozen=True)
class Installed:
    venv: Path
    home: Path
    workdir: Path
    env: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def run(self, name: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.bin(name), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            cwd=self.workdir,
        )

    def python(self, code: str) -> str:
        out = self.run("python", "-c", code)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()


def running_site_packages() -> list[str]:
    """Where the interpreter running the tests finds its packages (a virtualenv's own, and the
    system's or the user's when that interpreter sees them)."""
    found = [*site.getsitepackages(), site.getusersitepackages()]
    return [path for path in dict.fromkeys(found) if path in sys.path]


def see_the_running_packages(venv: Path) -> None:
    """Put the running interpreter's site-packages behind the venv's own (a .pth line appends to
    sys.path): the wheel installed into the venv is found first, its dependencies here."""
    purelib = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    lines = "".join(f"{path}\n" for path in running_site_packages())
    (Path(purelib) / "zz-running-interpreter.pth").write_text(lines, encoding="utf-8")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_PACKAGED))
    dist = root / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("mcp_ragdoc-*.whl")
    venv = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    see_the_running_packages(venv)
    done = subprocess.run(
        [*pip, "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    home = root / "home"
    home.mkdir()
    workdir = root / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGDOC_", "PYTHON"))}
    env.update(HOME=str(home), RAGDOC_SEMANTIC="off", PYTHONDONTWRITEBYTECODE="1")
    yield Installed(venv, home, workdir, env)


def test_the_installed_copy_runs_from_the_venv_not_from_the_checkout(installed: Installed):
    where = json.loads(
        installed.python(
            "import json, rag_server, web_ui; from helpers import config; print(json.dumps("
            "[rag_server.__file__, str(config.SAMPLE_DIR), str(web_ui.UI_DIR)]))"
        )
    )
    for path in where:
        assert Path(path).resolve().is_relative_to(installed.venv.resolve()), path
    assert (Path(where[1]) / "contracts" / "service-agreement.md").is_file()
    assert (Path(where[2]) / "rag.html").is_file()
    for script in ("ragdoc-console", "ragdoc-eval", "mcp-ragdoc"):
        shown = installed.run(script, "--help")
        assert shown.returncode == 0 and "--knowledge-dir" in shown.stdout, shown.stderr
    assert "--transport" in installed.run("mcp-ragdoc", "--help").stdout


def test_the_installed_scripts_explain_their_commands_and_options(installed: Installed):
    shown = installed.run("ragdoc", "--help")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("usage: ragdoc [options] COMMAND")
    commands = shown.stdout.split("commands:", 1)[1].split("shared options", 1)[0]
    for name in ("sync", "status", "cancel", "search", "health", "jobs", "watch", "demo", "model"):
        assert f"    {name} " in commands, name
    assert "--knowledge-dir" in shown.stdout and "~/.mcp-ragdoc/" in shown.stdout
    search = installed.run("ragdoc", "search", "--help")
    assert search.returncode == 0 and search.stdout.startswith("usage: ragdoc search ")
    for option in ("--top-k", "--path-prefix", "--type", "--mode", "--explain", "--max-chars"):
        assert option in search.stdout, option
    wrong = installed.run("ragdoc", "serch", "payment terms")
    assert (wrong.returncode, wrong.stdout) == (2, "")
    assert wrong.stderr == (
        "ragdoc: error: unknown command 'serch'; did you mean `search`? (see `ragdoc --help`)\n"
    )
    server = installed.run("mcp-ragdoc", "--help")
    assert server.returncode == 0 and server.stdout.startswith("usage: mcp-ragdoc [options]\n")
    assert "MCP server" in server.stdout and "stdin/stdout" in server.stdout
    assert "--transport" in server.stdout and "--knowledge-dir" in server.stdout
    assert "`ragdoc --help`" in server.stdout and "search the index" not in server.stdout


def test_the_installed_console_serves_its_page_from_the_data_package(installed: Installed):
    sample = installed.python("from helpers import config; print(config.SAMPLE_DIR)")
    console = subprocess.Popen(
        [installed.bin("ragdoc-console"), "--knowledge-dir", sample, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=installed.env,
        cwd=installed.workdir,
    )
    try:
        assert console.stderr is not None
        line = ""
        while not line.startswith("RagDoc console: "):
            line = console.stderr.readline()
            assert line, "the console exited before serving"
        url = line.split(": ", 1)[1].strip()
        with httpx.Client(trust_env=False, timeout=20) as http:
            page = http.get(url)
            script = http.get(url + "ui/rag.js")
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert script.status_code == 200 and len(script.text) > 100
    finally:
        console.terminate()
        console.wait(timeout=20)


def test_ragdoc_demo_and_search_work_on_the_bundled_sample_folder(installed: Installed):
    demo = installed.run("ragdoc", "demo")
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "contracts/service-agreement.md" in demo.stdout
    (state,) = (installed.home / ".mcp-ragdoc").iterdir()  # the default private state
    assert (state / "index.sqlite3").is_file()
    sample = installed.python("from helpers import config; print(config.SAMPLE_DIR)")
    found = installed.run("ragdoc", "--knowledge-dir", sample, "search", "payment terms", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["path"] == "contracts/service-agreement.md"
    bare = installed.run("ragdoc")
    assert bare.returncode == 2 and "search" in bare.stderr  # commands, not a stdio server


@pytest.mark.anyio
async def test_the_readme_client_config_runs_the_installed_mcp_ragdoc(
    installed: Installed, tmp_path: Path
):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "runbook.md").write_text(
        "# Runbook\n\n## Failover\nPromote the standby database first.\n", encoding="utf-8"
    )
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{.*?\})\n```", readme, re.S)
    assert block, "README must show the JSON client configuration"
    server = json.loads(block.group(1))["mcpServers"]["ragdoc"]  # exactly what users paste
    params = StdioServerParameters(
        command=installed.bin(server["command"]),
        args=[str(docs) if a == "/abs/docs" else a for a in server["args"]],
        env=installed.env,
        cwd=str(installed.workdir),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        assert {"rag_search", "sync_kb", "sync_status", "rag_read", "rag_health"} <= tools
        job = (await session.call_tool("sync_kb", {})).structured_content
        final = (
            await session.call_tool("sync_status", {"job_id": job["job_id"], "wait_seconds": 30})
        ).structured_content
        while final["state"] not in ("succeeded", "failed", "cancelled"):
            final = (
                await session.call_tool(
                    "sync_status", {"job_id": job["job_id"], "wait_seconds": 30}
                )
            ).structured_content
        assert final["state"] == "succeeded", final
        result = await session.call_tool("rag_search", {"query": "standby database"})
        assert result.structured_content["hits"][0]["path"] == "runbook.md"
        resources = (await session.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["ragdoc://doc/runbook.md"]
    (state,) = (installed.home / ".mcp-ragdoc").glob("docs-*")
    assert (state / "index.sqlite3").is_file()
