"""Errors of the cut/filter model."""

from ..exceptions import PlanningError


class PandoExprError(PlanningError, ValueError):
    """A predicate cannot be modeled: unknown column, untypable literal, unsupported or
    non-deterministic expression. The message names the table (when known), the column,
    the literal and what would be accepted."""
