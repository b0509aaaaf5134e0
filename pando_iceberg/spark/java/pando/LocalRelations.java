package pando;

/**
 * Local relations of long keys built as Spark's analyzer would leave them (Spark 3.5's
 * {@code DataTypeUtils}): its rows are a Scala Vector, as in a Dataset's analyzed plan (over the
 * Java list's wrapper, analysing a query reading 10,000 keys took 66 ms instead of 16).
 */
public class LocalRelations {
    // The next n longs of values as a local relation of one non-null bigint column.
    public static org.apache.spark.sql.catalyst.plans.logical.LocalRelation longRelation(
            java.nio.LongBuffer values, int n, String column) {
        java.util.List rows = new java.util.ArrayList(n);
        for (int i = 0; i < n; i++) {
            rows.add(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(
                new Object[] {Long.valueOf(values.get())}));
        }
        org.apache.spark.sql.types.StructType schema = new org.apache.spark.sql.types.StructType()
            .add(column, org.apache.spark.sql.types.DataTypes.LongType, false);
        return new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(
            (scala.collection.Seq) org.apache.spark.sql.catalyst.types.DataTypeUtils.toAttributes(schema),
            (scala.collection.Seq) scala.collection.JavaConverters.asScalaBuffer(rows).toVector(), false);
    }
}
