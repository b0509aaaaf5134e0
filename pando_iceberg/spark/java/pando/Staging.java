package pando;

/**
 * The staging of a table whose chosen files are found in the task cache, in one py4j call
 * (checking the Java table's metadata file, looking the tasks up and staging them with their view
 * took three calls and a Java list to release, ~0.5 ms per staged table); Spark's analysis of a
 * query ahead of time; and the analysed query's relations swapped onto their staged task sets.
 */
public class Staging {
    public static int stageCachedView(Object session, Object icebergTable, String location, String name,
            Object snapshotId, String key, String joinedPaths, Object maxTasks, String setId, String view)
            throws Exception {
        if (!location.equals(TaskCache.metadataLocation(icebergTable))) {
            return 1;  // read from another metadata file: the caller reloads the table
        }
        java.util.List tasks = TaskCache.cachedChosen(icebergTable, snapshotId, key, joinedPaths, maxTasks);
        if (tasks == null) {
            return 2;  // a chosen file is not a data file of the cached snapshot: the caller plans
        }
        TaskSetViews.stageView(session, icebergTable, name, tasks, setId, view);
        return 0;
    }

    // Spark's analysis of a query as written, started on a JVM thread of its own (a Future of the
    // Dataset): from a Python thread it would start and finish only when that thread gets the GIL
    // back from the planning (up to the 5 ms switch interval each way).
    static java.util.concurrent.ExecutorService analysis;

    public static synchronized Object analysedAhead(Object session, String sql) {
        if (analysis == null) {
            analysis = java.util.concurrent.Executors.newCachedThreadPool(new java.util.concurrent.ThreadFactory() {
                public Thread newThread(Runnable r) {
                    Thread thread = new Thread(r, "pando-analysis");
                    thread.setDaemon(true);
                    return thread;
                }
            });
        }
        final org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        final String text = sql;
        return analysis.submit(new java.util.concurrent.Callable() {
            public Object call() {
                return spark.sql(text);
            }
        });
    }

    // The analysed plan of the user's own query with each of its relations of a staged table reading
    // the staged task set (Spark analyses the query while Python plans its tables, instead
    // of analysing a rewritten query over temporary views afterwards). The relation keeps its output
    // attributes, so the plan stays resolved: only its options gain the task set id (and the split
    // size Iceberg's own scan would take), with which SparkTable.newScanBuilder builds the staged
    // scan. A table's row filters become broadcast left semi-joins of its relations with local
    // relations of their keys (the integer column's rows among the keys; the relation's output kept).
    // Relations inside a view are the view's, not the query's: left alone. Null when a relation of a
    // staged table cannot read its set (another metadata file, a snapshot or branch of its own,
    // options of its own naming a set), a row filter's column is not an integer, or a table has no
    // relation outside views.
    public static Object swappedPlan(Object session, Object dataset, String joinedUuids, String joinedLocations,
                                     String joinedSetIds, String joinedFilterUuids, String joinedFilterColumns,
                                     String joinedFilterCounts, byte[] filterKeys) {
        org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan analysed =
            ((org.apache.spark.sql.Dataset) dataset).queryExecution().analyzed();
        java.util.Map sets = new java.util.HashMap();  // uuid -> {location, set id, split size, row filters}
        if (joinedUuids.length() > 0) {
            String[] uuids = joinedUuids.split("\u0000", -1);
            String[] locations = joinedLocations.split("\u0000", -1);
            String[] setIds = joinedSetIds.split("\u0000", -1);
            for (int i = 0; i < uuids.length; i++) {
                sets.put(uuids[i], new Object[] {locations[i], setIds[i], null, null});
            }
        }
        if (joinedFilterUuids.length() > 0) {
            String[] uuids = joinedFilterUuids.split("\u0000", -1);
            String[] columns = joinedFilterColumns.split("\u0000", -1);
            String[] counts = joinedFilterCounts.split("\u0000", -1);
            java.nio.LongBuffer values = java.nio.ByteBuffer.wrap(filterKeys).asLongBuffer();
            for (int i = 0; i < uuids.length; i++) {
                Object[] set = (Object[]) sets.get(uuids[i]);
                if (set == null) {
                    set = new Object[] {null, null, null, null};
                    sets.put(uuids[i], set);
                }
                if (set[3] == null) {
                    set[3] = new java.util.ArrayList();
                }
                ((java.util.List) set[3]).add(new Object[] {columns[i],
                    LocalRelations.longRelation(values, Integer.parseInt(counts[i]), "__pando_key")});
            }
        }
        java.util.Set found = new java.util.HashSet();
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swapped;
        try {
            swapped = swapped(spark, analysed, sets, found);
        } catch (IllegalStateException e) {
            return null;  // a relation that cannot read its set (relation below)
        }
        if (found.size() != sets.size()) {
            return null;  // a table with no relation outside views
        }
        if (swapped == analysed) {
            return dataset;
        }
        swapped.setAnalyzed();  // resolved as analysed: Spark's analyzer does not run over it again
        return org.apache.spark.sql.Dataset$.MODULE$.ofRows(spark, swapped);
    }

    static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swapped(
            final org.apache.spark.sql.SparkSession spark, org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
            final java.util.Map sets, final java.util.Set found) {
        if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.View) {
            return plan;
        }
        if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) {
            return relation(spark, (org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation) plan, sets, found);
        }
        return Plans.withChildren(plan, new java.util.function.UnaryOperator() {
            public Object apply(Object child) {
                return swapped(spark, (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) child, sets, found);
            }
        });
    }

    static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan relation(org.apache.spark.sql.SparkSession spark,
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation, java.util.Map sets,
            java.util.Set found) {
        if (!(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)) {
            return relation;
        }
        org.apache.iceberg.spark.source.SparkTable sparkTable =
            (org.apache.iceberg.spark.source.SparkTable) relation.table();
        if (!(sparkTable.table() instanceof org.apache.iceberg.BaseTable)) {
            return relation;  // a metadata table (t.files, t.snapshots, ...)
        }
        org.apache.iceberg.TableMetadata current =
            ((org.apache.iceberg.BaseTable) sparkTable.table()).operations().current();
        Object[] set = (Object[]) sets.get(current.uuid());
        if (set == null) {
            return relation;
        }
        if (sparkTable.snapshotId() != null || sparkTable.branch() != null) {
            throw new IllegalStateException("a snapshot or branch of its own");
        }
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = relation;
        if (set[1] != null) {
            if (!set[0].equals(current.metadataFileLocation()) || relation.options().containsKey("scan-task-set-id")) {
                throw new IllegalStateException("another metadata file, or a set of its own");
            }
            if (set[2] == null) {  // once per set: its tasks' sizes summed
                String split = relation.options().containsKey("split-size") ? null
                    : TaskSetViews.adaptiveSplitSize(spark, sparkTable.table(), (String) set[1]);
                set[2] = split == null ? "" : split;
            }
            java.util.Map options = new java.util.HashMap(relation.options().asCaseSensitiveMap());
            options.put("scan-task-set-id", set[1]);
            if (((String) set[2]).length() > 0) {
                options.put("split-size", set[2]);
            }
            out = relation.copy(relation.table(), relation.output(), relation.catalog(), relation.identifier(),
                new org.apache.spark.sql.util.CaseInsensitiveStringMap(options));
            out.copyTagsFrom(relation);
        }
        if (set[3] != null) {
            org.apache.spark.sql.catalyst.plans.logical.JoinHint broadcast =
                new org.apache.spark.sql.catalyst.plans.logical.JoinHint(scala.Option.empty(), scala.Option.apply(
                    new org.apache.spark.sql.catalyst.plans.logical.HintInfo(scala.Option.apply(
                        org.apache.spark.sql.catalyst.plans.logical.BROADCAST$.MODULE$))));
            for (java.util.Iterator it = ((java.util.List) set[3]).iterator(); it.hasNext();) {
                Object[] filter = (Object[]) it.next();
                org.apache.spark.sql.catalyst.expressions.Attribute column = null;
                for (scala.collection.Iterator a = relation.output().iterator(); a.hasNext();) {
                    org.apache.spark.sql.catalyst.expressions.Attribute attribute =
                        (org.apache.spark.sql.catalyst.expressions.Attribute) a.next();
                    if (attribute.name().equalsIgnoreCase((String) filter[0])) {
                        column = attribute;
                    }
                }
                if (column == null || !(column.dataType() instanceof org.apache.spark.sql.types.IntegralType)) {
                    throw new IllegalStateException("a row filter's column is not an integer");
                }
                org.apache.spark.sql.catalyst.expressions.Expression value = column;
                if (!(column.dataType() instanceof org.apache.spark.sql.types.LongType)) {
                    // widened to bigint, as Spark's analyzer does in the rewritten query's semi-join
                    value = new org.apache.spark.sql.catalyst.expressions.Cast(column,
                        org.apache.spark.sql.types.DataTypes.LongType, scala.Option.empty(),
                        org.apache.spark.sql.catalyst.expressions.EvalMode$.MODULE$.LEGACY());
                }
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan keys =
                    ((org.apache.spark.sql.catalyst.plans.logical.LocalRelation) filter[1]).newInstance();
                out = new org.apache.spark.sql.catalyst.plans.logical.Join(out, keys,
                    org.apache.spark.sql.catalyst.plans.LeftSemi$.MODULE$,
                    scala.Option.apply(new org.apache.spark.sql.catalyst.expressions.EqualTo(
                        value, (org.apache.spark.sql.catalyst.expressions.Expression) keys.output().head())),
                    broadcast);
            }
        }
        found.add(current.uuid());
        return out;
    }
}
