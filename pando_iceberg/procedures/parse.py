"""``CALL pando.system.<name>(arg => value, ...)`` parsed with sqlglot, the way Iceberg's Spark
procedures take their arguments: named (``=>``) or positional, string / number / boolean
literals, ``map(k, v, ...)`` and ``array(...)``."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from ..exceptions import UsageError

PANDO_NAMESPACE = ("pando", "system")


class ProcedureError(UsageError, ValueError):
    """A CALL statement is wrong; the message says what is accepted."""


@dataclass
class ProcedureCall:
    namespace: tuple[str, ...]
    name: str
    positional: list[Any] = field(default_factory=list)
    named: dict[str, Any] = field(default_factory=dict)
    text: str = ""

    @property
    def is_pando(self) -> bool:
        return self.namespace == PANDO_NAMESPACE


_CALL_RE = re.compile(r"^\s*CALL\s+", re.IGNORECASE)
_FORM = "expected CALL pando.system.<procedure>(name => value, ...) or positional values"


def is_call(statement: str) -> bool:
    return bool(_CALL_RE.match(_strip_comments(statement)))


# CALL pando.system.<name>: Pando's; any other CALL (``<catalog>.system.<name>``, ``system.<name>``) is
# Spark's, whose arguments Pando does not parse (Iceberg's take TIMESTAMP literals, for one)
_PANDO_CALL_RE = re.compile(r"^\s*CALL\s+`?pando`?\s*\.\s*`?system`?\s*\.", re.IGNORECASE)


def is_pando_call(statement: str) -> bool:
    return bool(_PANDO_CALL_RE.match(_strip_comments(statement)))


def _strip_comments(text: str) -> str:
    return re.sub(r"^(\s*--[^\n]*\n)+", "", text)


def parse_call(statement: str) -> ProcedureCall:
    """Parse one CALL statement (a trailing ';' is allowed)."""
    text = _strip_comments(statement).strip().rstrip(";").strip()
    m = _CALL_RE.match(text)
    if not m:
        raise ProcedureError(f"not a CALL statement: {text[:80]!r}; expected CALL pando.system.<procedure>(...)")
    body = _quote_argument_names(text[m.end():])
    try:
        tree = sqlglot.parse_one(f"SELECT {body}", read="spark")
    except sqlglot.errors.ParseError as e:
        raise ProcedureError(f"cannot parse {text!r}: {e.errors[0]['description'] if e.errors else e}; "
                             f"{_FORM}") from None
    if not isinstance(tree, exp.Select) or len(tree.expressions) != 1 or any(
            v for k, v in tree.args.items() if k != "expressions"):  # FROM, WHERE, ... after the call
        raise ProcedureError(f"cannot parse {text!r}: {_FORM}")
    node = tree.expressions[0]
    path: list[str] = []
    while isinstance(node, exp.Dot):
        path.insert(0, node.this.name if isinstance(node.this, exp.Identifier) else _dotted(node.this))
        node = node.expression
    func = node
    if not isinstance(func, (exp.Anonymous, exp.Func)):
        raise ProcedureError(f"cannot parse {text!r}: no argument list; {_FORM}")
    name = func.name if isinstance(func, exp.Anonymous) else func.sql_name().lower()
    namespace = tuple(p.lower() for p in ".".join(path).split(".") if p)
    call = ProcedureCall(namespace, name.lower(), text=text)
    args = func.expressions if isinstance(func, exp.Anonymous) else list(func.args.values())
    for arg in args:
        if isinstance(arg, exp.Kwarg):
            key = arg.this.name.lower()
            if key in call.named:
                raise ProcedureError(f"argument {key!r} is given twice")
            call.named[key] = literal_value(arg.expression, key)
        else:
            if call.named:
                raise ProcedureError("positional arguments cannot follow named arguments")
            call.positional.append(literal_value(arg, f"#{len(call.positional) + 1}"))
    return call


def _dotted(node: exp.Expression) -> str:
    if isinstance(node, exp.Dot):
        return f"{_dotted(node.this)}.{_dotted(node.expression)}"
    return node.name


def _quote_argument_names(body: str) -> str:
    """Back-quote every ``name =>`` so keywords (``table``, ``where``) parse as argument names."""
    tokens = sqlglot.tokenize(body, read="spark")
    out, last = [], 0
    for tok, nxt in itertools.pairwise(tokens):
        if nxt.token_type == TokenType.FARROW and tok.token_type not in (TokenType.STRING, TokenType.NUMBER):
            out.append(body[last:tok.start])
            out.append(f"`{tok.text.strip('`')}`")
            last = tok.end + 1
    out.append(body[last:])
    return "".join(out)


def literal_value(node: exp.Expression, where: str) -> Any:
    """A Python value from a literal argument; anything else is refused with what is accepted."""
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        return int(text) if re.fullmatch(r"[0-9]+", text) else float(text)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -literal_value(node.this, where)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.VarMap):
        keys = [literal_value(k, where) for k in node.args["keys"].expressions]
        values = [literal_value(v, where) for v in node.args["values"].expressions]
        return {str(k): v for k, v in zip(keys, values)}
    if isinstance(node, exp.Map):
        keys = [literal_value(k, where) for k in node.args["keys"].expressions]
        values = [literal_value(v, where) for v in node.args["values"].expressions]
        return {str(k): v for k, v in zip(keys, values)}
    if isinstance(node, exp.Array):
        return [literal_value(v, where) for v in node.expressions]
    if isinstance(node, (exp.Anonymous,)) and node.name.lower() == "map":
        items = [literal_value(v, where) for v in node.expressions]
        if len(items) % 2:
            raise ProcedureError(f"argument {where}: map(...) needs an even number of key, value arguments")
        return {str(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    raise ProcedureError(f"argument {where}: {node.sql(dialect='spark')!r} is not a literal; accepted: "
                         "'string', number, true/false, map('k', 'v', ...), array(...)")
