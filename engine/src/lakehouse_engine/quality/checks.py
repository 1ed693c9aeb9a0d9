"""Great Expectations (1.x) checks for silver tables.

``run_quality_checks`` validates a Spark DataFrame against a per-table suite (keys not null, key
unique - in the source's collations when the caller says how, see ``UniqueKey`` - exact row
count, the checks the caller measured against the source (``expectations.Measured``: silver's
lag, its values), plus caller-supplied expectations) in a File data context and builds the
local Data Docs for the run, naming the table and the silver version checked, rewritten to read
offline (``datadocs``). GX objects are saved only when they
differ from the stored ones: the source row count is a suite parameter given to each run, so a
scheduled run leaves ``gx/`` (everything outside ``gx/uncommitted``) untouched.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse
from urllib.request import url2pathname

# Must be set before great_expectations is imported (it is imported lazily below, as it
# takes ~3 s): the pipeline runs offline, so GX must never try to phone home.
os.environ["GX_ANALYTICS_ENABLED"] = "False"

if TYPE_CHECKING:
    import pyspark.sql
    from great_expectations.checkpoint.checkpoint import CheckpointResult
    from great_expectations.core import ExpectationSuite
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.core.expectation_validation_result import ExpectationValidationResult
    from great_expectations.data_context.data_context.abstract_data_context import AbstractDataContext
    from great_expectations.expectations.expectation import Expectation

    from .expectations import Measured

__all__ = ["CheckOutcome", "QualityResult", "UniqueKey", "run_quality_checks"]

DATASOURCE_NAME = "spark_dataframes"
# For a run whose checks were all measured by the engine (``dq`` without a JVM): GX reads no
# data then, and is given an empty pandas frame, so that it never starts Spark.
MEASURED_DATASOURCE_NAME = "measured_by_the_engine"
BATCH_DEFINITION_NAME = "whole_dataframe"
ROW_COUNT_PARAMETER = "source_row_count"
_NO_BARS = {"globally": False, "metric_calculations": False}


@dataclass(frozen=True)
class CheckOutcome:
    expectation: str  # e.g. "expect_column_values_to_be_unique(order_id)"
    success: bool
    observed: str  # short human-readable observed value / unexpected count


@dataclass(frozen=True)
class UniqueKey:
    """The columns whose values together must be unique (by default the key columns), a note
    shown with the expectation in the Data Docs, and the line that replaces GX's observed value
    when the expectation fails (the caller knows which keys collide and how to fix it)."""

    columns: tuple[str, ...]
    notes: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class QualityResult:
    table: str
    success: bool
    checks: tuple[CheckOutcome, ...]
    docs_path: str | None  # path of the Data Docs index.html built for this run, if any
    compared_at: str | None = None  # the binlog position silver and the source were compared at
    lag_seconds: float | None = None  # silver's lag behind the source (None: not measured or unknown)


def run_quality_checks(
    df: pyspark.sql.DataFrame | None,
    *,
    table: str,
    key_columns: Sequence[str],
    expected_row_count: int | None,
    extra_expectations: Sequence[Expectation] = (),
    gx_root: pathlib.Path,
    compared_at: str | None = None,
    unique_key: UniqueKey | None = None,
    measured: Sequence[Measured] = (),
    batch_description: Mapping[str, str] | None = None,
    measured_keys: bool = False,
) -> QualityResult:
    """Validate ``df`` for ``table`` and return a summary of every expectation (``df`` None:
    every check is ``measured``, with ``measured_keys``, and there are no ``extra_expectations``;
    GX then reads no data and runs without Spark).

    The GX project lives in ``gx_root / "gx"`` (created on first use). The suite is named ``table``
    and is saved again only when its expectations changed, so changed ``key_columns`` or
    ``extra_expectations`` take effect at once and an unchanged suite is never rewritten; the row
    count is the suite parameter ``source_row_count``. ``compared_at`` (the binlog position) is
    the run's name, shown in the Data Docs next to the results. ``extra_expectations`` are
    copied first, so the same instances may be passed on every run (GX refuses an Expectation
    object that already belongs to a suite). ``df`` is cached for the run and unpersisted
    afterwards unless the caller had cached it.

    Failing expectations do not raise: they give ``success=False``. GX errors (e.g. an unknown
    column) become failed checks whose ``observed`` starts with ``"error:"``. ``docs_path`` is
    the local site's ``index.html``, the run's pages built after it (``_data_docs``), its
    pages rewritten to need no network.

    ``unique_key`` names the columns the uniqueness expectation reads instead of
    ``key_columns`` (e.g. a ``_ci`` key's column of collation classes); its ``failure`` becomes
    that expectation's ``observed`` when it fails. ``measured`` are checks made against the
    source (their expectations join the suite, their values are the run's parameters);
    ``batch_description`` (what was checked: e.g. silver's path and Delta version) replaces GX's
    placeholder for the dataframe in the Data Docs. ``measured_keys``: ``measured`` holds the key
    and row-count checks (``expectations.keys_measured``, ``rows_measured``), so GX's own
    not-null, uniqueness and row-count expectations (each a pass over ``df``) are left out.
    """
    if not key_columns:
        raise ValueError(f"{table}: key_columns must not be empty")
    if df is None and (extra_expectations or not measured_keys):
        raise ValueError(f"{table}: GX needs silver's rows for expectations the engine did not measure")
    unique = unique_key or UniqueKey(tuple(key_columns))
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    from . import expectations  # noqa: F401  (registers the measured checks before suites load)

    context = gx.get_context(mode="file", project_root_dir=str(gx_root))
    _quiet_context(context)
    batch_definition = _batch_definition(context, table, spark=df is not None)
    suite = _saved_suite(context, _build_suite(table, key_columns, extra_expectations, unique=unique,
                                               count_rows=expected_row_count is not None and not measured_keys,
                                               check_keys=not measured_keys,
                                               measured=[m.expectation for m in measured]))
    # Each batch kind keeps a validation and checkpoint of its own, so that a table checked one
    # way one run and the other the next (Spark's pass names differing keys) rewrites nothing.
    kind = "" if df is not None else "measured_"
    validation = _saved(
        context.validation_definitions,
        gx.ValidationDefinition(name=f"{table}__{kind}validation", data=batch_definition, suite=suite),
        lambda stored: stored.suite.id == suite.id and stored.data.id == batch_definition.id,
    )
    checkpoint = _saved(
        context.checkpoints,
        gx.Checkpoint(
            name=f"{table}__{kind}checkpoint",
            validation_definitions=[validation],
            actions=[],  # the Data Docs are built below, once the results name what was checked
            result_format="SUMMARY",
        ),
        lambda stored: ([v.id for v in stored.validation_definitions] == [validation.id]
                        and not stored.actions and stored.result_format == "SUMMARY"),
    )
    parameters: dict[str, Any] = ({} if expected_row_count is None or measured_keys
                                  else {ROW_COUNT_PARAMETER: expected_row_count})
    for check in measured:
        parameters.update(check.parameters)
    # Should GX's Spark engine persist() the batch after all (a datasource that insists), it never
    # releases it: undo that unless the caller had already cached df.
    was_cached = df is not None and df.is_cached
    try:
        result = checkpoint.run(
            batch_parameters={"dataframe": _nothing_to_read() if df is None else df},
            expectation_parameters=parameters or None,
            run_id=RunIdentifier(run_name=f"binlog {compared_at}" if compared_at else None),
        )
    finally:
        if df is not None and not was_cached and df.is_cached:
            df.unpersist()
    docs_path = _data_docs(context, result, table, batch_description or {})

    checks: list[CheckOutcome] = []
    for suite_result in result.run_results.values():
        checks.extend(_outcome(r) for r in suite_result.results)
    if unique.failure is not None:
        name = _unique_expectation(unique.columns).expectation_type
        checks = [
            replace(c, observed=unique.failure)
            if not c.success and c.expectation == f"{name}({', '.join(unique.columns)})" else c
            for c in checks
        ]
    return QualityResult(
        table=table,
        success=bool(result.success),
        checks=tuple(checks),
        docs_path=docs_path,
        compared_at=compared_at,
    )


def _quiet_context(context: AbstractDataContext) -> None:
    """Persistently disable analytics and tqdm progress bars (noise in job logs).

    ``great_expectations.yml`` is only rewritten when it differs, not on every run.
    """
    from great_expectations.data_context.types.base import ProgressBarsConfig

    variables = context.variables
    # A ProgressBarsConfig when set in-process, a plain dict when loaded from YAML.
    bars: Any = variables.progress_bars
    current = {k: bars[k] for k in _NO_BARS if k in bars} if bars is not None else {}
    if variables.analytics_enabled is not False or current != _NO_BARS:
        variables.analytics_enabled = False
        variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
        variables.save()


def _nothing_to_read() -> Any:
    import pandas  # type: ignore[import-untyped]  # GX's own dependency

    return pandas.DataFrame()


def _batch_definition(context: AbstractDataContext, table: str, *, spark: bool = True) -> BatchDefinition[Any]:
    """Get or create the Spark datasource (``spark`` False: the pandas one of measured runs), the
    table's dataframe asset and its batch definition.

    Not ``add_or_update_spark``: it replaces the datasource with an asset-less copy, orphaning
    the batch definitions that stored validation definitions refer to.
    """
    from great_expectations.datasource.fluent.spark_datasource import DataFrameAsset, SparkDatasource

    if not spark:
        return _measured_batch_definition(context, table)

    if DATASOURCE_NAME in context.data_sources.all():
        datasource = context.data_sources.get(DATASOURCE_NAME)
    else:
        datasource = context.data_sources.add_spark(name=DATASOURCE_NAME, persist=False)
    if not isinstance(datasource, SparkDatasource):
        raise TypeError(f"GX datasource {DATASOURCE_NAME!r} is a {type(datasource).__name__}, not spark")
    # GX caches the whole batch by default so that its metric jobs share one scan: every column
    # of every silver row, in memory. Its metrics here (a count, a key's uniqueness) read no
    # column or only the key from Parquet, cheaper apart than one full cache. A datasource an
    # older engine saved caching is switched here for the run (and saved so once GX next writes
    # it, e.g. for a table's new asset).
    datasource.persist = False
    asset: DataFrameAsset[Any] = (
        datasource.get_asset(table)
        if table in datasource.get_asset_names()
        else datasource.add_dataframe_asset(name=table)
    )
    try:
        return asset.get_batch_definition(BATCH_DEFINITION_NAME)
    except KeyError:  # documented "not found" signal of get_batch_definition
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION_NAME)


def _measured_batch_definition(context: AbstractDataContext, table: str) -> BatchDefinition[Any]:
    from great_expectations.datasource.fluent.pandas_datasource import PandasDatasource

    if MEASURED_DATASOURCE_NAME in context.data_sources.all():
        datasource = context.data_sources.get(MEASURED_DATASOURCE_NAME)
    else:
        datasource = context.data_sources.add_pandas(name=MEASURED_DATASOURCE_NAME)
    if not isinstance(datasource, PandasDatasource):
        raise TypeError(f"GX datasource {MEASURED_DATASOURCE_NAME!r} is a {type(datasource).__name__}, not pandas")
    asset = (datasource.get_asset(table) if table in datasource.get_asset_names()
             else datasource.add_dataframe_asset(name=table))
    try:
        return asset.get_batch_definition(BATCH_DEFINITION_NAME)
    except KeyError:  # documented "not found" signal of get_batch_definition
        return asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION_NAME)


def _saved_suite(context: AbstractDataContext, suite: ExpectationSuite) -> ExpectationSuite:
    """The stored suite when it holds the same expectations as ``suite``, else ``suite`` saved."""
    saved: ExpectationSuite = _saved(context.suites, suite, lambda stored: _shape(stored) == _shape(suite))
    return saved


def _shape(suite: ExpectationSuite) -> list[dict[str, Any]]:
    """What a suite checks, without the ids GX assigns when saving."""
    shapes = []
    for expectation in suite.expectations:
        body = expectation.configuration.to_json_dict()
        body.pop("id", None)
        shapes.append(body)
    return shapes


def _saved(store: Any, wanted: Any, same: Callable[[Any], bool]) -> Any:
    """``wanted`` from ``store`` (a GX suite, validation definition or checkpoint factory): the
    stored object when ``same(stored)``, else ``wanted`` saved. GX's ``add_or_update`` rewrites
    the file every time, which a scheduled run must not do to files kept in git. A stored object
    that GX cannot read any more is replaced."""
    from great_expectations.exceptions import DataContextError

    try:
        stored = store.get(wanted.name)
    except DataContextError:  # "not found" (also a stored file GX can no longer read)
        stored = None
    if stored is not None and same(stored):
        return stored
    return store.add_or_update(wanted)


def _build_suite(
    table: str,
    key_columns: Sequence[str],
    extra_expectations: Sequence[Expectation],
    *,
    unique: UniqueKey | None = None,
    count_rows: bool = True,
    check_keys: bool = True,
    measured: Sequence[Expectation] = (),
) -> ExpectationSuite:
    import great_expectations as gx
    import great_expectations.expectations as gxe

    unique = unique or UniqueKey(tuple(key_columns))
    expectations: list[Expectation] = []
    if check_keys:  # else measured in the engine's pass over silver (``measured`` holds them)
        expectations += [gxe.ExpectColumnValuesToNotBeNull(column=c) for c in key_columns]
        expectations.append(_unique_expectation(unique.columns, unique.notes))
    if count_rows:  # not for a table that started without a snapshot: silver holds only later changes
        expectations.append(gxe.ExpectTableRowCountToEqual(value={"$PARAMETER": ROW_COUNT_PARAMETER}))
    expectations.extend(measured)
    # Pydantic-v1 style copy (GX models): detach from any suite the caller's instance joined.
    expectations.extend(e.copy(deep=True, update={"id": None}) for e in extra_expectations)

    # Given to the constructor, not by add_expectation(): that writes each expectation straight
    # into the stored suite of the same name (GX treats the new object as that saved suite).
    return gx.ExpectationSuite(name=table, expectations=expectations)


def _unique_expectation(columns: Sequence[str], notes: str | None = None) -> Expectation:
    import great_expectations.expectations as gxe

    if len(columns) == 1:
        return gxe.ExpectColumnValuesToBeUnique(column=columns[0], notes=notes)
    return gxe.ExpectCompoundColumnsToBeUnique(column_list=list(columns), notes=notes)


def _data_docs(context: AbstractDataContext, result: CheckpointResult, table: str,
               described: Mapping[str, str]) -> str | None:
    """Build the run's Data Docs pages, offline, with the table as the data asset and
    ``described`` in place of GX's ``<DATAFRAME>`` placeholder; the site's index path."""
    from .datadocs import make_offline

    for identifier, suite_result in result.run_results.items():
        meta: Any = suite_result.meta  # GX types it per key; these are plain JSON here
        meta["batch_spec"] = {"data_asset_name": table}
        meta["batch_parameters"] = dict(described) or {"table": table}
        meta.get("active_batch_definition", {}).get("batch_identifiers", {}).pop("dataframe", None)
        context.validation_results_store.set(identifier, suite_result)
    context.build_data_docs(resource_identifiers=list(result.run_results))
    docs_path = _local_docs_index(context)
    if docs_path is not None:
        make_offline(pathlib.Path(docs_path).parent)
    return docs_path


def _outcome(result: ExpectationValidationResult) -> CheckOutcome:
    from .expectations import console_name

    config = result.expectation_config
    kwargs: Mapping[str, Any] = config.kwargs if config is not None else {}
    name = config.type if config is not None else "unknown_expectation"
    ours = console_name(name, kwargs)
    observed = _describe_observed(result)
    if ours is not None and not observed.startswith("error:"):  # the whole report: it names the keys
        observed = str((result.result or {}).get("observed_value", observed))
    return CheckOutcome(
        expectation=ours or f"{name}({_describe_kwargs(kwargs)})",
        success=bool(result.success),
        observed=observed,
    )


def _describe_kwargs(kwargs: Mapping[str, Any]) -> str:
    if "column" in kwargs:
        return str(kwargs["column"])
    if "column_list" in kwargs:
        return ", ".join(map(str, kwargs["column_list"]))
    if "column_A" in kwargs and "column_B" in kwargs:
        return f"{kwargs['column_A']}, {kwargs['column_B']}"
    shown = {k: v for k, v in kwargs.items() if k != "batch_id" and v is not None}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


def _describe_observed(result: ExpectationValidationResult) -> str:
    error = _error_message(result.exception_info)
    if error is not None:
        lines = error.strip().splitlines()
        return f"error: {_short(lines[0] if lines else 'unknown')}"
    details: Mapping[str, Any] = result.result or {}
    if "observed_value" in details:
        return _short(details["observed_value"])
    if "unexpected_count" in details:
        count = details["unexpected_count"] or 0
        pct = details.get("unexpected_percent")
        text = f"{count} unexpected" + (f" ({pct:.2f}%)" if pct is not None else "")
        sample = details.get("partial_unexpected_list") or []
        if count and sample:
            text += f", e.g. {_short(sample[:5])}"
        return text
    return ""


def _error_message(info: Mapping[str, Any] | None) -> str | None:
    """First exception message in ``exception_info``, or None if nothing was raised.

    GX uses two shapes: flat ``{"raised_exception": ..., "exception_message": ...}`` when the
    expectation itself failed, ``{metric_id: ExceptionInfo}`` when a metric it needs failed.
    """
    if not info:
        return None
    if "raised_exception" in info:
        return str(info.get("exception_message") or "") if info["raised_exception"] else None
    for nested in info.values():
        if isinstance(nested, Mapping) and nested.get("raised_exception"):
            return str(nested.get("exception_message") or "")
    return None


def _short(value: object, limit: int = 120) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _local_docs_index(context: AbstractDataContext) -> str | None:
    """Filesystem path of the first built ``file://`` Data Docs index, else None."""
    for site in context.get_docs_sites_urls(only_if_exists=True):
        url = site.get("site_url")
        if not url or urlparse(url).scheme != "file":
            continue
        path = pathlib.Path(url2pathname(urlparse(url).path))
        if path.is_file():
            return str(path)
    return None
