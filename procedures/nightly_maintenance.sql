-- Nightly maintenance after a bulk load into a laid-out table.
-- New files are outside the layout (always read, never wrong); when they pass the threshold the
-- table is laid out again with its recorded workload. Old snapshots are expired afterwards
-- (Pando's sidecars live beside the table location, so expire/remove_orphan_files leave them alone).
-- Variables: table, max_rows_outside (e.g. 0.1), k, min_block_rows, retain_last (e.g. 5)

CALL pando.system.layout_health(table => '${table}', max_rows_outside => ${max_rows_outside},
                                relayout => true,
                                options => map('k', '${k}', 'min-block-rows', '${min_block_rows}'));

CALL ${catalog}.system.expire_snapshots(table => '${table}', retain_last => ${retain_last});

CALL pando.system.layout_health(table => '${table}');
