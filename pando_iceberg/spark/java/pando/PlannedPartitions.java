package pando;

/**
 * The executed plan's Iceberg scans planned, in one call: Spark builds a scan's input partitions
 * (Iceberg's file tasks) lazily; walking the plan through py4j to ask for them costs five round
 * trips a node (~8 ms for a TPC-H join query's plan), more than the planning it forces.
 */
public class PlannedPartitions {
    public static int plannedPartitions(Object root) {
        int total = 0;
        java.util.ArrayDeque stack = new java.util.ArrayDeque();
        java.util.Set seen = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap());
        stack.push(root);
        while (!stack.isEmpty()) {
            org.apache.spark.sql.execution.SparkPlan node = (org.apache.spark.sql.execution.SparkPlan) stack.pop();
            if (!seen.add(node)) {
                continue;
            }
            if (node instanceof org.apache.spark.sql.execution.datasources.v2.BatchScanExec) {
                total += ((org.apache.spark.sql.execution.datasources.v2.BatchScanExec) node).inputPartitions().size();
            }
            if (node instanceof org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) {
                stack.push(((org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec) node).initialPlan());
            }
            scala.collection.Iterator children = node.children().iterator();
            while (children.hasNext()) {
                stack.push(children.next());
            }
        }
        return total;
    }
}
