"""Terminal commands over the same service the MCP tools call (results on stdout, progress on
stderr). Reached through `python rag_server.py [options] COMMAND ...`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import rag_service
from helpers.config import Config
from helpers.errors import RagError
from rag_service import FINAL_STATES, JobView, eta_text, progress_line

DEMO_QUERIES = ("invoice payment terms", "отчёт о продажах", "การประชุม", "budget.csv")


def command_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rag_server.py [options]")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("sync", help="index new and changed files (progress on stderr)")
    p.add_argument("--detach", action="store_true", help="return at once; the worker goes on")
    p.add_argument("--path", help="only this sub-folder of the knowledge dir")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("status", help="a sync job's progress (default: the latest)")
    p.add_argument("job_id", nargs="?")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("cancel", help="cancel a running sync")
    p.add_argument("job_id")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("search", help="search the index")
    p.add_argument("query")
    p.add_argument("--top-k", type=int, default=8)
    p.add_argument("--path-prefix")
    p.add_argument("--type", action="append", dest="file_types")
    p.add_argument("--mode", default="hybrid", choices=rag_service.MODES)
    p.add_argument("--explain", action="store_true", help="show each channel's rank")
    p.add_argument(
        "--max-chars", type=int, help="bound the response as rag_search does for agents (8000)"
    )
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("health", help="configuration, index and engine state")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("jobs", help="recent sync jobs")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("watch", help="sync changed files as they change (Ctrl-C stops)")
    p.add_argument("--polling", action="store_true", help="poll instead of inotify")
    p.add_argument("--no-initial-sync", action="store_true", help="skip the first full sync")
    sub.add_parser("demo", help="sync the knowledge dir, then run a few sample searches")
    p = sub.add_parser("model", help="semantic model management")
    model_sub = p.add_subparsers(dest="model_command", required=True)
    p = model_sub.add_parser(
        "fetch", help="download the default embedding model into the Hugging Face cache"
    )
    p.add_argument("--base-url", default="https://huggingface.co", help="model hub address")
    p.add_argument("--cache-dir", help="Hugging Face hub cache (default: HF_HUB_CACHE / HF_HOME)")
    return parser


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


def run(config: Config, argv: list[str]) -> int:
    args = command_parser().parse_args(argv)
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
