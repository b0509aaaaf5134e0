package pando;

/**
 * An optimizer rule (the session's {@code experimental().extraOptimizations()}, run after Spark's
 * own operator optimizations and scan push-down) that makes every query of the session, the
 * DataFrame API's included, read only the files Pando's planner keeps.
 *
 * <p>The optimized plan is cut into blocks: maximal subtrees of filters, projections and inner
 * joins over Iceberg batch scans. Each block with a scan of a laid-out table is rendered as one SQL
 * query ({@code SELECT 1 FROM t0 AS __p0, t1 AS __p1 WHERE ...}: its conditions, each column named
 * by its scan's alias) and the blocks of a plan are handed to Python in one call
 * ({@code planner}, a py4j callback). A block's rows are what its subtree gives the rest of the
 * plan, so a file the planner proves gives none of them can go. Python answers, per scan alias, a
 * staged Iceberg task set (empty: nothing to read); the scan is replaced by a staged scan of that
 * set with the same output attributes, its tasks read here, and every set is removed before the
 * rule returns (the scan object holds its tasks). The filters above the scans stay in the plan:
 * rows are filtered as before.
 *
 * <p>A left semi join is pruned as the inner join of its sides. A left anti join's left side stays
 * in the enclosing block (its rows are some of the left side's); its right side is a block of its own
 * with the enclosing block's scans as context (marked, never answered): a right row matching no row
 * the enclosing block gives decides nothing. A table read twice in a block is planned per scan
 * (prune_rule.py: each scan with the conditions on it and the other scans of its table left out).
 *
 * <p>A condition that cannot be rendered (a subquery, a non-deterministic or unrenderable
 * expression, a column of something that is no block scan) is left out of the block's SQL: the
 * planner then knows less and keeps more. A scan is never replaced when it is not an Iceberg batch
 * scan of a table of its catalog (metadata tables, snapshots, branches, options of its own, staged
 * scans), its table is partitioned (Iceberg keeps out of the plan the predicates it evaluates on
 * partitions), a dynamic-pruning filter is above it, or it reads metadata columns. Any failure
 * leaves the plan as Spark made it, with a note ({@link #lastNote()}).
 */
public class PruneRule {
    // The session's extra optimizer rules with a new Optimizer asking planner (a py4j proxy of a
    // java.util.function.Function) in place of any it had; the rule.
    public static Object install(Object session, Object planner, String marker) {
        Optimizer rule = new Optimizer(session, planner, marker);
        replaceRules((org.apache.spark.sql.SparkSession) session, rule);
        return rule;
    }

    // The session's extra optimizer rules without its Optimizer.
    public static void uninstall(Object session) {
        replaceRules((org.apache.spark.sql.SparkSession) session, null);
    }

    private static void replaceRules(org.apache.spark.sql.SparkSession spark, Object rule) {
        org.apache.spark.sql.ExperimentalMethods methods = spark.experimental();
        java.util.List rules = new java.util.ArrayList();
        for (scala.collection.Iterator it = methods.extraOptimizations().iterator(); it.hasNext();) {
            Object r = it.next();
            if (!r.getClass().getName().equals(Optimizer.class.getName())) {
                rules.add(r);
            }
        }
        if (rule != null) {
            rules.add(rule);
        }
        methods.extraOptimizations_$eq(scala.collection.JavaConverters.asScalaBuffer(rules).toList());
    }

    // The rule.
    public static class Optimizer extends org.apache.spark.sql.catalyst.rules.Rule {
        // Rules asking Python now: the queries Python's planning runs meanwhile are left as they are.
        static final java.util.concurrent.atomic.AtomicInteger ASKING = new java.util.concurrent.atomic.AtomicInteger();

        private final java.util.function.Function planner;  // request (String) -> answer (String)
        private final String marker;  // the table property of a laid-out table
        private final org.apache.spark.sql.SparkSession session;  // the session whose optimizer runs the rule
        private volatile String lastNote = "";
        private final java.util.concurrent.atomic.AtomicLong replaced = new java.util.concurrent.atomic.AtomicLong();
        // Where the rule's time goes: plans seen, plans worth asking about, calls to Python, answers
        // reused, and nanoseconds in the rule (all of it) and waiting for Python's answers.
        private final java.util.concurrent.atomic.AtomicLong applied = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong considered = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong asked = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong reused = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong ruleNanos = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong askNanos = new java.util.concurrent.atomic.AtomicLong();
        // The notes of the last plans asked about (Python's, and the rule's own), oldest first.
        private final java.util.ArrayDeque notes = new java.util.ArrayDeque();
        static final int NOTES_KEPT = 50;
        // Python's answers by what they depend on (the request: blocks, tables, snapshots; each table's
        // metadata file; the session's settings and current catalog), each with the tasks of the sets
        // it staged: the same blocks optimized again (a DataFrame run twice, explain then collect, a
        // query repeated) are answered without asking Python, by staging the same tasks again. A new
        // snapshot, a property set on a table, or a setting changed makes a new key.
        static final int ANSWERS_KEPT = 64;
        private final java.util.LinkedHashMap answers = new java.util.LinkedHashMap(16, 0.75f, true) {
            protected boolean removeEldestEntry(java.util.Map.Entry eldest) {
                return size() > ANSWERS_KEPT;
            }
        };

        static class Answer {
            final String[] lines;  // Python's answer, its set ids without their unique tail
            final java.util.Map tasks = new java.util.HashMap();  // alias -> the tasks of its staged set

            Answer(String[] lines) {
                this.lines = lines;
            }
        }

        // What the rule said of the last plan it asked about ('' when it replaced what Python staged).
        public String lastNote() {
            return lastNote;
        }

        // How many scans the rule replaced by staged scans.
        public long replacedScans() {
            return replaced.get();
        }

        // The notes of the last plans asked about, one a line, oldest first.
        public String notes() {
            synchronized (notes) {
                StringBuilder out = new StringBuilder();
                for (java.util.Iterator it = notes.iterator(); it.hasNext();) {
                    out.append((String) it.next()).append('\n');
                }
                return out.toString();
            }
        }

        public void clearNotes() {
            synchronized (notes) {
                notes.clear();
            }
        }

        private void note(String text) {
            synchronized (notes) {
                notes.addLast(text);
                while (notes.size() > NOTES_KEPT) {
                    notes.removeFirst();
                }
            }
        }

        // "applied <n> considered <n> asked <n> reused <n> rule_ms <ms> ask_ms <ms>" (since install or the
        // last clearStats).
        public String stats() {
            return "applied " + applied.get() + " considered " + considered.get() + " asked " + asked.get()
                + " reused " + reused.get() + " rule_ms " + (ruleNanos.get() / 1.0e6) + " ask_ms " + (askNanos.get() / 1.0e6);
        }

        public void clearStats() {
            applied.set(0);
            considered.set(0);
            asked.set(0);
            reused.set(0);
            ruleNanos.set(0);
            askNanos.set(0);
        }

        // How many answers are kept for reuse; forgetting them (the next plans ask Python again).
        public int answersKept() {
            synchronized (answers) {
                return answers.size();
            }
        }

        public void forgetAnswers() {
            synchronized (answers) {
                answers.clear();
            }
        }

        public Optimizer(Object session, Object planner, String marker) {
            this.session = (org.apache.spark.sql.SparkSession) session;
            this.planner = (java.util.function.Function) planner;
            this.marker = marker;
        }

        static class Block {
            final java.util.List leaves = new java.util.ArrayList();  // DataSourceV2ScanRelation
            final java.util.List conditions = new java.util.ArrayList();  // Expression
            final java.util.Map aliases = new java.util.HashMap();  // ExprId -> Expression (projected aliases)
            // Scans in the block's SQL only to say which rows matter (an anti join's left side): never answered.
            final java.util.Set context = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap());
            // The anti joins whose left side is in the block: {right side (LogicalPlan), condition (Option)}.
            final java.util.List anti = new java.util.ArrayList();
            boolean laidOut;
        }

        public org.apache.spark.sql.catalyst.trees.TreeNode apply(org.apache.spark.sql.catalyst.trees.TreeNode node) {
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan =
                (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) node;
            long t0 = System.nanoTime();
            applied.incrementAndGet();
            // A correlated subquery optimized on its own (Spark's OptimizeSubqueries, before it rewrites
            // EXISTS / IN / correlated scalars into joins): left alone, so that its scans are planned
            // in the join they become, with the outer query's filters (TPC-H Q4's EXISTS).
            boolean correlated = plan instanceof org.apache.spark.sql.catalyst.plans.logical.Subquery
                && ((org.apache.spark.sql.catalyst.plans.logical.Subquery) plan).correlated();
            if (correlated || ASKING.get() > 0 || plan.isStreaming() || !worthAsking(plan)) {
                ruleNanos.addAndGet(System.nanoTime() - t0);
                return plan;
            }
            considered.incrementAndGet();
            java.util.List sets = new java.util.ArrayList();  // {Table, set id} staged by Python
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out = plan;
            try {
                out = swapped(plan, sets);
            } catch (Throwable t) {
                lastNote = "Spark's own plan: " + t;
                note(lastNote.replace('\n', ' '));
                out = plan;
            }
            // (no finally: Janino's stack maps of a finally around returns fail verification)
            org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
            for (java.util.Iterator it = sets.iterator(); it.hasNext();) {
                Object[] set = (Object[]) it.next();
                try {
                    manager.removeTasks((org.apache.iceberg.Table) set[0], (String) set[1]);
                } catch (Throwable ignored) {
                    lastNote = lastNote + " (a staged set was not removed: " + ignored + ")";
                }
            }
            ruleNanos.addAndGet(System.nanoTime() - t0);
            return out;
        }

        // The plan with the scans Python staged sets for swapped for staged scans; the sets staged are
        // added to sets (the caller removes them).
        private org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swapped(
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, java.util.List sets) {
            java.util.List blocks = new java.util.ArrayList();
            collect(plan, blocks);
            java.util.IdentityHashMap names = new java.util.IdentityHashMap();  // scan -> alias
            java.util.IdentityHashMap seen = new java.util.IdentityHashMap();  // scan -> times in the plan
            StringBuilder request = new StringBuilder();
            StringBuilder state = new StringBuilder();  // what the answer depends on beyond the request
            int[] count = {0};  // scans named so far (__p0, __p1, ...)
            for (int b = 0; b < blocks.size(); b++) {
                Block block = (Block) blocks.get(b);
                if (!block.laidOut) {
                    continue;
                }
                render(block, names, count, request, state);
            }
            if (request.length() == 0) {
                return plan;
            }
            countScans(plan, seen);
            java.util.Map byAlias = new java.util.HashMap();
            for (java.util.Iterator it = names.entrySet().iterator(); it.hasNext();) {
                java.util.Map.Entry e = (java.util.Map.Entry) it.next();
                byAlias.put(e.getValue(), e.getKey());
            }
            String key = request.toString() + "\u0000" + state + "\u0000" + settingsKey();
            Answer kept;
            synchronized (answers) {
                kept = (Answer) answers.get(key);
            }
            String answer = null;
            boolean fresh = kept == null;
            if (kept != null) {
                reused.incrementAndGet();
                answer = restaged(kept, byAlias, sets);
            } else {
                Throwable failed = null;
                asked.incrementAndGet();
                long t0 = System.nanoTime();
                ASKING.incrementAndGet();
                try {
                    answer = (String) planner.apply(request.toString());
                } catch (Throwable t) {
                    failed = t;
                }
                ASKING.decrementAndGet();
                askNanos.addAndGet(System.nanoTime() - t0);
                if (failed != null) {
                    throw new IllegalStateException("the planner failed", failed);
                }
            }
            if (answer == null || answer.length() == 0) {
                return plan;
            }
            String[] lines = answer.split("\n");
            boolean keep = fresh;
            for (int i = 0; i < lines.length; i++) {  // every set Python staged is removed, whatever happens next
                String[] f = lines[i].split("\t", -1);
                Object scan = f.length == 3 && f[0].equals("S") ? byAlias.get(f[1]) : null;
                if (scan != null && f[2].length() > 0 && fresh) {
                    sets.add(new Object[] {((org.apache.iceberg.spark.source.SparkTable)
                        ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) scan).relation().table())
                        .table(), f[2]});
                }
            }
            // A fresh answer Python marks reusable ("K") is kept with its sets' tasks
            boolean reusable = false;
            for (int i = 0; i < lines.length; i++) {
                reusable |= lines[i].equals("K");
            }
            if (fresh && reusable) {
                Answer made = new Answer(lines);
                for (int i = 0; i < lines.length; i++) {
                    String[] f = lines[i].split("\t", -1);
                    if (f.length != 3 || !f[0].equals("S") || f[2].length() == 0) {
                        continue;
                    }
                    Object scan = byAlias.get(f[1]);
                    if (scan == null || f[2].length() <= UNIQUE_TAIL) {
                        made = null;
                        break;
                    }
                    org.apache.iceberg.Table table = ((org.apache.iceberg.spark.source.SparkTable)
                        ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) scan).relation().table()).table();
                    made.tasks.put(f[1], new java.util.ArrayList(
                        org.apache.iceberg.spark.ScanTaskSetManager.get().fetchTasks(table, f[2])));
                }
                if (made != null) {
                    synchronized (answers) {
                        answers.put(key, made);
                    }
                }
            }
            final java.util.IdentityHashMap swaps = new java.util.IdentityHashMap();
            StringBuilder said = new StringBuilder();
            for (int i = 0; i < lines.length; i++) {
                String[] f = lines[i].split("\t", -1);
                if (f.length == 2 && f[0].equals("N")) {
                    said.append(f[1]).append('\n');
                    note(f[1]);
                    continue;
                }
                if (f.length != 3 || !f[0].equals("S")) {
                    continue;
                }
                org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan =
                    (org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) byAlias.get(f[1]);
                if (scan == null) {
                    continue;
                }
                org.apache.iceberg.spark.source.SparkTable table =
                    (org.apache.iceberg.spark.source.SparkTable) scan.relation().table();
                if (((Integer) seen.get(scan)).intValue() != 1) {
                    said.append(f[1]).append(": the same scan twice in the plan: Spark's own scan\n");
                    note(f[1] + ": the same scan twice in the plan: Spark's own scan");
                    continue;
                }
                swaps.put(scan, f[2].length() == 0 ? emptyOf(scan) : stagedOf(scan, table, f[2]));
            }
            lastNote = said.toString();
            if (swaps.isEmpty()) {
                return plan;
            }
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan out =
                (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plan.transformUp(
                    new scala.runtime.AbstractPartialFunction() {
                        public boolean isDefinedAt(Object p) {
                            return swaps.containsKey(p);
                        }
                        public Object applyOrElse(Object p, scala.Function1 otherwise) {
                            Object now = swaps.get(p);
                            return now == null ? otherwise.apply(p) : now;
                        }
                    });
            replaced.addAndGet(swaps.size());
            return out;
        }

        static final int UNIQUE_TAIL = 12;  // the random tail of a set id Python stages (prune_rule.stage)

        // A kept answer with its sets staged again (same tasks, new ids, added to sets for removal).
        private static String restaged(Answer kept, java.util.Map byAlias, java.util.List sets) {
            StringBuilder out = new StringBuilder();
            org.apache.iceberg.spark.ScanTaskSetManager manager = org.apache.iceberg.spark.ScanTaskSetManager.get();
            for (int i = 0; i < kept.lines.length; i++) {
                String line = kept.lines[i];
                String[] f = line.split("\t", -1);
                if (f.length == 3 && f[0].equals("S") && f[2].length() > 0) {
                    Object scan = byAlias.get(f[1]);
                    java.util.List tasks = (java.util.List) kept.tasks.get(f[1]);
                    if (scan == null || tasks == null) {
                        continue;  // not swapped: Spark's own scan
                    }
                    org.apache.iceberg.Table table = ((org.apache.iceberg.spark.source.SparkTable)
                        ((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) scan).relation().table()).table();
                    String id = f[2].substring(0, f[2].length() - UNIQUE_TAIL)
                        + java.util.UUID.randomUUID().toString().replace("-", "").substring(0, UNIQUE_TAIL);
                    manager.stageTasks(table, id, tasks);
                    sets.add(new Object[] {table, id});
                    line = "S\t" + f[1] + "\t" + id;
                }
                out.append(line).append('\n');
            }
            return out.toString();
        }

        // The session's settings (every SQL setting set, sorted) and current catalog: an answer is
        // reused only under the settings it was planned with (ANSI mode, time zone, Pando's own).
        // Public API only: RuntimeConfig.getAll (the session's SQL settings set) and Catalog.currentCatalog.
        private String settingsKey() {
            java.util.Map confs = new java.util.TreeMap(scala.collection.JavaConverters.mapAsJavaMap(session.conf().getAll()));
            return session.catalog().currentCatalog() + "\u0001" + confs;
        }

        // Is there a scan of a laid-out table in the plan (not in its subqueries: they are optimized
        // on their own), and no row-level write (its scans choose the files it replaces)?
        private boolean worthAsking(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan) {
            String kind = plan.getClass().getSimpleName();
            if (kind.equals("ReplaceData") || kind.equals("WriteDelta") || kind.startsWith("MergeRows")) {
                return false;
            }
            if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) {
                return candidate((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan) && laidOut(
                    (org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan);
            }
            boolean any = false;
            for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan child =
                    (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next();
                String childKind = child.getClass().getSimpleName();
                if (childKind.equals("ReplaceData") || childKind.equals("WriteDelta")) {
                    return false;
                }
                any |= worthAsking(child);
            }
            return any;
        }

        private static void countScans(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan,
                                       java.util.IdentityHashMap seen) {
            if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) {
                Integer n = (Integer) seen.get(plan);
                seen.put(plan, Integer.valueOf(n == null ? 1 : n.intValue() + 1));
            }
            for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
                countScans((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), seen);
            }
        }

        // An Iceberg batch scan of a current, unpartitioned table of a catalog, with no options of its
        // own and only table columns in its output.
        static boolean candidate(org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan) {
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation relation = scan.relation();
            if (!(relation.table() instanceof org.apache.iceberg.spark.source.SparkTable)
                    || !scan.scan().getClass().getSimpleName().equals("SparkBatchQueryScan")
                    || relation.catalog().isEmpty() || relation.identifier().isEmpty()
                    || !relation.options().isEmpty()
                    || ((org.apache.spark.sql.connector.catalog.Identifier) relation.identifier().get()).namespace().length != 1) {
                return false;
            }
            org.apache.iceberg.spark.source.SparkTable table = (org.apache.iceberg.spark.source.SparkTable) relation.table();
            if (table.snapshotId() != null || table.branch() != null || !(table.table() instanceof org.apache.iceberg.BaseTable)
                    || !table.table().spec().isUnpartitioned()) {
                return false;
            }
            java.util.Set columns = new java.util.HashSet();
            org.apache.spark.sql.types.StructField[] fields = table.schema().fields();
            for (int i = 0; i < fields.length; i++) {
                columns.add(fields[i].name());
            }
            for (scala.collection.Iterator it = scan.output().iterator(); it.hasNext();) {
                if (!columns.contains(((org.apache.spark.sql.catalyst.expressions.AttributeReference) it.next()).name())) {
                    return false;
                }
            }
            return true;
        }

        private boolean laidOut(org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan) {
            return ((org.apache.iceberg.spark.source.SparkTable) scan.relation().table()).table().properties()
                .containsKey(marker);
        }

        private static boolean isInner(org.apache.spark.sql.catalyst.plans.logical.Join join) {
            // CROSS JOIN written with a condition (TPC-H's comma joins as sqlglot writes them) is an inner join.
            // A left semi join (EXISTS / IN subqueries as Spark rewrites them) gives the left rows of its
            // inner join's pairs, and only the right rows of those pairs decide which: both sides are
            // pruned as in the inner join (an anti join's right side decides by its absence: not so).
            return join.joinType() == org.apache.spark.sql.catalyst.plans.Inner$.MODULE$
                || join.joinType() == org.apache.spark.sql.catalyst.plans.Cross$.MODULE$
                || join.joinType() == org.apache.spark.sql.catalyst.plans.LeftSemi$.MODULE$;
        }

        // A left anti join (NOT EXISTS, NOT IN as Spark rewrites them): its left rows without a match.
        private static boolean isAnti(org.apache.spark.sql.catalyst.plans.logical.Join join) {
            return join.joinType() == org.apache.spark.sql.catalyst.plans.LeftAnti$.MODULE$;
        }

        // The right sides of the anti joins in the block, each as a block of its own with the enclosing
        // block's scans as context: the enclosing scans and conditions, the anti join's condition and
        // the right side's own, where only the right side's scans are answered. A right row that can
        // make the condition TRUE for no left row the block gives decides nothing (a left row the block
        // does not give is filtered out whatever the anti join says), so it may go; the enclosing scans
        // are never pruned by the right side (an anti join keeps the left rows whose match is absent).
        private void anti(Block block, java.util.List blocks) {
            for (int i = 0; i < block.anti.size(); i++) {
                Object[] a = (Object[]) block.anti.get(i);
                org.apache.spark.sql.catalyst.plans.logical.LogicalPlan right =
                    (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) a[0];
                Block side = new Block();
                boolean shaped = right instanceof org.apache.spark.sql.catalyst.plans.logical.Filter
                    || (right instanceof org.apache.spark.sql.catalyst.plans.logical.Project && plainProject(right))
                    || (right instanceof org.apache.spark.sql.catalyst.plans.logical.Join
                        && (isInner((org.apache.spark.sql.catalyst.plans.logical.Join) right)
                            || isAnti((org.apache.spark.sql.catalyst.plans.logical.Join) right)))
                    || (right instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation
                        && candidate((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) right));
                if (!shaped) {
                    collect(right, blocks);
                    continue;
                }
                gather(right, side, blocks);
                if (side.leaves.isEmpty()) {
                    continue;
                }
                Block both = new Block();
                both.leaves.addAll(block.leaves);
                both.context.addAll(block.leaves);
                both.leaves.addAll(side.leaves);
                both.context.addAll(side.context);
                both.conditions.addAll(block.conditions);
                scala.Option condition = (scala.Option) a[1];
                if (condition.isDefined()) {
                    conjuncts((org.apache.spark.sql.catalyst.expressions.Expression) condition.get(), both.conditions);
                }
                both.conditions.addAll(side.conditions);
                both.aliases.putAll(block.aliases);
                both.aliases.putAll(side.aliases);
                both.anti.addAll(side.anti);
                both.laidOut = side.laidOut;
                blocks.add(both);
                anti(both, blocks);  // an anti join in the right side: planned with all of this as context
            }
        }

        // Blocks of the plan: a filter, projection, inner join or scan starts one; what is none of
        // these is the root of further blocks.
        private void collect(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, java.util.List blocks) {
            if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Filter
                    || (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Project && plainProject(plan))
                    || (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Join
                        && (isInner((org.apache.spark.sql.catalyst.plans.logical.Join) plan)
                            || isAnti((org.apache.spark.sql.catalyst.plans.logical.Join) plan)))
                    || (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation
                        && candidate((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan))) {
                Block block = new Block();
                gather(plan, block, blocks);
                if (!block.leaves.isEmpty()) {
                    blocks.add(block);
                }
                anti(block, blocks);
                return;
            }
            for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
                collect((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), blocks);
            }
        }

        private static boolean plainProject(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan) {
            for (scala.collection.Iterator it = ((org.apache.spark.sql.catalyst.plans.logical.Project) plan)
                    .projectList().iterator(); it.hasNext();) {
                org.apache.spark.sql.catalyst.expressions.Expression e =
                    (org.apache.spark.sql.catalyst.expressions.Expression) it.next();
                if (!e.deterministic()
                        || org.apache.spark.sql.catalyst.expressions.SubqueryExpression$.MODULE$.hasSubquery(e)) {
                    return false;
                }
            }
            return true;
        }

        private void gather(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, Block block, java.util.List blocks) {
            if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Filter) {
                conjuncts(((org.apache.spark.sql.catalyst.plans.logical.Filter) plan).condition(), block.conditions);
                gather(((org.apache.spark.sql.catalyst.plans.logical.Filter) plan).child(), block, blocks);
            } else if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Project && plainProject(plan)) {
                for (scala.collection.Iterator it = ((org.apache.spark.sql.catalyst.plans.logical.Project) plan)
                        .projectList().iterator(); it.hasNext();) {
                    Object e = it.next();
                    if (e instanceof org.apache.spark.sql.catalyst.expressions.Alias) {
                        org.apache.spark.sql.catalyst.expressions.Alias a = (org.apache.spark.sql.catalyst.expressions.Alias) e;
                        block.aliases.put(a.exprId(), a.child());
                    }
                }
                gather(((org.apache.spark.sql.catalyst.plans.logical.Project) plan).child(), block, blocks);
            } else if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Join
                    && isInner((org.apache.spark.sql.catalyst.plans.logical.Join) plan)) {
                org.apache.spark.sql.catalyst.plans.logical.Join join = (org.apache.spark.sql.catalyst.plans.logical.Join) plan;
                if (join.condition().isDefined()) {
                    conjuncts((org.apache.spark.sql.catalyst.expressions.Expression) join.condition().get(), block.conditions);
                }
                gather(join.left(), block, blocks);
                gather(join.right(), block, blocks);
            } else if (plan instanceof org.apache.spark.sql.catalyst.plans.logical.Join
                    && isAnti((org.apache.spark.sql.catalyst.plans.logical.Join) plan)) {
                // An anti join gives some of its left side's rows: the left side stays in the block (the
                // block's SQL without the anti join keeps more rows, never fewer); its right side is
                // planned once the block is whole (anti below), never the other way round.
                org.apache.spark.sql.catalyst.plans.logical.Join join = (org.apache.spark.sql.catalyst.plans.logical.Join) plan;
                gather(join.left(), block, blocks);
                block.anti.add(new Object[] {join.right(), join.condition()});
            } else if (plan instanceof org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation
                    && candidate((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan)) {
                block.leaves.add(plan);
                block.laidOut |= laidOut((org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) plan);
            } else {
                for (scala.collection.Iterator it = plan.children().iterator(); it.hasNext();) {
                    collect((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) it.next(), blocks);
                }
            }
        }

        private static void conjuncts(org.apache.spark.sql.catalyst.expressions.Expression e, java.util.List out) {
            if (e instanceof org.apache.spark.sql.catalyst.expressions.And) {
                conjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).left(), out);
                conjuncts(((org.apache.spark.sql.catalyst.expressions.And) e).right(), out);
            } else {
                out.add(e);
            }
        }

        // One block as lines of the request: "B\t<sql>", then "L\t<alias>\t<catalog>\t<db>.<table>\t<snapshot id>"
        // per scan (a scan under a dynamic-pruning filter is in the SQL but marked "X": not replaced; a
        // context scan of an anti join's block "C": in the SQL, never answered). Every scan of the plan
        // has an alias of its own in every block it is in: Python answers per scan, not per table.
        private void render(Block block, java.util.IdentityHashMap names, int[] count, StringBuilder out,
                            StringBuilder state) {
            final java.util.Map qualifiers = new java.util.HashMap();  // ExprId -> alias
            StringBuilder from = new StringBuilder();
            java.util.List leafLines = new java.util.ArrayList();
            java.util.Set pinned = new java.util.HashSet();  // aliases under a dynamic-pruning filter
            for (int i = 0; i < block.leaves.size(); i++) {
                org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan =
                    (org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation) block.leaves.get(i);
                String alias = "__p" + count[0]++;
                boolean context = block.context.contains(scan);
                if (!context) {
                    names.put(scan, alias);
                }
                for (scala.collection.Iterator it = scan.output().iterator(); it.hasNext();) {
                    qualifiers.put(((org.apache.spark.sql.catalyst.expressions.AttributeReference) it.next()).exprId(), alias);
                }
                org.apache.spark.sql.connector.catalog.Identifier ident =
                    (org.apache.spark.sql.connector.catalog.Identifier) scan.relation().identifier().get();
                String catalog = ((org.apache.spark.sql.connector.catalog.CatalogPlugin) scan.relation().catalog().get()).name();
                org.apache.iceberg.Table table = ((org.apache.iceberg.spark.source.SparkTable) scan.relation().table()).table();
                org.apache.iceberg.Snapshot snapshot = table.currentSnapshot();
                from.append(from.length() == 0 ? "" : ", ").append(quote(catalog)).append('.')
                    .append(quote(ident.namespace()[0])).append('.').append(quote(ident.name())).append(" AS ").append(alias);
                leafLines.add(new String[] {context ? "C" : null, alias, catalog, ident.namespace()[0] + "." + ident.name(),
                    snapshot == null ? "" : String.valueOf(snapshot.snapshotId())});
                // its metadata file: a new one with every commit, properties (the layout pointer) included
                state.append(alias).append('\t')
                    .append(((org.apache.iceberg.BaseTable) table).operations().current().metadataFileLocation()).append('\n');
            }
            StringBuilder where = new StringBuilder();
            for (int i = 0; i < block.conditions.size(); i++) {
                org.apache.spark.sql.catalyst.expressions.Expression e =
                    substituted((org.apache.spark.sql.catalyst.expressions.Expression) block.conditions.get(i), block.aliases);
                boolean known = true;
                java.util.Set aliasesOf = new java.util.HashSet();
                for (scala.collection.Iterator it = e.references().iterator(); it.hasNext();) {
                    Object alias = qualifiers.get(((org.apache.spark.sql.catalyst.expressions.Attribute) it.next()).exprId());
                    if (alias == null) {
                        known = false;
                    } else {
                        aliasesOf.add(alias);
                    }
                }
                if (e.toString().toLowerCase(java.util.Locale.ROOT).contains("dynamicpruning")) {
                    pinned.addAll(aliasesOf);
                    continue;
                }
                if (!known || !e.deterministic() || hasFloatLiteral(e)
                        || org.apache.spark.sql.catalyst.expressions.SubqueryExpression$.MODULE$.hasSubquery(e)) {
                    continue;  // left out: the planner keeps more
                }
                String text;
                try {
                    text = ((org.apache.spark.sql.catalyst.expressions.Expression) e.transform(
                        new scala.runtime.AbstractPartialFunction() {
                            public boolean isDefinedAt(Object x) {
                                return x instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference;
                            }
                            public Object applyOrElse(Object x, scala.Function1 otherwise) {
                                if (!isDefinedAt(x)) {
                                    return otherwise.apply(x);
                                }
                                org.apache.spark.sql.catalyst.expressions.AttributeReference a =
                                    (org.apache.spark.sql.catalyst.expressions.AttributeReference) x;
                                java.util.List q = new java.util.ArrayList();
                                q.add(qualifiers.get(a.exprId()));
                                return a.withQualifier(scala.collection.JavaConverters.asScalaBuffer(q).toSeq());
                            }
                        })).sql();
                } catch (Throwable t) {
                    continue;
                }
                if (text.indexOf('\n') >= 0) {
                    continue;
                }
                where.append(where.length() == 0 ? " WHERE " : " AND ").append(text);
            }
            out.append("B\tSELECT 1 FROM ").append(from).append(where).append('\n');
            for (int i = 0; i < leafLines.size(); i++) {
                String[] l = (String[]) leafLines.get(i);
                out.append(l[0] != null ? l[0] : pinned.contains(l[1]) ? "X" : "L");
                for (int j = 1; j < l.length; j++) {
                    out.append('\t').append(l[j]);
                }
                out.append('\n');
            }
        }

        // A FLOAT literal is written CAST(<decimal> AS FLOAT), which rounds twice: not the literal.
        private static boolean hasFloatLiteral(org.apache.spark.sql.catalyst.expressions.Expression e) {
            if (e instanceof org.apache.spark.sql.catalyst.expressions.Literal
                    && e.dataType() instanceof org.apache.spark.sql.types.FloatType) {
                return true;
            }
            for (scala.collection.Iterator it = e.children().iterator(); it.hasNext();) {
                if (hasFloatLiteral((org.apache.spark.sql.catalyst.expressions.Expression) it.next())) {
                    return true;
                }
            }
            return false;
        }

        // The condition with the block's projected aliases replaced by what they project.
        private static org.apache.spark.sql.catalyst.expressions.Expression substituted(
                org.apache.spark.sql.catalyst.expressions.Expression e, final java.util.Map aliases) {
            if (aliases.isEmpty()) {
                return e;
            }
            for (int round = 0; round < 8; round++) {
                final boolean[] changed = {false};
                e = (org.apache.spark.sql.catalyst.expressions.Expression) e.transformUp(
                    new scala.runtime.AbstractPartialFunction() {
                        public boolean isDefinedAt(Object x) {
                            return x instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference
                                && aliases.containsKey(((org.apache.spark.sql.catalyst.expressions.AttributeReference) x).exprId());
                        }
                        public Object applyOrElse(Object x, scala.Function1 otherwise) {
                            if (!isDefinedAt(x)) {
                                return otherwise.apply(x);
                            }
                            changed[0] = true;
                            return aliases.get(((org.apache.spark.sql.catalyst.expressions.AttributeReference) x).exprId());
                        }
                    });
                if (!changed[0]) {
                    break;
                }
            }
            return e;
        }

        private static String quote(String name) {
            return "`" + name.replace("`", "``") + "`";
        }

        private static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan emptyOf(
                org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan) {
            return new org.apache.spark.sql.catalyst.plans.logical.LocalRelation(
                (scala.collection.Seq) scan.output(), (scala.collection.Seq) scala.collection.immutable.Nil$.MODULE$, false);
        }

        // The scan reading the staged set: same relation and output attributes, its columns pruned to
        // the output, its tasks read now (the set is removed when the rule returns).
        private static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan stagedOf(
                org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation scan,
                org.apache.iceberg.spark.source.SparkTable table, String setId) {
            java.util.Map options = new java.util.HashMap();
            options.put("scan-task-set-id", setId);
            org.apache.spark.sql.SparkSession spark = org.apache.spark.sql.SparkSession.active();
            String split = TaskSetViews.adaptiveSplitSize(spark, table.table(), setId);
            if (split != null) {
                options.put("split-size", split);
            }
            // The scan's table under a name that says what it reads (explain and the Spark UI print it):
            // the same table operations, so the same metadata, files and staged sets (found by uuid).
            org.apache.iceberg.Table named = new org.apache.iceberg.BaseTable(
                ((org.apache.iceberg.BaseTable) table.table()).operations(), table.table().name() + " " + setId);
            org.apache.spark.sql.connector.read.ScanBuilder builder = new org.apache.iceberg.spark.source.SparkTable(
                named, false).newScanBuilder(new org.apache.spark.sql.util.CaseInsensitiveStringMap(options));
            org.apache.spark.sql.types.StructType wanted =
                org.apache.spark.sql.catalyst.types.DataTypeUtils.fromAttributes((scala.collection.Seq) scan.output());
            ((org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns) builder).pruneColumns(wanted);
            org.apache.spark.sql.connector.read.Scan staged = builder.build();
            org.apache.spark.sql.types.StructField[] got = staged.readSchema().fields();
            org.apache.spark.sql.types.StructField[] want = wanted.fields();
            if (got.length != want.length) {
                throw new IllegalStateException("the staged scan reads other columns than the scan");
            }
            for (int i = 0; i < got.length; i++) {
                if (!got[i].name().equals(want[i].name()) || !got[i].dataType().sameType(want[i].dataType())) {
                    throw new IllegalStateException("the staged scan reads other columns than the scan");
                }
            }
            staged.toBatch();  // reads the staged tasks into the scan
            org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation out =
                new org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation(
                    scan.relation(), staged, scan.output(), scala.Option.empty(), scala.Option.empty());
            out.copyTagsFrom(scan);
            return out;
        }
    }
}
