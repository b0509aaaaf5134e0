-- Nightly maintenance of a PARTITIONED table with one Pando layout per partition (paper §7, the
-- two-level scheme: e.g. a partition per day, a Pando layout inside each):
-- 0. the literal (join-induced) cuts of every partition layout are brought up to date with their
--    dimensions (keys the partition's laid-out rows have keep their side), so step 1 routes the
--    new rows with fresh key sets;
-- 1. in every partition that has a layout, the rows outside it (appended since) are laid out with
--    that partition's stored trees into new files of its blocks, in one replace commit (shares
--    below min_block_rows stay outside, always read, until enough arrives);
-- 2. layout_health measures each partition (rows/files outside its layout, rows the recorded
--    workload reads now vs at layout time) and, with relayout => true, lays out in ONE rewrite
--    exactly the degraded partitions and the new ones without a layout (a `where` selecting
--    them; every other partition keeps its files and its layout);
-- 3. old snapshots are expired.
-- Variables: table, min_block_rows (e.g. 100000), max_rows_outside (e.g. 0.2), retain_last (e.g. 5)

CALL pando.system.refresh_literal_cuts(table => '${table}');

CALL pando.system.rewrite_data_files(table => '${table}', strategy => 'pando',
                                     options => map('mode', 'incremental', 'min-block-rows', '${min_block_rows}'));

CALL pando.system.layout_health(table => '${table}', max_rows_outside => ${max_rows_outside}, relayout => true);

CALL ${catalog}.system.expire_snapshots(table => '${table}', retain_last => ${retain_last});
