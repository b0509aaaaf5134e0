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
    // here: its scans would fetch their tasks before they are staged again). A file Iceberg's
    // planning of the set's snapshot (by table uuid, '' for not known) with the residual drops, as
    // Spark's own scan's planning does, is dropped from the set (withResidual).
    // A set read by several relations of the query (a self-join, a table in a subquery too) would
    // get only what holds for all of them, while Spark's own scan of each relation skips by its own
    // filter: each such relation with a residual of its own reads a copy of the set staged with it
    // (a new set id, its relation in the analysed plan given that id), when every relation of the
    // set in the optimized plan is one of the analysed plan (an optimizer rule that copies a
    // relation under new attributes, as an inlined CTE's second reference, leaves the set shared).
    // Returns {the Dataset to run (dataset, or one over the analysed plan so changed), a list of
    // {Iceberg table, set id} of the copies staged, which the caller removes with its sets}.
    public static Object[] withResiduals(Object session, Object dataset, String joinedUuids, String joinedFilters,
                                         String joinedSnapshots, String sensitive) {
        org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        boolean caseSensitive = "true".equals(sensitive);
        java.util.Map filters = new java.util.HashMap();
        String[] uuids = joinedUuids.split("\u0000", -1);
        String[] texts = joinedFilters.split("\u0000", -1);
        String[] snapshotIds = joinedSnapshots.split("\u0000", -1);
        java.util.Map snapshots = new java.util.HashMap();  // uuid -> the snapshot its set was planned from
        for (int i = 0; i < uuids.length; i++) {
            filters.put(uuids[i], texts[i]);
            if (snapshotIds[i].length() > 0) {
                snapshots.put(uuids[i], Long.valueOf(snapshotIds[i]));
            }
        }
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan analysed =
            ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed();
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan optimized =
            (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) spark.sessionState().optimizer().execute(analysed);
        // set id -> relation (its first output attribute's id) -> [{Iceberg table, columns its Filter reads, the Filter's condition}]
        java.util.Map scans = new java.util.LinkedHashMap();
        filteredScans(optimized, null, scans, caseSensitive);
        java.util.Set analysedRelations = new java.util.HashSet();  // {set id, relation} of the analysed plan
        relations(analysed, analysedRelations);
        org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
        java.util.Map copies = new java.util.HashMap();  // {set id, relation} -> the set id it reads
        java.util.List staged = new java.util.ArrayList();
        java.util.List restaged = new java.util.ArrayList();  // {table, set id, its tasks with the shared residual}
        for (java.util.Iterator it = scans.entrySet().iterator(); it.hasNext();) {
            java.util.Map.Entry entry = (java.util.Map.Entry) it.next();
            String setId = (String) entry.getKey();
            java.util.Map byRelation = (java.util.Map) entry.getValue();
            org.apache.iceberg.Table table = (org.apache.iceberg.Table) ((Object[]) ((java.util.List)
                byRelation.values().iterator().next()).get(0))[0];
            if (!(table instanceof org.apache.iceberg.BaseTable)) {
                continue;
            }
            String uuid = ((org.apache.iceberg.BaseTable) table).operations().current().uuid();
            String text = (String) filters.get(uuid);
            Long snapshot = (Long) snapshots.get(uuid);
            if (text == null) {
                continue;
            }
            java.util.List shared = new java.util.ArrayList();  // the occurrences reading the set itself
            boolean own = byRelation.size() > 1;
            for (java.util.Iterator r = byRelation.keySet().iterator(); own && r.hasNext();) {
                own = analysedRelations.contains(java.util.Arrays.asList(new Object[] {setId, r.next()}));
            }
            for (java.util.Iterator r = byRelation.entrySet().iterator(); r.hasNext();) {
                java.util.Map.Entry relation = (java.util.Map.Entry) r.next();
                java.util.List occurrences = (java.util.List) relation.getValue();
                org.apache.iceberg.expressions.Expression residual =
                    own ? residual(table, text, occurrences, caseSensitive) : null;
                if (residual == null || residual.op() == org.apache.iceberg.expressions.Expression.Operation.TRUE) {
                    shared.addAll(occurrences);
                    continue;
                }
                java.util.List tasks = withResidual(manager.fetchTasks(table, setId), residual,
                    plannedFiles(table, snapshot, residual, caseSensitive), caseSensitive);
                if (tasks == null) {
                    shared.addAll(occurrences);
                    continue;
                }
                String copy = setId + "-" + (staged.size() + 1);
                manager.stageTasks(table, copy, tasks);
                staged.add(new Object[] {table, copy});
                copies.put(java.util.Arrays.asList(new Object[] {setId, relation.getKey()}), copy);
            }
            if (shared.isEmpty()) {
                continue;
            }
            org.apache.iceberg.expressions.Expression residual = residual(table, text, shared, caseSensitive);
            if (residual.op() == org.apache.iceberg.expressions.Expression.Operation.TRUE) {
                continue;
            }
            java.util.List tasks = withResidual(manager.fetchTasks(table, setId), residual,
                    plannedFiles(table, snapshot, residual, caseSensitive), caseSensitive);
            if (tasks != null) {
                restaged.add(new Object[] {table, setId, tasks});
            }
        }
        Object out = dataset;
        if (!copies.isEmpty()) {
            try {
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan retargeted = retargeted(analysed, copies);
                retargeted.setAnalyzed();  // resolved as analysed: Spark's analyzer does not run over it again
                out = org.apache.spark.sql.Dataset$.MODULE$.ofRows(spark, retargeted);
            } catch (RuntimeException e) {
                // no set is restaged yet: dataset's relations read their sets as staged
                for (java.util.Iterator it = staged.iterator(); it.hasNext();) {
                    Object[] copy = (Object[]) it.next();
                    manager.removeTasks((org.apache.iceberg.Table) copy[0], (String) copy[1]);
                }
                throw e;
            }
        }
        // only now: a shared residual holds for the relations left reading the set
        for (java.util.Iterator it = restaged.iterator(); it.hasNext();) {
            Object[] set = (Object[]) it.next();
            manager.stageTasks((org.apache.iceberg.Table) set[0], (String) set[1], (java.util.List) set[2]);
        }
        return new Object[] {out, staged};
    }

    // The residual of occurrences (relations reading one set): the table's pruning filter (text)
    // and, when they are one relation read once, Spark's own filter of it, cut down to the columns
    // every occurrence's Filter reads.
    static org.apache.iceberg.expressions.Expression residual(org.apache.iceberg.Table table, String text,
            java.util.List occurrences, boolean caseSensitive) {
        java.util.Set columns = null;
        for (java.util.Iterator it = occurrences.iterator(); it.hasNext();) {
            java.util.Set read = (java.util.Set) ((Object[]) it.next())[1];
            if (columns == null) {
                columns = new java.util.HashSet(read);
            } else {
                columns.retainAll(read);
            }
        }
        org.apache.iceberg.expressions.Expression residual = org.apache.iceberg.expressions.Expressions.alwaysTrue();
        if (columns == null || columns.isEmpty()) {
            return residual;
        }
        org.apache.iceberg.Schema schema = table.schema();
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
        Object condition = occurrences.size() == 1 ? ((Object[]) occurrences.get(0))[2] : null;
        if (condition == null) {
            return residual;
        }
        java.util.List pushed = new java.util.ArrayList();
        sparkConjuncts((org.apache.spark.sql.catalyst.expressions.Expression) condition, pushed);
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
        return residual;
    }

    // tasks with residual as theirs, but for those whose file is not among planned (null: all kept):
    // Spark's own scan plans the table with its pushed filter, and Iceberg's planning drops a
    // file whole by its metrics (a file of NaNs only for x = 2.1), where no row-group statistics
    // or dictionary of it need to show it (a one-row page falls back from its dictionary). When
    // every file is dropped, one task is kept with a FALSE residual (a set is never empty): its
    // reader skips every row group. Null when one is not a file scan task (or there are none).
    static java.util.List withResidual(java.util.List tasks, org.apache.iceberg.expressions.Expression residual,
                                       java.util.Set planned, boolean caseSensitive) {
        if (tasks == null || tasks.isEmpty()) {
            return null;
        }
        java.util.List out = new java.util.ArrayList(tasks.size());
        java.util.Map schemaJson = new java.util.IdentityHashMap();
        java.util.Map specJson = new java.util.IdentityHashMap();
        java.util.Map residuals = new java.util.IdentityHashMap();
        for (java.util.Iterator t = tasks.iterator(); t.hasNext();) {
            Object next = t.next();
            if (!(next instanceof org.apache.iceberg.FileScanTask)) {
                return null;
            }
            org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) next;
            boolean dropped = planned != null && !planned.contains(task.file().location());
            if (dropped && (!out.isEmpty() || t.hasNext())) {
                continue;
            }
            org.apache.iceberg.PartitionSpec spec = task.spec();
            org.apache.iceberg.Schema taskSchema = task.schema();
            if (!schemaJson.containsKey(taskSchema)) {
                schemaJson.put(taskSchema, org.apache.iceberg.SchemaParser.toJson(taskSchema));
            }
            if (!specJson.containsKey(spec)) {
                specJson.put(spec, org.apache.iceberg.PartitionSpecParser.toJson(spec));
                residuals.put(spec, org.apache.iceberg.expressions.ResidualEvaluator.of(spec, residual, caseSensitive));
            }
            org.apache.iceberg.expressions.ResidualEvaluator evaluator = dropped
                ? org.apache.iceberg.expressions.ResidualEvaluator.of(spec,
                    org.apache.iceberg.expressions.Expressions.alwaysFalse(), caseSensitive)
                : (org.apache.iceberg.expressions.ResidualEvaluator) residuals.get(spec);
            out.add(new org.apache.iceberg.BaseFileScanTask((org.apache.iceberg.DataFile) task.file(),
                (org.apache.iceberg.DeleteFile[]) task.deletes().toArray(new org.apache.iceberg.DeleteFile[0]),
                (String) schemaJson.get(taskSchema), (String) specJson.get(spec), evaluator));
        }
        return out;
    }

    // The data files of the table's snapshot that Iceberg's planning with residual keeps (by
    // partitions and file metrics, as for Spark's own scan: the staged tasks carry no metrics);
    // null when not known (no snapshot given, or the planning failed): no file is dropped.
    static java.util.Set plannedFiles(org.apache.iceberg.Table table, Long snapshot,
                                      org.apache.iceberg.expressions.Expression residual, boolean caseSensitive) {
        if (snapshot == null || residual.op() == org.apache.iceberg.expressions.Expression.Operation.TRUE) {
            return null;
        }
        java.util.Set out = new java.util.HashSet();
        try {
            // one call per line: Scan's methods return its type parameter, which Janino reads as Object
            org.apache.iceberg.TableScan scan = table.newScan().useSnapshot(snapshot.longValue());
            scan = (org.apache.iceberg.TableScan) scan.caseSensitive(caseSensitive);
            scan = (org.apache.iceberg.TableScan) scan.filter(residual);
            scan = (org.apache.iceberg.TableScan) scan.ignoreResiduals();
            org.apache.iceberg.io.CloseableIterable files = scan.planFiles();
            try {
                for (java.util.Iterator it = files.iterator(); it.hasNext();) {
                    out.add(((org.apache.iceberg.FileScanTask) it.next()).file().location());
                }
            } finally {
                files.close();
            }
        } catch (java.io.IOException e) {
            return null;
        } catch (RuntimeException e) {
            return null;
        }
        return out;
    }

    // The staged set a relation reads ("scan-task-set-id") and its first output attribute's id,
    // which tells the relations of one set apart (Spark gives each reference of a table attributes
    // of its own); null for a relation of no staged set.
    static java.util.List relationKey(org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation) {
        String setId = relation.options().get("scan-task-set-id");
        if (setId == null || !(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)
                || relation.output().isEmpty()) {
            return null;
        }
        return java.util.Arrays.asList(new Object[] {setId,
            ((org.apache.spark.sql.catalyst.expressions.Attribute) relation.output().head()).exprId()});
    }

    // Every relation reading a staged set: the Iceberg table, the columns read by the Filter
    // directly above it (none when there is none) and its condition, per set and relation.
    static void filteredScans(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
                              org.apache.spark.sql.catalyst.expressions.Expression condition, java.util.Map scans,
                              boolean caseSensitive) {
        if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) {
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation =
                ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan).relation();
            java.util.List key = relationKey(relation);
            if (key == null) {
                return;
            }
            java.util.Set columns = new java.util.HashSet();
            if (condition != null) {
                for (scala.collection.Iterator a = condition.references().iterator(); a.hasNext();) {
                    String name = ((org.apache.spark.sql.catalyst.expressions.Attribute) a.next()).name();
                    columns.add(caseSensitive ? name : name.toLowerCase(java.util.Locale.ROOT));
                }
            }
            java.util.Map byRelation = (java.util.Map) scans.get(key.get(0));
            if (byRelation == null) {
                byRelation = new java.util.LinkedHashMap();
                scans.put(key.get(0), byRelation);
            }
            java.util.List occurrences = (java.util.List) byRelation.get(key.get(1));
            if (occurrences == null) {
                occurrences = new java.util.ArrayList();
                byRelation.put(key.get(1), occurrences);
            }
            occurrences.add(new Object[] {
                ((org.apache.iceberg.spark.source.SparkTable) relation.table()).table(), columns, condition});
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

    // The keys (relationKey) of the relations of staged sets in plan, views and subqueries included.
    static void relations(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, java.util.Set out) {
        if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) {
            java.util.List key = relationKey((org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) plan);
            if (key != null) {
                out.add(key);
            }
        }
        for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
            relations((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), out);
        }
        for (scala.collection.Iterator it = plan.subqueries().iterator(); it.hasNext();) {
            relations((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), out);
        }
    }

    // plan with each relation whose key (relationKey) copies names reading that set id instead.
    static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan retargeted(
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, final java.util.Map copies) {
        if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) {
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation =
                (org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) plan;
            java.util.List key = relationKey(relation);
            String copy = key == null ? null : (String) copies.get(key);
            if (copy == null) {
                return plan;
            }
            java.util.Map options = new java.util.HashMap(relation.options().asCaseSensitiveMap());
            options.put("scan-task-set-id", copy);
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = relation.copy(relation.table(),
                relation.output(), relation.catalog(), relation.identifier(),
                new org.apache.spark.sql.util.CaseInsensitiveStringMap(options));
            out.copyTagsFrom(relation);
            return out;
        }
        return Plans.withChildren(plan, new java.util.function.UnaryOperator() {
            public Object apply(Object child) {
                return retargeted((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) child, copies);
            }
        });
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
