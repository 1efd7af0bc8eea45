"""Terminal commands over the same service the MCP tools call (results on stdout, progress on
stderr), and the one command line of `ragdoc`, `mcp-ragdoc` and `python rag_server.py`."""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import rag_service
from helpers.config import DATA_HOME_NAME, Config, add_config_arguments, config_from_args
from helpers.errors import RagError
from rag_service import FINAL_STATES, JobView, eta_text, progress_line

PROG = "ragdoc"
DEMO_QUERIES = ("invoice payment terms", "отчёт о продажах", "การประชุม", "budget.csv")
COMMAND_METAVAR = "COMMAND"  # marks the actions whose choices are command names
SHARED_TITLE = "shared options (before or after the command; each also RAGDOC_<NAME>)"
SERVER_TITLE = "options (each also RAGDOC_<NAME>)"
EXCLUDE_AFTER = "exclude_after_command"  # where a command's copy of --exclude stores its globs
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse reads these as values, not options
ABOUT = """\
Search your own documents from the terminal: index a folder (PDF, Office, OpenDocument, Markdown,
CSV, e-mail, scans; any language) and search it by words and by meaning, each hit with its file
and page, sheet, slide or heading. Nothing leaves the machine. The MCP server (mcp-ragdoc) and the
web console (ragdoc-console) use the same index."""


def index_help(prog: str) -> str:
    """The end of the help: where the index lives and one example."""
    return f"""\
where the index lives:
  ~/{DATA_HOME_NAME}/<folder name>-<hash of its path>/ (index.sqlite3, logs/, sync.lock), one per
  knowledge dir; --data-dir (RAGDOC_DATA_DIR) puts it anywhere else. The knowledge dir must be
  given (--knowledge-dir or RAGDOC_KNOWLEDGE_DIR); only demo falls back to a bundled sample folder.

example:
  {prog} --knowledge-dir ~/Documents/work sync
  {prog} --knowledge-dir ~/Documents/work search "payment terms" --top-k 3"""


class CommandLineParser(argparse.ArgumentParser):
    """argparse whose mistakes are one line with exit code 2 that names the closest command,
    choice or option (argparse prints its usage block and names none)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def option_names(self) -> list[str]:
        return list(self._option_string_actions)  # every spelling: --top-k, -h, --help

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's one check of a value against `choices` (a command name, --mode, --semantic).
        if action.choices is None or value in action.choices:
            return
        choices = [str(choice) for choice in action.choices]
        if action.metavar == COMMAND_METAVAR:
            raise argparse.ArgumentError(
                None, f"unknown command {value!r}{_closest(value, choices)}"
            )
        raise argparse.ArgumentError(
            action, f"{value!r} is not one of {', '.join(choices)}{_closest(value, choices)}"
        )


def _closest(word: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, candidates, n=1)
    return f"; did you mean `{close[0]}`?" if close else ""


@dataclass(frozen=True)
class CommandLine:
    """The parser with its command parsers by name ("search", "model fetch")."""

    parser: CommandLineParser
    commands: dict[str, CommandLineParser]

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        self._refuse_unknown_options(argv)
        args, extras = self.parser.parse_known_args(argv)
        if extras:
            owner = self.commands.get(command_name(args) or "", self.parser)
            close = _closest(extras[0], owner.option_names()) if extras[0][:1] == "-" else ""
            owner.error(f"unrecognized arguments: {' '.join(extras)}{close}")
        after = vars(args).pop(EXCLUDE_AFTER, None)
        if after:
            args.exclude = [*(args.exclude or []), *after]
        return args

    def _refuse_unknown_options(self, argv: Sequence[str]) -> None:
        """An option no parser knows is named before argparse runs: before the command it would
        take the next word as its value and call that an unknown command."""
        known = set(self.parser.option_names())
        for command in self.commands.values():
            known.update(command.option_names())
        for token in argv:
            if token == "--":
                return
            if token[:1] != "-" or token == "-" or " " in token or NEGATIVE_NUMBER.match(token):
                continue
            name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
            if name in known or (name.startswith("--") and any(k.startswith(name) for k in known)):
                continue
            named = next((self.commands[t] for t in argv if t in self.commands), self.parser)
            close = _closest(name, named.option_names()) or _closest(name, sorted(known))
            named.error(f"unknown option {name}{close}")


def command_name(args: argparse.Namespace) -> str | None:
    """The command given ("search", "model fetch"), or None: the MCP server / the command list."""
    command = getattr(args, "command", None)
    if command == "model":
        return f"model {args.model_command}"
    return command


def command_line(
    prog: str = PROG,
    about: str = ABOUT,
    epilog: str | None = None,
    server_options: Callable[[Any], None] | None = None,
    list_commands: bool = True,
) -> CommandLine:
    """`ragdoc` by default; the MCP server's faces add their transport options, and
    `mcp-ragdoc` keeps the commands out of its help (they are `ragdoc`'s)."""
    parser = CommandLineParser(
        prog=prog,
        usage=_usage(prog, server=server_options is not None, list_commands=list_commands),
        description=about,
        epilog=index_help(prog) if epilog is None else epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    sub = parser.add_subparsers(
        dest="command",
        metavar=COMMAND_METAVAR,
        title="commands" if list_commands else None,
        help=f"`{prog} COMMAND --help` shows its options" if list_commands else argparse.SUPPRESS,
        prog=prog,
    )
    shared = parser.add_argument_group(SHARED_TITLE if list_commands else SERVER_TITLE)
    shared.add_argument("-h", "--help", action="help", help="show this help and exit")
    add_config_arguments(shared)
    if server_options is not None:
        title = "MCP server options (no command given)" if list_commands else "transport"
        server_options(parser.add_argument_group(title))
    # A command's own copy of the shared options: SUPPRESS leaves a value given before the
    # command in place (argparse copies every value of a command's parser over the namespace).
    after = CommandLineParser(add_help=False, argument_default=argparse.SUPPRESS)
    add_config_arguments(after.add_argument_group(SHARED_TITLE), exclude_dest=EXCLUDE_AFTER)
    return CommandLine(parser, _add_commands(prog, sub, after))


def _usage(prog: str, server: bool, list_commands: bool) -> str:
    command = f"{COMMAND_METAVAR} [command options]"
    if not list_commands:
        return f"{prog} [options]"
    return f"{prog} [options] [{command}]" if server else f"{prog} [options] {command}"


def _sync_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--detach", action="store_true", help="return at once; the worker goes on")
    p.add_argument("--path", metavar="SUBFOLDER", help="only this sub-folder of the knowledge dir")
    p.add_argument("--json", action="store_true", help="the job as JSON on stdout")


def _status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", nargs="?", metavar="JOB", help="a job id (default: the latest job)")
    p.add_argument("--json", action="store_true", help="the job as JSON on stdout")


def _cancel_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", metavar="JOB", help="the job id that sync, status or jobs printed")
    p.add_argument("--json", action="store_true", help="the job as JSON on stdout")


def _search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY", help="what to look for (quote several words)")
    p.add_argument("--top-k", type=int, default=8, metavar="N", help="hits to return (default 8)")
    p.add_argument(
        "--path-prefix", metavar="FOLDER", help="only files under this folder (at a / boundary)"
    )
    p.add_argument(
        "--type",
        action="append",
        dest="file_types",
        metavar="EXT",
        help="only this file type, e.g. pdf (repeatable)",
    )
    p.add_argument(
        "--mode",
        default="hybrid",
        choices=rag_service.MODES,
        help="hybrid: words and meaning (default); lexical: words only; semantic: meaning only",
    )
    p.add_argument("--explain", action="store_true", help="show each channel's rank")
    p.add_argument(
        "--max-chars",
        type=int,
        metavar="N",
        help="bound the response as rag_search does for agents (8000)",
    )
    p.add_argument("--json", action="store_true", help="the full result as JSON on stdout")


def _health_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")


def _jobs_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=20, metavar="N", help="how many (default 20)")
    p.add_argument("--json", action="store_true", help="the jobs as JSON on stdout")


def _watch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--polling", action="store_true", help="poll instead of inotify")
    p.add_argument("--no-initial-sync", action="store_true", help="skip the first full sync")


def _no_options(p: argparse.ArgumentParser) -> None:
    return None


def _fetch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", default="https://huggingface.co", help="model hub address")
    p.add_argument("--cache-dir", help="Hugging Face hub cache (default: HF_HUB_CACHE / HF_HOME)")


@dataclass(frozen=True)
class Command:
    name: str  # "search", or "model fetch" under `model`
    summary: str  # its line in the command list
    description: str  # the top of its own --help
    options: Callable[[argparse.ArgumentParser], None]


COMMANDS = (
    Command(
        "sync",
        "index new and changed files (progress on stderr)",
        "Index new and changed files of the knowledge dir and drop removed ones: a progress bar "
        "on stderr, then the job (counts, skipped files by reason, errors) on stdout. Ctrl-C "
        "cancels; what was committed stays searchable. Exit code 1 when the job did not succeed.",
        _sync_options,
    ),
    Command(
        "status",
        "a sync job's progress (default: the latest)",
        "A sync job's state, progress, counts, skipped files and errors.",
        _status_options,
    ),
    Command(
        "cancel",
        "cancel a running sync",
        "Cancel a running sync: the document being written rolls back, the rest stays searchable.",
        _cancel_options,
    ),
    Command(
        "search",
        "search the index",
        "Search the index by words and meaning: ranked hits, each with its citation (file and "
        "page, sheet, slide or heading), score and snippet, then the answer's confidence.",
        _search_options,
    ),
    Command(
        "health",
        "configuration, index and engine state",
        "Paths, index counts, the last job, semantic and OCR state, and the fix for any problem. "
        "Exit code 1 when something is broken.",
        _health_options,
    ),
    Command("jobs", "recent sync jobs", "Recent sync jobs, newest first.", _jobs_options),
    Command(
        "watch",
        "sync changed files as they change (Ctrl-C stops)",
        "Sync the knowledge dir, then keep syncing the files that change until Ctrl-C.",
        _watch_options,
    ),
    Command(
        "demo",
        "sync the sample folder, then run a few sample searches",
        "Sync the bundled sample folder (or --knowledge-dir), then run a few sample searches.",
        _no_options,
    ),
    Command(
        "model fetch",
        "download the default embedding model into the Hugging Face cache",
        "Download the default embedding model into the Hugging Face cache: the only command that "
        "uses the network, and only when run.",
        _fetch_options,
    ),
)
MODEL_SUMMARY = "`model fetch`: download the default embedding model (the only network use)"


def _add_commands(prog: str, sub: Any, shared: CommandLineParser) -> dict[str, CommandLineParser]:
    """Each command's parser: its own options, then the shared ones; its usage names only its
    own (the shared ones are listed below them)."""
    commands: dict[str, CommandLineParser] = {}
    groups: dict[str, Any] = {"": sub}
    for spec in COMMANDS:
        group, _, name = spec.name.rpartition(" ")
        if group not in groups:
            parent = sub.add_parser(group, help=MODEL_SUMMARY, description=MODEL_SUMMARY)
            groups[group] = parent.add_subparsers(
                dest=f"{group}_command", metavar=COMMAND_METAVAR, title="commands", required=True
            )
        own = CommandLineParser(prog=f"{prog} {spec.name}", add_help=False)
        spec.options(own)
        usage = own.format_usage().removeprefix("usage: ").rstrip()
        commands[spec.name] = groups[group].add_parser(
            name,
            help=spec.summary,
            description=spec.description,
            parents=[own, shared],
            usage=f"{usage} [shared options]",
        )
    return commands


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _print_progress(view: JobView) -> None:
    line = progress_line(view)[:160]
    end = "\n" if view.state in FINAL_STATES else "\r"
    sys.stderr.write("\x1b[2K" + line + end if sys.stderr.isatty() else line + "\n")
    sys.stderr.flush()


def run_sync(config: Config, path: str | None, detach: bool, quiet: bool = False) -> JobView:
    view = rag_service.start_sync(config, path)
    if view.already_running:
        sys.stderr.write(f"a sync is already running: job {view.job_id}\n")
    if detach:
        return view
    last = [""]

    def show(v: JobView) -> None:
        line = progress_line(v)
        if not quiet and (line != last[0] or v.state in FINAL_STATES):
            _print_progress(v)
            last[0] = line

    try:
        return rag_service.wait_for_job(config, view.job_id, show)
    except KeyboardInterrupt:
        sys.stderr.write("\ncancelling…\n")
        rag_service.cancel_sync(config, view.job_id)
        return rag_service.wait_for_job(config, view.job_id, show)


def _print_job(view: JobView) -> None:
    d = view.to_dict()
    print(f"job {d['job_id']}: {d['state']} ({d['phase']}) {d['percent']}%")
    if view.state not in FINAL_STATES:  # the same words as the bar, the console and sync_status
        print(f"  {d['progress']['text']}{eta_text(view)}")
    print("  counts: " + ", ".join(f"{k} {v}" for k, v in d["counts"].items()))
    if d["message"]:
        print(f"  {d['message']}")
    for reason, item in d["skipped"]["by_reason"].items():
        examples = ", ".join(item["examples"][:3])
        print(f"  skipped {reason} ({item['label']}): {item['count']}  e.g. {examples}")
    if d["skipped"]["by_reason"]:
        print('  (every skipped file: rag_list(status="skipped"))')
    for err in d["errors"][:20]:
        print(f"  ! {err['path']}: {err['message']}")
    if d["error_count"] > 20:
        print(f"  … {d['error_count'] - 20} more errors (use --json)")


def print_search(result_dict: dict[str, Any], explain: bool) -> None:
    if not result_dict["hits"]:
        print("no results")
    for hit in result_dict["hits"]:
        flags = (" (OCR)" if hit["ocr"] else "") + (" (STALE: re-sync)" if hit["stale"] else "")
        print(f"{hit['rank']}. {hit['citation']}{flags}  score {hit['score']:.4f}")
        print(f"   {hit['snippet']}")
        if explain:
            channels = ", ".join(
                f"{name} #{c['rank']} ({c['score']:.3f})" for name, c in hit["channels"].items()
            )
            print(f"   channels: {channels}")
    if result_dict["hits"]:
        print(f"confidence: {result_dict['confidence']}")
    for warning in result_dict["warnings"]:
        sys.stderr.write(f"warning: {warning}\n")


def main(argv: list[str] | None = None) -> int:
    """`ragdoc [options] COMMAND` and `python rag_cli.py`: the terminal commands (with no command
    it prints its help rather than starting an MCP server on a terminal)."""
    line = command_line()
    args = line.parse(list(sys.argv[1:] if argv is None else argv))
    if command_name(args) is None:
        line.parser.print_help(sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return run(config_from_args(args, demo=command_name(args) == "demo"), args)


def run(config: Config, args: argparse.Namespace) -> int:
    """Run the command `command_line().parse` found (results on stdout, errors on stderr)."""
    try:
        return _dispatch(config, args)
    except RagError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2


def _dispatch(config: Config, args: argparse.Namespace) -> int:
    if args.command == "sync":
        view = run_sync(config, args.path, args.detach, quiet=args.json)
        _emit(view.to_dict()) if args.json else _print_job(view)
        return 0 if view.state in ("succeeded", "queued", "running") else 1
    if args.command == "status":
        view = rag_service.sync_status(config, args.job_id)
        _emit(view.to_dict()) if args.json else _print_job(view)
        return 0
    if args.command == "cancel":
        view = rag_service.cancel_sync(config, args.job_id)
        _emit(view.to_dict()) if args.json else _print_job(view)
        return 0
    if args.command == "search":
        result = rag_service.search(
            config,
            args.query,
            top_k=args.top_k,
            path_prefix=args.path_prefix,
            file_types=args.file_types,
            mode=args.mode,
            max_chars=args.max_chars,
        ).to_dict()
        _emit(result) if args.json else print_search(result, args.explain)
        return 0
    if args.command == "health":
        report = rag_service.health(config)
        if args.json:
            _emit(report)
        else:
            for key, value in report.items():
                print(f"{key}: {json.dumps(value, ensure_ascii=False)}")
        return 0 if report["status"] != "error" else 1
    if args.command == "jobs":
        views = rag_service.list_jobs(config, args.limit)
        if args.json:
            _emit([v.to_dict() for v in views])
        for v in [] if args.json else views:
            print(f"{v.job_id}  {v.state:<10} {v.percent:5.1f}%  {v.counts}")
        return 0
    if args.command == "demo":
        return _demo(config)
    if args.command == "watch":
        watcher = rag_service.make_watcher(
            config, polling=args.polling or None, initial_sync=not args.no_initial_sync
        )
        try:
            watcher.run()
        except KeyboardInterrupt:
            sys.stderr.write("watch stopped\n")
        return 0
    if args.command == "model":
        return _model_fetch(args)
    raise AssertionError(args.command)


def _demo(config: Config) -> int:
    sys.stderr.write(f"indexing {config.knowledge_dir} into {config.db_path}\n")
    view = run_sync(config, None, detach=False)
    _print_job(view)
    for query in DEMO_QUERIES:
        print(f"\n=== search: {query}")
        print_search(rag_service.search(config, query, top_k=3).to_dict(), explain=True)
    return 0 if view.state == "succeeded" else 1


def _model_fetch(args: argparse.Namespace) -> int:
    """The only code path that downloads anything, and only when the user asks for it."""

    def show(name: str, done: int, total: int | None) -> None:
        size = f"{done / 1e6:.1f}/{total / 1e6:.1f} MB" if total else f"{done / 1e6:.1f} MB"
        sys.stderr.write(f"\r{name}: {size}   ")
        sys.stderr.flush()

    try:
        result = rag_service.fetch_model(args.cache_dir, args.base_url, show)
    except RagError as exc:
        sys.stderr.write(f"\nerror: {exc}\n")
        return 2
    sys.stderr.write("\n")
    print(f"model ready in {result.model_dir} ({result.downloaded_bytes / 1e6:.1f} MB downloaded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
