"""Name resolution of a workload statement (sqlglot's ``qualify``): each base table renamed to a
flat name under its alias, every column qualified by the source it comes from, parenthesised
joins flattened into their SELECT's join list (:data:`JOIN_GROUP` keeps their tree), once per
query shape (``planner.caches.SHAPES``).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from pando_iceberg.planner.caches import SHAPES

from .model import PandoWorkloadError, resolve_table


def _schema_key(qualify_schema: dict[str, Any]) -> tuple:
    """A hashable form of a ``{table: {column: SQL type}}`` mapping (the columns in their order:
    ``*`` expands in it)."""
    return tuple(sorted((t, tuple(cols.items())) for t, cols in qualify_schema.items()))


@functools.lru_cache(maxsize=64)
def _mapping_schema(key: tuple, dialect: str) -> MappingSchema:
    """sqlglot's schema for ``qualify``, built once per set of table schemas: building it
    normalizes every table's every column name (~2 ms per query for TPC-H's eight tables, issue
    16); qualify only reads it (its caches hold normalized names and tables)."""
    return MappingSchema({t: dict(cols) for t, cols in key}, dialect=dialect)


@functools.lru_cache(maxsize=256)
def _sql_columns(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
    """(lower-case name, SQL type) of each column, in order, once per schema."""
    return tuple((f.name.lower(), _arrow_to_sql_type(f.type)) for f in schema)


def _arrow_to_sql_type(t: pa.DataType) -> str:
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_date(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    return "STRING"


# Literals that qualify reads as positions or names, not values: they stay in a template's shape.
_NOT_VALUES = (exp.Group, exp.Ordered, exp.Distinct, exp.Limit, exp.Offset, exp.Fetch, exp.DataTypeParam)
_HOLE = "pando_value_"


def _value_literals(stmt: exp.Expr) -> list[exp.Literal]:
    """The literals of ``stmt`` that stand only for values (not ``GROUP BY 1``, a LIMIT, a type's
    size or a pivot's column names); none when the statement has placeholders of its own."""
    if stmt.find(exp.Placeholder, exp.Pivot) is not None:
        return []
    return [n for n in stmt.find_all(exp.Literal) if not isinstance(n.parent, _NOT_VALUES)]


def qualified(stmt: exp.Expr, schemas: dict[str, pa.Schema], qualify_schema: dict[str, Any], dialect: str,
               number: int, shape_only: bool = False) -> exp.Expression:
    """``stmt`` copied, each base table renamed to its flat name (:func:`_flat_name`) under its
    alias, every column qualified by the source it comes from (sqlglot's ``qualify``).

    Qualified once per template: qualification does not look at a literal's value, so the
    statement with its value literals as placeholders (its shape) is qualified and kept (the
    256 most recent shapes per process), and a query of a known shape is a copy of it
    with its own literals put back (tomorrow's queries are today's templates with other
    literals; qualification was ~2 ms of a TPC-H join query's planning, twice with a row filter)."""
    literals = _value_literals(stmt)
    holes = [exp.Placeholder(this=f"{_HOLE}{i}") for i in range(len(literals))]
    for lit, hole in zip(literals, holes):
        lit.replace(hole)
    try:
        schema_key = _schema_key(qualify_schema)
        key = (hash(stmt), len(literals), schema_key, dialect)  # sqlglot's structural hash: identifiers exact
        shape = SHAPES.get(key)
        if shape is None:
            shape = _without_positions(_qualify_shape(stmt.copy(), schemas, schema_key, dialect, number))
            SHAPES.put(key, shape)
    finally:
        for lit, hole in zip(literals, holes):
            hole.replace(lit)
    if shape_only:
        return shape
    tree = shape.copy()
    if literals:
        for hole in list(tree.find_all(exp.Placeholder)):
            lit = literals[int(hole.name[len(_HOLE):])]
            hole.replace(exp.Literal(this=lit.this, is_string=lit.is_string))  # a copy without its position
    return tree


_POSITION = ("line", "col", "start", "end")


def _without_positions(tree: exp.Expression) -> exp.Expression:
    """``tree`` with the parser's source positions dropped from its nodes' meta, in place: a
    copy of a cached shape then deep-copies no per-node dict (they were ~70 % of the
    time of copying a qualified TPC-H query). Positions point into one query's text and mean
    nothing in another query of the shape; other meta (sqlglot's own marks) is kept."""
    for node in tree.walk():
        meta = node._meta  # sqlglot's slot; ``node.meta`` would create an empty dict
        if meta:
            for k in _POSITION:
                meta.pop(k, None)
            if not meta:
                node._meta = None
    return tree


def _qualify_shape(tree: exp.Expr, schemas: dict[str, pa.Schema], schema_key: tuple, dialect: str,
                   number: int) -> exp.Expression:
    """:func:`qualified`'s work on a tree of its own (renamed and qualified in place)."""
    _flatten_join_groups(tree)  # before the renaming: a table's replacement carries no joins
    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for t in list(tree.find_all(exp.Table)):
        name = ".".join(p.name for p in t.parts)
        if name.lower() in cte_names and not t.args.get("db"):
            continue
        try:
            key = resolve_table(name, schemas)
        except KeyError:
            raise PandoWorkloadError(f"statement {number}: unknown table {name!r}; known tables: "
                                     f"{', '.join(schemas)}") from None
        alias = t.alias or t.name
        t.replace(exp.Table(this=exp.to_identifier(_flat_name(key)),
                            alias=exp.TableAlias(this=exp.to_identifier(alias))))
    try:
        return as_expression(qualify(tree, schema=_mapping_schema(schema_key, dialect),
                                   dialect=dialect, validate_qualify_columns=True, identify=False))
    except sqlglot.errors.SqlglotError as e:
        raise PandoWorkloadError(f"statement {number} cannot be resolved: {e}") from None


# Join meta: how many of the joins that follow this one belong to its right input (a
# parenthesised join, ``d LEFT JOIN (s JOIN f ON ..) ON ..``), set by _flatten_join_groups.
JOIN_GROUP = "pando_join_group"


def _flatten_join_groups(tree: exp.Expr) -> None:
    """Every parenthesised join of ``tree`` (``(s JOIN f ON ..)``, sqlglot: a Subquery or Table
    carrying ``joins``) moved, in place, into its SELECT's join list, so that qualification sees
    every table of the scope; the join that held the group gets :data:`JOIN_GROUP`, the number of
    joins after it that make up its right input, from which :func:`join_scopes` rebuilds the tree.
    A column resolves to the same table as in the nested form (or is ambiguous, an error): the
    flat scope has the same tables and more. An aliased group (``(..) AS y``) is left as it is."""
    for select in list(tree.find_all(exp.Select)):
        joins = select.args.get("joins") or []
        frm = select.args.get("from_")
        first: list[exp.Join] = []
        if frm is not None and isinstance(frm.this, (exp.Table, exp.Subquery)):
            leaf, first = _expand_group(frm.this)
            if leaf is not frm.this:
                frm.set("this", leaf)
        flat = first + _flatten_joins(joins)
        if len(flat) != len(joins) or first:
            select.set("joins", flat)


def _flatten_joins(joins: list[exp.Join]) -> list[exp.Join]:
    out: list[exp.Join] = []
    for join in joins:
        leaf, group = _expand_group(join.this)
        if group or leaf is not join.this:
            join.set("this", leaf)
        if group:
            join.meta[JOIN_GROUP] = len(group)
        out += [join] + group
    return out


def _expand_group(node: exp.Expression) -> tuple[exp.Expression, list[exp.Join]]:
    """A relation's first table and the joins of its group after it (flattened, recursively);
    ``(node, [])`` for a table or a derived table."""
    own = node.args.get("joins") or []
    if own:
        node.set("joins", None)
    leaf, first = node, list[exp.Join]()
    if isinstance(node, exp.Subquery) and not node.alias and isinstance(node.this, (exp.Table, exp.Subquery)):
        leaf, first = _expand_group(node.this)
    return leaf, first + _flatten_joins(own)


def qualify_names(schemas: dict[str, pa.Schema]) -> tuple[dict[str, str], dict[str, object]]:
    """The flat name of each table of ``schemas`` → its key, and the ``{flat name: {column: SQL
    type}}`` schema that ``qualify`` resolves columns with."""
    flat_to_key = {_flat_name(k): k for k in schemas}
    qualify_schema: dict[str, object] = {_flat_name(k): dict(_sql_columns(s)) for k, s in schemas.items()}
    return flat_to_key, qualify_schema


def qualify_query(stmt: exp.Expression, schemas: dict[str, pa.Schema], dialect: str = "spark",
                  shape_only: bool = False) -> tuple[exp.Expression, dict[str, str]]:
    """``stmt`` as the parser reads it before merging derived tables: copied, every column
    qualified by its source's alias, each base table renamed to a flat name; with the map from
    those names back to the keys of ``schemas``. Subqueries and derived tables keep their own
    scopes, as in Spark's plan. ``shape_only``: for a caller that reads the tree's structure and
    never its values or mutates it: the cached qualified shape itself, its value literals
    placeholders (no copy)."""
    flat_to_key, qualify_schema = qualify_names(schemas)
    return qualified(stmt, schemas, qualify_schema, dialect, 1, shape_only), flat_to_key


_FLAT = re.compile(r"[^a-z0-9_]")


def _flat_name(key: str) -> str:
    return "pando_t_" + _FLAT.sub("_", key.lower())


def as_expression(node: exp.Expr) -> exp.Expression:
    """``node`` as an ``exp.Expression``, the type ``pando_iceberg.expr`` takes: sqlglot types
    ``and_``/``or_`` by the trait they return (``Condition``), but every node it builds is an
    ``Expression``."""
    assert isinstance(node, exp.Expression), type(node)
    return node


__all__ = ["JOIN_GROUP", "as_expression", "qualified", "qualify_names", "qualify_query"]
