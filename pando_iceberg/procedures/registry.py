"""The procedure registry: declared parameters (name, type, required, default), argument
binding with errors that list what is valid, typed result rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .parse import ProcedureCall, ProcedureError

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "int": (int,),
    "double": (int, float),
    "boolean": (bool,),
    "map<string,string>": (dict,),
    "array<string>": (list,),
}


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # one of _TYPES
    required: bool = False
    default: Any = None
    doc: str = ""

    def describe(self) -> str:
        return f"{self.name} {self.type.upper()}{'' if self.required else ' (optional)'}"

    def check(self, value: Any, procedure: str) -> Any:
        ok = _TYPES[self.type]
        if isinstance(value, bool) and bool not in ok:
            ok_value = False
        else:
            ok_value = isinstance(value, ok)
        if not ok_value:
            raise ProcedureError(f"{procedure}: argument {self.name!r} must be {self.type.upper()}, got "
                                 f"{type(value).__name__} {value!r}")
        if self.type == "map<string,string>":
            return {str(k): str(v) for k, v in value.items()}
        if self.type == "array<string>":
            return [str(v) for v in value]
        return value


@dataclass
class Result:
    """Rows with named, typed columns (``columns``: (name, type) pairs)."""

    columns: list[tuple[str, str]]
    rows: list[tuple]
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]


@dataclass(frozen=True)
class Procedure:
    name: str
    params: tuple[Param, ...]
    run: Callable[..., Result]
    doc: str

    def signature(self) -> str:
        return f"{self.name}({', '.join(p.describe() for p in self.params)})"

    def bind(self, call: ProcedureCall) -> dict[str, Any]:
        by_name = {p.name: p for p in self.params}
        if len(call.positional) > len(self.params):
            raise ProcedureError(f"{self.name} takes at most {len(self.params)} arguments, got "
                                 f"{len(call.positional)}; signature: {self.signature()}")
        values: dict[str, Any] = {}
        for p, v in zip(self.params, call.positional):
            values[p.name] = v
        for k, v in call.named.items():
            if k not in by_name:
                raise ProcedureError(f"{self.name}: unknown argument {k!r}; valid arguments: "
                                     f"{', '.join(p.describe() for p in self.params)}")
            if k in values:
                raise ProcedureError(f"{self.name}: argument {k!r} is given both by position and by name")
            values[k] = v
        out = {}
        for p in self.params:
            if p.name in values and values[p.name] is not None:
                out[p.name] = p.check(values[p.name], self.name)
            elif p.required:
                raise ProcedureError(f"{self.name}: missing required argument {p.name!r} ({p.type.upper()}); "
                                     f"signature: {self.signature()}")
            else:
                out[p.name] = p.default
        return out


REGISTRY: dict[str, Procedure] = {}


def procedure(name: str, *params: Param, doc: str = ""):
    def register(fn: Callable[..., Result]) -> Callable[..., Result]:
        REGISTRY[name] = Procedure(name, tuple(params), fn, doc or (fn.__doc__ or "").strip().splitlines()[0])
        return fn

    return register


def lookup(call: ProcedureCall) -> Procedure:
    if not call.is_pando:
        raise ProcedureError(f"unknown procedure namespace {'.'.join(call.namespace)!r}: pando procedures are "
                             "CALL pando.system.<name>(...); "
                             "Iceberg's own run through Spark as CALL <catalog>.system.<name>")
    proc = REGISTRY.get(call.name)
    if proc is None:
        raise ProcedureError(f"unknown procedure pando.system.{call.name}; valid procedures: "
                             + "; ".join(REGISTRY[n].signature() for n in sorted(REGISTRY)))
    return proc
