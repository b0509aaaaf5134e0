package pando;

/**
 * A long column from the driver registered as a temporary view of a local relation, in one call:
 * no Dataset is made, so Spark's analyzer does not run over it (a LocalRelation is resolved as
 * built; 3 ms of {@code Longs.longs} + {@code Views.tempView} for 10 keys). The node is marked
 * analyzed, as in a Dataset's analyzed plan. The views of one query are dropped in one call, from
 * the session catalog ({@code spark.catalog.dropTempView} also looks for cached data of each view:
 * these private views are never cached).
 */
public class KeyViews {
    public static void longsView(Object session, byte[] data, String column, String name) {
        org.apache.spark.sql.SparkSession spark = (org.apache.spark.sql.SparkSession) session;
        java.nio.LongBuffer values = java.nio.ByteBuffer.wrap(data).asLongBuffer();
        org.apache.spark.sql.catalyst.plans.logical.LocalRelation plan =
            LocalRelations.longRelation(values, values.remaining(), column);
        plan.setAnalyzed();  // resolved as built, like the analyzed plan of a Dataset
        Views.registerView(spark, plan, name);
    }

    public static void dropViews(Object session, String joinedNames) {
        org.apache.spark.sql.catalyst.catalog.SessionCatalog catalog =
            ((org.apache.spark.sql.SparkSession) session).sessionState().catalog();
        String[] names = joinedNames.split("\u0000", -1);
        for (int i = 0; i < names.length; i++) {
            catalog.dropTempView(names[i]);
        }
    }
}
