package pando;

/**
 * A logical plan with each child, and the plan of each subquery of its expressions, given by
 * {@code f} (the plan itself when {@code f} changes none): the walk of Staging's swap and of
 * Residuals' retargeting.
 */
public class Plans {
    static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan withChildren(
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, final java.util.function.UnaryOperator f) {
        java.util.List children = new java.util.ArrayList();
        boolean changed = false;
        for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
            Object child = it.next();
            Object now = f.apply(child);
            changed |= now != child;
            children.add(now);
        }
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = !changed ? plan
            : (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plan.withNewChildren(
                scala.collection.JavaConverters.asScalaBuffer(children).toSeq());
        if (out.subqueries().isEmpty()) {
            return out;
        }
        return (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) out.transformExpressions(
            new scala.runtime.AbstractPartialFunction() {
                public boolean isDefinedAt(Object e) {
                    return e instanceof org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
                }
                public Object applyOrElse(Object e, scala.Function1 otherwise) {
                    if (!isDefinedAt(e)) {
                        return otherwise.apply(e);
                    }
                    org.apache.spark.sql.catalyst.expressions.SubqueryExpression subquery =
                        (org.apache.spark.sql.catalyst.expressions.SubqueryExpression) e;
                    Object inner = subquery.plan();
                    Object now = f.apply(inner);
                    return now == inner ? subquery
                        : subquery.withNewPlan((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) now);
                }
            });
    }
}
