"""The aggregates attribute-range cuts are chosen from (``workload/attribute_ranges.py``),
computed in Spark: per dimension, one job for whether its keys follow each attribute, and one job
for the fact sample's rows per distinct value of every attribute, of which only the values a boundary
may fall on reach the driver (``attribute_ranges.near_quantiles``: a few per quantile, or every
value when there are at most as many as groups). The sample's distinct foreign keys go the other
way; the dimension's rows never reach the driver.

The results are those of ``attribute_ranges.arrow_weights`` on the same dimension:

* ``keys_follow``: in key order (NULL keys last), a row changes the attribute from the row
  before when either value is NULL or NaN or they differ (Arrow's ``not_equal``, NULL counted as
  a change); the keys follow when there are at most twice as many changes as distinct non-NULL
  values, or fewer than two rows.
* ``fact_weights`` and ``candidates``: the sample's foreign keys counted per key (NULL keys
  dropped), joined to the dimension's key, summed per attribute value other than NULL and NaN;
  the values in Spark's order, each with the rows before it.

A dimension of at most ``DRIVER_DIMENSION_ROWS`` rows is read to the driver instead, its key and
the attributes in one Spark job, and aggregated there by ``attribute_ranges.arrow_weights``'s
functions: the same results (tested against the Spark jobs), without their shuffles and Python
workers (4–6 jobs per dimension). The Spark jobs still run when the key has NULLs or duplicates,
when the fact's and the dimension's keys are not both integers or both strings, or when a
floating attribute holds -0.0 (Spark groups it with 0.0; Arrow apart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..expr import semantics
from ..workload.attribute_ranges import AttributeWeights, DimensionWeights, candidates, fact_weights, keys_follow
from .session import session_conf

_KEY, _ROWS, _RANK = "__pando_fact_key", "__pando_fact_rows", "__pando_rank"

# A dimension of at most this many rows is aggregated on the driver: its key and the attributes
# filtered on (TPC-H SF 1 orders, 1.5 M rows: one read instead of 7 jobs); the key-set prefetch
# (``rewrite_common.SparkKeyProvider.prefetch``) reads every dimension's key to the driver already.
DRIVER_DIMENSION_ROWS = 4_000_000


def spark_weights(spark, collect: Callable[..., pa.Table], rows: Callable[[str], int] | None = None,
                  driver_rows: int = DRIVER_DIMENSION_ROWS,
                  keys_read: Callable[[str, str, pa.Array], None] | None = None) -> DimensionWeights:
    """``DimensionWeights`` of the session's tables (module docstring); ``collect``: a small
    DataFrame to Arrow (``rewrite_common.collect_arrow``); ``rows``: a table's row count
    (``rewrite_common.row_count``; None: every dimension aggregated by Spark); a dimension of at
    most ``driver_rows`` rows is aggregated on the driver; ``keys_read(dimension, pk, keys)``
    is then handed its whole key column (e.g. ``SparkKeyProvider.keys_read``: whether it is unique)."""
    follows: dict[tuple[str, str, str], bool] = {}  # a dimension joined by several foreign keys: once
    read: dict[tuple[str, ...], pa.Table | None] = {}  # (dimension, pk, attributes) read to the driver

    def weights(dim: str, pk: str, attrs: Sequence[str], fact_keys: pa.Array,
                groups: int) -> dict[str, AttributeWeights]:
        with session_conf(spark, semantics.DEFAULT.spark_conf()):  # as the cuts' key sets are read
            df = spark.table(dim)
            names = (dim, pk, *dict.fromkeys(attrs))
            if names not in read:
                small = rows is not None and rows(dim) <= driver_rows
                whole = collect(df.select(*[_quoted(c) for c in names[1:]])) if small else None
                if whole is not None and keys_read is not None:
                    keys_read(dim, pk, whole.column(pk))
                read[names] = whole
            if read[names] is not None:
                got = _driver_weights(read[names], pk, attrs, fact_keys, groups)
                if got is not None:
                    return got
            todo = [a for a in attrs if (dim, pk, a) not in follows]
            if todo:
                follows.update({(dim, pk, a): f for a, f in _keys_follow(df, pk, todo, collect).items()})
            per_key = _fact_key_counts(spark, fact_keys)
            joined = per_key.join(df, per_key[_KEY] == df[_quoted(pk)])
            values = _value_weights(joined, list(dict.fromkeys(attrs)), df, groups, collect)
            return {a: AttributeWeights(follows[(dim, pk, a)], *values[a]) for a in attrs}

    return weights


def _driver_weights(dim: pa.Table, pk: str, attrs: Sequence[str], fact_keys: pa.Array,
                    groups: int) -> dict[str, AttributeWeights] | None:
    """The weights of ``dim`` (the dimension's key and attributes, read whole) on the driver, as
    ``attribute_ranges.arrow_weights`` computes them; None where they could differ from the Spark
    jobs' (module docstring)."""
    keys = dim.column(pk).combine_chunks()
    if pa.types.is_dictionary(fact_keys.type):
        fact_keys = fact_keys.cast(fact_keys.type.value_type)
    both = (pa.types.is_integer(keys.type) and pa.types.is_integer(fact_keys.type)) or (
        pa.types.is_string(keys.type) and pa.types.is_string(fact_keys.type))
    if not both or keys.null_count or pc.count_distinct(keys).as_py() != len(keys):
        return None
    fact_keys = fact_keys.drop_null()
    if fact_keys.type != keys.type:
        try:
            fact_keys = pc.cast(fact_keys, keys.type)  # refused when a key does not fit: Spark's jobs then
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    out = {}
    for a in dict.fromkeys(attrs):
        column = dim.column(a).combine_chunks()
        if pa.types.is_floating(column.type):
            v = column.to_numpy(zero_copy_only=False)
            if ((v == 0) & np.signbit(v)).any():
                return None
        out[a] = candidates(keys_follow(keys, column), *fact_weights(fact_keys, keys, column), groups)
    return out


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_float(df, name: str) -> bool:
    from pyspark.sql.types import DoubleType, FloatType

    return isinstance(df.schema[name].dataType, (DoubleType, FloatType))


def _keys_follow(df, pk: str, attrs: Sequence[str], collect: Callable[..., pa.Table]) -> dict[str, bool]:
    """``attribute_ranges.keys_follow`` of every attribute, in parallel: the dimension's (key,
    attributes) range-partitioned by the key (NULL keys last), each partition sorted and counted
    on an executor in Arrow (rows, changes inside it, distinct values, its first and last
    values); the driver adds the changes between consecutive partitions. The distinct values of
    the whole dimension are counted (one more job) only for an attribute that the partitions'
    counts leave undecided: changes above twice their sum decide "no", at most twice the largest
    decide "yes"."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    if not attrs:
        return {}
    names = [pk, *attrs]
    sel = df.select(*[F.col(_quoted(c)).alias(f"a{i}") for i, c in enumerate(names)])
    ranged = sel.repartitionByRange(F.col("a0").asc_nulls_last())  # the session's shuffle partitions
    fields = [StructField("part", LongType()), StructField("n", LongType())]
    for i in range(1, len(names)):
        kind = sel.schema[f"a{i}"].dataType
        fields += [StructField(f"c{i}", LongType()), StructField(f"d{i}", LongType()),
                   StructField(f"f{i}", kind), StructField(f"l{i}", kind)]
    stats = ranged.mapInArrow(_partition_changes(len(names) - 1), StructType(fields))
    got = collect(stats)
    got = got.filter(pc.greater(got.column("n"), 0)).sort_by("part")
    n = int(pc.sum(got.column("n")).as_py() or 0)
    out: dict[str, bool] = {}
    undecided: dict[str, int] = {}
    for i, a in enumerate(attrs, start=1):
        changes = int(pc.sum(got.column(f"c{i}")).as_py() or 0)
        if got.num_rows > 1:  # between consecutive partitions: Arrow's not_equal, NULL a change
            last, first = got.column(f"l{i}").combine_chunks()[:-1], got.column(f"f{i}").combine_chunks()[1:]
            changes += int(pc.sum(pc.fill_null(pc.not_equal(first, last), True)).as_py() or 0)
        local = got.column(f"d{i}").to_numpy()
        # the partitions' distinct values bound the dimension's (one more each: NaN, -0.0 counted apart)
        low, high = (int(local.max()) - 1 if len(local) else 0), int(local.sum()) + len(local)
        if n < 2 or changes <= 2 * low:
            out[a] = True
        elif changes > 2 * high:
            out[a] = False
        else:
            undecided[a] = changes
    if undecided:
        exact = df.agg(*[F.countDistinct(F.col(_quoted(a))).alias(f"d{i}") for i, a in enumerate(undecided)]).first()
        out.update({a: c <= 2 * exact[f"d{i}"] for i, (a, c) in enumerate(undecided.items())})
    return out


def _partition_changes(attrs: int):
    """mapInArrow: one partition's (key, attributes) → one row: its id, rows, and per attribute
    the changes in key order, distinct values, first and last value."""
    def run(batches):
        from pyspark import TaskContext

        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        ctx = TaskContext.get()
        order = pc.sort_indices(table.column(0))  # NULL keys last, as Spark ranged them
        row: dict = {"part": [ctx.partitionId() if ctx is not None else 0], "n": [table.num_rows]}
        for i in range(1, attrs + 1):
            v = table.column(i).take(order).combine_chunks()
            changes = pc.sum(pc.fill_null(pc.not_equal(v[1:], v[:-1]), True)).as_py() or 0
            row[f"c{i}"], row[f"d{i}"] = [changes], [pc.count_distinct(v).as_py()]
            row[f"f{i}"], row[f"l{i}"] = v[:1], v[-1:]
        yield pa.RecordBatch.from_pydict({k: pa.concat_arrays(x) if isinstance(x[0], pa.Array) else x
                                          for k, x in row.items()})
    return run


def _fact_key_counts(spark, fact_keys: pa.Array):
    """The sample's foreign keys as a DataFrame of (key, rows), one row per distinct key."""
    if pa.types.is_dictionary(fact_keys.type):
        fact_keys = fact_keys.cast(fact_keys.type.value_type)
    counts = pc.value_counts(fact_keys.drop_null())
    table = pa.table({_KEY: counts.field("values"), _ROWS: counts.field("counts")})
    return spark.createDataFrame(table.to_pandas(), schema=_spark_schema(table))


def _spark_schema(table: pa.Table):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(table.schema)


def _value_weights(joined, attrs: Sequence[str], df, groups: int, collect: Callable[..., pa.Table]) -> dict:
    """Each attribute's ``AttributeWeights`` but ``follows``: its values (no NULL or NaN) with the
    sample's rows of each, in Spark's order, each with the rows before it; only the rows
    ``attribute_ranges.near_quantiles`` keeps reach the driver. One job for all the attributes:
    each joined row once per attribute (``explode``: the attribute's number ``a`` and its value in
    its own column ``v<a>``, the others NULL), grouped per (attribute, value), and one window per
    attribute over its distinct values, on the executors."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not attrs:
        return {}
    vals = [f"v{i}" for i in range(len(attrs))]
    types = [df.schema[a].dataType for a in attrs]
    entries = [F.struct(F.lit(i).alias("a"), *[(F.col(_quoted(a)) if j == i else F.lit(None).cast(types[j])).alias(v)
                                                for j, (a, v) in enumerate(zip(attrs, vals))])
               for i, a in enumerate(attrs)]
    valid = F.lit(False)
    for i, a in enumerate(attrs):
        value = F.col(vals[i])
        ok = value.isNotNull() & (~F.isnan(value) if _is_float(df, a) else F.lit(True))
        valid = valid | ((F.col("a") == i) & ok)
    each = joined.select(F.col(_ROWS), F.explode(F.array(*entries)).alias("e")).select(_ROWS, "e.*")
    per_value = each.where(valid).groupBy("a", *vals).agg(F.sum(_ROWS).alias("w"))
    order = Window.partitionBy("a").orderBy(*[F.col(v).asc() for v in vals])  # one non-NULL value per row
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = Window.partitionBy("a")
    ranked = per_value.select("a", *vals, (F.sum("w").over(running) - F.col("w")).alias("before"),
                              (F.row_number().over(order) - 1).alias("idx"),
                              F.count(F.lit(1)).over(whole).alias("m"), F.sum("w").over(whole).alias("total"))
    q = F.col("q")
    stepped = ranked.withColumn("q", F.expr(f"before * {int(groups)} div total")).withColumn(
        "stepped", F.coalesce(q != F.lag(q).over(order), F.lit(False)) | F.coalesce(q != F.lead(q).over(order),
                                                                                   F.lit(False)))
    keep = ((F.col("m") <= groups) | (F.col("total") <= 0) | F.col("stepped") | (F.col("idx") == 1)
            | (F.col("idx") == F.col("m") - 1))
    kept_all = collect(stepped.where((F.col("idx") >= 1) & keep).select("a", *vals, "before", "idx", "m", "total"))
    which = kept_all.column("a").to_numpy()
    out = {}
    for i, a in enumerate(attrs):
        kept = kept_all.filter(pa.array(which == i))
        order_ = np.argsort(kept.column("idx").to_numpy(), kind="stable")
        count = int(kept.column("m")[0].as_py()) if kept.num_rows else 0
        total = int(kept.column("total")[0].as_py()) if kept.num_rows else 0
        out[a] = (kept.column(vals[i]).combine_chunks().take(pa.array(order_)),
                  kept.column("before").to_numpy().astype(np.int64)[order_], count, total)
    return out


__all__ = ["spark_weights"]
