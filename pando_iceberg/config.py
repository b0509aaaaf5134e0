"""One configuration for the lakehouse: the Iceberg catalog, its warehouse and the Spark master.

Sources, later ones winning: built-in defaults (the embedded lakehouse under ``./.pando`` or
``$PANDO_HOME``), the YAML file (``--config FILE``, ``$PANDO_CONFIG``, or ``pando.yaml`` in the
home directory or the current directory), ``PANDO_*`` environment variables, CLI flags.

From this single description come both the pyiceberg catalog properties
(:meth:`PandoConfig.pyiceberg_properties`) and the Spark catalog configuration
(:meth:`PandoConfig.spark_conf`), so the two sides always point at the same tables.

``pando.yaml`` (every key optional)::

    home: ./.pando                 # embedded lakehouse root
    catalog:
      name: lake                   # Spark catalog name == pyiceberg catalog name
      type: embedded               # embedded | jdbc | rest | hive | glue
      uri: ...                     # jdbc:sqlite:/..., jdbc:postgresql://host/db, http(s)://, thrift://
      warehouse: ...               # local path, file:/..., s3://bucket/prefix
      user: ...                    # jdbc user (password from $PANDO_CATALOG_PASSWORD)
      properties: {}               # extra catalog properties passed to both sides
    s3:
      endpoint: http://127.0.0.1:9000
      region: us-east-1
      path_style_access: true      # (access keys from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)
    spark:
      master: local[*]             # local, local[N], local[*], spark://host:port
      driver_memory: 4g
      shuffle_partitions: 4
      conf: {}                     # any extra spark.* settings
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import yaml

from .exceptions import ConfigurationError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_D = TypeVar("_D", bound="DataclassInstance")

CATALOG_TYPES = ("embedded", "jdbc", "rest", "hive", "glue")
DEFAULT_CATALOG_NAME = "lake"
_MASTER_RE = re.compile(r"^(local|local\[(\*|[1-9][0-9]*)(,[0-9]+)?\]|spark://[A-Za-z0-9_.\-]+:[0-9]{1,5}(,[A-Za-z0-9_.\-]+:[0-9]{1,5})*|yarn|k8s://.+)$")
_MEMORY_RE = re.compile(r"^[1-9][0-9]*[kmgtKMGT]?$")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

SQLITE_JDBC_JAR = "/usr/share/java/sqlite-jdbc.jar"
POSTGRES_JDBC_JAR = "/usr/share/java/postgresql.jar"


class ConfigError(ConfigurationError, ValueError):
    """A setting is wrong; the message names the setting, the value and what is accepted."""


@dataclass(frozen=True)
class CatalogConfig:
    name: str = DEFAULT_CATALOG_NAME
    type: str = "embedded"
    uri: str | None = None
    warehouse: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)  # never printed
    properties: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # credentials in the URI or the properties are never printed
        return (f"CatalogConfig(name={self.name!r}, type={self.type!r}, uri={_redact(self.uri)!r}, "
                f"warehouse={_redact(self.warehouse)!r}, user={self.user!r}, "
                f"properties={redact_settings(self.properties)!r})")


@dataclass(frozen=True)
class S3Config:
    endpoint: str | None = None
    region: str | None = None
    path_style_access: bool = True


@dataclass(frozen=True)
class SparkConfig:
    master: str = "local[*]"
    driver_memory: str = "4g"
    shuffle_partitions: int = 4
    conf: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"SparkConfig(master={self.master!r}, driver_memory={self.driver_memory!r}, "
                f"shuffle_partitions={self.shuffle_partitions!r}, conf={redact_settings(self.conf)!r})")


@dataclass(frozen=True)
class PandoConfig:
    home: Path
    catalog: CatalogConfig = field(default_factory=CatalogConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    s3: S3Config = field(default_factory=S3Config)
    source: str = "defaults"

    # ---- derived locations -------------------------------------------------------------
    @property
    def embedded(self) -> bool:
        return self.catalog.type == "embedded"

    @property
    def catalog_db(self) -> Path:
        return self.home / "catalog.db"

    @property
    def warehouse_uri(self) -> str:
        """The warehouse as a URI both Java and pyiceberg accept (``file:/abs`` or ``s3://``)."""
        wh = self.catalog.warehouse or str(self.home / "warehouse")
        if "://" in wh or wh.startswith("file:"):
            return wh
        return "file:" + str(Path(wh).expanduser().resolve())

    @property
    def local_warehouse(self) -> Path | None:
        wh = self.warehouse_uri
        if wh.startswith("file:"):
            return Path(re.sub(r"^file:(//)?", "", wh))
        return None

    def jdbc_uri(self) -> str:
        if self.embedded:
            return f"jdbc:sqlite:{self.catalog_db}"
        assert self.catalog.uri is not None
        return self.catalog.uri

    # ---- the two sides -----------------------------------------------------------------
    def pyiceberg_properties(self) -> dict[str, str]:
        """Properties for ``pyiceberg.catalog.load_catalog(self.catalog.name, **props)``."""
        c = self.catalog
        wh = self.warehouse_uri
        props: dict[str, str] = {"warehouse": f"file://{self.local_warehouse}" if self.local_warehouse else wh}
        if c.type in ("embedded", "jdbc"):
            props["type"] = "sql"
            props["uri"] = _jdbc_to_sqlalchemy(self.jdbc_uri(), c.user, c.password)
        elif c.type == "rest":
            props.update(type="rest", uri=str(c.uri))
        elif c.type == "hive":
            props.update(type="hive", uri=str(c.uri))
        elif c.type == "glue":
            props["type"] = "glue"
        if self.s3.endpoint:
            props["s3.endpoint"] = self.s3.endpoint
        if self.s3.region:
            props["s3.region"] = self.s3.region
        if self.warehouse_uri.startswith("s3"):
            if os.environ.get("AWS_ACCESS_KEY_ID"):
                props["s3.access-key-id"] = os.environ["AWS_ACCESS_KEY_ID"]
                props["s3.secret-access-key"] = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
            props["s3.force-virtual-addressing"] = str(not self.s3.path_style_access).lower()
        props.update({k: str(v) for k, v in c.properties.items()})
        return props

    def spark_conf(self) -> dict[str, str]:
        """Spark settings for the Iceberg catalog (jars and session defaults are added by
        :func:`pando_iceberg.spark.session.spark_session`)."""
        c = self.catalog
        p = f"spark.sql.catalog.{c.name}"
        conf: dict[str, str] = {
            p: "org.apache.iceberg.spark.SparkCatalog",
            f"{p}.warehouse": self.warehouse_uri,
            "spark.sql.defaultCatalog": c.name,
        }
        if c.type in ("embedded", "jdbc"):
            conf[f"{p}.type"] = "jdbc"
            conf[f"{p}.uri"] = self.jdbc_uri()
            # Stay on the V0 schema: V1 (views) makes Java ignore rows that pyiceberg writes
            # (their iceberg_type is NULL), so the two sides would stop seeing each other's tables.
            if self.embedded:
                # Iceberg's JdbcCatalog.initialize leaves a getTables() ResultSet open when the
                # catalog tables exist; on SQLite that pins a read snapshot on a pooled connection,
                # so Spark stops seeing pyiceberg's commits. pyiceberg creates the (same V0)
                # tables instead: see prepare_embedded_catalog.
                conf[f"{p}.jdbc.init-catalog-tables"] = "false"
            if c.user:
                conf[f"{p}.jdbc.user"] = c.user
            if c.password:
                conf[f"{p}.jdbc.password"] = c.password
        elif c.type == "rest":
            conf[f"{p}.type"] = "rest"
            conf[f"{p}.uri"] = str(c.uri)
        elif c.type == "hive":
            conf[f"{p}.type"] = "hive"
            conf[f"{p}.uri"] = str(c.uri)
        elif c.type == "glue":
            conf[f"{p}.catalog-impl"] = "org.apache.iceberg.aws.glue.GlueCatalog"
        if self.warehouse_uri.startswith("s3"):
            conf[f"{p}.io-impl"] = "org.apache.iceberg.aws.s3.S3FileIO"
            if self.s3.endpoint:
                conf[f"{p}.s3.endpoint"] = self.s3.endpoint
            conf[f"{p}.s3.path-style-access"] = str(self.s3.path_style_access).lower()
            if self.s3.region:
                conf[f"{p}.client.region"] = self.s3.region
        for k, v in c.properties.items():
            conf[f"{p}.{k}"] = str(v)
        return conf

    def jdbc_driver_jars(self) -> list[str]:
        uri = self.jdbc_uri() if self.catalog.type in ("embedded", "jdbc") else ""
        if uri.startswith("jdbc:sqlite:"):
            return [SQLITE_JDBC_JAR]
        if uri.startswith("jdbc:postgresql:"):
            return [POSTGRES_JDBC_JAR]
        return []

    def describe(self) -> dict[str, Any]:
        """A printable summary; credentials are never included."""
        return {
            "home": str(self.home),
            "source": self.source,
            "catalog": {"name": self.catalog.name, "type": self.catalog.type,
                        "uri": _redact(self.jdbc_uri() if self.catalog.type in ("embedded", "jdbc")
                                       else self.catalog.uri),
                        "warehouse": self.warehouse_uri},
            "spark": {"master": self.spark.master, "driver_memory": self.spark.driver_memory,
                      "shuffle_partitions": self.spark.shuffle_partitions},
        }


#: The settings of a Spark Iceberg catalog ``spark.sql.catalog.<name>.<key>`` that name its tables'
#: location: what :func:`spark_catalog_config` reads and :func:`same_catalog` compares.
SPARK_CATALOG_KEYS = ("", "type", "catalog-impl", "uri", "warehouse", "jdbc.user", "jdbc.password",
                      "s3.endpoint", "s3.path-style-access", "client.region")
_ICEBERG_SPARK_CATALOGS = ("org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog")


def spark_catalog_config(name: str, settings: Mapping[str, str | None], home: Path) -> PandoConfig:
    """The configuration of Spark's Iceberg catalog ``name`` from its session settings
    (``settings``: :data:`SPARK_CATALOG_KEYS` → value, ``""`` being the catalog class): the inverse of
    :meth:`PandoConfig.spark_conf`, so pyiceberg opens the tables the Spark session reads. Raises
    :class:`ConfigError` naming the setting when the catalog is not one pyiceberg can open."""
    p = f"spark.sql.catalog.{name}"
    impl = settings.get("")
    if impl not in _ICEBERG_SPARK_CATALOGS:
        raise ConfigError(f"{p} = {impl!r} is not an Iceberg catalog; accepted: {', '.join(_ICEBERG_SPARK_CATALOGS)}")
    kind = settings.get("type")
    if settings.get("catalog-impl") == "org.apache.iceberg.aws.glue.GlueCatalog":
        kind = "glue"
    if kind not in ("jdbc", "rest", "hive", "glue"):
        raise ConfigError(f"{p}.type = {kind!r} cannot be opened by pyiceberg; accepted: jdbc, rest, hive, "
                          "or catalog-impl org.apache.iceberg.aws.glue.GlueCatalog")
    s3 = S3Config(endpoint=settings.get("s3.endpoint") or None, region=settings.get("client.region") or None,
                  path_style_access=(settings.get("s3.path-style-access") or "true").lower() == "true")
    catalog = CatalogConfig(name=name, type=kind, uri=settings.get("uri") or None,
                            warehouse=settings.get("warehouse") or None, user=settings.get("jdbc.user") or None,
                            password=settings.get("jdbc.password") or None)
    return validate(PandoConfig(home=home, catalog=catalog, s3=s3, source=f"Spark session settings {p}.*"))


def same_catalog(cfg: PandoConfig, name: str, settings: Mapping[str, str | None]) -> bool:
    """Does ``cfg`` describe Spark's catalog ``name`` (same name, location of its catalog and warehouse)?"""
    mine = cfg.spark_conf()
    p = f"spark.sql.catalog.{name}"
    return cfg.catalog.name == name and all(
        (mine.get(f"{p}.{key}") or None) == (settings.get(key) or None) for key in ("uri", "warehouse"))


def _redact(uri: str | None) -> str | None:
    if uri is None:
        return None
    return re.sub(r"(password=)[^&;]*", r"\1***", re.sub(r"//([^:/@]+):([^@]+)@", r"//\1:***@", uri))


_SECRET_SETTING = re.compile(r"pass|secret|token|credential|access[-._]?key|session[-._]?key|private", re.I)


def redact_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings with the values of credential-like keys (password, secret, token, access key,
    ...) replaced by '***' and credentials in URI values masked: safe to print or log."""
    return {k: "***" if _SECRET_SETTING.search(str(k)) else _redact(v) if isinstance(v, str) else v
            for k, v in settings.items()}


def _jdbc_to_sqlalchemy(jdbc: str, user: str | None, password: str | None) -> str:
    if jdbc.startswith("jdbc:sqlite:"):
        path = jdbc[len("jdbc:sqlite:"):]
        return "sqlite:///" + path  # an absolute path keeps its leading '/': sqlite:////abs/catalog.db
    if jdbc.startswith("jdbc:postgresql://"):
        rest = jdbc[len("jdbc:postgresql://"):]
        cred = ""
        if user:  # SQLAlchemy URL: '@', ':' or '/' in a credential must be percent-encoded
            cred = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
        return f"postgresql+psycopg2://{cred}{rest}"
    raise ConfigError(f"catalog.uri: JDBC URI {_redact(jdbc)!r} is not supported; accepted: jdbc:sqlite:<path>, jdbc:postgresql://host[:port]/db")


# ---- loading and validation ------------------------------------------------------------------

_ENV = {
    "PANDO_CATALOG_NAME": ("catalog", "name"),
    "PANDO_CATALOG_TYPE": ("catalog", "type"),
    "PANDO_CATALOG_URI": ("catalog", "uri"),
    "PANDO_CATALOG_USER": ("catalog", "user"),
    "PANDO_CATALOG_PASSWORD": ("catalog", "password"),
    "PANDO_WAREHOUSE": ("catalog", "warehouse"),
    "PANDO_SPARK_MASTER": ("spark", "master"),
    "PANDO_DRIVER_MEMORY": ("spark", "driver_memory"),
    "PANDO_SHUFFLE_PARTITIONS": ("spark", "shuffle_partitions"),
    "PANDO_S3_ENDPOINT": ("s3", "endpoint"),
}


def load_config(config_file: str | os.PathLike[str] | None = None, home: str | os.PathLike[str] | None = None,
                overrides: Mapping[str, Mapping[str, Any]] | None = None,
                env: Mapping[str, str] | None = None) -> PandoConfig:
    """Build and validate the configuration (see the module docstring for the sources)."""
    env = os.environ if env is None else env
    home_path = Path(home or env.get("PANDO_HOME") or ".pando").expanduser().resolve()
    data: dict[str, dict[str, Any]] = {"catalog": {}, "spark": {}, "s3": {}}
    source = "defaults"

    candidates = [config_file, env.get("PANDO_CONFIG"), home_path / "pando.yaml", Path("pando.yaml")]
    for i, cand in enumerate(candidates):
        if not cand:
            continue
        path = Path(cand).expanduser()
        if not path.exists():
            if i < 2:  # explicitly named: must exist
                raise ConfigError(f"config file {str(path)!r} does not exist "
                                  f"(given by {'--config' if i == 0 else 'PANDO_CONFIG'})")
            continue
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML: {e}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a mapping with keys home, catalog, spark, s3")
        unknown = set(loaded) - {"home", "catalog", "spark", "s3"}
        if unknown:
            raise ConfigError(f"config file {str(path)!r}: unknown key(s) {sorted(unknown)}; "
                              "accepted: home, catalog, spark, s3")
        if loaded.get("home") and not home and not env.get("PANDO_HOME"):
            home_path = (path.parent / str(loaded["home"])).expanduser().resolve()
        for section in ("catalog", "spark", "s3"):
            sec = loaded.get(section) or {}
            if not isinstance(sec, dict):
                raise ConfigError(f"config file {str(path)!r}: '{section}' must be a mapping")
            data[section].update(sec)
        source = str(path)
        break

    for var, (section, key) in _ENV.items():
        if env.get(var):
            data[section][key] = env[var]
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update({k: v for k, v in values.items() if v is not None})

    return validate(PandoConfig(
        home=home_path,
        catalog=_build(CatalogConfig, data["catalog"], "catalog"),
        spark=_build(SparkConfig, data["spark"], "spark"),
        s3=_build(S3Config, data["s3"], "s3"),
        source=source,
    ))


def _build(cls: type[_D], values: Mapping[str, Any], section: str) -> _D:
    fields = cls.__dataclass_fields__
    unknown = set(values) - set(fields)
    if unknown:
        raise ConfigError(f"{section}: unknown setting(s) {sorted(unknown)}; accepted: {sorted(fields)}")
    kwargs = dict(values)
    if cls is SparkConfig and "shuffle_partitions" in kwargs:
        try:
            kwargs["shuffle_partitions"] = int(kwargs["shuffle_partitions"])
        except (TypeError, ValueError):
            raise ConfigError(f"spark.shuffle_partitions: {values['shuffle_partitions']!r} "
                              "is not a positive integer") from None
    if cls is S3Config and isinstance(kwargs.get("path_style_access"), str):
        kwargs["path_style_access"] = kwargs["path_style_access"].lower() in ("1", "true", "yes")
    for key in ("properties", "conf"):
        if key in kwargs and not isinstance(kwargs[key], Mapping):
            raise ConfigError(f"{section}.{key} must be a mapping of strings")
    return cls(**kwargs)


def validate(cfg: PandoConfig) -> PandoConfig:
    c, s = cfg.catalog, cfg.spark
    if not _NAME_RE.match(c.name or ""):
        raise ConfigError(f"catalog.name: {c.name!r} is not a valid catalog name; "
                          "accepted: letters, digits and '_', not starting with a digit")
    if c.type not in CATALOG_TYPES:
        raise ConfigError(f"catalog.type: {c.type!r} is not supported; accepted: {', '.join(CATALOG_TYPES)}")
    if c.type == "jdbc":
        if not c.uri or not (c.uri.startswith("jdbc:sqlite:") or c.uri.startswith("jdbc:postgresql://")):
            raise ConfigError(f"catalog.uri: {_redact(c.uri)!r} is not valid for catalog.type 'jdbc'; "
                              "accepted: jdbc:sqlite:<path>, jdbc:postgresql://host[:port]/db")
    if c.type == "rest" and not (c.uri and re.match(r"^https?://", c.uri)):
        raise ConfigError(f"catalog.uri: {_redact(c.uri)!r} is not valid for catalog.type 'rest'; accepted: http(s)://host[:port][/path]")
    if c.type == "hive" and not (c.uri and c.uri.startswith("thrift://")):
        raise ConfigError(f"catalog.uri: {_redact(c.uri)!r} is not valid for catalog.type 'hive'; accepted: thrift://host:port")
    if c.type in ("glue", "hive", "rest") and c.warehouse is None and c.type == "glue":
        raise ConfigError("catalog.warehouse: required for catalog.type 'glue' (s3://bucket/prefix)")
    wh = cfg.warehouse_uri
    if not (wh.startswith("file:") or wh.startswith("s3://") or wh.startswith("s3a://")):
        raise ConfigError(f"catalog.warehouse: {_redact(wh)!r} is not supported; "
                          "accepted: a local path, file:/abs/path, s3://bucket/prefix")
    if not _MASTER_RE.match(s.master or ""):
        raise ConfigError(f"spark.master: {s.master!r} is not a valid Spark master URL; "
                          "accepted: local, local[N], local[*], spark://host:port")
    if not _MEMORY_RE.match(str(s.driver_memory)):
        raise ConfigError(f"spark.driver_memory: {s.driver_memory!r} is not a JVM memory size; accepted e.g. 2g, 4096m")
    if s.shuffle_partitions < 1:
        raise ConfigError(f"spark.shuffle_partitions: {s.shuffle_partitions} must be a positive integer")
    return cfg


def ensure_local_dirs(cfg: PandoConfig) -> None:
    """Create the embedded lakehouse's directories; fail with the setting's name if not writable."""
    targets = [("home", cfg.home)] if cfg.embedded else []
    if cfg.local_warehouse is not None:
        targets.append(("catalog.warehouse", cfg.local_warehouse))
    for setting, path in targets:
        try:
            path.mkdir(parents=True, exist_ok=True)
            # A probe of this process's own (mkstemp): processes opening the same lakehouse at
            # once must not unlink each other's probe (a fixed name made one of them fail).
            fd, probe = tempfile.mkstemp(prefix=".pando-write-probe-", dir=path)
            os.close(fd)
            os.unlink(probe)
        except OSError as e:
            raise ConfigError(f"{setting}: {str(path)!r} is not a writable directory ({e.strerror or e}); "
                              f"set PANDO_HOME / --home or catalog.warehouse to a writable location") from None


def prepare_embedded_catalog(cfg: PandoConfig) -> None:
    """Create the embedded lakehouse and put its SQLite catalog in WAL mode.

    Spark's JdbcCatalog keeps pooled connections open; in SQLite's default rollback-journal mode
    a reader's lock makes pyiceberg's commits fail with "database is locked". In WAL mode readers
    never block the (single) writer. The mode is stored in the database file, so it holds for
    every process that opens it.
    """
    import sqlite3

    ensure_local_dirs(cfg)
    con = sqlite3.connect(str(cfg.catalog_db), timeout=30)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        # The V0 catalog tables, as Iceberg's JdbcCatalog and pyiceberg's SqlCatalog both define them.
        con.execute("CREATE TABLE IF NOT EXISTS iceberg_tables (catalog_name VARCHAR(255) NOT NULL, "
                    "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
                    "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
                    "PRIMARY KEY (catalog_name, table_namespace, table_name))")
        con.execute("CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (catalog_name VARCHAR(255) NOT NULL, "
                    "namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255), property_value VARCHAR(1000), "
                    "PRIMARY KEY (catalog_name, namespace, property_key))")
        con.commit()
    finally:
        con.close()


def with_overrides(cfg: PandoConfig, **spark: Any) -> PandoConfig:
    return validate(replace(cfg, spark=replace(cfg.spark, **spark)))

