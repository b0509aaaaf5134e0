"""The catalog routes of ``pando serve`` over the embedded lakehouse's catalog (the SQLite JDBC
catalog Spark shares), driven by pyiceberg's ``RestCatalog``: namespaces, tables, commits with
requirements, rename, drop, and the errors each maps to."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.table.update import AssertRefSnapshotId, SetPropertiesUpdate
from pyiceberg.types import StringType

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


@pytest.fixture(scope="module")
def embedded(lakehouse_cfg):
    from pando_iceberg.catalog import load_catalog

    return load_catalog(lakehouse_cfg)


@pytest.fixture(scope="module")
def rest(embedded, make_client):
    from pando_iceberg.serve import ServerThread

    with ServerThread(embedded) as server:
        yield make_client(server.uri)


def test_namespaces(rest, embedded):
    rest.create_namespace("serve_ns", {"owner": "pando"})
    try:
        assert ("serve_ns",) in rest.list_namespaces()
        assert rest.namespace_exists("serve_ns") and not rest.namespace_exists("serve_nope")
        assert rest.load_namespace_properties("serve_ns")["owner"] == "pando"
        summary = rest.update_namespace_properties("serve_ns", removals={"owner", "absent"}, updates={"team": "a"})
        assert summary.removed == ["owner"] and summary.updated == ["team"] and summary.missing == ["absent"]
        assert embedded.load_namespace_properties("serve_ns").get("team") == "a"  # it is the same catalog
        with pytest.raises(NamespaceAlreadyExistsError):
            rest.create_namespace("serve_ns")
        with pytest.raises(NoSuchNamespaceError):
            rest.load_namespace_properties("serve_nope")
        with pytest.raises(NoSuchNamespaceError):
            rest.list_tables("serve_nope")
    finally:
        rest.drop_namespace("serve_ns")
    assert not embedded.namespace_exists("serve_ns")


def test_tables_create_commit_rename_drop(rest, embedded):
    rest.create_namespace("serve_tables")
    try:
        t = rest.create_table("serve_tables.people", SCHEMA, properties={"purpose": "test"})
        assert rest.table_exists("serve_tables.people") and ("serve_tables", "people") in rest.list_tables(
            "serve_tables")
        with pytest.raises(TableAlreadyExistsError):
            rest.create_table("serve_tables.people", SCHEMA)
        t.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA))  # a commit with requirements
        t.append(pa.table({"id": [4], "name": ["d"]}, schema=SCHEMA))
        direct = embedded.load_table("serve_tables.people")
        assert direct.scan().to_arrow().num_rows == 4 and direct.properties["purpose"] == "test"
        with t.update_schema() as update:  # a schema change through the server
            update.add_column("city", StringType())
        assert "city" in embedded.load_table("serve_tables.people").schema().column_names

        stale = rest.load_table("serve_tables.people")
        rest.load_table("serve_tables.people").append(pa.table({"id": [5], "name": ["e"], "city": ["x"]}))
        with pytest.raises(CommitFailedException, match="CommitFailedException"):  # a stale requirement: 409
            rest.commit_table(stale, (AssertRefSnapshotId(ref="main", snapshot_id=stale.metadata.current_snapshot_id),),
                              (SetPropertiesUpdate(updates={"x": "1"}),))
        assert "x" not in embedded.load_table("serve_tables.people").properties
        stale.append(pa.table({"id": [6], "name": ["f"], "city": ["y"]}))  # pyiceberg retries on the 409: it lands

        rest.rename_table("serve_tables.people", "serve_tables.persons")
        assert not rest.table_exists("serve_tables.people")
        assert rest.load_table("serve_tables.persons").scan().to_arrow().num_rows == 6
        with pytest.raises(NoSuchTableError):
            rest.load_table("serve_tables.people")
        with pytest.raises(NamespaceNotEmptyError):
            rest.drop_namespace("serve_tables")
        rest.drop_table("serve_tables.persons")
        assert not embedded.table_exists("serve_tables.persons")
        with pytest.raises(NoSuchTableError):
            rest.drop_table("serve_tables.persons")
    finally:
        for ident in embedded.list_tables("serve_tables"):
            embedded.drop_table(ident)
        embedded.drop_namespace("serve_tables")



def test_staged_create_is_created_by_its_commit(rest, embedded):
    """stage-create (what CREATE TABLE AS SELECT uses): nothing exists until the transaction's
    commit (requirement assert-create) creates the table with its first snapshot."""
    rest.create_namespace("serve_staged")
    try:
        txn = rest.create_table_transaction("serve_staged.t", SCHEMA, properties={"made": "staged"})
        assert not embedded.table_exists("serve_staged.t")
        txn.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA))
        txn.commit_transaction()
        made = embedded.load_table("serve_staged.t")
        assert made.scan().to_arrow().num_rows == 2 and made.properties["made"] == "staged"
        with pytest.raises(TableAlreadyExistsError):
            rest.create_table_transaction("serve_staged.t", SCHEMA)
    finally:
        for ident in embedded.list_tables("serve_staged"):
            embedded.drop_table(ident)
        embedded.drop_namespace("serve_staged")
