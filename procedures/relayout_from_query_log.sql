-- Lay a table out again for the queries it actually got: the last day's (or week's) queries of a
-- query log, weighted by how often they ran.
-- Variables: table, query_log (a .jsonl/.csv file, or an Iceberg table with columns
--            text STRING, timestamp TIMESTAMP, weight DOUBLE — see docs/PROCEDURES.md),
--            since (e.g. '1 day', '7 days' or '2026-11-21T00:00:00Z'), k, min_block_rows
-- Run: pando run procedures/relayout_from_query_log.sql --var table=tpch.lineitem \
--        --var query_log=ops.query_log --var since='1 day' --var k=3 --var min_block_rows=100000

-- 1. Learn from the window's queries and compare with the current layout (writes no data)
CALL pando.system.optimize_layout(table => '${table}', workload_log => '${query_log}', since => '${since}',
                                  options => map('k', '${k}', 'min-block-rows', '${min_block_rows}'));

-- 2. Apply that layout (the same arguments: the pending layout of step 1 is used, not re-learned)
CALL pando.system.rewrite_data_files(table => '${table}', strategy => 'pando',
                                     workload_log => '${query_log}', since => '${since}',
                                     options => map('k', '${k}', 'min-block-rows', '${min_block_rows}'));

-- 3. Check it
CALL pando.system.layout_health(table => '${table}');
