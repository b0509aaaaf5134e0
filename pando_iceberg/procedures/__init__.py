"""CALL-style maintenance procedures: ``CALL pando.system.<name>(arg => value, ...)``.

Arguments follow Iceberg's Spark procedures (named or positional, literals, ``map(...)``,
``array(...)``); every procedure returns rows with named, typed columns; a wrong call gets an
error listing what is valid.
"""

from .builtin import ProcedureContext, call, explain_result
from .parse import ProcedureCall, ProcedureError, is_call, is_pando_call, parse_call
from .registry import REGISTRY, Param, Procedure, Result

__all__ = ["REGISTRY", "Param", "Procedure", "ProcedureCall", "ProcedureContext", "ProcedureError", "Result", "call",
           "explain_result", "is_call", "is_pando_call", "parse_call"]
