package pando;

/**
 * The FileScanTasks of recent snapshots by data file, kept in the JVM: a held-out query's chosen
 * files are then a lookup, not a planning of the table in the JVM besides pyiceberg's (14 ms per
 * table for TPC-H SF 1 lineitem with the pushed filter, 25 ms without). A snapshot's tasks never
 * change (no residual: rows are filtered by the query). Least recently used snapshots go first once
 * more than {@code maxTasks} tasks are kept; a larger snapshot is not kept. One class in the JVM
 * holds this state: every class that uses the cache calls this one.
 */
public class TaskCache {
    static final java.util.LinkedHashMap SNAPSHOTS = new java.util.LinkedHashMap(16, 0.75f, true);
    static long kept = 0;

    public static synchronized java.util.List cachedChosen(Object tableObject, Object snapshotId, String key,
            String joinedPaths, Object maxTasks) throws java.io.IOException {
        long limit = ((Number) maxTasks).longValue();
        java.util.Map byPath = (java.util.Map) SNAPSHOTS.get(key);
        if (byPath == null) {
            org.apache.iceberg.Table table = (org.apache.iceberg.Table) tableObject;
            byPath = new java.util.HashMap();
            long snapshot = ((Number) snapshotId).longValue();
            org.apache.iceberg.io.CloseableIterable files = table.newScan().useSnapshot(snapshot).planFiles();
            try {
                java.util.Iterator it = files.iterator();
                while (it.hasNext()) {
                    org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) it.next();
                    byPath.put(task.file().location(), task);
                }
            } finally {
                files.close();
            }
            if (byPath.size() <= limit) {
                SNAPSHOTS.put(key, byPath);
                kept += byPath.size();
                java.util.Iterator eldest = SNAPSHOTS.entrySet().iterator();
                while (kept > limit && eldest.hasNext()) {
                    java.util.Map.Entry entry = (java.util.Map.Entry) eldest.next();
                    kept -= ((java.util.Map) entry.getValue()).size();
                    eldest.remove();
                }
            }
        }
        String[] paths = joinedPaths.split("\u0000", -1);
        java.util.List out = new java.util.ArrayList(paths.length);
        for (int i = 0; i < paths.length; i++) {
            Object task = byPath.get(paths[i]);
            if (task == null) {
                return null;
            }
            out.add(task);
        }
        return out;
    }

    public static synchronized long[] cachedCounts() {
        return new long[] {SNAPSHOTS.size(), kept};
    }

    public static String metadataLocation(Object table) {
        if (!(table instanceof org.apache.iceberg.HasTableOperations)) {
            return null;
        }
        org.apache.iceberg.TableMetadata current = ((org.apache.iceberg.HasTableOperations) table).operations().current();
        return current == null ? null : current.metadataFileLocation();
    }

    public static void unstage(Object table, String setId) {
        org.apache.iceberg.spark.ScanTaskSetManager.get().removeTasks((org.apache.iceberg.Table) table, setId);
    }
}
