"""The reference pages name what the code accepts: every procedure and each of its arguments
(docs/PROCEDURES.md), every rewrite option (docs/LAYOUT.md, docs/PROCEDURES.md,
docs/CONFIGURATION.md) and every `pando` subcommand with its help line (docs/PROCEDURES.md).
The settings are checked both ways by tests/test_settings.py."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import pando_iceberg.procedures.builtin  # noqa: F401  (registers the procedures)
from pando_iceberg.cli import build_parser
from pando_iceberg.procedures.registry import REGISTRY
from pando_iceberg.spark.rewrite_common import RewriteOptions

DOCS = Path(__file__).resolve().parents[1] / "docs"
PROCEDURES = (DOCS / "PROCEDURES.md").read_text()
OPTIONS_PAGES = "".join((DOCS / p).read_text() for p in ("LAYOUT.md", "PROCEDURES.md", "CONFIGURATION.md"))


def _named(text: str, name: str) -> bool:
    return re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", text) is not None


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_procedure_and_argument_is_in_the_reference(name: str) -> None:
    assert _named(PROCEDURES, name), f"docs/PROCEDURES.md does not name the procedure {name}"
    missing = [p.name for p in REGISTRY[name].params if not _named(PROCEDURES, p.name)]
    assert not missing, f"docs/PROCEDURES.md does not name {name}'s arguments {missing}"


def test_every_rewrite_option_is_in_the_reference() -> None:
    missing = [k for k in RewriteOptions.OPTION_NAMES if not _named(OPTIONS_PAGES, k)]
    assert not missing, f"options not named in docs/LAYOUT.md, PROCEDURES.md or CONFIGURATION.md: {missing}"


def _subcommands() -> dict[str, str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help or "" for a in sub._choices_actions}


def test_every_subcommand_is_in_the_command_table_with_its_help() -> None:
    commands = _subcommands()
    assert {"init", "sql", "bench", "cleanup"} <= set(commands)
    for name, help_text in commands.items():
        row = f"| `pando {name}` | {help_text} |"
        assert row in PROCEDURES, f"docs/PROCEDURES.md's command table lacks or misstates: {row}"


def test_the_check_finds_what_is_missing() -> None:
    assert not _named("`rewrite_data_files(table => 't')`", "strategy")
    assert _named("`rewrite_data_files(table => 't', strategy => 'pando')`", "strategy")
