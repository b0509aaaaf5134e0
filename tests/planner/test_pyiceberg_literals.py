"""pyiceberg expressions with date and timestamp literals: pyiceberg keeps them as days and
microseconds, and a Pando scan reads them as the column's type (as pyiceberg's binding does).
Randomized against pyiceberg's own scan of the same table, rows compared exactly."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pytest
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    Or,
)

import pando_iceberg
from pando_iceberg.planner.pyiceberg_sql import pyiceberg_to_sql

UTC = dt.UTC
START = dt.datetime(2020, 1, 1)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    from pyiceberg.catalog.sql import SqlCatalog

    d = tmp_path_factory.mktemp("lits")
    catalog = SqlCatalog("t", uri=f"sqlite:///{d}/c.db", warehouse=f"file://{d}")
    catalog.create_namespace("n")
    schema = pa.schema([("id", pa.int64()), ("d", pa.date32()), ("ts", pa.timestamp("us")),
                        ("tz", pa.timestamp("us", tz="UTC"))])
    t = catalog.create_table("n.t", schema=schema)
    rng = random.Random(0)
    for part in range(4):  # four files, each a stretch of time: min/max pruning has something to skip
        stamps = [START + dt.timedelta(days=90 * part, seconds=rng.randrange(0, 90 * 86400)) for _ in range(50)]
        t.append(pa.table({"id": list(range(part * 50, part * 50 + 50)),
                           "d": [s.date() if i % 7 else None for i, s in enumerate(stamps)],
                           "ts": stamps, "tz": [s.replace(tzinfo=UTC) for s in stamps]}, schema=schema))
    return catalog.load_table("n.t")


def _value(rng: random.Random, column: str):
    moment = START + dt.timedelta(seconds=rng.randrange(-86400, 370 * 86400))
    if column == "d":
        return rng.choice([moment.date(), moment.date().isoformat()])
    if column == "ts":
        return rng.choice([moment, moment.isoformat()])
    return rng.choice([moment.replace(tzinfo=UTC), moment.replace(tzinfo=UTC).isoformat(),
                       moment.replace(tzinfo=dt.timezone(dt.timedelta(hours=5))).isoformat()])


def _predicate(rng: random.Random):
    column = rng.choice(["d", "ts", "tz"])
    op = rng.choice([EqualTo, NotEqualTo, LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, In, NotIn])
    if op in (In, NotIn):
        return op(column, [_value(rng, column) for _ in range(rng.randint(1, 3))])
    return op(column, _value(rng, column))


def _filter(rng: random.Random, depth: int = 0):
    if depth < 2 and rng.random() < 0.4:
        kind = rng.choice([And, Or, Not])
        if kind is Not:
            return Not(_filter(rng, depth + 1))
        return kind(_filter(rng, depth + 1), _filter(rng, depth + 1))
    return _predicate(rng)


def _ids(arrow: pa.Table) -> list[int]:
    return sorted(arrow.column("id").to_pylist())


@pytest.mark.parametrize("seed", range(60))
def test_date_and_timestamp_literals_read_what_pyiceberg_reads(table, seed):
    rng = random.Random(seed)
    f = _filter(rng)
    scan = pando_iceberg.scan(table, row_filter=f)
    assert _ids(scan.to_arrow()) == _ids(table.scan(row_filter=f).to_arrow()), f


def test_literals_render_as_the_columns_types(table):
    schema = table.schema()
    assert pyiceberg_to_sql(GreaterThan("d", dt.date(2020, 6, 1)), schema) == "`d` > CAST('2020-06-01' AS DATE)"
    assert pyiceberg_to_sql(LessThan("ts", dt.datetime(2020, 6, 1, 8, 30, 0, 5)), schema) == \
        "`ts` < CAST('2020-06-01 08:30:00.000005' AS TIMESTAMP_NTZ)"
    # a timestamptz column: the instant, with its offset written out (any session time zone reads it alike)
    assert pyiceberg_to_sql(EqualTo("tz", "2020-06-01T10:00:00+02:00"), schema) == \
        "`tz` = CAST('2020-06-01 08:00:00+00:00' AS TIMESTAMP)"
    # the filter of a scan on a file that only holds earlier times skips it
    late = pando_iceberg.scan(table, row_filter=GreaterThanOrEqual("ts", START + dt.timedelta(days=270)))
    assert late.explain().pando_files < late.explain().total_files
