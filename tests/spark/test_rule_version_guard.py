"""The optimizer rule builds Spark's and Iceberg's internal plan nodes (docs/JVM.md): on a Spark or
Iceberg version it is not verified on, ``enable`` installs no rule, says so in one warning, and
the session's queries are Spark's own (correct, not pruned); CALL still works."""

from __future__ import annotations

import logging

import pytest

import pando_iceberg
from pando_iceberg.spark import jvm_classes, prune_rule

pytestmark = pytest.mark.spark


def extra_rules(session) -> list[str]:
    rules = session._jsparkSession.experimental().extraOptimizations()
    return [str(rules.apply(i).getClass().getName()) for i in range(rules.size())]


def test_an_unverified_version_gets_no_rule_and_one_warning(spark, tpch, monkeypatch, caplog):
    monkeypatch.setattr(jvm_classes, "TESTED_SPARK", ("9.9",))
    session = spark.newSession()
    with caplog.at_level(logging.WARNING, logger="pando_iceberg"):
        pando_iceberg.enable(session)
    try:
        warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
                  and r.name.startswith("pando_iceberg")]
        assert len(warned) == 1, warned
        assert "optimizer rule is not installed" in warned[0] and "verified on Spark 9.9.x" in warned[0], warned
        assert "correct, not pruned" in warned[0]
        assert not any("PruneRule" in r for r in extra_rules(session))
        assert prune_rule.replaced_scans(session) == 0
        want = spark.newSession().sql("SELECT count(*), sum(l_quantity) FROM tpch.lineitem "
                                      "WHERE l_shipdate < date '1994-01-01'").collect()
        got = session.sql("SELECT count(*), sum(l_quantity) FROM tpch.lineitem "
                          "WHERE l_shipdate < date '1994-01-01'").collect()
        assert got == want
    finally:
        pando_iceberg.disable(session)
        monkeypatch.undo()
    pando_iceberg.enable(session)  # on the verified versions the rule goes in
    try:
        assert sum("PruneRule" in r for r in extra_rules(session)) == 1
    finally:
        pando_iceberg.disable(session)
    assert not any("PruneRule" in r for r in extra_rules(session))
