"""Configuration by the ecosystem's conventions, without Spark: the planning settings' registry
and resolver (``pando_iceberg.settings``), the reference tables of docs/CONFIGURATION.md checked
against the registry and the layout options both ways, Spark's own settings left to Spark, and
catalogs of pyiceberg's own configuration."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from pando_iceberg import settings
from pando_iceberg.config import ConfigError, load_config
from pando_iceberg.spark.rewrite_common import (
    LAYOUT_PROPERTY_PREFIX,
    TABLE_DEFAULT_OPTIONS,
    OptionFields,
    PandoRewriteError,
    RewriteOptions,
    with_table_defaults,
)
from pando_iceberg.spark.session import SPARK_OWN_KEYS, build_conf, user_spark_settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "CONFIGURATION.md"


def _table(heading: str) -> list[list[str]]:
    """The rows of the first markdown table under ``## heading``, cells stripped of backticks."""
    text = DOC.read_text()
    section = text[text.index(f"## {heading}\n"):]
    section = section[:section.find("\n## ", 4) if "\n## " in section[4:] else len(section)]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # header and rule
    return [[c.strip().replace("`", "") for c in row.strip("|").split("|")] for row in rows]


def _number(cell: str) -> str:
    return cell.split(" (")[0]


# ---- the resolver ------------------------------------------------------------------------------

def test_the_source_wins_then_the_environment_then_the_default(monkeypatch):
    monkeypatch.delenv("PANDO_ROW_FILTER_MAX_KEYS", raising=False)
    assert settings.value("rowFilter.maxKeys") == 1_000_000
    monkeypatch.setenv("PANDO_ROW_FILTER_MAX_KEYS", "7")
    assert settings.value("rowFilter.maxKeys") == 7
    with settings.using(settings.of_options({"pando.rowFilter.maxKeys": "5"})):
        assert settings.value("rowFilter.maxKeys") == 5
        assert settings.value("staging.maxBytes") == 16 * 1024 * 1024
    with settings.using(settings.Tunables({"spark.sql.pando.rowFilter.maxKeys": " 0 "})):
        assert settings.value("rowFilter.maxKeys") == 0
    with settings.using(settings.Tunables({"spark.sql.pando.rowFilter.maxKeys": ""})):  # blank: not set
        assert settings.value("rowFilter.maxKeys") == 7


def test_a_planning_reads_each_key_once():
    class Counting(dict):
        reads: ClassVar[list[str]] = []

        def get(self, key, default=None):
            self.reads.append(key)
            return super().get(key, default)

    conf = Counting({"spark.sql.pando.staging.maxBytes": "3"})
    tunables = settings.Tunables(conf)
    with settings.using(tunables):
        assert [settings.value("staging.maxBytes") for _ in range(3)] == [3, 3, 3]
    assert conf.reads == ["spark.sql.pando.staging.maxBytes"]
    tunables.read_all()
    assert sorted(conf.reads) == sorted(s.spark_key for s in settings.SETTINGS.values() if s.spark_key)


def test_bad_values_and_names_are_refused_naming_the_key(monkeypatch):
    with pytest.raises(ConfigError, match=r"spark\.sql\.pando\.rowFilter\.minRows='-1' is not accepted: an int"):
        settings.Tunables({"spark.sql.pando.rowFilter.minRows": "-1"}).read_all()
    monkeypatch.setenv("PANDO_STAGE_MAX_BYTES", "16MiB")
    with pytest.raises(ConfigError, match="PANDO_STAGE_MAX_BYTES='16MiB' is not accepted"):
        settings.value("staging.maxBytes")
    with pytest.raises(ConfigError, match=r"scan option 'pando\.rowFilter\.maxkeys' is not a Pando setting; accepted: "
                                          r"pando\.staging\.maxBytes, "):
        settings.of_options({"pando.rowFilter.maxkeys": "1"})
    settings.of_options({"include_empty_files": "true"})  # pyiceberg's own options pass through


def test_process_settings_have_no_session_key():
    for s in settings.SETTINGS.values():
        assert s.scope in settings.SCOPES
        assert (s.spark_key is None) == (s.option is None) == (s.scope == "process")


# ---- the reference tables ----------------------------------------------------------------------

def test_every_planning_setting_is_documented_with_its_default_and_scope():
    rows = _table("Planning settings")
    documented = {row[2]: row for row in rows}
    assert len(documented) == len(rows), "a variable is documented twice"
    assert set(documented) == {s.env for s in settings.SETTINGS.values()}, "registry and docs differ"
    for s in settings.SETTINGS.values():
        key, option, _, default, scope, meaning = documented[s.env]
        assert (key, option) == (s.spark_key or "—", s.option or "—"), s.name
        assert int(_number(default)) == s.default, f"{s.env}: documented default {default}, code {s.default}"
        assert scope == s.scope and meaning, s.name


def test_every_table_property_is_documented_with_its_default():
    rows = _table("Layout defaults as table properties")
    documented = {row[0]: row for row in rows}
    assert set(documented) == {LAYOUT_PROPERTY_PREFIX + o for o in TABLE_DEFAULT_OPTIONS}
    defaults = OptionFields()
    for option in TABLE_DEFAULT_OPTIONS:
        _, default, meaning = documented[LAYOUT_PROPERTY_PREFIX + option]
        code = getattr(defaults, RewriteOptions.OPTION_NAMES[option]) or "off"  # '' = the guard's default, off
        assert default == str(code), f"{option}: documented {default}, code {code}"
        assert f"option `{option}`" in DOC.read_text() and meaning


# ---- layout defaults as table properties ----------------------------------------------------

def test_option_then_table_property_then_default():
    props = {"pando.layout.k": "2", "pando.layout.min-block-rows": "5000", "pando.layout.in-block-order": "Ts",
             "write.format.default": "parquet"}
    opts = with_table_defaults({}, props)
    assert (opts.k, opts.min_block_rows, opts.in_block_order, opts.sample_rate) == (2, 5000, "ts", 0.01)
    opts = with_table_defaults({"k": "4", "sample-rate": "0.5"}, props)
    assert (opts.k, opts.min_block_rows, opts.sample_rate) == (4, 5000, 0.5)
    assert with_table_defaults({}, {}) == RewriteOptions()
    with pytest.raises(PandoRewriteError, match=r"table property pando\.layout\.sample-rate = '2' is not accepted: "
                                                r"option 'sample-rate' must be in \(0, 1\]"):
        with_table_defaults({}, {"pando.layout.sample-rate": "2"})
    with pytest.raises(PandoRewriteError, match=r"pando\.layout\.max-template-regression = 'high'"):
        with_table_defaults({}, {"pando.layout.max-template-regression": "high"})
    assert with_table_defaults({"k": "1"}, {"pando.layout.k": "many"}).k == 1  # given: the property is not read


def test_layout_options_know_which_fields_were_given():
    from pando_iceberg import LayoutOptions

    assert LayoutOptions().given == frozenset()
    assert LayoutOptions(k=2, seed=1).given == {"k", "seed"}
    assert LayoutOptions(2).given == {"k"}
    assert LayoutOptions.from_map({"min-block-rows": "10", "k": "2"}).given == {"min_block_rows", "k"}
    resolved = LayoutOptions(seed=7).with_table_defaults({"pando.layout.k": "5", "pando.layout.seed": "9"})
    assert (resolved.k, resolved.seed) == (5, 7)  # seed is not a table default; given anyway
    assert resolved == LayoutOptions(**{f.name: getattr(resolved, f.name) for f in dataclasses.fields(resolved)})


# ---- Spark's own settings, pyiceberg's catalogs ------------------------------------------------

def test_sparks_own_places_win_over_pandos_fallbacks(tmp_path, monkeypatch):
    cfg = load_config(home=tmp_path / "lh", env={}, overrides={"spark": {"driver_memory": "2g",
                                                                          "conf": {"spark.executor.memory": "1g"}}})
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert {k: build_conf(cfg)[k] for k in SPARK_OWN_KEYS} == {
        "spark.master": "local[*]", "spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4"}
    (tmp_path / "spark-defaults.conf").write_text("# cluster defaults\nspark.driver.memory   6g\n"
                                                  "spark.sql.shuffle.partitions=64\n")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[3] --conf spark.default.parallelism=9 pyspark-shell")
    assert user_spark_settings() == {"spark.driver.memory": "6g", "spark.sql.shuffle.partitions": "64",
                                     "spark.master": "local[3]", "spark.default.parallelism": "9"}
    conf = build_conf(cfg)
    assert not set(SPARK_OWN_KEYS) & set(conf)  # spark-submit applies the user's
    assert conf["spark.executor.memory"] == "1g"
    pinned = load_config(home=tmp_path / "lh", env={}, overrides={"spark": {"conf": {"spark.driver.memory": "5g"}}})
    assert build_conf(pinned)["spark.driver.memory"] == "5g"  # pando.yaml's spark.conf wins over all


def test_a_catalog_name_resolves_through_pyicebergs_own_configuration(tmp_path):
    """pyiceberg reads ``PYICEBERG_CATALOG__*`` and ``.pyiceberg.yaml`` once, at import: a process of
    its own, as a user's."""
    script = (
        "import sys\n"
        "from pando_iceberg.catalog import catalog_named\n"
        "from pando_iceberg.config import load_config\n"
        "cfg = load_config(home=sys.argv[1], env={})\n"
        "other = catalog_named('elsewhere', cfg)\n"
        "other.create_namespace('ns')\n"
        "ours = catalog_named(cfg.catalog.name, cfg)\n"
        "print(other.name, other.properties['uri'], ('ns',) in other.list_namespaces(), ours.name,\n"
        "      ours.properties['uri'] == cfg.pyiceberg_properties()['uri'], ('ns',) in ours.list_namespaces())\n")
    env = {**os.environ, "PYICEBERG_CATALOG__ELSEWHERE__URI": f"sqlite:///{tmp_path}/elsewhere.db",
           "PYICEBERG_CATALOG__ELSEWHERE__WAREHOUSE": f"file://{tmp_path}/wh"}
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "lh")], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["elsewhere", f"sqlite:///{tmp_path}/elsewhere.db", "True", "lake", "True", "False"]
