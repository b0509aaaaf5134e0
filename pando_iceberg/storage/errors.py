"""Errors of the storage layer."""

from __future__ import annotations

from ..exceptions import LayoutError

__all__ = ["SidecarError"]


class SidecarError(LayoutError, ValueError):
    """A Puffin file, a layout sidecar or a layout pointer is missing, malformed, corrupt,
    too new, or does not belong to the table/layout it was expected for. The message says
    exactly what was wrong; the planner treats it as "no usable layout" (advisory metadata)."""
