package pando;

/**
 * The chosen tasks of a planFiles() kept inside the JVM: through py4j, each task costs four round
 * trips (hasNext, next, file, location), ~40 ms for 60 files, more than the planning itself.
 */
public class ChosenTasks {
    public static java.util.List chosen(Object planned, String joinedPaths) throws java.io.IOException {
        java.util.Set paths = joinedPaths == null ? null
            : new java.util.HashSet(java.util.Arrays.asList(joinedPaths.split("\u0000", -1)));
        java.util.List out = new java.util.ArrayList();
        org.apache.iceberg.io.CloseableIterable files = (org.apache.iceberg.io.CloseableIterable) planned;
        try {
            java.util.Iterator it = files.iterator();
            while (it.hasNext()) {
                org.apache.iceberg.FileScanTask task = (org.apache.iceberg.FileScanTask) it.next();
                if (paths == null || paths.contains(task.file().location())) out.add(task);
            }
        } finally {
            files.close();
        }
        return out;
    }
}
