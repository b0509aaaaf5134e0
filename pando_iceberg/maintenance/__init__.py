"""Keeping Pando layouts useful as tables change (paper §7)."""
