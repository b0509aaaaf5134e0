"""Binding: a sqlglot predicate over one table → its canonical form.

Canonical means: unqualified lower-case columns that exist in the table's Arrow schema;
literal-only subexpressions folded to one typed literal (`date '1994-01-01' + interval '1'
year` → `date '1995-01-01'`); literals typed against the column they are compared with
(Spark's coercions, e.g. a double literal against a decimal column compares
`CAST(col AS DOUBLE)`); the term on the left of a comparison; IN lists sorted and
deduplicated; column-vs-column comparisons with their operands in a fixed order. Equal
predicates then get equal `.sql()` text, which is what cut keys and the structural
reasoning in `sides.py` rely on.
"""

from __future__ import annotations

import functools
import logging
import re
import typing
from typing import Any

import numpy as np
import pyarrow as pa
import sqlglot
from sqlglot import exp

from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.evaluate import Context, Vec, arrow_kind, eval_node
from pando_iceberg.expr.semantics import current
from pando_iceberg.expr.values import (
    NULL,
    NUMERIC_KINDS,
    TypedValue,
    cast_value,
    float32,
    fold,
    parse_date,
    parse_int,
    parse_timestamp,
    render,
)
from pando_iceberg.expr.visitor import DATE_PARTS, PredicateVisitor, kind_of

DIALECT = "spark"


@functools.lru_cache(maxsize=4096)
def column_identifier(name: str) -> exp.Identifier:
    """``name`` as a column identifier, quoted when written bare it would not read back as that
    column: a space or a quote (sqlglot quotes those itself), a keyword (``from``), a function
    called without parentheses (``current_date``), as ``parse_predicate`` reads it. A filter's SQL
    is its cut's key in the sidecar and is parsed again from there; names that read back bare stay
    bare, as they always were."""
    ident = exp.to_identifier(name)
    if ident.quoted:
        return ident
    log = logging.getLogger("sqlglot")  # `comment = 0` is read as a command, with a warning
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        node = parse_predicate(f"{name} = 0")
    except PandoExprError:
        node = None
    finally:
        log.setLevel(level)
    left = node.this if isinstance(node, exp.EQ) else None
    bare = isinstance(left, exp.Column) and not left.table and left.this.name == name
    return ident if bare else exp.to_identifier(name, quoted=True)

_FLIP: dict[type[exp.Expression], type[exp.Expression]] = {
    exp.LT: exp.GT, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.GTE: exp.LTE, exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}

_ACCEPTED = {
    "int": "integer or decimal numbers (a double literal compares as double), integer strings",
    "decimal": "integer or decimal numbers (a double literal compares as double), numeric strings",
    "float": "numbers, 'NaN', 'Infinity'",
    "string": "string literals",
    "date": "date 'yyyy-mm-dd' literals or 'yyyy-mm-dd' strings",
    "timestamp": "timestamp '...' literals, date literals, timestamp strings",
    "timestamp_ntz": "timestamp_ntz '...' literals, date literals, timestamp strings",
    "bool": "true / false",
}

_ACCEPTED_TEXT = {
    "date": "'yyyy-mm-dd' (also 'yyyy' or 'yyyy-mm') with a valid month and day",
    "timestamp": "'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][zone]', zone Z, UTC or +hh:mm (no zone: UTC)",
    "timestamp_ntz": "'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]]'",
}


@functools.lru_cache(maxsize=256)
def _empty_context(schema: pa.Schema) -> Context:
    """The zero-row table of ``schema`` that type checks evaluate on, made once per schema
    (``empty_table`` cost ~0.2 ms per bind, several binds per query). Shared: its
    columns have no rows, so nothing evaluated on it can change what it holds."""
    return Context(schema.empty_table())


class _Binder(PredicateVisitor[None, exp.Expression]):
    def __init__(self, schema: pa.Schema, table: str | None):
        self.schema = schema
        self.table = table
        self.by_lower = {name.lower(): name for name in schema.names}
        self.empty = _empty_context(schema)
        # kinds of the nodes this binder built, by id (the node is kept, so its id is not reused):
        # an AND/OR nest is type-checked once per node, not once per level
        self._kinds: dict[int, tuple[exp.Expression, Vec]] = {}

    def where(self) -> str:
        return f"table {self.table!r}: " if self.table else ""

    def fail(self, msg: str) -> PandoExprError:
        return PandoExprError(self.where() + msg)

    def kind_of(self, node: exp.Expression) -> str:
        return self.vec_of(node).kind

    def vec_of(self, node: exp.Expression) -> Vec:
        """The node evaluated on no rows: its kind and width."""
        hit = self._kinds.get(id(node))
        if hit is not None:
            return hit[1]
        try:
            vec = eval_node(node, self.empty)
        except PandoExprError as e:
            msg, text = str(e), node.sql(DIALECT)
            raise self.fail(msg if text in msg else f"{msg} in {text}") from None
        self._kinds[id(node)] = (node, vec)
        return vec

    def connective_kind(self, node: exp.Expression) -> str:
        """The kind of an AND, OR or parenthesis over bound operands, from the operands' kinds
        (the evaluator's rules: AND/OR operands are booleans or NULL)."""
        if isinstance(node, exp.Paren):
            inner = self.vec_of(node.this)
            self._kinds[id(node)] = (node, inner)
            return inner.kind
        else:
            word = "AND" if isinstance(node, exp.And) else "OR"
            for operand in (node.this, node.expression):
                k = self.kind_of(operand)
                if k not in ("bool", "null"):
                    raise self.fail(f"{word} operand must be a boolean, got a {k} value in {node.sql(DIALECT)}")
            kind = "bool"
        n = self.empty.n
        self._kinds[id(node)] = (node, Vec(kind, np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)))
        return kind

    # -------------------------------------------------------------- the walk

    def bind(self, node: exp.Expression) -> exp.Expression:
        return self.visit(node, None)

    def visit(self, node: exp.Expression, arg: None) -> exp.Expression:
        if node.args.get("negate"):  # sqlglot spells `s NOT LIKE p` as Like(negate=True)
            positive = node.copy()
            positive.set("negate", None)
            return self.bind(exp.Not(this=positive))
        result: exp.Expression = self._methods[kind_of(node)](self, node, arg)
        return result

    def visit_nondeterministic(self, node: exp.Expression, arg: None) -> exp.Expression:
        raise self.fail(f"non-deterministic expression {node.sql(DIALECT)} cannot be a cut")

    def visit_subquery(self, node: exp.Expression, arg: None) -> exp.Expression:
        raise self.fail(f"subquery {node.sql(DIALECT)} is not a single-table predicate")

    def visit_in_subquery(self, node: exp.Expression, arg: None) -> exp.Expression:
        return self.visit_subquery(node, arg)

    def visit_udf(self, node: exp.Expression, arg: None) -> exp.Expression:
        raise self.fail(f"unknown function (UDF?) {node.sql(DIALECT)}: its semantics are not modeled")

    def visit_null_safe_eq(self, node: exp.Expression, arg: None) -> exp.Expression:
        raise self.fail(f"null-safe equality {node.sql(DIALECT)} is not supported")

    def visit_column(self, node: exp.Expression, arg: None) -> exp.Expression:
        name = node.name.lower()
        if name not in self.by_lower:
            raise self.fail(f"unknown column {node.sql(DIALECT)!r}; columns are: {', '.join(self.schema.names)}")
        t = self.schema.field(self.by_lower[name]).type
        if arrow_kind(t) is None:
            raise self.fail(f"column {name!r} has type {t}, which predicates cannot use "
                            "(accepted: integers, floats, decimals, strings, booleans, dates, timestamps)")
        return exp.Column(this=column_identifier(name))

    def visit_interval(self, node: exp.Expression, arg: None) -> exp.Expression:
        self.literal_of(node)  # validates the interval; it is bound by its parent
        return node

    def visit_to_date(self, node: exp.Expression, arg: None) -> exp.Expression:
        """sqlglot's wrapper in year(d), month(d), ... (the date part reads a timestamp itself),
        and Spark's to_date(x): x cast to DATE."""
        if node.args.get("format") is not None:
            raise self.fail(f"{node.sql(DIALECT)} parses with a format, which is not modelled")
        inner = self.bind(node.this)
        if isinstance(node.parent, tuple(DATE_PARTS)) or self.kind_of(inner) == "date":
            return inner
        return self.visit_other(exp.Cast(this=inner, to=exp.DataType.build("DATE")), None)

    def visit_not(self, node: exp.Expression, arg: None) -> exp.Expression:
        inner = self.bind(node.this)
        if isinstance(inner, exp.Not):  # NOT NOT p ≡ p in three-valued logic
            positive: exp.Expression = inner.this
            return positive
        return exp.Not(this=inner)

    def visit_comparison(self, node: exp.Expression, arg: None) -> exp.Expression:
        return self.bind_comparison(node)

    def visit_between(self, node: exp.Expression, arg: None) -> exp.Expression:
        term = self.bind(node.this)
        low, high = self.literal_of(node.args["low"]), self.literal_of(node.args["high"])
        if low is None or high is None:
            lo_b, hi_b = self.bind(node.args["low"]), self.bind(node.args["high"])
            return exp.Between(this=term, low=lo_b, high=hi_b)
        # Spark compares the term with each bound on its own (BETWEEN is >= AND <=)
        (lo_term, (low,)), (hi_term, (high,)) = self.coerce(term, [low], node), self.coerce(term, [high], node)
        if lo_term.sql(DIALECT) != hi_term.sql(DIALECT):
            return exp.And(this=exp.GTE(this=lo_term, expression=render(low, compared_to_float=True)),
                           expression=exp.LTE(this=hi_term, expression=render(high, compared_to_float=True)))
        return exp.Between(this=lo_term, low=render(low, compared_to_float=True),
                           high=render(high, compared_to_float=True))

    def visit_in(self, node: exp.Expression, arg: None) -> exp.Expression:
        term = self.bind(node.this)
        values = [v for v in (self.literal_of(e) for e in node.expressions) if v is not None]
        if len(values) != len(node.expressions):
            raise self.fail(f"IN list must hold literals: {node.sql(DIALECT)}")
        term, typed = self.coerce(term, values, node)
        return exp.In(this=term, expressions=[render(v, compared_to_float=True) for v in sort_values(typed)])

    def visit_like(self, node: exp.Expression, arg: None) -> exp.Expression:
        term = self.bind(node.this)
        pattern = self.literal_of(node.expression)
        if pattern is None or pattern.kind != "string" or self.kind_of(term) != "string":
            raise self.fail(f"LIKE needs a string expression and a string literal pattern: {node.sql(DIALECT)}")
        return exp.Like(this=term, expression=exp.Literal.string(pattern.value))

    def visit_other(self, node: exp.Expression, arg: None) -> exp.Expression:
        """Constants (literal-only terms) fold to one typed literal; anything else has its
        children bound, then the evaluator type-checks it."""
        try:
            const = fold(node)
        except PandoExprError as e:
            raise self.fail(str(e)) from None
        if const is not None:
            if const.kind == "null":
                self.check_typed_literals(node)
            if const.kind == "interval":
                return node
            return render(const)
        # A new node over bound children: copying the node first would copy its whole subtree at
        # every level of an AND/OR nest, only for the children to be replaced.
        args: dict[str, Any] = {}
        for key, value in node.args.items():
            if isinstance(value, exp.Expression) and not isinstance(value, (exp.DataType, exp.Var, exp.Identifier)):
                args[key] = self._fresh(self.bind(value))
            elif isinstance(value, exp.Expression):
                args[key] = value.copy()
            elif isinstance(value, list):
                args[key] = [self._fresh(self.bind(v)) if isinstance(v, exp.Expression) else v for v in value]
            else:
                args[key] = value
        out = type(node)(**args)
        if isinstance(out, (exp.And, exp.Or, exp.Paren)):
            self.connective_kind(out)
        else:
            self.kind_of(out)
        return out

    @staticmethod
    def _fresh(bound: exp.Expression) -> exp.Expression:
        """``bound``, or a copy when it is a node of the input tree (it has a parent there: the
        child itself or one below it): the new node must not take it from that tree."""
        return bound.copy() if bound.parent is not None else bound

    def check_typed_literals(self, node: exp.Expression) -> None:
        """`DATE 'x'` / `TIMESTAMP 'x'` (sqlglot: Cast; an explicit Spark CAST is TryCast)
        with an unparsable string is an error in Spark, not NULL: say so instead of
        silently comparing with NULL."""
        for cast in node.find_all(exp.Cast):
            if type(cast) is not exp.Cast or not (isinstance(cast.this, exp.Literal) and cast.this.is_string):
                continue
            to = cast.args["to"]
            kind = ("date" if to.is_type("date") else "timestamp_ntz" if to.is_type("timestamp_ntz")
                    else "timestamp" if to.is_type("timestamp", "timestamptz", "timestampltz") else None)
            if kind is None:
                continue
            text = cast.this.this
            try:
                ok = parse_date(text) if kind == "date" else parse_timestamp(text, ntz=kind == "timestamp_ntz")
            except PandoExprError:
                ok = None
            if ok is None:
                accepted = _ACCEPTED_TEXT[kind]
                raise self.fail(f"invalid {kind} literal {text!r} in {cast.sql(DIALECT)}; accepted: {accepted}")

    def literal_of(self, node: exp.Expression) -> TypedValue | None:
        try:
            v = fold(node)
        except PandoExprError as e:
            raise self.fail(str(e)) from None
        if v is not None and v.kind == "null":
            self.check_typed_literals(node)
        return None if v is None or v.kind == "interval" else v

    def bind_comparison(self, node: exp.Expression) -> exp.Expression:
        cls = type(node)
        left_lit, right_lit = self.literal_of(node.this), self.literal_of(node.expression)
        if left_lit is not None and right_lit is not None:
            raise self.fail(f"constant predicate {node.sql(DIALECT)} references no column")
        if left_lit is not None:  # literal on the left: flip so the term is on the left
            return self.bind_comparison(_FLIP[cls](this=node.expression, expression=node.this))
        term = self.bind(node.this)
        if right_lit is not None:
            term, (lit,) = self.coerce(term, [right_lit], node)
            return cls(this=term, expression=render(lit, compared_to_float=True))
        other = self.bind(node.expression)
        self.kind_of(cls(this=term, expression=other))  # type check (raises on mismatch)
        if term.sql(DIALECT) > other.sql(DIALECT):  # fixed operand order for structural matching
            return _FLIP[cls](this=other, expression=term)
        return cls(this=term, expression=other)

    def coerce(self, term: exp.Expression, values: list[TypedValue], node: exp.Expression
               ) -> tuple[exp.Expression, list[TypedValue]]:
        """Type literals against the term they are compared with, as Spark does under the
        session's settings (one common type for an IN list)."""
        vec = self.vec_of(term)
        kind, bits = vec.kind, vec.bits
        ansi = current().ansi
        literal_kinds = {(v.kind, v.bits if v.kind == "float" else 0) for v in values if v.kind != "null"}
        mixed = kind in NUMERIC_KINDS and len(literal_kinds) > 1 and "string" in {k for k, _ in literal_kinds}
        target = None if mixed else _numeric_target(kind, bits, literal_kinds, ansi)
        if target is not None:
            if kind != "float":
                term = exp.Cast(this=term, to=_FLOAT if target[1] == 32 else _DOUBLE)
            kind, bits = target
        out = []
        for v in values:
            why = ""
            try:
                if mixed and v.kind == "string":
                    raise PandoExprError("Spark compares a list of strings and numbers as strings: not modelled")
                typed = _coerce_value(v, kind, bits, ansi)
            except PandoExprError as e:
                typed, why = None, f" ({e})"
            if typed is None:
                what = f"column {term.name!r}" if isinstance(term, exp.Column) else f"expression {term.sql(DIALECT)}"
                col_type = (str(self.schema.field(self.by_lower[term.name]).type)
                            if isinstance(term, exp.Column) else kind)
                raise self.fail(f"literal {_show(v)} cannot be compared with {what} of type {col_type} "
                                f"in {node.sql(DIALECT)}{why}; accepted: {_ACCEPTED.get(kind, kind)}")
            out.append(typed)
        return term, out


def _show(v: TypedValue) -> str:
    return f"'{v.value}'" if v.kind == "string" else f"{v.value!r} ({v.kind})"


def _numeric_target(kind: str, bits: int, literals: set[tuple[str, int]], ansi: bool) -> tuple[str, int] | None:
    """The float type (kind, bits) Spark compares a numeric term with these literals as, None
    when it compares exactly (integers and decimals). ANSI off: an integer term with FLOAT
    literals only is compared as FLOAT (the term rounded to float32), a FLOAT term with integer
    or string literals only too (the literals rounded); any DOUBLE or decimal literal makes it
    DOUBLE. ANSI on: every float comparison is DOUBLE, and a string compared with a decimal or
    float term too. A FLOAT term compared as DOUBLE is widened exactly: it keeps no cast."""
    kinds = {k for k, _ in literals}
    if kind not in NUMERIC_KINDS:
        return None
    if kind == "float":
        if bits == 32 and not ansi and "decimal" not in kinds and ("float", 64) not in literals:
            return ("float", 32)
        return ("float", 64)
    if "string" in kinds:
        return ("float", 64) if kind == "decimal" else None
    if "float" not in kinds:
        return None
    if kind == "int" and not ansi and ("float", 64) not in literals and "decimal" not in kinds:
        return ("float", 32)
    return ("float", 64)


def _coerce_value(v: TypedValue, kind: str, bits: int = 64, ansi: bool = False) -> TypedValue | None:
    """``v`` as a value of the term's type (``kind``, ``bits``) it is compared with."""
    if v.kind == "null":
        return NULL
    if kind == "int":
        if v.kind == "int":
            return TypedValue("int", v.value)
        if v.kind == "decimal":
            return v
        if v.kind == "string":
            # ANSI off: the string cast to the term's type (a fraction cut off, NULL when it does
            # not fit); ANSI on: to BIGINT, an error when it is not an integer
            parsed = parse_int(v.value, 64 if ansi else bits)
            if parsed is None:
                if ansi:
                    raise PandoExprError(f"{v.value!r} is not a BIGINT: Spark with ANSI mode on raises")
                return NULL
            return TypedValue("int", parsed)
    elif kind == "decimal":
        if v.kind in ("int", "decimal"):
            return v
    elif kind == "float":
        if v.kind == "float":
            return TypedValue("float", v.value, 64) if bits == 64 else v
        if v.kind == "int":
            return TypedValue("float", float32(float(v.value)) if bits == 32 else float(v.value), bits)
        if v.kind == "decimal":
            if bits == 32:
                return None
            return cast_value(v, _DOUBLE)
        if v.kind == "string":
            typed = cast_value(v, _FLOAT if bits == 32 else _DOUBLE)
            return typed if typed.kind == "null" or bits == 32 else TypedValue("float", typed.value, 64)
    elif kind == "string":
        if v.kind == "string":
            return v
    elif kind == "date":
        if v.kind == "date":
            return v
        if v.kind == "string":  # a string that is not a date: NULL in Spark, most likely a mistake here
            typed = cast_value(v, _DATE)
            return None if typed.kind == "null" else typed
    elif kind == "timestamp":
        if v.kind == "timestamp_ntz" or v.kind == "date":  # the literal read in the session zone
            return cast_value(v, _LTZ)
        if v.kind == "timestamp":
            return v
        if v.kind == "string":
            typed = cast_value(v, _LTZ)
            return None if typed.kind == "null" else typed
    elif kind == "timestamp_ntz":
        if v.kind == "timestamp":
            # Spark casts the column to TIMESTAMP: its wall clock read in the session zone
            if not current().utc:
                raise PandoExprError("a TIMESTAMP_NTZ column compared with a TIMESTAMP is read in the session "
                                     f"time zone {current().time_zone}, which is not modelled")
            return TypedValue(kind, v.value)
        if v.kind in ("timestamp_ntz", "date", "string"):
            typed = cast_value(v, _NTZ)
            return None if typed.kind == "null" else typed
    elif kind == "bool":
        if v.kind == "bool":
            return v
        if v.kind == "string" and v.value.strip().lower() in ("true", "false"):
            return TypedValue("bool", v.value.strip().lower() == "true")
    return None


_DOUBLE, _FLOAT, _DATE = exp.DataType.build("DOUBLE"), exp.DataType.build("FLOAT"), exp.DataType.build("DATE")
_LTZ = exp.DataType.build("TIMESTAMP")
_NTZ = exp.DataType(this=exp.DataType.Type.TIMESTAMPNTZ)


def value_sort_key(v: TypedValue) -> tuple[int, Any]:
    """A total order on literals of one kind (NULL last, NaN above every double)."""
    import math

    if v.kind == "null":
        return (2, 0)
    if v.kind == "float" and math.isnan(v.value):
        return (1, 0)
    val = v.value
    if v.kind == "float" and val == 0:
        val = 0.0
    return (0, val)


def sort_values(values: list[TypedValue]) -> list[TypedValue]:
    seen, out = set(), []
    for v in sorted(values, key=value_sort_key):
        k = value_sort_key(v)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


PREDICATE_HELP = ("expected one boolean SQL expression in Spark syntax, e.g. "
                  "l_shipdate >= DATE '1994-01-01' AND l_discount BETWEEN 0.05 AND 0.07")


def parse_predicate(sql: str | exp.Expr, table: str | None = None) -> exp.Expression:
    """Parse one predicate (Spark SQL); errors name the table, the text and the position."""
    if isinstance(sql, exp.Expression):
        return sql
    where = f"table {table!r}: " if table else ""
    if not isinstance(sql, str):
        raise PandoExprError(f"{where}a predicate must be SQL text or a sqlglot expression, got "
                             f"{type(sql).__name__}; {PREDICATE_HELP}")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except sqlglot.errors.ParseError as e:
        first = e.errors[0] if e.errors else {}
        what = _ANSI.sub("", str(first.get("description") or e).split("\n")[0])
        what = re.sub(r"<class 'sqlglot\.expressions(?:\.\w+)*\.(\w+)'>", r"\1", what)
        at = f" at line {first['line']}, column {first['col']}" if first.get("line") else ""
        raise PandoExprError(f"{where}cannot parse predicate {sql!r}: {what}{at}; {PREDICATE_HELP}") from None
    except sqlglot.errors.SqlglotError as e:  # tokenizer errors: unterminated strings, ...
        raise PandoExprError(f"{where}cannot parse predicate {sql!r}: {_ANSI.sub('', str(e))}; "
                             f"{PREDICATE_HELP}") from None
    if not statements:
        raise PandoExprError(f"{where}empty predicate {sql!r}; {PREDICATE_HELP}")
    if isinstance(statements[0], exp.Alias):  # `a < 1 b`: sqlglot reads trailing text as an alias
        raise PandoExprError(f"{where}unexpected text {statements[0].alias!r} after the predicate in {sql!r}; "
                             f"{PREDICATE_HELP}")
    if len(statements) > 1:
        raise PandoExprError(f"{where}predicate {sql!r} holds {len(statements)} statements; "
                             f"{PREDICATE_HELP} (combine conditions with AND / OR, not ';')")
    return typing.cast(exp.Expression, statements[0])


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parenthesize(node: exp.Expression) -> exp.Expression:
    """Add the parentheses sqlglot's generator does not add for hand-built trees, so that
    the SQL text (the cut key) parses back to the same tree."""

    def fix(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.And):
            for key in ("this", "expression"):
                if isinstance(n.args[key], exp.Or):
                    n.set(key, exp.Paren(this=n.args[key]))
        elif isinstance(n, exp.Not) and isinstance(n.this, (exp.And, exp.Or, exp.Not)):
            n.set("this", exp.Paren(this=n.this))
        return n

    return node.transform(fix, copy=False)


def bind(expr: str | exp.Expr, schema: pa.Schema, table: str | None = None) -> exp.Expression:
    """The canonical form of a single-table predicate; raises PandoExprError if it cannot
    be modeled."""
    binder = _Binder(schema, table)
    bound = parenthesize(binder.bind(parse_predicate(expr, table)))
    kind = binder.kind_of(bound)
    if kind not in ("bool", "null"):
        raise binder.fail(f"{bound.sql(DIALECT)} is a {kind} expression, not a predicate")
    return bound
