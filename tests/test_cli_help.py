"""The command line explains itself: `--help` names every command and the shared options,
`COMMAND --help` shows that command's own options, and a mistake gets one line naming the closest
command or option with exit code 2. The installed scripts are checked in test_packaging.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from helpers.config import Config

# Every command with the options its --help must show (the list, not the code's).
COMMAND_OPTIONS = {
    "sync": ["--detach", "--path", "--json"],
    "status": ["JOB", "--json"],
    "cancel": ["JOB", "--json"],
    "search": [
        "QUERY",
        "--top-k",
        "--path-prefix",
        "--type",
        "--mode",
        "--explain",
        "--max-chars",
        "--json",
    ],
    "health": ["--json"],
    "jobs": ["--limit", "--json"],
    "watch": ["--polling", "--no-initial-sync"],
    "demo": [],
    "model fetch": ["--base-url", "--cache-dir"],
}
SHARED = ["--knowledge-dir", "--data-dir", "--semantic", "--read-only", "--exclude"]
SERVER = ["--transport", "--port", "--allow-remote"]


def rag_server(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "rag_server.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def section(text: str, title: str) -> str:
    """The lines of one `title:` block of an argparse help (up to the next blank line)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def test_the_help_names_every_command_then_the_shared_options_the_index_and_an_example():
    shown = rag_server("--help")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    commands = section(text, "commands:")
    for name in ("sync", "status", "cancel", "search", "health", "jobs", "watch", "demo"):
        assert re.search(rf"^\s+{name}\s+\S", commands, re.M), name  # with its purpose
    assert "model fetch" in commands
    shared = section(text, "shared options")
    assert all(option in shared for option in SHARED)
    assert all(option in section(text, "MCP server options") for option in SERVER)
    assert "MCP server" in text.split("commands:")[0]  # no command = the server, said up front
    assert "~/.mcp-ragdoc/" in text and "--data-dir" in section(text, "where the index lives")
    assert 'rag_server.py --knowledge-dir ~/Documents/work search "' in section(text, "example")
    assert text.index("commands:") < text.index("shared options") < text.index("example:")


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
def test_each_command_help_shows_its_own_options_and_the_shared_ones(command: str):
    shown = rag_server(*command.split(), "--help")
    assert shown.returncode == 0, shown.stderr
    own = section(shown.stdout, "options:") + section(shown.stdout, "usage:")
    assert all(option in own for option in COMMAND_OPTIONS[command]), shown.stdout
    assert all(option in section(shown.stdout, "shared options") for option in SHARED)
    assert "--transport" not in shown.stdout  # a server option, not a command's


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["serch", "payment terms"], "did you mean `search`?"),
        (["model", "fecth"], "did you mean `fetch`?"),
        (["search", "q", "--top-kk", "3"], "did you mean `--top-k`?"),
        (["jobs", "--limt", "3"], "did you mean `--limit`?"),
        (["--knowlege-dir", "/tmp", "search", "q"], "did you mean `--knowledge-dir`?"),
        (["search", "q", "--mode", "hybird"], "did you mean `hybrid`?"),
        (["--semantic", "of", "health"], "did you mean `off`?"),
    ],
)
def test_a_mistake_is_one_line_naming_the_closest_command_or_option_with_exit_code_2(
    argv: list[str], named: str
):
    result = rag_server(*argv)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_misspelt_option_before_the_command_is_not_taken_for_an_unknown_command():
    result = rag_server("--knowlege-dir", "/tmp", "search", "q")
    assert "unknown command" not in result.stderr and "--knowlege-dir" in result.stderr


def test_an_option_of_another_command_is_refused_by_the_one_given():
    result = rag_server("search", "q", "--limit", "3")
    assert result.returncode == 2
    assert result.stderr.startswith("rag_server.py search: error: unrecognized arguments: --limit")


def test_shared_options_work_after_the_command_as_before_it(config: Config, knowledge: Path):
    (knowledge / "manual.md").write_text("# Manual\n\nRotate the backup tapes.\n", "utf-8")
    where = ["--knowledge-dir", str(knowledge), "--data-dir", str(config.data_dir)]
    synced = rag_server("sync", "--json", *where, "--semantic", "off")
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["counts"]["added"] == 1
    found = rag_server("--semantic", "off", "search", "backup tapes", *where, "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["path"] == "manual.md"


def test_python_rag_cli_py_runs_the_commands_and_prints_the_help_with_none(
    config: Config, knowledge: Path
):
    """`python rag_cli.py` is `ragdoc`: it once exited 0 having done nothing."""
    (knowledge / "manual.md").write_text("# Manual\n\nRotate the backup tapes.\n", "utf-8")
    where = ["--knowledge-dir", str(knowledge), "--data-dir", str(config.data_dir)]
    cli = [sys.executable, str(REPO / "rag_cli.py")]
    bare = subprocess.run(cli, capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bare.returncode == 2 and "commands:" in bare.stderr, bare.stderr
    synced = subprocess.run(
        [*cli, *where, "--semantic", "off", "sync", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert synced.returncode == 0, synced.stderr
    assert json.loads(synced.stdout)["counts"]["added"] == 1


def test_an_option_given_before_the_command_is_kept_when_the_command_is_parsed(
    config: Config, knowledge: Path
):
    """argparse copies every value of a command's parser over the namespace: the command's
    copy of the shared options must not reset `--read-only` given before it."""
    where = ["--knowledge-dir", str(knowledge), "--data-dir", str(config.data_dir)]
    for argv in (["--read-only", *where, "sync"], [*where, "sync", "--read-only"]):
        refused = rag_server(*argv)
        assert refused.returncode == 2 and "read-only" in refused.stderr, (argv, refused.stderr)


def test_the_readme_terminal_section_matches_what_help_prints():
    """Each command has one line in the README's Terminal block, naming exactly the options its
    --help lists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    terminal = readme.split("\n## Terminal\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", terminal, re.S)
    lines = [line.split("#", 1)[0] for line in re.sub(r"\n\s+", " ", block).splitlines()]
    listed = section(rag_server("--help").stdout, "commands:")
    commands = re.findall(r"^\s{4}(\w+)\s", listed, re.M)
    assert set(commands) == {name.split()[0] for name in COMMAND_OPTIONS}
    for command in COMMAND_OPTIONS:
        (line,) = [line for line in lines if re.search(rf"^ragdoc .*\b{command}( |$)", line)]
        own = section(rag_server(*command.split(), "--help").stdout, "options:")
        options = set(re.findall(r"^\s{2}(--[a-z-]+)", own, re.M)) - {"--help"}
        documented = set(re.findall(r"--[a-z][a-z-]*", line)) - {"--knowledge-dir"}
        assert documented == options, (command, line)
