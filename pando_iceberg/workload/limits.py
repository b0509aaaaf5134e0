"""Query shapes whose LIMIT may prune the scan under it (the Snowflake seed §4 and §5).

``SELECT <columns> FROM t [WHERE p] LIMIT k [OFFSET o]`` wants any ``k + o`` rows of ``t`` that
satisfy ``p``, in no order: reading only files every row of which satisfies ``p`` gives a
result Spark could have given itself (LIMIT pruning). With ``ORDER BY c [ASC|DESC] [NULLS ...]
[, ...]`` it wants the ``k + o`` first of them in c's order, and a file that cannot hold one of
them is not read (top-k pruning; ``planner/limit.py`` chooses the files). Anything that makes
the result depend on more rows keeps the plan as it is: GROUP BY, DISTINCT, HAVING, QUALIFY, a
window or aggregate, a join, a LATERAL VIEW or generator, a subquery or CTE, a set operation, a
hint, a sample, an ORDER BY whose first item is not a column of the table (an expression, a
position, an alias of an expression). The select list holds only columns, ``*`` and literals: an
expression could raise (ANSI casts and arithmetic) on a row Spark's own plan never evaluates.
"""

from __future__ import annotations

from sqlglot import exp

from ..planner.limit import Ordering

# The arguments of a Select a LIMIT-pruned query may set (every other one must be empty).
_ALLOWED_SELECT_ARGS = frozenset({"expressions", "from_", "where", "limit", "offset", "order"})
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


def _ordering(tree: exp.Select, table: exp.Table) -> Ordering | bool | None:
    """The query's order as its first ORDER BY item gives it (None: no ORDER BY; False: an
    order Pando does not read). A name the select list gives an alias is that alias (Spark
    resolves ORDER BY names against the select list first); a qualifier must name the table
    (``a.b`` may be a struct's field)."""
    order = tree.args.get("order")
    if order is None:
        return None
    items = order.expressions
    if not items or any(i.find(exp.Subquery, exp.AggFunc, exp.Window) is not None for i in items):
        return False
    first = items[0]
    column = first.this if isinstance(first, exp.Ordered) else None
    names = {table.name.lower(), table.alias_or_name.lower()}

    def own(c: exp.Expression | None) -> bool:
        return isinstance(c, exp.Column) and bool(c.name) and not c.args.get("db") and \
            (not c.table or c.table.lower() in names)

    if not isinstance(column, exp.Column) or not own(column):
        return False
    name = column.name.lower()
    for e in tree.expressions:
        if isinstance(e, exp.Alias) and e.alias.lower() == name:
            if not own(e.this):
                return False
            name = e.this.name.lower()
            break
    return Ordering(name, bool(first.args.get("desc")), bool(first.args.get("nulls_first")))


def limit_shape(tree: exp.Expression) -> tuple[int, Ordering | None] | None:
    """For a LIMIT-prunable query (module docstring): the rows it needs from its one table
    (LIMIT plus OFFSET) and its order (None: any rows); None for every other query."""
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
    order = _ordering(tree, table)
    if isinstance(order, bool):
        return None
    return limit + offset, order


__all__ = ["limit_shape"]
