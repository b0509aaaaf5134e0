"""What the Spark TPC-H benchmark scripts (rewrite_tpch, living_tpch, partitioned_tpch) share:
their common options and the lakehouse + Spark session they start."""

from __future__ import annotations

import argparse
from pathlib import Path


def parser(doc: str, *, sf: float, home: str, out: str, per_template: int, sample_rate: float,
           driver_memory: str) -> argparse.ArgumentParser:
    """An argument parser with the options every script has (its own defaults)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=sf)
    ap.add_argument("--home", default=home)
    ap.add_argument("--out", default=out)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--per-template", type=int, default=per_template)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--b", type=int, default=None, help="min block rows (default 100,000 × SF)")
    ap.add_argument("--sample-rate", type=float, default=sample_rate)
    ap.add_argument("--driver-memory", default=driver_memory)
    return ap


def start(args, app_name: str):
    """(out directory, b, config, Spark session, pyiceberg catalog) for parsed ``args``."""
    from pando_iceberg.catalog import load_catalog
    from pando_iceberg.config import load_config
    from pando_iceberg.spark.session import start_spark

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    b = args.b or int(100_000 * args.sf)
    cfg = load_config(home=args.home, env={}, overrides={"spark": {"driver_memory": args.driver_memory,
                                                                    "shuffle_partitions": 8}})
    spark = start_spark(cfg, app_name=app_name)
    return out, b, cfg, spark, load_catalog(cfg)
