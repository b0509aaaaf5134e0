"""Fixtures of the living-table tests (helpers are in _living.py)."""

import pytest

from pando_iceberg.procedures import ProcedureContext


@pytest.fixture(scope="module")
def ctx(spark, catalog, lakehouse_cfg):
    return ProcedureContext(lakehouse_cfg, catalog, lambda: spark)
