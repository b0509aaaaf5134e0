-- Nightly maintenance of a laid-out table after a bulk load, without re-learning (paper §7):
-- 1. the literal (join-induced) cuts take the dimension changes since the layout (sound: keys
--    whose fact rows are already laid out keep their side);
-- 2. the rows outside the layout (the new batch, and rows carried over by earlier runs) are laid
--    out with the stored trees into new files of the existing blocks, in one replace commit;
--    a block's share below min_block_rows stays outside (always read) until enough arrives;
-- 3. only when the layout has degraded anyway (rows outside, or the recorded workload reading
--    much more than at layout time) is the table laid out again from scratch;
-- 4. old snapshots are expired (Pando's sidecars live beside the table location).
-- Variables: table, min_block_rows (e.g. 100000), max_rows_outside (e.g. 0.1), retain_last (e.g. 5)

CALL pando.system.refresh_literal_cuts(table => '${table}');

CALL pando.system.rewrite_data_files(table => '${table}', strategy => 'pando',
                                     options => map('mode', 'incremental', 'min-block-rows', '${min_block_rows}'));

CALL pando.system.layout_health(table => '${table}', max_rows_outside => ${max_rows_outside}, relayout => true);

CALL ${catalog}.system.expire_snapshots(table => '${table}', retain_last => ${retain_last});
