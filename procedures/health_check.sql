-- Health check: report drift, and re-lay out only when it passes the thresholds.
-- Variables: table, max_rows_outside (share of rows outside the layout, e.g. 0.2),
--            max_efficiency_loss (growth of rows read by the recorded workload, e.g. 0.5)

CALL pando.system.layout_health(table => '${table}', max_rows_outside => ${max_rows_outside},
                                max_efficiency_loss => ${max_efficiency_loss}, relayout => true);
CALL pando.system.explain_scan(table => '${table}');
