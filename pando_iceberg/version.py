"""The package's version (pyproject.toml's), in a module of its own so that any module may read it
without importing the public API of ``pando_iceberg/__init__.py``."""

__version__ = "0.1.0"
