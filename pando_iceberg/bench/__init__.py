"""``pando bench``: Pando against Iceberg's own layouts (arrival order, sort, z-order) on the same
data in one run — files and bytes read by the executed Spark plans, the selectivity lower bound,
Spark time per query, result equality, offline cost and payback.

Modules: :mod:`.datasets` (TPC-H, the correlated taxi-like table), :mod:`.workloads` (train/test
splits, z-order columns from the train workload), :mod:`.harness` (layouts and measurements),
:mod:`.report` (markdown and PNG plots).
"""
