package pando;

/**
 * Staged task sets given the residuals Spark's own Iceberg scan would give their tasks.
 */
public class Residuals {
    // Spark's own Iceberg scan hands Iceberg its pushed filter, which becomes each task's residual:
    // Iceberg's Parquet and ORC readers skip the row groups whose statistics or dictionaries show no
    // row can pass it, before Spark's Filter sees a row. A staged task carries no residual, so under
    // ANSI mode an expression of the query (a CAST, an overflow) could raise on a row of such a row
    // group that Spark's own plan never reads. Each staged set of dataset is staged again with
    // the residual of its table's pruning filter (Iceberg expression JSON by table uuid, '' for none)
    // and of Spark's own filter of the set's relation, cut down to the conjuncts over columns that
    // every post-scan Filter directly above a relation of the set reads (so the scan's read schema
    // holds them: the reader binds the residual against it). The
    // columns are learned from an optimization of its own (the Dataset's plan is not optimized
    // here: its scans would fetch their tasks before they are staged again). The number of sets
    // staged again.
    public static int withResiduals(Object session, Object dataset, String joinedUuids, String joinedFilters,
                                    String sensitive) {
        org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        boolean caseSensitive = "true".equals(sensitive);
        java.util.Map filters = new java.util.HashMap();
        String[] uuids = joinedUuids.split("\u0000", -1);
        String[] texts = joinedFilters.split("\u0000", -1);
        for (int i = 0; i < uuids.length; i++) {
            filters.put(uuids[i], texts[i]);
        }
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan optimized =
            (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) spark.sessionState().optimizer().execute(
                ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed());
        java.util.Map scans = new java.util.LinkedHashMap();  // set id -> {Iceberg table, columns every Filter reads}
        filteredScans(optimized, null, scans, caseSensitive);
        org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
        int restaged = 0;
        for (java.util.Iterator it = scans.entrySet().iterator(); it.hasNext();) {
            java.util.Map.Entry entry = (java.util.Map.Entry) it.next();
            Object[] scan = (Object[]) entry.getValue();
            org.apache.iceberg.Table table = (org.apache.iceberg.Table) scan[0];
            java.util.Set columns = (java.util.Set) scan[1];
            if (!(table instanceof org.apache.iceberg.BaseTable) || columns.isEmpty()) {
                continue;
            }
            String text = (String) filters.get(((org.apache.iceberg.BaseTable) table).operations().current().uuid());
            if (text == null) {
                continue;
            }
            org.apache.iceberg.Schema schema = table.schema();
            org.apache.iceberg.expressions.Expression residual = org.apache.iceberg.expressions.Expressions.alwaysTrue();
            java.util.List conjuncts = new java.util.ArrayList();
            if (text.length() > 0) {
                conjuncts(org.apache.iceberg.expressions.ExpressionParser.fromJson(text, schema), conjuncts);
            }
            for (java.util.Iterator c = conjuncts.iterator(); c.hasNext();) {
                org.apache.iceberg.expressions.Expression conjunct = (org.apache.iceberg.expressions.Expression) c.next();
                if (readsOnly(conjunct, schema, columns, caseSensitive)) {
                    residual = org.apache.iceberg.expressions.Expressions.and(residual, conjunct);
                }
            }
            // Spark's own filter of the set's one relation, as Spark would push it to Iceberg's scan
            // (the table's pruning filter can be weaker: a predicate it does not model); only where
            // Iceberg's pruning agrees with Spark's semantics (floatExact).
            if (scan[2] != null) {
                java.util.List pushed = new java.util.ArrayList();
                sparkConjuncts((org.apache.spark.sql.catalyst.expressions.Expression) scan[2], pushed);
                for (java.util.Iterator c = pushed.iterator(); c.hasNext();) {
                    org.apache.spark.sql.catalyst.expressions.Expression conjunct =
                        (org.apache.spark.sql.catalyst.expressions.Expression) c.next();
                    if (!conjunct.deterministic() || org.apache.spark.sql.catalyst.expressions
                            .SubqueryExpression$.MODULE$.hasSubquery(conjunct)) {
                        continue;
                    }
                    scala.Option predicate = org.apache.spark.sql.execution.datasources.v2.DataSourceV2Strategy$.MODULE$
                        .translateFilterV2(conjunct);
                    if (predicate.isEmpty()) {
                        continue;
                    }
                    org.apache.iceberg.expressions.Expression converted;
                    try {
                        converted = org.apache.iceberg.spark.SparkV2Filters.convert(
                            (org.apache.spark.sql.connector.expressions.filter.Predicate) predicate.get());
                    } catch (RuntimeException e) {
                        continue;
                    }
                    if (converted != null && readsOnly(converted, schema, columns, caseSensitive)
                            && floatExact(converted, schema, caseSensitive)) {
                        residual = org.apache.iceberg.expressions.Expressions.and(residual, converted);
                    }
                }
            }
            if (residual.op() == org.apache.iceberg.expressions.Expression.Operation.TRUE) {
                continue;
            }
            String setId = (String) entry.getKey();
            java.util.List tasks = manager.fetchTasks(table, setId);
            if (tasks == null || tasks.isEmpty()) {
                continue;
            }
            java.util.List out = new java.util.ArrayList(tasks.size());
            java.util.Map schemaJson = new java.util.IdentityHashMap();
            java.util.Map specJson = new java.util.IdentityHashMap();
            java.util.Map residuals = new java.util.IdentityHashMap();
            for (java.util.Iterator t = tasks.iterator(); t.hasNext();) {
                Object next = t.next();
                if (!(next instanceof org.apache.iceberg.FileScanTask)) {
                    out = null;
                    break;
                }
                org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) next;
                org.apache.iceberg.PartitionSpec spec = task.spec();
                org.apache.iceberg.Schema taskSchema = task.schema();
                if (!schemaJson.containsKey(taskSchema)) {
                    schemaJson.put(taskSchema, org.apache.iceberg.SchemaParser.toJson(taskSchema));
                }
                if (!specJson.containsKey(spec)) {
                    specJson.put(spec, org.apache.iceberg.PartitionSpecParser.toJson(spec));
                    residuals.put(spec, org.apache.iceberg.expressions.ResidualEvaluator.of(spec, residual, caseSensitive));
                }
                out.add(new org.apache.iceberg.BaseFileScanTask((org.apache.iceberg.DataFile) task.file(),
                    (org.apache.iceberg.DeleteFile[]) task.deletes().toArray(new org.apache.iceberg.DeleteFile[0]),
                    (String) schemaJson.get(taskSchema), (String) specJson.get(spec),
                    (org.apache.iceberg.expressions.ResidualEvaluator) residuals.get(spec)));
            }
            if (out != null) {
                manager.stageTasks(table, setId, out);
                restaged++;
            }
        }
        return restaged;
    }

    // Every relation reading a staged set: the columns read by the Filter directly above it (none
    // when there is none), intersected over the set's relations.
    static void filteredScans(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
                              org.apache.spark.sql.catalyst.expressions.Expression condition, java.util.Map scans,
                              boolean caseSensitive) {
        if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) {
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation =
                ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan).relation();
            String setId = relation.options().get("scan-task-set-id");
            if (setId == null || !(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)) {
                return;
            }
            java.util.Set columns = new java.util.HashSet();
            if (condition != null) {
                for (scala.collection.Iterator a = condition.references().iterator(); a.hasNext();) {
                    String name = ((org.apache.spark.sql.catalyst.expressions.Attribute) a.next()).name();
                    columns.add(caseSensitive ? name : name.toLowerCase(java.util.Locale.ROOT));
                }
            }
            Object[] seen = (Object[]) scans.get(setId);
            if (seen == null) {
                scans.put(setId, new Object[] {
                    ((org.apache.iceberg.spark.source.SparkTable) relation.table()).table(), columns, condition});
            } else {
                ((java.util.Set) seen[1]).retainAll(columns);
                seen[2] = null;  // read by two relations: neither one's filter holds for the other's rows
            }
            return;
        }
        org.apache.spark.sql.catalyst.expressions.Expression above =
            plan instanceof org.apache.spark.sql.catalyst.plans.logical.Filter
                ? ((org.apache.spark.sql.catalyst.plans.logical.Filter) plan).condition() : null;
        for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
            filteredScans((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), above, scans, caseSensitive);
        }
        for (scala.collection.Iterator it = plan.subqueries().iterator(); it.hasNext();) {
            filteredScans((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), null, scans, caseSensitive);
        }
    }

    static void sparkConjuncts(org.apache.spark.sql.catalyst.expressions.Expression e, java.util.List out) {
        if (e instanceof org.apache.spark.sql.catalyst.expressions.And) {
            sparkConjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).left(), out);
            sparkConjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).right(), out);
        } else {
            out.add(e);
        }
    }

    static void conjuncts(org.apache.iceberg.expressions.Expression e, java.util.List out) {
        if (e instanceof org.apache.iceberg.expressions.And) {
            conjuncts(((org.apache.iceberg.expressions.And) e).left(), out);
            conjuncts(((org.apache.iceberg.expressions.And) e).right(), out);
        } else {
            out.add(e);
        }
    }

    // Does e bind to schema and read only top-level columns among columns?
    static boolean readsOnly(org.apache.iceberg.expressions.Expression e, org.apache.iceberg.Schema schema,
                             java.util.Set columns, boolean caseSensitive) {
        java.util.Set ids;
        try {
            ids = org.apache.iceberg.expressions.Binder.boundReferences(schema.asStruct(),
                java.util.Collections.singletonList(e), caseSensitive);
        } catch (RuntimeException ex) {
            return false;
        }
        for (java.util.Iterator it = ids.iterator(); it.hasNext();) {
            org.apache.iceberg.types.Types.NestedField field = schema.asStruct().field(((Integer) it.next()).intValue());
            if (field == null) {
                return false;  // a nested field: its struct may be pruned to other fields
            }
            String name = caseSensitive ? field.name() : field.name().toLowerCase(java.util.Locale.ROOT);
            if (!columns.contains(name)) {
                return false;
            }
        }
        return !ids.isEmpty();
    }

    // Does Iceberg skip a row group by e (bound to schema) only when Spark's own reading of e keeps
    // none of its rows? On float and double columns Spark has NaN = NaN, orders NaN above every
    // number and has -0.0 = 0.0; Iceberg's statistics and dictionaries do not (a group of NaNs
    // fails x > c, a group of -0.0 fails x = 0.0). So there, only IS NULL, IS NOT NULL, and =, IN,
    // < and <= with literals neither NaN nor a zero, which neither NaN nor the sign of a zero
    // can make Spark keep; no NOT over a float column. (Spark's own scan pushes every such
    // conjunct; its rows then may differ from Spark's semantics, Pando's must not.)
    static boolean floatExact(org.apache.iceberg.expressions.Expression e, org.apache.iceberg.Schema schema,
                              boolean caseSensitive) {
        try {
            return floatExact(org.apache.iceberg.expressions.Binder.bind(schema.asStruct(), e, caseSensitive), true);
        } catch (RuntimeException ex) {
            return false;
        }
    }

    static boolean floatExact(org.apache.iceberg.expressions.Expression e, boolean positive) {
        if (e instanceof org.apache.iceberg.expressions.And) {
            return floatExact(((org.apache.iceberg.expressions.And) e).left(), positive)
                && floatExact(((org.apache.iceberg.expressions.And) e).right(), positive);
        }
        if (e instanceof org.apache.iceberg.expressions.Or) {
            return floatExact(((org.apache.iceberg.expressions.Or) e).left(), positive)
                && floatExact(((org.apache.iceberg.expressions.Or) e).right(), positive);
        }
        if (e instanceof org.apache.iceberg.expressions.Not) {
            return floatExact(((org.apache.iceberg.expressions.Not) e).child(), false);
        }
        if (!(e instanceof org.apache.iceberg.expressions.BoundPredicate)) {
            return true;  // TRUE or FALSE
        }
        org.apache.iceberg.expressions.BoundPredicate p = (org.apache.iceberg.expressions.BoundPredicate) e;
        org.apache.iceberg.types.Type.TypeID type = p.ref().type().typeId();
        if (type != org.apache.iceberg.types.Type.TypeID.FLOAT && type != org.apache.iceberg.types.Type.TypeID.DOUBLE) {
            return true;
        }
        if (!positive) {
            return false;
        }
        org.apache.iceberg.expressions.Expression.Operation op = p.op();
        if (op == org.apache.iceberg.expressions.Expression.Operation.IS_NULL
                || op == org.apache.iceberg.expressions.Expression.Operation.NOT_NULL) {
            return true;
        }
        if (op == org.apache.iceberg.expressions.Expression.Operation.EQ
                || op == org.apache.iceberg.expressions.Expression.Operation.LT
                || op == org.apache.iceberg.expressions.Expression.Operation.LT_EQ) {
            return p.isLiteralPredicate() && ordinaryFloat(p.asLiteralPredicate().literal().value());
        }
        if (op == org.apache.iceberg.expressions.Expression.Operation.IN && p.isSetPredicate()) {
            for (java.util.Iterator it = p.asSetPredicate().literalSet().iterator(); it.hasNext();) {
                if (!ordinaryFloat(it.next())) {
                    return false;
                }
            }
            return true;
        }
        return false;
    }

    static boolean ordinaryFloat(Object value) {
        if (!(value instanceof Number)) {
            return false;
        }
        double d = ((Number) value).doubleValue();
        return !Double.isNaN(d) && d != 0.0;
    }
}
