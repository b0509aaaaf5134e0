"""The errors pando-iceberg raises, by what a caller does about them.

Every error Pando raises on purpose is a :class:`PandoError`; catch one of the kinds below to
handle one failure, or ``PandoError`` for all of them::

    from pando_iceberg import CommitConflictError, PandoError, PandoTable

    try:
        PandoTable(catalog, "db.t", spark=spark).optimize.rewrite(workload, k=3)
    except CommitConflictError:
        ...  # another writer changed the files first: nothing was committed; run it again
    except PandoError as e:
        print(e)  # the message names what was wrong and what is accepted

The classes raised are defined beside the code that raises them (``spark.iceberg_jvm.CommitConflict``,
``storage.SidecarError``, ...) and each subclasses one kind here as well as the built-in
exception it always was (``ValueError`` for bad input, ``RuntimeError`` for a failure), so code
catching ``ValueError`` keeps working. This module imports nothing from the package: every
module may use it.

======================================  ============================================================
kind                                    raised as
======================================  ============================================================
:class:`ConfigurationError`             ``config.ConfigError`` (a setting of pando.yaml, the
                                        environment or a table property)
:class:`EngineError`                    ``spark.session.SparkSetupError`` (Spark cannot start),
                                        ``spark.session.SparkSqlError`` (Spark or Iceberg failed)
:class:`CommitConflictError`            ``spark.iceberg_jvm.CommitConflict``
:class:`LayoutError`                    ``storage.SidecarError``, ``layout.serialize.LayoutFormatError``,
                                        ``spark.rewrite_common.PandoRewriteError``
:class:`TemplateRegressionError`        ``spark.rewrite_common.TemplateGuardError``
:class:`WorkloadError`                  ``workload.model.PandoWorkloadError``
:class:`PlanningError`                  ``expr.PandoExprError``, ``planner.pyiceberg_sql.UnsupportedFilter``
:class:`UsageError`                     ``procedures.ProcedureError``, ``runner.RunbookError``,
                                        ``table.PandoApiError``, the CLI's and the benchmarks' errors
======================================  ============================================================
"""

from __future__ import annotations

__all__ = ["CommitConflictError", "ConfigurationError", "EngineError", "LayoutError", "PandoError",
           "PlanningError", "TemplateRegressionError", "UsageError", "WorkloadError"]


class PandoError(Exception):
    """Base of every error pando-iceberg raises on purpose; the message says what was wrong."""


class ConfigurationError(PandoError):
    """A setting is wrong or missing: the message names the setting, the value and what is accepted."""


class EngineError(PandoError):
    """Spark cannot start (a prerequisite is missing), or Spark or Iceberg failed running a
    statement; the message is the engine's, read while it was still running."""


class CommitConflictError(PandoError):
    """A commit lost to a concurrent change of the files it replaces. Nothing was committed and
    the files it wrote were removed: running the operation again is safe."""


class LayoutError(PandoError):
    """A layout cannot be learned, stored, read or applied as asked: a wrong option, a table with
    nothing to lay out, a sidecar that is missing, corrupt or of a format version this code
    cannot read, a layout changed concurrently."""


class TemplateRegressionError(LayoutError):
    """The per-template guard refused a layout: a workload template would read more than the
    guard allows (``max-template-regression``). Nothing was written; ``force => true`` applies it."""


class WorkloadError(PandoError):
    """A workload statement cannot be read: it does not parse, or a table or column it names is unknown."""


class PlanningError(PandoError):
    """A filter or query cannot be planned as written: an unknown column, a literal of the wrong
    type, an expression Pando does not accept. (What Pando can plan but not model exactly is not
    an error: it prunes nothing.)"""


class UsageError(PandoError):
    """Pando was called wrongly: a ``CALL`` statement, a runbook, a verb's arguments, a command's
    options. The message lists what is accepted."""
