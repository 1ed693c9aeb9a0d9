"""The checks ``dq`` measures itself, as Great Expectations expectations.

Silver's lag and the value-by-value reconciliation cannot be computed from silver alone: they
are measured outside GX (the lag from the source's binlog head, the values in the source's read
view) and handed to each run as a *suite parameter*. Silver's row count and its key's
uniqueness are counted by the engine in one job over silver's key columns (``silverpass``) where
the table is reconciled and its key compares as the source's does, instead of the four passes
GX's own expectations make. The expectation then decides, GX records
the verdict with its observed value in the validation result, and the Data Docs show both checks
next to the count and key checks. The stored suite holds only the ``$PARAMETER`` references and
the thresholds, so a scheduled run leaves it untouched.

Importing this module registers both classes with GX: it must be imported before a suite that
holds them is loaded (``checks.run_quality_checks`` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from great_expectations.compatibility import pydantic
from great_expectations.expectations.expectation import BatchExpectation
from great_expectations.render import LegacyRendererType, RenderedStringTemplateContent
from great_expectations.render.renderer.renderer import renderer
from great_expectations.render.renderer_configuration import RendererConfiguration, RendererValueType

from .freshness import LagMeasurement, lag_verdict
from .reconcile import Reconciliation
from .silverpass import KeyFacts

Rendered = RenderedStringTemplateContent

__all__ = ["KEYS_PARAMETER", "LAG_PARAMETER", "ROWS_PARAMETER", "VALUES_CHECK", "VALUES_PARAMETER",
           "ExpectSilverKeyToBeUniqueAndNotNull", "ExpectSilverLagToBeAtMost", "ExpectSilverRowCountToEqualSource",
           "ExpectSilverValuesToEqualSource", "Measured", "console_name", "keys_measured", "lag_measured",
           "rows_measured", "values_measured"]

LAG_PARAMETER = "silver_lag"
VALUES_PARAMETER = "silver_values"
VALUES_CHECK = "silver_values_equal_source(row fingerprints per key bucket)"
KEYS_PARAMETER = "silver_keys"
ROWS_PARAMETER = "silver_rows"
KEYS_TEMPLATE = "Every row must hold a key no other row holds, none of the key's columns NULL."
ROWS_TEMPLATE = "Silver must hold as many rows as the source held at the compared binlog position."
LAG_TEMPLATE = ("Silver must hold every change the source committed more than $max_lag_seconds seconds "
                "ago (lag read at the source's binlog head).")
VALUES_TEMPLATE = ("Every row must hold the source's values at the compared binlog position (row "
                   "fingerprints summed per key bucket; differing keys named).")


@dataclass(frozen=True)
class Measured:
    """A check measured outside GX: the expectation for the suite, and its run's parameters."""

    expectation: BatchExpectation
    parameters: Mapping[str, Any]


class ExpectSilverLagToBeAtMost(BatchExpectation):
    """Silver's lag behind the source, as ``freshness.LagMeasurement.as_parameter`` gives it,
    is at most ``max_lag_seconds`` (an unknown lag fails: a check that cannot tell must not pass)."""

    max_lag_seconds: int | float = pydantic.Field(description="The largest lag accepted, in seconds.")
    measured: dict[str, Any] = pydantic.Field(
        default_factory=lambda: {"$PARAMETER": LAG_PARAMETER},
        description="The lag measured by the engine for this run (a suite parameter).")
    success_keys = ("max_lag_seconds", "measured")
    args_keys = ("max_lag_seconds",)
    library_metadata: ClassVar[dict[str, Any]] = {"maturity": "production", "tags": ["lakehouse"],
                                                   "contributors": [], "requirements": []}

    class Config:
        title = "Expect silver's lag behind the source to be at most"

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration[Any]) -> RendererConfiguration[Any]:
        renderer_configuration.add_param(name="max_lag_seconds", param_type=RendererValueType.NUMBER)
        renderer_configuration.template_str = LAG_TEMPLATE
        return renderer_configuration

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration: Any = None, result: Any = None,
                               runtime_configuration: dict[str, Any] | None = None) -> list[Rendered]:
        kwargs = configuration.kwargs if configuration is not None else {}
        return _template(LAG_TEMPLATE, {"max_lag_seconds": kwargs.get("max_lag_seconds")}, runtime_configuration)

    def _validate(self, metrics: dict[str, Any], runtime_configuration: dict[str, Any] | None = None,
                  execution_engine: Any = None) -> dict[str, Any]:
        kwargs = self._get_success_kwargs()
        success, observed = lag_verdict(LagMeasurement.from_parameter(kwargs["measured"]),
                                        float(kwargs["max_lag_seconds"]))
        return {"success": success, "result": {"observed_value": observed}}


class ExpectSilverValuesToEqualSource(BatchExpectation):
    """Silver holds the source's values key by key, as ``reconcile`` measured them in the
    source's read view (``values_measured`` gives the parameter); the observed value names the
    differing keys and the command that re-reads them."""

    measured: dict[str, Any] = pydantic.Field(
        default_factory=lambda: {"$PARAMETER": VALUES_PARAMETER},
        description="The reconciliation measured by the engine for this run (a suite parameter).")
    success_keys = ("measured",)
    library_metadata: ClassVar[dict[str, Any]] = {"maturity": "production", "tags": ["lakehouse"],
                                                   "contributors": [], "requirements": []}

    class Config:
        title = "Expect silver's values to equal the source's"

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration[Any]) -> RendererConfiguration[Any]:
        renderer_configuration.template_str = VALUES_TEMPLATE
        return renderer_configuration

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration: Any = None, result: Any = None,
                               runtime_configuration: dict[str, Any] | None = None) -> list[Rendered]:
        return _template(VALUES_TEMPLATE, {}, runtime_configuration)

    def _validate(self, metrics: dict[str, Any], runtime_configuration: dict[str, Any] | None = None,
                  execution_engine: Any = None) -> dict[str, Any]:
        measured = self._get_success_kwargs()["measured"]
        success = (measured.get("not_compared") is None and not measured.get("differing_buckets")
                   and not measured.get("unbucketed_rows"))
        return {"success": success, "result": {"observed_value": str(measured["observed"]),
                                               "details": {"differing_keys": list(measured["differing_keys"])}}}


class ExpectSilverKeyToBeUniqueAndNotNull(BatchExpectation):
    """No two rows of silver hold the same key and no key column is NULL, as counted by the
    engine's pass over silver (``keys_measured`` gives the parameter)."""

    key_columns: list[str] = pydantic.Field(description="The key's columns.")
    measured: dict[str, Any] = pydantic.Field(
        default_factory=lambda: {"$PARAMETER": KEYS_PARAMETER},
        description="The key facts counted by the engine for this run (a suite parameter).")
    success_keys = ("measured",)
    args_keys = ("key_columns",)
    library_metadata: ClassVar[dict[str, Any]] = {"maturity": "production", "tags": ["lakehouse"],
                                                   "contributors": [], "requirements": []}

    class Config:
        title = "Expect silver's key to be unique and not null"

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration[Any]) -> RendererConfiguration[Any]:
        renderer_configuration.template_str = KEYS_TEMPLATE
        return renderer_configuration

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration: Any = None, result: Any = None,
                               runtime_configuration: dict[str, Any] | None = None) -> list[Rendered]:
        return _template(KEYS_TEMPLATE, {}, runtime_configuration)

    def _validate(self, metrics: dict[str, Any], runtime_configuration: dict[str, Any] | None = None,
                  execution_engine: Any = None) -> dict[str, Any]:
        measured = self._get_success_kwargs()["measured"]
        success = measured["shared_rows"] == 0 and not any(measured["null_rows"].values())
        return {"success": success, "result": {"observed_value": str(measured["observed"]),
                                               "details": {"rows": measured["rows"],
                                                           "shared_rows": measured["shared_rows"],
                                                           "null_rows": dict(measured["null_rows"])}}}


class ExpectSilverRowCountToEqualSource(BatchExpectation):
    """Silver holds as many rows as the source at the compared position (``rows_measured``)."""

    measured: dict[str, Any] = pydantic.Field(
        default_factory=lambda: {"$PARAMETER": ROWS_PARAMETER},
        description="Silver's rows and the source's at the compared position (a suite parameter).")
    success_keys = ("measured",)
    library_metadata: ClassVar[dict[str, Any]] = {"maturity": "production", "tags": ["lakehouse"],
                                                   "contributors": [], "requirements": []}

    class Config:
        title = "Expect silver's row count to equal the source's"

    @classmethod
    def _prescriptive_template(cls, renderer_configuration: RendererConfiguration[Any]) -> RendererConfiguration[Any]:
        renderer_configuration.template_str = ROWS_TEMPLATE
        return renderer_configuration

    @classmethod
    @renderer(renderer_type=LegacyRendererType.PRESCRIPTIVE)
    def _prescriptive_renderer(cls, configuration: Any = None, result: Any = None,
                               runtime_configuration: dict[str, Any] | None = None) -> list[Rendered]:
        return _template(ROWS_TEMPLATE, {}, runtime_configuration)

    def _validate(self, metrics: dict[str, Any], runtime_configuration: dict[str, Any] | None = None,
                  execution_engine: Any = None) -> dict[str, Any]:
        measured = self._get_success_kwargs()["measured"]
        silver, source = int(measured["silver_rows"]), int(measured["source_rows"])
        observed = f"{silver} rows (the source's at the compared position: {source})"
        return {"success": silver == source, "result": {"observed_value": observed,
                                                        "details": {"silver_rows": silver, "source_rows": source}}}


def keys_measured(key_columns: list[str], facts: KeyFacts) -> Measured:
    parameter = {"rows": facts.rows, "shared_rows": facts.shared_rows, "null_rows": dict(facts.null_rows),
                 "observed": facts.describe()}
    return Measured(ExpectSilverKeyToBeUniqueAndNotNull(key_columns=list(key_columns)), {KEYS_PARAMETER: parameter})


def rows_measured(silver_rows: int, source_rows: int) -> Measured:
    return Measured(ExpectSilverRowCountToEqualSource(),
                    {ROWS_PARAMETER: {"silver_rows": silver_rows, "source_rows": source_rows}})


def lag_measured(measurement: LagMeasurement, max_lag_seconds: float) -> Measured:
    return Measured(ExpectSilverLagToBeAtMost(max_lag_seconds=max_lag_seconds),
                    {LAG_PARAMETER: measurement.as_parameter()})


def values_measured(table: str, reconciliation: Reconciliation) -> Measured:
    """The reconciliation as the values expectation's parameter (``differing_keys`` only lists
    the keys compared one by one: a differing bucket not drilled names no key)."""
    keys = [f"{k.key}: {k.problem}" for d in reconciliation.differences if d.drilled for k in d.keys]
    parameter = {"not_compared": reconciliation.not_compared, "buckets": reconciliation.buckets,
                 "differing_buckets": len(reconciliation.differences), "differing_keys": keys,
                 "unbucketed_rows": reconciliation.unbucketed_rows,
                 "observed": reconciliation.observed(table)}
    return Measured(ExpectSilverValuesToEqualSource(), {VALUES_PARAMETER: parameter})


def console_name(expectation_type: str, kwargs: Mapping[str, Any]) -> str | None:
    """The short name ``dq`` prints for one of these expectations; None for any other."""
    if expectation_type == "expect_silver_lag_to_be_at_most":
        return f"silver_lag_at_most({float(kwargs['max_lag_seconds']):g} s)"
    if expectation_type == "expect_silver_values_to_equal_source":
        return VALUES_CHECK
    if expectation_type == "expect_silver_key_to_be_unique_and_not_null":
        return f"silver_key_unique_and_not_null({', '.join(kwargs.get('key_columns') or [])})"
    if expectation_type == "expect_silver_row_count_to_equal_source":
        return "silver_row_count_equals_source"
    return None


def _template(template: str, params: dict[str, Any],
              runtime_configuration: dict[str, Any] | None) -> list[Rendered]:
    styling = runtime_configuration.get("styling", {}) if runtime_configuration else {}
    return [RenderedStringTemplateContent(content_block_type="string_template",
                                          string_template={"template": template, "params": params,
                                                           "styling": styling})]
