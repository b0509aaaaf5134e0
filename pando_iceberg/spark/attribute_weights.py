"""The aggregates attribute-range cuts are chosen from (``workload/attribute_ranges.py``),
computed in Spark: per dimension, one job for whether its keys follow each attribute, and one job
per attribute for the fact sample's rows per distinct value, of which only the values a boundary
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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..expr import semantics
from ..workload.attribute_ranges import AttributeWeights, DimensionWeights
from .session import session_conf

_KEY, _ROWS, _RANK = "__pando_fact_key", "__pando_fact_rows", "__pando_rank"


def spark_weights(spark, collect: Callable[..., pa.Table]) -> DimensionWeights:
    """``DimensionWeights`` of the session's tables (module docstring); ``collect``: a small
    DataFrame to Arrow (``rewrite_common.collect_arrow``)."""
    follows: dict[tuple[str, str, str], bool] = {}  # a dimension joined by several foreign keys: once

    def weights(dim: str, pk: str, attrs: Sequence[str], fact_keys: pa.Array,
                groups: int) -> dict[str, AttributeWeights]:
        with session_conf(spark, semantics.DEFAULT.spark_conf()):  # as the cuts' key sets are read
            df = spark.table(dim)
            todo = [a for a in attrs if (dim, pk, a) not in follows]
            if todo:
                follows.update({(dim, pk, a): f for a, f in _keys_follow(df, pk, todo).items()})
            per_key = _fact_key_counts(spark, fact_keys)
            joined = per_key.join(df, per_key[_KEY] == df[_quoted(pk)])
            return {a: AttributeWeights(follows[(dim, pk, a)], *_value_weights(joined, a, df, groups, collect))
                    for a in attrs}

    return weights


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _is_float(df, name: str) -> bool:
    from pyspark.sql.types import DoubleType, FloatType

    return isinstance(df.schema[name].dataType, (DoubleType, FloatType))


def _keys_follow(df, pk: str, attrs: Sequence[str]) -> dict[str, bool]:
    """``attribute_ranges.keys_follow`` of every attribute, in one job (a window over the
    dimension in key order: one partition on an executor, nothing on the driver)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.orderBy(F.col(_quoted(pk)).asc_nulls_last())
    changes = []
    for i, a in enumerate(attrs):
        now, before = F.col(_quoted(a)), F.lag(F.col(_quoted(a))).over(order)
        change = now.isNull() | before.isNull() | (now != before)
        if _is_float(df, a):  # Arrow's not_equal: NaN differs from everything, NaN too
            change = change | F.isnan(now) | F.isnan(before)
        changes.append(change.alias(f"c{i}"))
    ranked = df.select(F.row_number().over(order).alias(_RANK),
                       *[F.col(_quoted(a)).alias(f"a{i}") for i, a in enumerate(attrs)], *changes)
    stats = ranked.agg(F.count(F.lit(1)).alias("n"),
                       *[F.sum(F.when((F.col(_RANK) > 1) & F.col(f"c{i}"), 1).otherwise(0)).alias(f"c{i}")
                         for i in range(len(attrs))],
                       *[F.countDistinct(F.col(f"a{i}")).alias(f"d{i}") for i in range(len(attrs))]).first()
    return {a: stats["n"] < 2 or (stats[f"c{i}"] or 0) <= 2 * stats[f"d{i}"] for i, a in enumerate(attrs)}


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


def _value_weights(joined, attr: str, df, groups: int, collect: Callable[..., pa.Table]) -> tuple:
    """The attribute's ``AttributeWeights`` but ``follows``: its values (no NULL or NaN) with the
    sample's rows of each, in Spark's order, each with the rows before it; only the rows
    ``attribute_ranges.near_quantiles`` keeps reach the driver (one window over the distinct
    values, on an executor)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    value = F.col(_quoted(attr))
    valid = value.isNotNull() & (~F.isnan(value) if _is_float(df, attr) else F.lit(True))
    per_value = joined.where(valid).groupBy(value.alias("v")).agg(F.sum(_ROWS).alias("w"))
    order = Window.orderBy(F.col("v").asc())
    running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = Window.partitionBy()
    ranked = per_value.select("v", (F.sum("w").over(running) - F.col("w")).alias("before"),
                              (F.row_number().over(order) - 1).alias("idx"),
                              F.count(F.lit(1)).over(whole).alias("m"), F.sum("w").over(whole).alias("total"))
    q = F.col("q")
    stepped = ranked.withColumn("q", F.expr(f"before * {int(groups)} div total")).withColumn(
        "stepped", F.coalesce(q != F.lag(q).over(order), F.lit(False)) | F.coalesce(q != F.lead(q).over(order),
                                                                                   F.lit(False)))
    keep = ((F.col("m") <= groups) | (F.col("total") <= 0) | F.col("stepped") | (F.col("idx") == 1)
            | (F.col("idx") == F.col("m") - 1))
    kept = collect(stepped.where((F.col("idx") >= 1) & keep).select("v", "before", "idx", "m", "total"))
    order_ = np.argsort(kept.column("idx").to_numpy(), kind="stable")
    count = int(kept.column("m")[0].as_py()) if kept.num_rows else 0
    total = int(kept.column("total")[0].as_py()) if kept.num_rows else 0
    return (kept.column("v").combine_chunks().take(pa.array(order_)),
            kept.column("before").to_numpy().astype(np.int64)[order_], count, total)


__all__ = ["spark_weights"]
