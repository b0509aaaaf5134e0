-- Lay a table out only when it pays: rank the candidate layouts for the queries a query log
-- recorded (the table as is, Iceberg's sort and z-order, Pando with 1..k trees), and write the
-- advised one only if the bytes it saves repay its rewrite within max_repay_days of that workload
-- (the window's queries a day on the table). Nothing is written otherwise; the notes say why.
-- Variables: table, query_log (a .jsonl/.csv file or an Iceberg table — see docs/PROCEDURES.md),
--            since (e.g. '7 days'), max_repay_days, min_block_rows
-- Run: pando run procedures/advise_and_apply.sql --var table=tpch.lineitem --var query_log=ops.query_log \
--        --var since='7 days' --var max_repay_days=30 --var min_block_rows=100000

CALL pando.system.advise(table => '${table}', workload_log => '${query_log}', since => '${since}',
                         options => map('min-block-rows', '${min_block_rows}'),
                         apply => true, max_repay_days => ${max_repay_days});
