"""Query shapes whose LIMIT may prune the scan under it (LIMIT pruning, the Snowflake seed §4).

``SELECT <columns> FROM t [WHERE p] LIMIT k [OFFSET o]`` wants any ``k + o`` rows of ``t`` that
satisfy ``p``, in no order: reading only files every row of which satisfies ``p`` gives a
result Spark could have given itself (``planner/limit.py`` chooses the files). Anything that
makes the result depend on which matching rows are read, or on more of them, keeps the plan as
it is: an ORDER BY, GROUP BY, DISTINCT, HAVING, QUALIFY, a window or aggregate, a join, a
LATERAL VIEW or generator, a subquery or CTE, a set operation, a hint, a sample. The select
list holds only columns, ``*`` and literals: an expression could raise (ANSI casts and
arithmetic) on a row Spark's own plan never evaluates.
"""

from __future__ import annotations

from sqlglot import exp

# The arguments of a Select a LIMIT-pruned query may set (every other one must be empty).
_ALLOWED_SELECT_ARGS = frozenset({"expressions", "from_", "where", "limit", "offset"})
# The arguments of its one table: the name and an alias.
_ALLOWED_TABLE_ARGS = frozenset({"this", "db", "catalog", "alias"})


def _count(node: exp.Expression | None) -> int | None:
    """The integer a LIMIT or OFFSET clause gives (a non-negative integer literal), else None."""
    value = node.args.get("expression") if node is not None else None
    if not isinstance(value, exp.Literal) or value.is_string:
        return None
    try:
        n = int(value.this)
    except ValueError:
        return None
    return n if n >= 0 else None


def _plain(e: exp.Expression) -> bool:
    """A select item that reads a column or states a constant, and nothing else."""
    if isinstance(e, exp.Alias):
        e = e.this
    return isinstance(e, (exp.Star, exp.Column, exp.Literal, exp.Null, exp.Boolean)) and \
        not any(isinstance(n, (exp.Subquery, exp.Func)) for n in e.walk() if n is not e)


def limit_rows(tree: exp.Expression) -> int | None:
    """The rows a LIMIT-prunable query (module docstring) needs from its one table: LIMIT plus
    OFFSET; None for every other query."""
    if not isinstance(tree, exp.Select):
        return None
    if any(v not in (None, [], False) for k, v in tree.args.items() if k not in _ALLOWED_SELECT_ARGS):
        return None
    limit = _count(tree.args.get("limit"))
    offset = _count(tree.args.get("offset")) if tree.args.get("offset") is not None else 0
    if limit is None or offset is None:
        return None
    source = tree.args.get("from_")
    table = source.this if isinstance(source, exp.From) else None
    if not isinstance(table, exp.Table) or \
            any(v not in (None, [], False) for k, v in table.args.items() if k not in _ALLOWED_TABLE_ARGS):
        return None
    if not tree.expressions or not all(_plain(e) for e in tree.expressions):
        return None
    where = tree.args.get("where")
    if where is not None and where.find(exp.Subquery, exp.Exists, exp.Select, exp.AggFunc, exp.Window) is not None:
        return None
    return limit + offset


__all__ = ["limit_rows"]
