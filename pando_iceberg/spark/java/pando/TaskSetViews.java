package pando;

/**
 * A staged task set's scan registered as a temporary view in one call, the way
 * {@code spark.read.format("iceberg").option("scan-task-set-id", id).load(name)} builds it
 * (DataSourceV2Utils.loadV2Source: Iceberg's source names the catalog and identifier, the catalog
 * loads the table, a DataSourceV2Relation over it with the same options) without what only a
 * Dataset needs: looking the source up among every DataSourceRegister on the classpath
 * (ServiceLoader), the analysis of the relation and a row encoder. A JFR profile of the TPC-H SF 1
 * join queries put 87 of 880 samples of the py4j thread in that {@code load}, half of them in
 * Dataset.ofRows and a fifth in the ServiceLoader.
 *
 * Its split size is the one Iceberg's own scan of the same files would take: a staged scan
 * (SparkStagedScan) groups its tasks by the table's fixed split size (128 MB), where a planned scan
 * (SparkPartitioningAwareScan) shrinks it to spread a small scan over the session's parallelism
 * (TableScanUtil.adjustSplitSize, {@code read.split.adaptive-size.enabled}). Without it, the
 * 10-40 MB a pruned TPC-H SF 1 join query reads of lineitem was one task on one core.
 */
public class TaskSetViews {
    static org.apache.iceberg.spark.source.IcebergSource source;
    static final java.util.Map RESOLVED = java.util.Collections.synchronizedMap(new java.util.HashMap());

    public static String adaptiveSplitSize(Object session, Object icebergTable, String setId) {
        org.apache.iceberg.Table table = (org.apache.iceberg.Table) icebergTable;
        org.apache.iceberg.spark.SparkReadConf conf = new org.apache.iceberg.spark.SparkReadConf(
            (org.apache.spark.sql.SparkSession) session, table, new java.util.HashMap());
        java.util.List tasks = org.apache.iceberg.spark.ScanTaskSetManager.get().fetchTasks(table, setId);
        if (tasks == null || !conf.adaptiveSplitSizeEnabled()) {
            return null;
        }
        long size = 0;
        for (java.util.Iterator it = tasks.iterator(); it.hasNext();) {
            size += ((org.apache.iceberg.ScanTask) it.next()).sizeBytes();
        }
        return String.valueOf(
            org.apache.iceberg.util.TableScanUtil.adjustSplitSize(size, conf.parallelism(), conf.splitSize()));
    }

    public static void taskSetView(Object session, String name, String setId, String view) throws Exception {
        org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        if (source == null) {
            source = new org.apache.iceberg.spark.source.IcebergSource();
        }
        java.util.Map options = new java.util.HashMap();
        scala.collection.Iterator sessionOptions = org.apache.spark.sql.execution.datasources.v2.DataSourceV2Utils
            .extractSessionConfigs(source, spark.sessionState().conf()).iterator();
        while (sessionOptions.hasNext()) {
            scala.Tuple2 kv = (scala.Tuple2) sessionOptions.next();
            options.put(kv._1(), kv._2());
        }
        options.put("path", name);
        options.put("scan-task-set-id", setId);
        org.apache.spark.sql.util.CaseInsensitiveStringMap dsOptions =
            new org.apache.spark.sql.util.CaseInsensitiveStringMap(options);
        // Resolving the name parses it twice (0.9 ms per staged table): the result is kept per
        // session (this one and the active one, which IcebergSource reads), name, current catalog
        // and namespace, the source's session options and whether Iceberg's path-keyed table cache
        // holds the name: all it depends on besides the task set id, which only selects the
        // staged scan ("rewrite") and does so for every set alike.
        org.apache.spark.sql.connector.catalog.CatalogManager manager = spark.sessionState().catalogManager();
        java.util.Map keyed = new java.util.TreeMap(options);
        keyed.remove("scan-task-set-id");
        String key = System.identityHashCode(spark) + "\u0000"
            + System.identityHashCode(org.apache.spark.sql.SparkSession.active()) + "\u0000" + name
            + "\u0000" + manager.currentCatalog().name() + "\u0000" + java.util.Arrays.toString(manager.currentNamespace())
            + "\u0000" + keyed + "\u0000" + org.apache.iceberg.spark.SparkTableCache.get().contains(name);
        Object[] resolved = (Object[]) RESOLVED.get(key);
        if (resolved == null || resolved[2] != spark) {
            if (RESOLVED.size() > 1000) {
                RESOLVED.clear();
            }
            resolved = new Object[] {
                source.extractIdentifier(dsOptions),
                org.apache.spark.sql.connector.catalog.CatalogV2Util.getTableProviderCatalog(source, manager, dsOptions),
                spark};
            RESOLVED.put(key, resolved);
        }
        org.apache.spark.sql.connector.catalog.Identifier ident =
            (org.apache.spark.sql.connector.catalog.Identifier) resolved[0];
        org.apache.spark.sql.connector.catalog.TableCatalog catalog =
            (org.apache.spark.sql.connector.catalog.TableCatalog) resolved[1];
        org.apache.spark.sql.connector.catalog.Table table = catalog.loadTable(ident);
        if (table instanceof org.apache.iceberg.spark.source.SparkTable && !dsOptions.containsKey("split-size")) {
            String split = adaptiveSplitSize(spark, ((org.apache.iceberg.spark.source.SparkTable) table).table(), setId);
            if (split != null) {
                options.put("split-size", split);
                dsOptions = new org.apache.spark.sql.util.CaseInsensitiveStringMap(options);
            }
        }
        org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation plan =
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation.create(
                table, scala.Option.apply(catalog), scala.Option.apply(ident), dsOptions);
        plan.setAnalyzed();  // resolved as built, like the analyzed plan of the Dataset load() returns
        Views.registerView(spark, plan, view);
    }

    // The tasks staged and their view made in one call (two py4j round trips fewer per staged table);
    // when the view cannot be made, the tasks are removed again and the error is the caller's. A
    // null view stages the tasks only.
    public static void stageView(Object session, Object icebergTable, String name, Object tasks, String setId,
                                 String view) throws Exception {
        org.apache.iceberg.Table table = (org.apache.iceberg.Table) icebergTable;
        org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
        manager.stageTasks(table, setId, (java.util.List) tasks);
        if (view == null) {
            return;  // staged only: the caller reads the set through swappedPlan, or makes its view later
        }
        try {
            taskSetView(session, name, setId, view);
        } catch (Exception e) {
            manager.removeTasks(table, setId);
            throw e;
        }
    }
}
