"""The ``pando`` command. Every sub-command has ``--help``; ``--json`` gives machine output.

Exit codes: 0 success, 1 the operation failed (Spark/Iceberg error, wrong result), 2 bad
input (usage, configuration, SQL that does not parse, unknown table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from .config import ConfigError, PandoConfig, load_config
from .exceptions import UsageError
from .output import emit, jsonable
from .version import __version__

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class CliError(UsageError):
    def __init__(self, message: str, code: int = EXIT_BAD_INPUT):
        super().__init__(message)
        self.code = code


def _progress(args) -> Callable[[str], None]:
    # A Progress is a Callable[[str], None] with .step(name, total) for bars; quiet unless
    # stderr is a terminal and the output is not --json.
    from .progress import Progress

    return Progress(sys.stderr, enabled=not getattr(args, "json", False) and sys.stderr.isatty())


# The optional dependencies: `pando-iceberg[bench]` for the benchmarks, the demo and the datasets
# (tpchgen-cli, DuckDB's TPC-DS, matplotlib's charts), `pando-iceberg[plot]` for pictures only.
BENCH_MODULES = ("duckdb", "matplotlib")


def require_extra(command: str, extra: str, modules: tuple[str, ...] = (), tpchgen: bool = False) -> None:
    """Stop before Spark starts when ``command`` needs an extra that is not installed, naming it."""
    from importlib import import_module

    from .tpch import TpchError, tpchgen_executable

    missing = []
    for name in modules:
        try:
            import_module(name)
        except ImportError:
            missing.append(name)
    if tpchgen:
        try:
            tpchgen_executable()
        except TpchError:
            missing.append("tpchgen-cli")
    if missing:
        raise CliError(f"pando {command} needs the {extra!r} extra, which is not installed (missing: "
                       f"{', '.join(missing)}): pip install 'pando-iceberg[{extra}]'")


def _config(args) -> PandoConfig:
    return load_config(config_file=args.config, home=args.home,
                       overrides={"spark": {"master": args.master}})


def cmd_init(args) -> int:
    from .catalog import load_catalog

    cfg = _config(args)
    cat = load_catalog(cfg)  # creates the embedded catalog.db and warehouse
    d = cfg.describe()
    rows = [("home", d["home"]), ("config", d["source"]),
            ("catalog", f"{d['catalog']['name']} ({d['catalog']['type']})"),
            ("catalog uri", d["catalog"]["uri"]), ("warehouse", d["catalog"]["warehouse"]),
            ("spark master", d["spark"]["master"]),
            ("namespaces", ", ".join(".".join(n) for n in cat.list_namespaces()) or "-")]
    emit(["setting", "value"], rows, args.json, title="pando lakehouse ready")
    return EXIT_OK


def cmd_tables(args) -> int:
    from .catalog import load_catalog

    cat = load_catalog(_config(args))
    rows = []
    for ns in cat.list_namespaces():
        for ident in cat.list_tables(ns):
            tbl = cat.load_table(ident)
            snap = tbl.current_snapshot()
            summary = snap.summary if snap else None
            rows.append((".".join(ident), int(summary.get("total-records", 0)) if summary else 0,
                         int(summary.get("total-data-files", 0)) if summary else 0,
                         tbl.properties.get("pando.layout-id", ""), tbl.properties.get("pando.pending-layout-id", "")))
    emit(["table", "rows", "data_files", "pando_layout", "pending_layout"], rows, args.json)
    return EXIT_OK


class _Context:
    """A procedure context whose Spark session starts on first use and always stops."""

    def __init__(self, args):
        from .catalog import load_catalog
        from .procedures import ProcedureContext
        from .spark.session import start_spark

        self.cfg = _config(args)
        self.ctx = ProcedureContext(self.cfg, load_catalog(self.cfg), lambda: start_spark(self.cfg),
                                    progress=_progress(args))

    def __enter__(self):
        return self.ctx

    def __exit__(self, et, ev, tb):
        from .spark.session import as_spark_sql_error, stop_spark

        spark = self.ctx._spark
        if spark is not None:
            err = as_spark_sql_error(ev) if ev is not None else None  # read while the JVM is up
            stop_spark(spark)
            if err is not None:
                code = EXIT_BAD_INPUT if err.kind in ("ParseException", "AnalysisException") else EXIT_FAILED
                raise CliError(str(err), code) from None
        return False


def _emit_result(args, result, title: str | None = None) -> None:
    extra = {f"note{i + 1}" if len(result.notes) > 1 else "note": n for i, n in enumerate(result.notes)}
    emit(result.names, result.rows, args.json, title=title, extra=extra or None)


def cmd_sql(args) -> int:
    from .runner import execute

    with _Context(args) as ctx:
        result = execute(ctx, args.statement, use_layout=not args.no_layout, limit=args.limit)
        _emit_result(args, result)
    return EXIT_OK


def cmd_run(args) -> int:
    from .runner import run_script

    variables = {"catalog": _config(args).catalog.name}
    for item in args.var or []:
        if "=" not in item:
            raise CliError(f"--var {item!r}: expected NAME=VALUE")
        k, v = item.split("=", 1)
        variables[k.strip()] = v
    try:
        text = open(args.file, encoding="utf-8").read()
    except OSError as e:
        raise CliError(f"cannot read runbook {args.file!r}: {e.strerror}") from None
    with _Context(args) as ctx:
        results = run_script(ctx, text, variables, where=args.file)
        if args.json:
            docs = [{"statement": stmt, "columns": r.names,
                     "rows": [dict(zip(r.names, map(jsonable, row))) for row in r.rows],
                     "notes": r.notes} for stmt, r in results]
            print(json.dumps(docs, indent=2))
        else:
            for stmt, result in results:
                _emit_result(args, result, title=f"-- {' '.join(stmt.split())[:160]}")
    return EXIT_OK


def cmd_explain(args) -> int:
    from .procedures.builtin import explain_scan

    with _Context(args) as ctx:
        if args.table:
            result = explain_scan(ctx, args.table, args.query, None)
        else:
            result = explain_scan(ctx, None, None, args.query)
        _emit_result(args, result)
    return EXIT_OK


def cmd_describe_layout(args) -> int:
    from .procedures.builtin import describe_layout

    with _Context(args) as ctx:
        result = describe_layout(ctx, args.table)
        _emit_result(args, result)
        if getattr(args, "png", None):
            require_extra("describe-layout --png", "plot", ("matplotlib",))
            from .pictures import draw_layout
            from .procedures.builtin import current_sidecar

            sidecar = current_sidecar(ctx.table(args.table))
            draw_layout(sidecar.load_layout(), sidecar.block_files, args.png, title=args.table)
            if not args.json:
                print(f"picture written to {args.png}")
    return EXIT_OK


def cmd_advise(args) -> int:
    from .procedures.builtin import advise

    options = _key_values(args.options)
    with _Context(args) as ctx:
        result = advise(ctx, args.table, args.workload, args.workload_log, args.since, args.until, options,
                        args.sort_orders, args.apply, args.max_repay_days)
        _emit_result(args, result)
    return EXIT_OK


def cmd_advise_tables(args) -> int:
    from .procedures.builtin import advise_tables

    options = _key_values(args.options)
    with _Context(args) as ctx:
        result = advise_tables(ctx, ",".join(args.tables), args.workload, args.workload_log, args.since, args.until,
                               options)
        _emit_result(args, result)
    return EXIT_OK


def _key_values(text: str | None) -> dict[str, str]:
    """--options KEY=VALUE,KEY=VALUE as a map."""
    options = {}
    for item in (text or "").split(","):
        if item.strip():
            if "=" not in item:
                raise CliError(f"--options {item.strip()!r}: expected KEY=VALUE pairs, comma-separated "
                               "(e.g. k=3,min-block-rows=100000)")
            k, v = item.split("=", 1)
            options[k.strip()] = v.strip()
    return options


def cmd_load_tpch(args) -> int:
    from .spark.session import spark_session
    from .tpch import expected_row_count, load_tpch

    require_extra("load-tpch", "bench", tpchgen=True)
    cfg = _config(args)
    with spark_session(cfg) as spark:
        t0 = time.time()
        loaded = load_tpch(spark, args.sf, namespace=args.namespace, replace=args.replace, progress=_progress(args))
        rows = [(f"{args.namespace}.{t.table}", t.rows, expected_row_count(t.table, args.sf), t.files,
                 round(t.seconds, 1))
                for t in loaded]
        emit(["table", "rows", "expected_rows", "data_files", "seconds"], rows, args.json,
             extra={"scale_factor": args.sf, "total_seconds": round(time.time() - t0, 1)})
        bad = [r for r in rows if r[2] is not None and r[1] != r[2]]
        if bad:
            raise CliError(f"row counts differ from TPC-H's for {[r[0] for r in bad]}", EXIT_FAILED)
    return EXIT_OK


def cmd_demo(args) -> int:
    from .bench.harness import BenchError
    from .demo import demo_layouts, run_demo

    try:
        demo_layouts(args.k)
    except ValueError as e:
        raise CliError(str(e)) from None
    require_extra("demo", "bench", BENCH_MODULES, tpchgen=True)
    try:
        return run_demo(_config(args), sf=args.sf, as_json=args.json, per_template=args.per_template, k=args.k,
                        progress=_progress(args))
    except BenchError as e:
        raise CliError(str(e)) from None


def cmd_bench(args) -> int:
    from .bench.harness import BenchError, run_from_args

    require_extra("bench", "bench", BENCH_MODULES, tpchgen=True)
    try:
        return run_from_args(_config(args), args, progress=_progress(args))
    except BenchError as e:
        raise CliError(str(e)) from None


def cmd_cleanup(args) -> int:
    from .catalog import load_catalog
    from .cleanup import Leftover, cleanup_table

    if args.older_than_minutes < 0:
        raise CliError(f"--older-than-minutes must be >= 0, got {args.older_than_minutes:g}")
    report = cleanup_table(load_catalog(_config(args)), args.table, apply=args.apply,
                           older_than_minutes=args.older_than_minutes)
    title = None if args.json else (f"{'deleted' if args.apply else 'dry run (nothing deleted; --apply deletes)'}: "
                                    f"files of failed Pando rewrites of {args.table}")
    emit(list(Leftover.COLUMNS), [x.row() for x in report.leftovers], args.json, title=title, extra=report.summary())
    if report.failed:
        raise CliError(f"{len(report.failed)} file(s) could not be deleted (see the action column)", EXIT_FAILED)
    return EXIT_OK


def cmd_soak(args) -> int:
    from .catalog import load_catalog
    from .soak import INJECTIONS, PROFILES, run_soak
    from .spark.session import spark_session

    if args.days < 1:
        raise CliError(f"--days must be >= 1, got {args.days}")
    inject = {}
    for item in args.inject or []:
        day, _, what = item.partition(":")
        if not day.isdigit() or what not in INJECTIONS:
            raise CliError(f"--inject {item!r}: expected DAY:KIND with KIND one of {', '.join(INJECTIONS)}")
        inject[int(day)] = what
    cfg = _config(args)
    with spark_session(cfg, app_name="pando-soak") as spark:
        report = run_soak(spark, load_catalog(cfg), cfg, seed=args.seed, days=args.days, profile=PROFILES[args.profile],
                          namespace=args.namespace, inject=inject,
                          progress=lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", file=sys.stderr, flush=True))
    emit(["metric", "value"], report.rows(), args.json, title=f"pando soak: seed {args.seed}, {args.days} day(s)",
         extra={"failures": report.failures, "known_failures": report.known_failures} if args.json else None)
    if not args.json:
        for line in report.failures:
            print(f"DISCREPANCY {line}")
        for line in report.known_failures:
            print(f"KNOWN FAILURE {line}")
    return EXIT_OK if report.ok else EXIT_FAILED


def cmd_serve(args) -> int:
    from .serve import LOOPBACK, ServeOptions, run

    if args.port < 0 or args.port > 65535:
        raise CliError(f"--port must be 0..65535, got {args.port}")
    if args.max_request_bytes <= 0 or args.tasks_per_page <= 0:
        raise CliError("--max-request-bytes and --tasks-per-page must be positive integers")
    if args.upstream is not None and not args.upstream.startswith(("http://", "https://")):
        raise CliError(f"--upstream must be a REST catalog's http:// or https:// URI, got {args.upstream!r}")
    token = args.token or os.environ.get("PANDO_SERVE_TOKEN") or None
    if args.host != LOOPBACK and token is None:
        print(f"pando serve: warning: listening on {args.host} without a bearer token (--token or "
              "PANDO_SERVE_TOKEN): any client that reaches it may read and change the catalog", file=sys.stderr)
    options = ServeOptions(token=token, max_request_bytes=args.max_request_bytes, tasks_per_page=args.tasks_per_page)
    if args.upstream is not None:
        print(f"pando serve: proxy of {args.upstream} at http://{args.host}:{args.port}", file=sys.stderr)
        run(None, host=args.host, port=args.port, options=options, log_level=args.log_level, upstream=args.upstream,
            upstream_token=os.environ.get("PANDO_SERVE_UPSTREAM_TOKEN") or None)
        return EXIT_OK
    from .catalog import load_catalog

    cfg = _config(args)
    print(f"pando serve: catalog {cfg.catalog.name} at http://{args.host}:{args.port} "
          f"(pyiceberg: RestCatalog(uri=..., **{{'scan-planning-mode': 'server'}}))", file=sys.stderr)
    run(load_catalog(cfg), host=args.host, port=args.port, options=options, log_level=args.log_level)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    # Global options may stand before or after the sub-command; SUPPRESS keeps a sub-parser's
    # missing value from overwriting one given before it.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--home", help="embedded lakehouse directory (default: $PANDO_HOME or ./.pando)")
    common.add_argument("--config", help="pando.yaml to use (default: $PANDO_CONFIG, <home>/pando.yaml, ./pando.yaml)")
    common.add_argument("--master", help="Spark master: local[*] (default), local[N], spark://host:port")
    common.add_argument("--json", action="store_true", help="machine-readable JSON output")

    p = argparse.ArgumentParser(prog="pando", description="Pando learned multi-tree layouts for Apache Iceberg tables.",
                                parents=[common])
    p.add_argument("--version", action="version", version=f"pando-iceberg {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    s = sub.add_parser("init", parents=[common], help="create the embedded lakehouse (catalog + warehouse)")
    s.set_defaults(func=cmd_init)
    s = sub.add_parser("tables", parents=[common], help="list the catalog's tables with rows, files and layout")
    s.set_defaults(func=cmd_tables)
    s = sub.add_parser("sql", parents=[common],
                       help="run a CALL pando.system.* procedure or Spark SQL (queries read with Pando pruning)")
    s.add_argument("statement", help="CALL pando.system.<procedure>(...), CALL <catalog>.system.*, or Spark SQL")
    s.add_argument("--limit", type=int, default=100, help="print at most this many rows (default 100)")
    s.add_argument("--no-layout", action="store_true", help="plan queries without Pando (Iceberg's pruning only)")
    s.set_defaults(func=cmd_sql)
    s = sub.add_parser("run", parents=[common], help="run a runbook: a .sql file of statements with ${variables}")
    s.add_argument("file", help="runbook file")
    s.add_argument("--var", action="append", metavar="NAME=VALUE", help="set ${NAME} (repeatable)")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("explain", parents=[common],
                       help="files/bytes/rows a query or filter reads with and without Pando")
    s.add_argument("query", help="a SQL query, or with --table a filter on that table")
    s.add_argument("--table", help="explain a filter on this table instead of a whole query")
    s.set_defaults(func=cmd_explain)
    s = sub.add_parser("describe-layout", parents=[common], help="a table's Pando trees, cuts, blocks and files")
    s.add_argument("table")
    s.add_argument("--png", metavar="FILE", help="also draw the trees, the k-tuple grid and block sizes to this PNG")
    s.set_defaults(func=cmd_describe_layout)
    s = sub.add_parser("advise", parents=[common],
                       help="rank layouts for a workload: as is, Iceberg's sort and z-order, Pando; apply the best")
    s.add_argument("table")
    s.add_argument("--workload", help="SQL text, a .sql file, a directory of .sql files, or a .jsonl/.csv query log")
    s.add_argument("--workload-log", help="a query log: a .jsonl/.csv file or an Iceberg table")
    s.add_argument("--since", help="query logs: only queries at or after this ('7 days', an ISO-8601 instant)")
    s.add_argument("--until", help="query logs: only queries before this")
    s.add_argument("--options", help="rewrite options, KEY=VALUE comma-separated (k=4: Pando with 1..4 trees)")
    s.add_argument("--sort-orders", help="more Iceberg sort orders to rank, ';'-separated ('c DESC; zorder(a, b)')")
    s.add_argument("--apply", action="store_true", help="write the advised layout")
    s.add_argument("--max-repay-days", type=float,
                   help="with --apply and a logged workload: only if it repays its rewrite within this many days")
    s.set_defaults(func=cmd_advise)
    s = sub.add_parser("advise-tables", parents=[common],
                       help="which table first: rank tables by the MB a workload saves per second of rewrite")
    s.add_argument("tables", nargs="+", help="the tables to rank")
    s.add_argument("--workload", help="SQL text, a .sql file, a directory of .sql files, or a .jsonl/.csv query log")
    s.add_argument("--workload-log", help="a query log: a .jsonl/.csv file or an Iceberg table")
    s.add_argument("--since", help="query logs: only queries at or after this ('7 days', an ISO-8601 instant)")
    s.add_argument("--until", help="query logs: only queries before this")
    s.add_argument("--options", help="rewrite options, KEY=VALUE comma-separated (k=4: Pando with 1..4 trees)")
    s.set_defaults(func=cmd_advise_tables)
    s = sub.add_parser("load-tpch", parents=[common], help="generate TPC-H and load all 8 tables as Iceberg tables")
    s.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    s.add_argument("--namespace", default="tpch", help="namespace for the tables (default tpch)")
    s.add_argument("--replace", action="store_true", help="drop and reload tables that exist")
    s.set_defaults(func=cmd_load_tpch)
    s = sub.add_parser("demo", parents=[common], help="the main job on the embedded lakehouse (see README)")
    s.add_argument("--sf", type=float, default=0.1, help="scale factor of both datasets (default 0.1)")
    s.add_argument("--k", type=int, default=3, help="Pando trees per table, at most (default 3; 1..4)")
    s.add_argument("--per-template", type=int, default=4, help="queries per template, half held out (default 4)")
    s.set_defaults(func=cmd_demo)
    s = sub.add_parser("bench", parents=[common],
                       help="Pando vs arrival order, sort and z-order on the same data: files, bytes, time")
    from .bench.harness import add_arguments

    add_arguments(s)
    s.set_defaults(func=cmd_bench)
    s = sub.add_parser("cleanup", parents=[common],
                       help="list (dry run) or delete (--apply) files that failed/crashed Pando rewrites left behind")
    s.add_argument("table")
    s.add_argument("--apply", action="store_true", help="delete the listed files (default: dry run, print only)")
    s.add_argument("--older-than-minutes", type=float, default=60.0,
                   help="keep files younger than this, a rewrite may still be running (default 60)")
    s.set_defaults(func=cmd_cleanup)
    s = sub.add_parser("soak", parents=[common],
                       help="N simulated days of appends, deletes, schema changes and maintenance, "
                            "checked against a model")
    s.add_argument("--seed", type=int, default=0, help="random seed: the same seed, the same history (default 0)")
    s.add_argument("--days", type=int, default=3, help="simulated days (default 3)")
    from .soak import PROFILES

    s.add_argument("--profile", choices=sorted(PROFILES), default="small", help="data sizes and operations per day")
    s.add_argument("--namespace", default="soak", help="namespace of the soak's tables, dropped first (default soak)")
    s.add_argument("--inject", action="append", metavar="DAY:KIND",
                   help="inject a discrepancy the checks must find (delete-behind-model, lose-a-layout-file)")
    s.set_defaults(func=cmd_soak)
    s = sub.add_parser("serve", parents=[common],
                       help="an Iceberg REST catalog over the configured catalog; its scan planning is Pando's")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    s.add_argument("--port", type=int, default=8181, help="port to listen on (default 8181)")
    s.add_argument("--token", help="bearer token every request must carry (default: $PANDO_SERVE_TOKEN; none: "
                                   "no check)")
    s.add_argument("--max-request-bytes", type=int, default=8 * 1024 * 1024,
                   help="larger request bodies are answered 413 (default 8 MiB)")
    s.add_argument("--tasks-per-page", type=int, default=1000,
                   help="plans with more file scan tasks are answered in pages (plan tasks; default 1000)")
    s.add_argument("--upstream", metavar="URI",
                   help="proxy mode: forward every request to the REST catalog at URI except scan planning, which "
                        "Pando answers (its token: $PANDO_SERVE_UPSTREAM_TOKEN, else the client's)")
    s.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"], default="info",
                   help="server log level; the access log is written at info (default info)")
    s.set_defaults(func=cmd_serve)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for name, default in (("home", None), ("config", None), ("master", None), ("json", False)):
        if not hasattr(args, name):
            setattr(args, name, default)
    try:
        return args.func(args)
    except CliError as e:
        print(f"pando: error: {e}", file=sys.stderr)
        return e.code
    except ConfigError as e:
        print(f"pando: configuration error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:
        if os.environ.get("PANDO_DEBUG"):
            raise
        code, msg = _classify(e)
        print(f"pando: error: {msg}", file=sys.stderr)
        return code


def _text(e: BaseException) -> str:
    try:
        return str(e)
    except Exception:  # py4j needs the JVM to render its errors; it may be gone
        return f"{type(e).__name__} (the Spark JVM is no longer reachable)"


def _classify(e: Exception) -> tuple[int, str]:
    name = type(e).__name__
    if name in ("ProcedureError", "RunbookError", "PandoRewriteError", "PandoWorkloadError", "PandoExprError",
                "PandoApiError", "ConfigError"):
        return EXIT_BAD_INPUT, _text(e)
    text = _text(e).strip()
    msg = text.splitlines()[0] if text else name
    if name in ("ParseException", "AnalysisException", "NoSuchTableError", "NoSuchNamespaceError"):
        return EXIT_BAD_INPUT, f"{name}: {msg}"
    if name == "SparkSqlError":
        kind = getattr(e, "kind", "")
        return (EXIT_BAD_INPUT if kind in ("ParseException", "AnalysisException") else EXIT_FAILED), msg
    if name == "SparkSetupError":
        return EXIT_BAD_INPUT, msg
    return EXIT_FAILED, f"{name}: {msg}"


if __name__ == "__main__":
    sys.exit(main())
