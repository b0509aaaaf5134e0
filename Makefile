# The two README commands. Both run the idempotent bootstrap first (a fast no-op once done).
.PHONY: bootstrap demo test test-fast

bootstrap:
	@bash scripts/bootstrap.sh

# The main job on the embedded lakehouse (./.pando, or $PANDO_HOME).
demo: bootstrap
	.venv/bin/pando demo

# The whole test suite: real Spark, real Iceberg catalogs and commits.
test: bootstrap
	.venv/bin/python -m pytest -q

# Pure-Python suites only (no JVM): a quick loop while editing.
test-fast: bootstrap
	.venv/bin/python -m pytest -q -m "not spark" tests/expr tests/workload tests/layout
