"""The Java helpers of the py4j side, compiled in the Spark JVM at run time.

Their sources are the ``.java`` files of package ``pando`` shipped beside this module
(``spark/java/pando/*.java``, package resources). Janino, Spark's own code generator and always on
Spark's classpath, compiles them once per JVM when first used: no JDK is needed on the user's
machine. Each class has a class loader of its own (Janino's ``JavaSourceClassLoader``): a class
that does not compile then fails alone, with the classes that call it (a loader that failed once
fails every class it loads later). A class that calls another finds it in its loader's parent
(:data:`PARENT_CLASSES`), so each class is compiled once; the task cache (``TaskCache``), whose
static state must be one copy in the JVM, is at the root, in the loader every other delegates to.

A class that does not compile (another Spark or Iceberg changed an internal API it calls) is
logged as a warning once and its methods are None: callers then take a slower, portable path.
Several helpers reach into Spark's and Iceberg's internals, which can change meaning without
failing to compile: on a Spark or Iceberg version they are not tested on (:data:`TESTED_SPARK`,
:data:`TESTED_ICEBERG`) every helper is None, with a note logged once (:func:`untested_versions`).
"""

from __future__ import annotations

import importlib.resources
import logging
from collections.abc import Iterator
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

PACKAGE = "pando"  # the Java package of every helper class

# The Spark and Iceberg versions (major.minor) the helpers, and the internal APIs they call, are
# tested on: the versions this package pins (pyproject.toml).
TESTED_SPARK = ("3.5",)
TESTED_ICEBERG = ("1.10",)

SHARED = "TaskCache"  # the class whose static state must be one copy: at the root of the loaders
# The helper classes other helpers call, by caller: the caller's loader delegates to that class's
# loader (so a class several call is compiled once, and is theirs); every chain ends at SHARED.
PARENT_CLASSES = {"KeyViews": "Views", "TaskSetViews": "Views", "Staging": "TaskSetViews", "PruneRule": "TaskSetViews"}
# The small helper classes compiled again in each caller's own loader.
COMPILED_WITH = {"KeyViews": ("LocalRelations",), "Staging": ("LocalRelations", "Plans"), "Residuals": ("Plans",)}

# (id(gateway), class) → (gateway, Janino's class loader); (id(gateway), class) → (gateway, instance
# or None); (id(gateway), class, method) → (gateway, py4j member or None)
_LOADERS: dict[tuple[int, str], tuple[Any, Any]] = {}
_INSTANCES: dict[tuple[int, str], tuple[Any, Any]] = {}
_METHODS: dict[tuple[int, str, str], tuple[Any, Any]] = {}
_WARNED: set[str] = set()
_TESTED: dict[int, tuple[Any, bool]] = {}  # id(gateway) → (gateway, its versions are tested)


def untested_versions(spark_version: str, iceberg_version: str) -> str | None:
    """None when the fast paths are tested on Spark ``spark_version`` with Iceberg
    ``iceberg_version`` (their major.minor among :data:`TESTED_SPARK` / :data:`TESTED_ICEBERG`),
    else a note saying which version is not and that the portable paths are taken."""
    def minor(version: str) -> str:
        return ".".join(version.strip().split(".")[:2])

    untested = [f"{what} {version}" for what, version, tested in
                (("Spark", spark_version, TESTED_SPARK), ("Iceberg", iceberg_version, TESTED_ICEBERG))
                if minor(version) not in tested]
    if not untested:
        return None
    return (f"pando: the JVM fast paths are tested on Spark {'/'.join(TESTED_SPARK)}.x with Iceberg "
            f"{'/'.join(TESTED_ICEBERG)}.x, not on {' with '.join(untested)}: this session takes the portable "
            "paths (same results, more py4j round trips)")


def jvm_versions(gateway) -> tuple[str, str]:
    """(Spark version, Iceberg version) of the jars in ``gateway``'s JVM."""
    jvm = gateway.jvm
    spark = getattr(getattr(jvm.org.apache.spark, "package$"), "MODULE$").SPARK_VERSION()
    return str(spark), str(jvm.org.apache.iceberg.IcebergBuild.version())


def tested(gateway) -> bool:
    """Are the helpers tested on the versions in ``gateway``'s JVM? Asked once per JVM; a note is
    logged when they are not (:func:`untested_versions`)."""
    hit = _TESTED.get(id(gateway))
    if hit is not None and hit[0] is gateway:
        return hit[1]
    try:
        note = untested_versions(*jvm_versions(gateway))
    except Exception as e:  # no Iceberg runtime, or another layout of Spark's version
        note = f"pando: the JVM's Spark and Iceberg versions are unknown ({type(e).__name__}: {e}): " \
               "this session takes the portable paths"
    if note is not None:
        log.warning("%s", note)
    _TESTED[id(gateway)] = (gateway, note is None)
    return note is None



# Java classes by (gateway, name): ``jvm.org.apache...Cls`` resolves every package step with a
# reflection round trip (0.7 ms for Spark3Util, 0.4 ms for java.lang.Object; a no-op call is 0.04
# ms), several times per staged table and key set.
_JCLASSES: dict[tuple[int, str], tuple[Any, Any]] = {}


def jclass(gateway, name: str):
    """The py4j handle of the Java class ``name`` (dotted), looked up once per JVM."""
    hit = _JCLASSES.get((id(gateway), name))
    if hit is None or hit[0] is not gateway:
        handle = gateway.jvm
        for part in name.split("."):
            handle = getattr(handle, part)
        _JCLASSES[(id(gateway), name)] = hit = (gateway, handle)
    return hit[1]


def java_iter(java_iterable) -> Iterator:
    """The elements of a Java Iterable, closing its iterator when it has a ``close``."""
    it = java_iterable.iterator()
    try:
        while it.hasNext():
            yield it.next()
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass


@cache
def java_sources() -> dict[str, str]:
    """Class name (without the package) → Java source text of every helper shipped."""
    folder = importlib.resources.files("pando_iceberg.spark") / "java" / PACKAGE
    return {entry.name.removesuffix(".java"): entry.read_text(encoding="utf-8")
            for entry in sorted(folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(".java")}


def _loader(gateway, name: str):
    """Janino's class loader for the helper class ``name`` in ``gateway``'s JVM, made once: it
    compiles ``name`` and the classes :data:`COMPILED_WITH` it, and delegates to the loader of its
    :data:`PARENT_CLASSES` entry (the shared class's by default, Spark's own for the shared class),
    where the classes above it in that tree are found, each compiled once."""
    hit = _LOADERS.get((id(gateway), name))
    if hit is not None and hit[0] is gateway:
        return hit[1]
    jvm = gateway.jvm
    parent = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader() if name == SHARED \
        else _loader(gateway, PARENT_CLASSES.get(name, SHARED))
    sources = jvm.java.util.HashMap()
    texts = java_sources()
    for source in (name, *COMPILED_WITH.get(name, ())):
        sources.put(f"{PACKAGE}/{source}.java", bytearray(texts[source].encode("utf-8")))
    finder = jvm.org.codehaus.commons.compiler.util.resource.MapResourceFinder(sources)
    loader = jvm.org.codehaus.janino.JavaSourceClassLoader(parent, finder, "UTF-8")
    loader.setDebuggingInfo(True, True, True)  # file and line numbers in a helper's stack traces
    _LOADERS[(id(gateway), name)] = (gateway, loader)
    return loader


def compile_error(gateway, name: str) -> str | None:
    """Janino's message when the helper class ``name`` (or a class it calls) does not compile in
    ``gateway``'s JVM, None when it compiles. Compiles it if it was not yet."""
    try:
        _loader(gateway, name).loadClass(f"{PACKAGE}.{name}")
    except Exception as e:  # py4j-wrapped ClassNotFoundException around Janino's CompileException
        return _java_message(e)
    return None


def _java_message(error: Exception) -> str:
    """The innermost cause's class and message of a py4j-wrapped Java exception (Janino's
    CompileException names the file, line and column), else the Python error's text."""
    throwable = getattr(error, "java_exception", None)
    if throwable is None:
        return f"{type(error).__name__}: {error}"
    while throwable.getCause() is not None:
        throwable = throwable.getCause()
    return str(throwable.toString())


def _instance(gateway, name: str):
    """An instance of the compiled helper class ``name`` (py4j calls its static methods through
    it: one round trip per call), or None when it does not compile (warned once)."""
    hit = _INSTANCES.get((id(gateway), name))
    if hit is not None and hit[0] is gateway:
        return hit[1]
    instance = None
    try:
        clazz = _loader(gateway, name).loadClass(f"{PACKAGE}.{name}")
        jvm = gateway.jvm
        instance = clazz.getDeclaredConstructor(gateway.new_array(jvm.java.lang.Class, 0)) \
            .newInstance(gateway.new_array(jvm.java.lang.Object, 0))
    except Exception as e:  # no Janino on this JVM's classpath, or it refused the source
        if name not in _WARNED:
            _WARNED.add(name)
            log.warning("pando: the JVM helper %s.%s does not compile here; its work takes the slower portable "
                        "path (%s)", PACKAGE, name, _java_message(e)[:2000])
    _INSTANCES[(id(gateway), name)] = (gateway, instance)
    return instance


def compiled(gateway, name: str, method: str, arg_types: tuple[str, ...]):
    """The static method ``method`` (public) of the helper class ``name`` (its argument classes by
    JVM name, ``[B`` for ``byte[]``) as a py4j member: one round trip per call. None when the
    JVM's Spark or Iceberg is a version the helpers are not tested on (:func:`tested`), the class
    does not compile or has no such method: callers then take a slower, portable path. Every fast
    path is chosen here."""
    hit = _METHODS.get((id(gateway), name, method))
    if hit is not None and hit[0] is gateway:
        return hit[1]
    found = None
    instance = _instance(gateway, name) if tested(gateway) else None
    if instance is not None:
        try:
            jvm = gateway.jvm
            types = gateway.new_array(jvm.java.lang.Class, len(arg_types))
            for i, t in enumerate(arg_types):
                types[i] = jvm.java.lang.Class.forName(t)
            instance.getClass().getMethod(method, types)  # declared with this signature, or NoSuchMethodException
            found = getattr(instance, method)
        except Exception as e:
            log.warning("pando: the JVM helper %s.%s has no method %s%s (%s)", PACKAGE, name, method, arg_types,
                        _java_message(e)[:500])
    _METHODS[(id(gateway), name, method)] = (gateway, found)
    return found


def helper(name: str, method: str, arg_types: tuple[str, ...]):
    """:func:`compiled` in the JVM of the running SparkContext, or None without one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return compiled(gateway, name, method, arg_types) if gateway is not None else None
