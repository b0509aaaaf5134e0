"""Every query of a session pruned by Pando, the DataFrame API's included: an optimizer rule in
the JVM (``spark/java/pando/PruneRule.java``, in the session's
``experimental().extraOptimizations()``) that asks this module's planner through py4j's callback
server.

For each optimized plan with an Iceberg scan of a laid-out table, the rule sends its blocks (the
filters, projections and inner joins over Iceberg scans, each rendered as one SQL query, its scans
by alias; an anti join's right side a block of its own with the enclosing scans as context, never
answered) in one call; :func:`answer` plans each block with the planner of
``pando_iceberg.spark.sql`` (:func:`~pando_iceberg.spark.pruned.plan_query`: trees, join pruning,
key sets), a table read by several scans of a block once per scan (:func:`per_scan`), and stages,
for each scan whose kept files are fewer than Iceberg's own pruning keeps, those files' tasks.
The rule swaps the scan for a staged scan of the set (same output),
reads its tasks and removes the set: nothing stays staged after the optimizer, so a DataFrame has
no lifetime to manage. Anything that goes wrong leaves the scan (or the plan) Spark's own, with a
note (:func:`notes`).

The rule keeps the last answers (``PruneRule.ANSWERS_KEPT``) with the tasks of the sets they
staged, by everything an answer depends on: the request (blocks, tables, the snapshots Spark's
scans read), each table's metadata file (a new one with every commit, a property set included) and
the session's SQL settings and current catalog. The same blocks optimized again (a query or
DataFrame run again, ``explain`` then ``collect``) are answered in the JVM by staging the same
tasks again, without a call to Python; an answer made while anything failed is not kept
(:func:`answer` marks the ones it may keep). :func:`stats` says where the rule's time went.

Why an optimizer rule and not interception of DataFrame actions in Python: the rule sees every
plan Spark runs (``spark.sql``, the DataFrame API, temporary views, CTEs, subqueries optimized on
their own, ``df.explain()``, and actions pyspark does not wrap) after Spark's own optimizations,
so the conditions it sends are Spark's, resolved and pushed next to the scans; action-time
interception would have to wrap every action of pyspark and re-plan a DataFrame per action.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

from .. import settings
from ..storage.pointer import P_LAYOUT_ID
from . import iceberg_jvm as jv
from .jvm_classes import helper, jclass

log = logging.getLogger("pando_iceberg.spark")

_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?\Z")


@dataclass
class Leaf:
    alias: str
    catalog: str
    table: str  # db.table
    snapshot: int | None
    pinned: bool  # under a dynamic-pruning filter: planned with, never replaced
    context: bool = False  # an anti join's enclosing scan: says which rows matter, never answered


def parse_request(request: str) -> list[tuple[str, list[Leaf]]]:
    """The rule's request: ``B\\t<sql>`` per block, then ``L`` (or ``X``: pinned; ``C``: context,
    never answered) lines ``\\t<alias>\\t<catalog>\\t<db.table>\\t<snapshot id>`` per scan of it."""
    blocks: list[tuple[str, list[Leaf]]] = []
    for line in request.split("\n"):
        if not line:
            continue
        kind, _, rest = line.partition("\t")
        if kind == "B":
            blocks.append((rest, []))
        elif kind in ("L", "X", "C") and blocks:
            alias, catalog, table, snapshot = rest.split("\t")
            blocks[-1][1].append(Leaf(alias, catalog, table, int(snapshot) if snapshot else None, kind == "X",
                                      kind == "C"))
        else:
            raise ValueError(f"PruneRule request: unexpected line {line[:200]!r}")
    return blocks


class ScanPlanner:
    """The Python end of the rule: a ``java.util.function.Function`` (request → answer) for py4j."""

    def __init__(self, spark) -> None:
        self.spark = spark

    def apply(self, request: str) -> str:
        try:
            return answer(self.spark, request)
        except Exception as e:  # never a failed query: Spark's own plan (and an answer the rule does not keep)
            note = f"Spark's own plan: {type(e).__name__}: {e}"
            log.warning("pando: %s", note)
            return "N\t" + note.replace("\n", " ").replace("\t", " ")

    class Java:
        implements: ClassVar[list[str]] = ["java.util.function.Function"]


@settings.of_session
def answer(spark, request: str) -> str:
    """The rule's answer: ``S\\t<alias>\\t<task set id>`` per scan to replace (an empty id: its
    table keeps no file), ``N\\t<note>`` per note, and ``K`` when nothing failed or raced (every
    block planned, every planned snapshot the one Spark's scan reads): the rule may then reuse the
    answer for the same request, tables' metadata and settings."""
    from . import session_config
    from .pruned import plan_query

    out: list[str] = []
    said: list[str] = []
    stable = True  # nothing failed or raced: the answer is the same for the same request and state
    if vars(spark).get("_pando_busy"):  # Pando's own statements (procedures, the SQL path) are Spark's
        return ""
    _, catalog = session_config(spark)
    name = str(getattr(catalog, "name", "") or "")
    for sql, leaves in parse_request(request):
        ours = [leaf for leaf in leaves if leaf.catalog.lower() == name.lower() and not leaf.context]
        if not ours:
            continue
        for scan_sql, answered, alone in per_scan(sql, leaves):
            try:
                qp = plan_query(spark, catalog, scan_sql, tree=block_tree(scan_sql))
            except Exception as e:
                said.append(f"not planned ({type(e).__name__}: {e}): Spark's own scans")
                stable = False
                continue
            if qp.unplanned:
                said.append(qp.unplanned)
                stable = False
            stable &= answer_scans(spark, qp, [leaf for leaf in answered if leaf in ours], alone, out, said)
    out += ["N\t" + n.replace("\n", " ").replace("\t", " ") for n in said]
    if stable:
        out.append("K")
    return "\n".join(out)


def answer_scans(spark, qp, leaves: list[Leaf], alone: int, out: list[str], said: list[str]) -> bool:
    """The answer lines (``out``) and notes (``said``) of ``leaves`` planned in ``qp``; ``alone``:
    how many scans of the table the block has when the plan is one scan's (0: the block's plan).
    False when something failed or raced (the answer is not kept)."""
    from .pruned import prunes_beyond_iceberg

    stable = True
    for leaf in leaves:
        plan = qp.plans.get(leaf.table)
        if plan is None:
            if leaf.table in qp.skipped:
                said.append(f"{leaf.table}: {qp.skipped[leaf.table]}")
                stable = False
            continue
        if not prunes_beyond_iceberg(plan):
            continue  # Spark's own scan plans the same files
        if leaf.pinned:
            said.append(f"{leaf.table}: under a dynamic-pruning filter: Spark's own scan")
            continue
        if plan.snapshot_id != leaf.snapshot:
            said.append(f"{leaf.table}: planned snapshot {plan.snapshot_id}, Spark's scan reads "
                        f"{leaf.snapshot}: Spark's own scan")
            stable = False
            continue
        set_id = stage(spark, qp.tables[leaf.table], leaf.table, plan)
        ex = plan.explain
        said.append(f"{leaf.table}: read {ex.pando_files} of {ex.total_files} files (layout {ex.layout_id}"
                    + (f"; one of {alone} scans of it in a block, planned on its own)" if alone else ")"))
        out.append(f"S\t{leaf.alias}\t{set_id}")
    return stable


def per_scan(sql: str, leaves: list[Leaf]) -> list[tuple[str, list[Leaf], int]]:
    """What to plan for a block: ``(sql, the scans answered from its plan, alone)``. The planner's
    answer is per table, so a table with one scan in the block is answered from the block's SQL
    (``alone`` 0), and each scan of a table read more than once in it from the block as that scan
    sees it (``alone``: the table's scans in the block): the other scans of its table and the
    conditions on them left out, and the equalities of columns they carried (``a.x = l2.k AND
    l2.k = b.y``) kept between the scans left (``a.x = b.y``). Leaving a scan and conditions out
    keeps every row the block gives, so the files kept hold every row of the scan that matters."""
    counts: dict[tuple[str, str], int] = {}
    for leaf in leaves:
        key = (leaf.catalog.lower(), leaf.table.lower())
        counts[key] = counts.get(key, 0) + 1
    answered = [leaf for leaf in leaves if not leaf.context]
    whole = [leaf for leaf in answered if counts[(leaf.catalog.lower(), leaf.table.lower())] == 1]
    out: list[tuple[str, list[Leaf], int]] = [(sql, whole, 0)] if whole else []
    for leaf in answered:
        key = (leaf.catalog.lower(), leaf.table.lower())
        if counts[key] > 1:
            others = {o.alias.lower() for o in leaves
                      if o is not leaf and (o.catalog.lower(), o.table.lower()) == key}
            try:
                out.append((scan_sql(sql, others), [leaf], counts[key]))
            except Exception as e:  # not answered: Spark's own scan
                log.info("pando: %s's scan %s not planned on its own (%s: %s)", leaf.table, leaf.alias,
                         type(e).__name__, e)
    return out


def scan_sql(sql: str, dropped: set[str]) -> str:
    """The block's SQL (``SELECT 1 FROM t AS a, ... WHERE c AND ...``) without the scans
    ``dropped`` (aliases, lower case) and its conditions on them, with the column equalities they
    carried closed over the scans left (per_scan)."""
    from sqlglot import exp

    tree = block_tree(sql)
    tables = [t for t in tree.find_all(exp.Table) if t.alias_or_name.lower() not in dropped]
    where = tree.args.get("where")
    conds = [c.unnest() for c in (where.this.flatten() if where is not None else [])]

    def scans(node) -> set[str]:
        return {c.table.lower() for c in node.find_all(exp.Column)}

    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def root(k: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    names: dict[tuple[str, str], exp.Column] = {}
    for c in conds:
        if isinstance(c, exp.EQ):
            a, b = c.this.unnest(), c.expression.unnest()
            if isinstance(a, exp.Column) and isinstance(b, exp.Column) and a.table and b.table:
                ka, kb = (a.table.lower(), a.name.lower()), (b.table.lower(), b.name.lower())
                names.setdefault(ka, a)
                names.setdefault(kb, b)
                parent[root(ka)] = root(kb)
    kept = [c for c in conds if not scans(c) & dropped]
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for k in names:
        classes.setdefault(root(k), []).append(k)
    for members in classes.values():
        if not any(k[0] in dropped for k in members):
            continue  # its equalities are all kept
        left = [k for k in members if k[0] not in dropped]
        kept += [exp.EQ(this=names[left[0]].copy(), expression=names[k].copy()) for k in left[1:]]
    text = "SELECT 1 FROM " + ", ".join(t.sql(dialect="spark") for t in tables)
    if kept:
        text += " WHERE " + " AND ".join(f"({c.sql(dialect='spark')})" for c in kept)
    return text


def block_tree(sql: str):
    """A block's SQL parsed, Spark's typed numeric literals (``24.00BD``, ``0.05D``, ``5L``: what
    Catalyst's ``Literal.sql`` writes, sqlglot's ``TRY_CAST('24.00' AS DECIMAL(4,2))``) as the
    equal ``CAST(24.00 AS DECIMAL(4,2))`` of a plain number, the form the workload parser folds."""
    from sqlglot import exp

    from .pruned import parse_sql

    def plain(node):
        # not FLOAT: a decimal cast to float rounds twice (through double), a string once
        if (isinstance(node, exp.TryCast) and isinstance(node.this, exp.Literal) and node.this.is_string
                and _NUMBER.match(node.this.this) and node.to.is_type(*exp.DataType.NUMERIC_TYPES)
                and not node.to.is_type(exp.DataType.Type.FLOAT)):
            return exp.Cast(this=exp.Literal.number(node.this.this), to=node.to.copy())
        return node

    return parse_sql(sql).transform(plain)


def stage(spark, table, name: str, plan) -> str:
    """Stage the plan's chosen files' tasks (the JVM's task cache when the snapshot fits it, else
    the JVM's planning with the pruning filter), under a task set id that names the layout and the
    files kept of all (shown in ``df.explain()``); '' when no file is kept."""
    from ..expr.iceberg import to_pyiceberg
    from .jvm_filter import java_expression
    from .pruned import in_task_cache

    if not plan.paths or plan.snapshot_id is None:
        return ""
    jtable = jv.load_table(spark, name, metadata_location=getattr(table, "metadata_location", None))
    found = None
    if in_task_cache(plan):
        found = jv.cached_tasks(jtable, plan.snapshot_id, plan.paths,
                                f"{table.metadata.table_uuid}@{plan.snapshot_id}")
    if found is None:
        row_filter = None
        if plan.filter is not None:
            try:
                row_filter = java_expression(spark._jvm, to_pyiceberg(plan.filter, table.schema()), table.schema(),
                                             jtable.schema())
            except Exception:  # the JVM plans without it: every chosen file is still found
                row_filter = None
        found, _ = jv.chosen_tasks(jtable, plan.snapshot_id, plan.paths, row_filter)
    if isinstance(found, list):
        tasks = spark._jvm.java.util.ArrayList()
        for task in found:
            tasks.add(task)
    else:
        tasks = found
    e = plan.explain
    set_id = f"pando-layout-{e.layout_id}-read-{e.pando_files}-of-{e.total_files}-{uuid.uuid4().hex[:12]}"
    jclass(spark.sparkContext._gateway, "org.apache.iceberg.spark.ScanTaskSetManager").get() \
        .stageTasks(jtable, set_id, tasks)
    return set_id


def install(spark) -> Any:
    """Put the rule in ``spark``'s optimizer (replacing one put there before), asking a new
    :class:`ScanPlanner` of this session; the Java rule, or None when the helper does not compile
    here or the JVM's versions are not the tested ones (the session is then unpruned, with a
    warning)."""
    from pyspark.java_gateway import ensure_callback_server_started

    refused = version_refusal(spark)
    if refused is not None:
        log.warning("%s", refused)
        vars(spark)["_pando_rule_refused"] = refused
        return None
    method = helper("PruneRule", "install", ("java.lang.Object", "java.lang.Object", "java.lang.String"))
    if method is None:
        log.warning("pando: the optimizer rule is not available in this JVM: queries read Spark's own plans "
                    "(pando_iceberg.spark.sql still prunes)")
        return None
    ensure_callback_server_started(spark.sparkContext._gateway)
    planner = ScanPlanner(spark)
    rule = method(spark._jsparkSession, planner, P_LAYOUT_ID)
    vars(spark)["_pando_rule"] = (rule, planner)
    return rule


def version_refusal(spark) -> str | None:
    """None when the JVM's Spark and Iceberg are the versions the rule is verified on
    (``jvm_classes.TESTED_SPARK`` / ``TESTED_ICEBERG``: it builds Spark's and Iceberg's internal plan
    nodes, docs/JVM.md); else the one warning that says which versions and that the session's
    queries read Spark's own plans, correct and unpruned."""
    from .jvm_classes import TESTED_ICEBERG, TESTED_SPARK, jvm_versions, untested_versions

    try:
        versions = jvm_versions(spark.sparkContext._gateway)
    except Exception as e:  # no Iceberg runtime, or another layout of Spark's version
        return (f"pando: the optimizer rule is not installed: the JVM's Spark and Iceberg versions are unknown "
                f"({type(e).__name__}: {e}); queries in this session read Spark's own plans (correct, not pruned)")
    if untested_versions(*versions) is None:
        return None
    return (f"pando: the optimizer rule is not installed: it is verified on Spark {'/'.join(TESTED_SPARK)}.x with "
            f"Iceberg {'/'.join(TESTED_ICEBERG)}.x, this JVM runs Spark {versions[0]} with Iceberg {versions[1]}; "
            "queries in this session read Spark's own plans (correct, not pruned)")


def uninstall(spark) -> None:
    """Take the rule out of ``spark``'s optimizer (nothing to do when :func:`install` put none in)."""
    vars(spark).pop("_pando_rule_refused", None)
    if vars(spark).get("_pando_rule") is None:
        return
    method = helper("PruneRule", "uninstall", ("java.lang.Object",))
    if method is not None:
        method(spark._jsparkSession)
    vars(spark).pop("_pando_rule", None)


def notes(spark) -> list[str]:
    """The notes of the last plans the session's rule planned (what it read, what it left to Spark
    and why; a reused answer's notes again), oldest first (the last ``PruneRule.NOTES_KEPT``)."""
    got = vars(spark).get("_pando_rule")
    return [] if got is None else [n for n in str(got[0].notes()).split("\n") if n]


def clear_notes(spark) -> None:
    """Forget the notes :func:`notes` gives."""
    got = vars(spark).get("_pando_rule")
    if got is not None:
        got[0].clearNotes()


STATS = ("applied", "considered", "asked", "reused", "rule_ms", "ask_ms")


def stats(spark, *, clear: bool = False) -> dict[str, float]:
    """Where the session's rule spent its time since it was installed (or last cleared): plans
    ``applied`` to, plans ``considered`` (a scan of a laid-out table in them), Python ``asked``,
    answers ``reused`` without asking, milliseconds in the rule (``rule_ms``, the asking included)
    and waiting for Python's answers (``ask_ms``). Empty without a rule; ``clear``: start again."""
    got = vars(spark).get("_pando_rule")
    if got is None:
        return {}
    words = str(got[0].stats()).split()
    out = {k: float(v) for k, v in zip(words[::2], words[1::2])}
    if clear:
        got[0].clearStats()
    return out


def forget_answers(spark) -> None:
    """Drop the answers the session's rule keeps (the next plans ask Python again)."""
    got = vars(spark).get("_pando_rule")
    if got is not None:
        got[0].forgetAnswers()


def replaced_scans(spark) -> int:
    """How many scans the session's rule replaced by staged scans so far."""
    got = vars(spark).get("_pando_rule")
    return 0 if got is None else int(got[0].replacedScans())


__all__ = ["STATS", "Leaf", "ScanPlanner", "answer", "block_tree", "clear_notes", "forget_answers", "install", "notes",
           "parse_request", "replaced_scans", "stage", "stats", "uninstall", "version_refusal"]
