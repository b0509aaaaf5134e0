"""The cut and filter model (§4, §5): cuts, query filters, vectorized evaluation with Spark
SQL semantics, and the sound "which sides of a cut may hold matching rows" reasoning."""

from pando_iceberg.expr.bind import bind
from pando_iceberg.expr.cuts import Cut, CutOrigin, ExprCut, LiteralCut, cut_from_json, cut_masks
from pando_iceberg.expr.errors import PandoExprError
from pando_iceberg.expr.filters import JoinFilter, TableFilter, same_table
from pando_iceberg.expr.sides import MAX_CONJUNCTIONS, Sides

__all__ = [
    "MAX_CONJUNCTIONS",
    "Cut",
    "CutOrigin",
    "ExprCut",
    "JoinFilter",
    "LiteralCut",
    "PandoExprError",
    "Sides",
    "TableFilter",
    "bind",
    "cut_from_json",
    "cut_masks",
    "same_table",
    "to_pyiceberg",
]


def __getattr__(name: str):
    # Imported on first use: pyiceberg is not needed to build or evaluate cuts.
    if name == "to_pyiceberg":
        from pando_iceberg.expr.iceberg import to_pyiceberg

        return to_pyiceberg
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
