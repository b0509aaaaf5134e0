"""Which query shapes LIMIT and top-k pruning may touch (workload/limits.py): only a LIMIT (with
an ORDER BY whose first item is a column of the table, or none) straight over the filtered scan
of one table whose select list reads columns and constants."""

from __future__ import annotations

import pytest
import sqlglot

from pando_iceberg.planner.limit import Ordering
from pando_iceberg.workload.limits import limit_shape


@pytest.mark.parametrize("sql, rows", [
    ("SELECT a, b AS c, * FROM db.t x WHERE x.a > 1 LIMIT 10 OFFSET 5", (15, None)),
    ("SELECT t.* FROM t LIMIT 0", (0, None)),
    ("SELECT a, 1, NULL, TRUE FROM t WHERE a IS NULL OR b < 'x' LIMIT 3", (3, None)),
    ("SELECT a FROM t ORDER BY a LIMIT 3", (3, Ordering("a", False, True))),
    ("SELECT a FROM t ORDER BY A DESC LIMIT 3", (3, Ordering("a", True, False))),
    ("SELECT a FROM db.t x ORDER BY x.a DESC NULLS FIRST, b + 1 LIMIT 3 OFFSET 2", (5, Ordering("a", True, True))),
    ("SELECT b AS a FROM t ORDER BY a NULLS LAST LIMIT 3", (3, Ordering("b", False, False))),
    ("SELECT b + 1 AS a FROM t ORDER BY a LIMIT 3", None),  # an alias of an expression
    ("SELECT a FROM t ORDER BY s.f LIMIT 3", None),  # maybe a struct's field
    ("SELECT a FROM t ORDER BY 1 LIMIT 3", None),
    ("SELECT a FROM t ORDER BY a + 1 LIMIT 3", None),
    ("SELECT a FROM t ORDER BY a, count(*) LIMIT 3", None),
    ("SELECT a FROM t", None),
    ("SELECT a FROM t LIMIT 1 + 1", None),
    ("SELECT a FROM t LIMIT -1", None),
    ("SELECT a FROM t LIMIT 2.5", None),
    ("SELECT a FROM t LIMIT ALL", None),
    ("SELECT explode(a) FROM t LIMIT 3", None),
    ("SELECT a FROM t LATERAL VIEW explode(b) v AS y LIMIT 3", None),
    ("SELECT /*+ REPARTITION(3) */ a FROM t LIMIT 3", None),
    ("SELECT a FROM t TABLESAMPLE (10 PERCENT) LIMIT 3", None),
    ("SELECT a FROM t VERSION AS OF 1 LIMIT 2", None),
    ("SELECT DISTINCT a FROM t LIMIT 3", None),
    ("SELECT a FROM t CLUSTER BY a LIMIT 3", None),
    ("SELECT count(*) FROM t LIMIT 3", None),
    ("SELECT a FROM t GROUP BY a LIMIT 3", None),
    ("SELECT a FROM t WHERE a > 1 QUALIFY row_number() OVER (ORDER BY a) = 1 LIMIT 3", None),
    ("SELECT a FROM t, u LIMIT 3", None),
    ("SELECT a FROM t JOIN u ON t.a = u.a LIMIT 3", None),
    ("SELECT a FROM (SELECT a FROM t) LIMIT 3", None),
    ("WITH c AS (SELECT a FROM t) SELECT a FROM c LIMIT 3", None),
    ("SELECT a FROM t WHERE a IN (SELECT b FROM u) LIMIT 2", None),
    ("SELECT a FROM t WHERE EXISTS (SELECT 1 FROM u) LIMIT 2", None),
    ("SELECT a FROM t UNION ALL SELECT a FROM u LIMIT 3", None),
    ("SELECT -a FROM t LIMIT 2", None),
    ("SELECT CAST(a AS INT) FROM t LIMIT 2", None),
    ("SELECT a, (SELECT max(b) FROM u) FROM t LIMIT 2", None),
])
def test_limit_shape(sql, rows):
    assert limit_shape(sqlglot.parse_one(sql, dialect="spark")) == rows


def test_the_taxi_top_k_templates_are_pruned_shapes():
    import random

    from pando_iceberg.bench.workloads import TAXI_TOP_K, taxi_query

    for t in TAXI_TOP_K:
        shape = limit_shape(sqlglot.parse_one(taxi_query(t, random.Random(t)), dialect="spark"))
        assert shape is not None and shape[1] is not None, t


def test_the_tpch_limit_templates_are_pruned_shapes():
    """TPC-H's LIMIT templates: 23 and 24 with no order (LIMIT pruning), 25 and 26 ordered (top-k)."""
    import random

    from pando_iceberg.bench.workloads import TPCH_LIMIT, tpch_limit_query

    for t in TPCH_LIMIT:
        shape = limit_shape(sqlglot.parse_one(tpch_limit_query(t, random.Random(t)), dialect="spark"))
        assert shape is not None, t
        assert (shape[1] is not None) == (t in (25, 26)), (t, shape)
