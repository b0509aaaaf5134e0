# The two README commands. Both run the idempotent bootstrap first (a fast no-op once done).
.PHONY: bootstrap demo docs lint test test-fast test-long

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
		tests/test_package_structure.py tests/test_readme.py tests/test_exceptions.py tests/test_typing.py \
		tests/test_packaging.py tests/test_docs_links.py scripts/mkdocs_hooks.py
	.venv/bin/mypy pando_iceberg

# The test suite: real Spark, real Iceberg catalogs and commits. Tests marked slow (a
# two-executor cluster, the Docker build, the bench's scaling, resume and TPC-DS profiles) are
# the long profile: `make test-long`, run by hand.
test: bootstrap lint
	.venv/bin/python -m pytest -q -m "not slow" --durations=30

test-long: bootstrap
	.venv/bin/python -m pytest -q -m slow --durations=30

# Pure-Python suites only (no JVM): a quick loop while editing.
test-fast: bootstrap
	.venv/bin/python -m pytest -q -m "not spark" tests/expr tests/workload tests/layout tests/planner tests/test_package_structure.py \
		tests/test_docs_links.py tests/test_readme.py tests/test_exceptions.py

# The documentation site (mkdocs.yml: README.md, docs/, BENCHMARKS.md, benchmarks/README.md) into
# site/; --strict fails on a broken link or anchor. tests/test_docs_links.py checks the same links
# without building (part of `make test`).
docs: bootstrap
	.venv/bin/mkdocs build --strict
