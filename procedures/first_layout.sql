-- First-time Pando layout of a table.
-- Variables: table (e.g. tpch.lineitem), workload (a .sql file or a directory of them),
--            k (trees, e.g. 3), min_block_rows (e.g. 100000); ${catalog} is set by pando.
-- Run: pando run procedures/first_layout.sql --var table=tpch.lineitem --var workload=queries/ \
--        --var k=3 --var min_block_rows=100000

-- 1. What would the layout buy? (learns on a sample, writes nothing)
CALL pando.system.optimize_layout(table => '${table}', workload => '${workload}',
                                  options => map('k', '${k}', 'min-block-rows', '${min_block_rows}'));

-- 2. Apply it: one atomic `replace` commit
CALL pando.system.rewrite_data_files(table => '${table}', strategy => 'pando', workload => '${workload}',
                                     options => map('k', '${k}', 'min-block-rows', '${min_block_rows}'));

-- 3. Check it
CALL pando.system.describe_layout(table => '${table}');
CALL pando.system.layout_health(table => '${table}');
