"""``gaigel arena run``, ``report``, ``test`` and ``test-report`` (registered by :mod:`gaigel.cli`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Any

from gaigel.cli import CliError, number_arg, positive_int, writable_dir, writable_file, write_error

_bootstrap_arg = number_arg(int, 0, None, "a number of samples")

__all__ = ["configure_logging", "register"]


def configure_logging(level: str | None) -> None:
    """structlog once, at the edge: readable on a terminal, JSON lines otherwise (on stderr)."""
    import structlog

    tty = sys.stderr.isatty()
    name = (level or ("warning" if tty else "info")).upper()
    numeric = logging.getLevelName(name)
    if not isinstance(numeric, int):
        raise CliError(f"--log-level must be debug, info, warning or error, got {level!r}")
    renderer: Any = structlog.dev.ConsoleRenderer(colors=False) if tty else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=lambda *_: structlog.WriteLogger(sys.stderr),  # the current stderr; one write() per line
        cache_logger_on_first_use=False,
    )


def _check_out(out: Path, db: str | None, keep_records: bool) -> None:
    """The output folder (and its records folder and journal) can be written: checked before
    the first match, so a mistake costs one line, not a run."""
    writable_dir(out, "--out")
    if keep_records:
        writable_dir(out / "records", "--out")
    journal = Path(db) if db and "://" not in db else out / "arena.sqlite" if not db else None
    if journal is not None:
        writable_file(journal, "--db" if db else "--out")


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError):
        where = f" ({e.filename})" if e.filename else ""
        return f"{e.strerror or e}{where}"
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def cmd_arena_run(args: argparse.Namespace) -> int:
    """gaigel arena run."""
    from gaigel.record import write_json_atomic
    from gaigel_arena.config import load_config
    from gaigel_arena.metrics import ArenaMetrics
    from gaigel_arena.report import bot_fates, format_fates, format_table, load_report, report_dict
    from gaigel_arena.runner import ArenaError, Progress, run_arena

    configure_logging(args.log_level)
    config = load_config(args.config)
    executor = args.executor or ("ray" if args.ray_address else config.executor)
    if args.ray_address:
        if executor != "ray":
            raise CliError(f"--ray-address needs --executor ray, not --executor {executor}")
        config = dataclasses.replace(config, ray_address=args.ray_address)
    out = Path(args.out) if args.out else Path(Path(args.config).stem + "-arena")
    _check_out(out, args.db, config.keep_records)
    if config.listen:  # the published server for remote bots: a taken port is one line, not grpc's traceback
        from gaigel_server.server import check_bindable

        try:
            check_bindable(config.listen, "[arena] listen")
        except ValueError as e:
            raise CliError(str(e)) from None
    metrics = ArenaMetrics(config.bot_names)
    if args.metrics_port is not None:
        from prometheus_client import start_http_server

        try:
            start_http_server(args.metrics_port, addr=args.metrics_address, registry=metrics.registry)
        except OSError as e:
            raise CliError(
                f"--metrics-port {args.metrics_port}: cannot listen on {args.metrics_address}: {e.strerror or e}"
            ) from None
    progress = None if args.quiet else Progress()
    web = _start_web(args, out)
    try:
        summary = run_arena(
            config,
            out,
            db=args.db,
            workers=args.workers,
            executor=executor,
            progress=progress,
            metrics=metrics,
            bootstrap_samples=args.bootstrap,
        )
    except (NotImplementedError, ConnectionError) as e:  # an executor that cannot start (e.g. Ray unreachable)
        raise CliError(str(e)) from None
    except ArenaError as e:
        raise CliError(str(e)) from None
    except (OSError, sqlite3.OperationalError) as e:
        # A disk that fills up mid-run: every match fixed so far is in the journal, the one
        # being written is still pending; rerunning after freeing space continues from there.
        raise CliError(
            f"--out {out}: cannot write: {_reason(e)}; the matches finished so far are kept, "
            "rerun the same command once there is room"
        ) from None
    except KeyboardInterrupt:
        print(_interrupted_message(out, args.db), file=sys.stderr)
        return 130
    finally:
        if web is not None:
            web.shutdown()
    report = load_report(summary.db_path, samples=args.bootstrap)
    data = report_dict(report)
    try:
        write_json_atomic(data, out / "report.json")
    except OSError as e:
        raise write_error("--out", out / "report.json", e) from None
    if args.json:
        print(json.dumps(data))
    else:
        print(format_table(summary.standings, summary.done, summary.scheduled))
        if any(not f.rated or f.forfeits or f.voids for f in bot_fates(report)):
            print(format_fates(report))  # forfeits, voids, disqualifications: not only in the log
        print(
            f"played {summary.played_now} matches in {summary.seconds:.1f} s"
            + (f" ({summary.replayed} left unfinished by an earlier run, replayed)" if summary.replayed else "")
            + f"; journal {summary.db_label}"
        )
    return 0


def _interrupted_message(out: Path, db: str | None) -> str:
    """What Ctrl-C left behind and how to go on (the journal keeps every finished match)."""
    from gaigel_arena.journal import JournalError, redact_url, resolve_db

    try:
        journal = redact_url(resolve_db(out, db))
    except JournalError:
        journal = "the journal"
    return (
        f"gaigel arena run: interrupted; finished matches are kept in {journal}: "
        "run the same command again to resume (unfinished matches are replayed from their seed)"
    )


def _start_web(args: argparse.Namespace, out: Path) -> Any:
    """The live report server of ``--web-port``, or None."""
    if args.web_port is None:
        return None
    from gaigel_arena.web import serve_live_report

    target = args.db if args.db else out
    try:
        server = serve_live_report(target, args.web_address, args.web_port)
    except OSError as e:
        raise CliError(f"cannot serve the live report on {args.web_address}:{args.web_port}: {e.strerror}") from None
    port = server.server_address[1]
    print(f"live report: http://{args.web_address}:{port}/", file=sys.stderr, flush=True)
    return server


def cmd_arena_report(args: argparse.Namespace) -> int:
    """gaigel arena report."""
    from gaigel_arena.report import (
        format_fates,
        format_presence,
        format_set_histograms,
        format_table,
        load_report,
        report_dict,
        write_html_report,
    )

    if args.html:
        writable_dir(Path(args.html).parent, "--html")  # the page's folder also takes its viewer pages
        writable_file(Path(args.html), "--html")
    target = args.dir if "://" in args.dir else Path(args.dir)
    report = load_report(target, samples=args.bootstrap, details=bool(args.html) or not args.json)
    pages = 0
    if args.html:
        try:
            pages = write_html_report(report, Path(args.html))
        except OSError as e:
            raise write_error("--html", args.html, e) from None
    if args.json:
        print(json.dumps(report_dict(report)))
    elif not args.html:
        print(format_table(report.standings, report.counts["done"], report.counts["total"]))
        print(format_fates(report))
        if report.presence:
            print(format_presence(report))
        if report.results:
            print(format_set_histograms(report))
    else:
        print(f"wrote {args.html} and {pages} new match page(s) in {Path(args.html).parent / 'matches'}")
    return 0


def cmd_arena_check_bot(args: argparse.Namespace) -> int:
    """gaigel arena check-bot."""
    from gaigel_arena.checkbot import check_arena_bot
    from gaigel_arena.config import ConfigError, load_config

    try:
        config = load_config(Path(args.config))
        return check_arena_bot(
            config,
            args.bot,
            deadline=args.deadline,
            startup_timeout=args.startup_timeout,
            max_matches=args.max_matches,
            as_json=args.json,
            verbose=args.verbose,
        )
    except (ConfigError, ValueError) as e:
        raise CliError(str(e)) from None


def register(subparsers: Any) -> None:
    """Adds ``gaigel arena run`` and ``gaigel arena report``."""
    p = subparsers.add_parser(
        "arena",
        help="run a bot tournament and report its ratings",
        description="Run a bot tournament from a TOML config (resumable) and report its ratings.",
    )
    sub = p.add_subparsers(dest="arena_command", metavar="SUBCOMMAND", required=True)

    r = sub.add_parser(
        "run",
        help="play every pending match of an arena config",
        description=(
            "Play every pending match of an arena config into a journal (SQLite, WAL) in the output folder. "
            "Rerun the same command after a crash or kill: done matches are kept, started ones replayed."
        ),
    )
    r.add_argument("config", metavar="CONFIG.toml", help="arena configuration (see examples/demo.toml)")
    r.add_argument("--out", metavar="DIR", help="output folder (default: <config name>-arena)")
    r.add_argument(
        "--db",
        metavar="PATH|URL",
        help="journal: a SQLite file (default: DIR/arena.sqlite) or postgresql://user:password@host:port/dbname",
    )
    r.add_argument(
        "--workers",
        type=positive_int,
        metavar="N",
        help=(
            "matches at a time: worker processes (local), table workers each with a match server and "
            "bot processes (grpc) (default: [arena] workers, else one per core)"
        ),
    )
    r.add_argument(
        "--executor",
        choices=("auto", "local", "inline", "grpc", "ray"),
        help="how matches are played (default: [arena] executor, else auto: local worker processes for house bots)",
    )
    r.add_argument(
        "--ray-address",
        metavar="ADDR",
        help=(
            "with --executor ray (implied): the Ray cluster, HOST:PORT of a running head node, auto, "
            "ray://HOST:10001, or local for a cluster of --workers CPUs in this process "
            "(default: [arena] ray_address, else RAY_ADDRESS, else local)"
        ),
    )
    r.add_argument("--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics on this port")
    r.add_argument(
        "--metrics-address",
        default="127.0.0.1",
        help="address for --metrics-port (default %(default)s; 0.0.0.0 for all)",
    )
    r.add_argument(
        "--web-port",
        type=number_arg(int, 0, 65535, "a port"),
        metavar="PORT",
        help="serve the HTML report live on this port while the arena runs (0: any free port)",
    )
    r.add_argument(
        "--web-address",
        default="127.0.0.1",
        help="address for --web-port (default %(default)s; 0.0.0.0 for all)",
    )
    r.add_argument("--log-level", metavar="LEVEL", help="debug, info, warning or error (default: info off a terminal)")
    r.add_argument(
        "--bootstrap", type=_bootstrap_arg, default=1000, help="bootstrap samples for the intervals (default 1000)"
    )
    r.add_argument("--quiet", action="store_true", help="no progress line")
    r.add_argument("--json", action="store_true", help="print the final report as JSON")
    r.set_defaults(func=cmd_arena_run)

    q = sub.add_parser(
        "report",
        help="print the ratings of an arena folder",
        description="Print the ratings of an arena folder as a table, JSON or an HTML page.",
    )
    q.add_argument("dir", metavar="DIR", help="arena output folder (or its journal file, or its postgresql:// URL)")
    q.add_argument("--json", action="store_true", help="print the report as JSON")
    q.add_argument(
        "--html",
        metavar="FILE",
        help="write a self-contained HTML report, and a viewer page per kept match record in matches/ next to it",
    )
    q.add_argument(
        "--bootstrap", type=_bootstrap_arg, default=1000, help="bootstrap samples for the intervals (default 1000)"
    )
    q.set_defaults(func=cmd_arena_report)

    c = sub.add_parser(
        "check-bot",
        help="run the conformance checks on a bot of an arena config, in its arena sandbox",
        description="Run gaigel check-bot's checks on bot NAME of CONFIG as the arena would run it: in its sandbox "
        "(bwrap, podman or process), with its limits, and the arena's decision time as the deadline (times the "
        "machine's load per core when that is over 1). Exit 0 only when every check passes.",
    )
    c.add_argument("config", metavar="CONFIG.toml", help="arena configuration")
    c.add_argument("--bot", required=True, metavar="NAME", help="the command bot to check")
    c.add_argument("--deadline", type=float, metavar="SECONDS", help="time per decision (default: from the config)")
    c.add_argument(
        "--startup-timeout", type=float, default=15.0, metavar="SECONDS", help="seconds to join (default 15)"
    )
    c.add_argument("--max-matches", type=int, default=8, help="real matches to try for coverage (default 8)")
    c.add_argument("--json", action="store_true", help="print the results as one JSON object")
    c.add_argument("-v", "--verbose", action="store_true", help="show the bot's output as it comes")
    c.set_defaults(func=cmd_arena_check_bot)
    _register_test(sub)


def cmd_arena_test(args: argparse.Namespace) -> int:
    """gaigel arena test."""
    from gaigel.record import write_json_atomic
    from gaigel_arena.abreport import ab_report_dict, format_ab, write_ab_html
    from gaigel_arena.abtest import load_ab_config, run_ab
    from gaigel_arena.runner import ArenaError

    configure_logging(args.log_level or "warning")
    arena, test = load_ab_config(args.config)
    out = Path(args.out) if args.out else Path(Path(args.config).stem + "-test")
    _check_out(out, args.db, arena.keep_records)
    if args.html:
        writable_file(Path(args.html), "--html")
    try:
        run = run_ab(
            arena,
            test,
            out,
            db=args.db,
            workers=args.workers,
            executor=args.executor or arena.executor,
            stream=None if args.quiet else sys.stderr,
        )
    except (NotImplementedError, ConnectionError, ArenaError) as e:
        raise CliError(str(e)) from None
    except KeyboardInterrupt:
        print(_interrupted_message(out, args.db).replace("arena run", "arena test"), file=sys.stderr)
        return 130
    from gaigel_arena.journal import Journal

    with Journal.open_existing(run.db_path) as journal:
        counts = journal.counts()
    data = ab_report_dict(run.plan, run.state, counts, run.control_hash)
    try:
        write_json_atomic(data, out / "test-report.json")
        if args.html:
            write_ab_html(run.plan, run.state, data, Path(args.html))
    except OSError as e:
        raise write_error("--out", out, e) from None
    if args.json:
        print(json.dumps(data))
    else:
        print(format_ab(run.plan, run.state, counts))
        print(
            f"played {run.played_now} matches in {run.seconds:.1f} s"
            + (f" ({run.replayed} replayed after a crash)" if run.replayed else "")
        )
    return 0


def cmd_arena_test_report(args: argparse.Namespace) -> int:
    """gaigel arena test-report."""
    from gaigel_arena.abreport import ab_report_dict, format_ab, write_ab_html
    from gaigel_arena.abtest import open_ab

    if args.html:
        writable_file(Path(args.html), "--html")
    target: Any = args.dir if "://" in args.dir else Path(args.dir)
    plan, state, _control, digest, counts = open_ab(target)
    data = ab_report_dict(plan, state, counts, digest)
    if args.html:
        try:
            write_ab_html(plan, state, data, Path(args.html))
        except OSError as e:
            raise write_error("--html", args.html, e) from None
    if args.json:
        print(json.dumps(data))
    elif args.html:
        print(f"wrote {args.html}")
    else:
        print(format_ab(plan, state, counts))
    return 0


def _register_test(sub: Any) -> None:
    """Adds ``gaigel arena test`` and ``gaigel arena test-report``."""
    t = sub.add_parser(
        "test",
        help="sequential A/B test (or gauntlet) of a candidate bot on duplicate sets",
        description=(
            "Play duplicate sets of the [test] table's candidate against its baseline (or a field) until a "
            "sequential probability ratio test reaches a bound or the set cap (docs/testing-bots.md). "
            "Resumable: rerun the same command after a crash or kill."
        ),
    )
    t.add_argument("config", metavar="CONFIG.toml", help="arena configuration with a [test] table")
    t.add_argument("--out", metavar="DIR", help="output folder (default: <config name>-test)")
    t.add_argument(
        "--db", metavar="PATH|URL", help="journal: a SQLite file (default: DIR/arena.sqlite) or postgresql://..."
    )
    t.add_argument("--workers", type=positive_int, metavar="N", help="matches at a time (default: [arena] workers)")
    t.add_argument("--executor", choices=("auto", "local", "inline", "grpc", "ray"), help="as for gaigel arena run")
    t.add_argument("--html", metavar="FILE", help="also write the report as an HTML page")
    t.add_argument("--log-level", metavar="LEVEL", help="debug, info, warning or error (default: warning)")
    t.add_argument("--quiet", action="store_true", help="no plan and no live LLR lines")
    t.add_argument("--json", action="store_true", help="print the final report as JSON")
    t.set_defaults(func=cmd_arena_test)

    r = sub.add_parser(
        "test-report",
        help="print the verdict of an A/B test folder",
        description="Print the verdict, LLR, nElo and Elo, set histogram and standard errors of a test folder.",
    )
    r.add_argument("dir", metavar="DIR", help="test output folder (or its journal file, or its postgresql:// URL)")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--html", metavar="FILE", help="write the report as an HTML page (with the LLR plot)")
    r.set_defaults(func=cmd_arena_test_report)
