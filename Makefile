# The two README commands. Both run the idempotent bootstrap first (a fast no-op once done).
.PHONY: bootstrap demo lint test test-fast

bootstrap:
	@bash scripts/bootstrap.sh

# The main job on the embedded lakehouse (./.pando, or $PANDO_HOME).
demo: bootstrap
	.venv/bin/pando demo

# ruff and mypy (configured in pyproject.toml) on the modules brought under them so far: the
# public API. Extend LINTED as modules are cleaned up; do not mass-reformat the others.
LINTED = pando_iceberg/__init__.py pando_iceberg/datascan.py pando_iceberg/table.py \
	tests/planner/test_scan_api.py tests/spark/test_table_api.py
lint: bootstrap
	.venv/bin/ruff check $(LINTED)
	.venv/bin/mypy --follow-imports=silent $(filter pando_iceberg/%,$(LINTED))

# The whole test suite: real Spark, real Iceberg catalogs and commits.
test: bootstrap lint
	.venv/bin/python -m pytest -q

# Pure-Python suites only (no JVM): a quick loop while editing.
test-fast: bootstrap
	.venv/bin/python -m pytest -q -m "not spark" tests/expr tests/workload tests/layout tests/planner tests/test_package_structure.py
