"""Pando against Iceberg's own layouts in one run — the same as ``pando bench``:

    .venv/bin/python benchmarks/bench.py --home /tmp/pando-bench-home --dataset tpch --sf 1 --out /tmp/pando-bench
    .venv/bin/python benchmarks/bench.py --dataset taxi --sf 1 --out /tmp/pando-bench
    .venv/bin/python benchmarks/bench.py --scaling --layouts arrival,sort,zorder,pando-k3 --out /tmp/pando-scaling

Options: ``--help``. Writes a markdown report, a JSON file and PNG plots into --out; exits 1 on
any result mismatch against the arrival-order tables.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pando_iceberg.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
