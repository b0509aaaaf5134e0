"""A rewrite's commit that loses to a concurrent one is a ``CommitConflict``, recognised by the class
of Iceberg's Java exception (and its causes), never by words in a message."""

from __future__ import annotations

import pytest

from pando_iceberg.spark import iceberg_jvm as jv

pytestmark = pytest.mark.spark

T = "conflicts.t"


def _java(spark, name: str, *args):
    """A new Java exception of class ``name`` built with ``args`` (not thrown)."""
    return jv.jclass(spark.sparkContext._gateway, name)(*args)


def _message_args(spark, message: str):
    """``(message, Object[0])``: the arguments of Iceberg's ``(String, Object...)`` constructors."""
    gateway = spark.sparkContext._gateway
    return message, gateway.new_array(gateway.jvm.java.lang.Object, 0)


def test_conflicts_are_classified_by_the_exception_class_not_its_message(spark):
    validation = _java(spark, "org.apache.iceberg.exceptions.ValidationException",
                       *_message_args(spark, "Cannot determine history between starting snapshot 1 and 2"))
    failed = _java(spark, "org.apache.iceberg.exceptions.CommitFailedException", *_message_args(spark, "stale"))
    assert jv.conflict_exception(validation).equals(validation)
    assert jv.conflict_exception(failed).equals(failed)
    # a conflict that is the cause of another exception
    wrapper = _java(spark, "java.lang.RuntimeException", "while committing", validation)
    assert jv.conflict_exception(wrapper).equals(validation)
    # words of a conflict in the message of an exception that is none
    lookalike = _java(spark, "java.lang.IllegalArgumentException",
                      "org.apache.iceberg.exceptions.ValidationException: Missing required files to delete: a; "
                      "CommitFailedException; found new position delete")
    assert jv.conflict_exception(lookalike) is None
    # the commit's state is unknown (it may have succeeded): not a conflict, whatever its cause
    unknown = _java(spark, "org.apache.iceberg.exceptions.CommitStateUnknownException", failed)
    assert jv.conflict_exception(unknown) is None
    assert jv.conflict_exception(None) is None


def test_replacing_a_file_removed_concurrently_is_a_conflict(spark):
    """The Java table planned from is stale: another commit removed a file the rewrite replaces.
    Iceberg's RewriteFiles validation throws ValidationException ("Missing required files to
    delete"), a CommitConflict naming it; the table is as the other commit left it."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS conflicts")
    spark.sql(f"DROP TABLE IF EXISTS {T}")
    spark.sql(f"CREATE TABLE {T} (id bigint) USING iceberg")
    for lo in (0, 10):  # a data file each
        spark.sql(f"INSERT INTO {T} SELECT id FROM range({lo}, {lo + 10}, 1, 1)")
    table = jv.load_table(spark, T)
    base = int(table.currentSnapshot().snapshotId())
    files = jv.live_data_files(table, base)
    (path,) = [r[0] for r in spark.sql(f"SELECT DISTINCT _file FROM {T} WHERE id < 10").collect()]
    first = files[path]
    spark.sql(f"DELETE FROM {T} WHERE id < 10")  # removes that whole file (another commit)
    after = int(jv.load_table(spark, T).currentSnapshot().snapshotId())
    with pytest.raises(jv.CommitConflict, match="ValidationException: Missing required files to delete"):
        jv.commit_replace(spark, table, base, [first], [], {"pando.test": "x"})
    now = jv.load_table(spark, T)
    assert int(now.currentSnapshot().snapshotId()) == after and not now.properties().containsKey("pando.test")
    assert spark.table(T).count() == 10
    spark.sql(f"DROP TABLE {T}")
