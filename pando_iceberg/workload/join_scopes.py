"""Outer-join scopes: which table occurrences each conjunct of a SELECT may constrain, by SQL's
null-supplying rules over its join tree (a predicate evaluated where a table's rows may be NULL
filters nothing of that table).
"""

from __future__ import annotations

from sqlglot import exp

from pando_iceberg.expr.filters import split_conjuncts  # one definition of "split an AND"

from .qualify import JOIN_GROUP


def join_scopes(select: exp.Select) -> tuple[list[tuple[exp.Expression, frozenset[str]]], frozenset[str],
                                              frozenset[str], list[tuple[exp.Expression, str]]]:
    """Which table occurrences (aliases) each conjunct of a SELECT may constrain, by SQL's
    null-supplying rules over its join tree.

    The FROM clause is a join tree: sqlglot's join list read left-deep, a parenthesised join as
    the right input it is (:data:`JOIN_GROUP`). An outer join makes nullable every alias of its
    null-supplying input(s) (LEFT: the right one, RIGHT: the left one, FULL: both). A conjunct
    over alias T is a sound filter of T (T's rows failing it can be skipped) only if every row it
    is evaluated on holds a real row of T:

    - a WHERE conjunct is evaluated on the whole tree, an INNER or CROSS join's ON conjunct on
      that join's result: it may constrain the aliases of that node that no outer join below
      it makes nullable;
    - a LEFT JOIN's ON conjunct that references only its right input filters that input
      (``l LEFT JOIN r ON p(r) AND q`` reads ``r`` as ``(SELECT * FROM r WHERE p)``): it may
      constrain the aliases of the right input that are not nullable within it; RIGHT JOIN
      the same with the left input; a conjunct that references the preserved side, or any
      conjunct of a FULL JOIN's ON, constrains nothing.

    A comma join is read as a CROSS JOIN in the left-deep order (sqlglot does not tell them
    apart; Spark groups ``a, b RIGHT JOIN c`` as ``a, (b RIGHT JOIN c)``): that can only make
    more aliases nullable, never fewer. SEMI and ANTI joins keep the left input (their right one
    is constrained by nothing) and are reported as not modeled. USING and NATURAL joins arrive
    as ON (sqlglot's qualify names a USING column by its leftmost table, which is Spark's column
    wherever that table is not nullable, the only place it is used).

    Returns the conjuncts with the aliases each may constrain, the aliases nullable at the top
    (WHERE), the aliases under some outer join (no JoinFilter is made for or into them), and
    what is not modeled (node, why)."""
    out: list[tuple[exp.Expression, frozenset[str]]] = []
    unmodeled: list[tuple[exp.Expression, str]] = []
    under_outer: set[str] = set()
    joins = select.args.get("joins") or []
    Node = tuple[frozenset[str], frozenset[str]]  # (aliases, those nullable)

    def leaf(node: exp.Expression) -> Node:
        return frozenset({node.alias_or_name}), frozenset()

    def on_conjuncts(join: exp.Join) -> list[exp.Expression]:
        on = join.args.get("on")
        return split_conjuncts(on) if on is not None else []

    def within(c: exp.Expression, aliases: frozenset[str]) -> bool:
        return not has_subquery(c) and {col.table for col in c.find_all(exp.Column)} <= aliases

    def combine(left: Node, join: exp.Join, right: Node) -> Node:
        (la, ln), (ra, rn) = left, right
        side, kind = (join.side or "").upper(), (join.kind or "").upper()
        if kind in ("SEMI", "ANTI"):
            unmodeled.append((join, f"{kind} join is not modeled"))
            return left  # the left input's rows, none of the right's columns
        if kind not in ("", "INNER", "CROSS", "OUTER") or (kind == "OUTER" and not side):
            unmodeled.append((join, f"{kind} join is not modeled"))
            side = "FULL"  # read as one that constrains nothing
        if side in ("LEFT", "RIGHT", "FULL"):
            under_outer.update(la | ra)
            if side != "FULL":  # the ON filters the null-supplying input before it is joined
                kept, kept_nullable = (ra, rn) if side == "LEFT" else (la, ln)
                out.extend((c, kept - kept_nullable) for c in on_conjuncts(join) if within(c, kept))
            nullable = ln | ra if side == "LEFT" else la | rn if side == "RIGHT" else la | ra
            return la | ra, nullable
        nullable = ln | rn
        out.extend((c, (la | ra) - nullable) for c in on_conjuncts(join))
        return la | ra, nullable

    def fold(left: Node, i: int, stop: int) -> Node:
        while i < stop:
            join = joins[i]
            group = join.meta.get(JOIN_GROUP, 0) if join._meta else 0
            right = fold(leaf(join.this), i + 1, min(stop, i + 1 + group))
            left, i = combine(left, join, right), i + 1 + group
        return left

    frm = select.args.get("from_")
    aliases, nullable = fold(leaf(frm.this), 0, len(joins)) if frm is not None else (frozenset(), frozenset())
    where = select.args.get("where")
    if where is not None:
        out.extend((c, aliases - nullable) for c in split_conjuncts(where.this))
    return out, nullable, frozenset(under_outer), unmodeled


def has_subquery(node: exp.Expression) -> bool:
    """Does ``node`` hold a subquery (scalar, IN, EXISTS)?"""
    return any(isinstance(n, (exp.Subquery, exp.Select, exp.Exists)) for n in node.walk())


__all__ = ["has_subquery", "join_scopes"]
