# The two README commands. Both run the idempotent bootstrap first (a fast no-op once done).
.PHONY: bootstrap demo lint test test-fast

bootstrap:
	@bash scripts/bootstrap.sh

# The main job on the embedded lakehouse (./.pando, or $PANDO_HOME).
demo: bootstrap
	.venv/bin/pando demo

# ruff and mypy (configured in pyproject.toml) on the whole package: mypy at its default
# strictness for the internals, --strict's checks for the public API (pando_iceberg, datascan,
# table); ruff also on the tests of the public API and of the package's structure.
lint: bootstrap
	.venv/bin/ruff check pando_iceberg tests/planner/test_scan_api.py tests/spark/test_table_api.py \
		tests/test_package_structure.py
	.venv/bin/mypy pando_iceberg

# The whole test suite: real Spark, real Iceberg catalogs and commits.
test: bootstrap lint
	.venv/bin/python -m pytest -q

# Pure-Python suites only (no JVM): a quick loop while editing.
test-fast: bootstrap
	.venv/bin/python -m pytest -q -m "not spark" tests/expr tests/workload tests/layout tests/planner tests/test_package_structure.py
