"""Arrow columns laid out from buffers equal pyarrow's own conversion of the same values, are
refused where pyarrow refuses them, and are built without importing pandas."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse_engine.arrowcolumns import column, mask

UTC = dt.UTC
CASES = [
    ([1, None, -3, 2**62], pa.int64()),
    ([-128, 127, None], pa.int8()),
    ([0, 2**32 - 1], pa.uint32()),
    ([1.5, None, -0.0, float("inf")], pa.float64()),
    ([1.5, None, 0.25], pa.float32()),
    ([True, None, False, True, True, False, False, False, True], pa.bool_()),
    ([Decimal("12.34"), None, Decimal("-0.01"), Decimal("-12345678.9"), 7, Decimal("1E+2")],
     pa.decimal128(10, 2)),
    ([Decimal("9" * 38), Decimal("-" + "9" * 38)], pa.decimal128(38, 0)),
    ([Decimal("0.000000000000000000000000000000000001")], pa.decimal128(38, 36)),
    ([dt.datetime(2026, 12, 6, 23, 1, 2, 345678, tzinfo=UTC), None,
      dt.datetime(1969, 7, 20, 20, 17, 40, 5, tzinfo=UTC), dt.datetime(1, 1, 1, tzinfo=UTC)],
     pa.timestamp("us", tz="UTC")),
    ([dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)], pa.timestamp("ms", tz="UTC")),
    ([dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)], pa.timestamp("s", tz="UTC")),
    ([dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)], pa.timestamp("ns", tz="UTC")),
    ([dt.datetime(2026, 1, 2, 3, 4, 5, 6), None, dt.datetime(1900, 2, 28)], pa.timestamp("us")),
    ([dt.date(2026, 12, 6), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
    (["a", None, "", "é\u20ac\U0001F600", "z" * 1000], pa.string()),
    ([b"\x00\xff", None, b""], pa.binary()),
    ([], pa.int64()),
    ([], pa.string()),
    ([None, None], pa.decimal128(10, 2)),
    ([None], pa.timestamp("us", tz="UTC")),
    # Not laid out here (other Python types than the canonical ones): pyarrow converts them.
    ([1, 2.5], pa.float64()),
    ([dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))], pa.timestamp("us", tz="UTC")),
    ([dt.datetime(2026, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="Europe/Paris")),
    ([[1, 2], None], pa.list_(pa.int64())),
]


@pytest.mark.parametrize(("values", "kind"), CASES, ids=[f"{k}:{v!r:.30}" for v, k in CASES])
def test_a_column_equals_pyarrows_conversion_of_the_same_values(values, kind):
    made = column(values, kind)
    expected = pa.array(values, type=kind)
    assert made.type == expected.type
    assert made.null_count == expected.null_count
    made.validate(full=True)
    assert made.equals(expected)


def test_a_nan_stays_a_nan_and_not_a_null():
    made = column([float("nan"), None], pa.float64())
    assert made.null_count == 1
    assert str(made.to_pylist()) == "[nan, None]"


@pytest.mark.parametrize(("values", "kind"), [
    ([Decimal("1.234")], pa.decimal128(10, 2)),  # more fractional digits than the scale
    ([10**8], pa.decimal128(10, 2)),             # more digits than the precision
    ([2**63], pa.int64()),
    ([-1], pa.uint8()),
    (["\ud800"], pa.string()),                   # a lone surrogate
    ([Decimal("NaN")], pa.decimal128(10, 2)),
    ([True, 2], pa.int64()),                     # not laid out here: pyarrow refuses the bool
])
def test_a_value_pyarrow_refuses_is_refused_as_pyarrow_refuses_it(values, kind):
    with pytest.raises(Exception) as expected:  # noqa: PT011 - whichever pyarrow raises
        pa.array(values, type=kind)
    with pytest.raises(type(expected.value)):
        column(values, kind)


def test_a_float32_column_narrows_a_value_as_pyarrow_does():
    values = [0.1, None, 1e40]  # not exactly float32 values: pyarrow decides how they narrow
    try:
        expected = pa.array(values, type=pa.float32())
    except pa.ArrowException as exc:
        with pytest.raises(type(exc)):
            column(values, pa.float32())
    else:
        assert column(values, pa.float32()).equals(expected)


def test_a_mask_equals_a_boolean_array_of_its_flags():
    flags = [True, False, False, True, True, True, False, True, True, False, True]
    assert mask(flags).equals(pa.array(flags, type=pa.bool_()))
    assert mask([]).equals(pa.array([], type=pa.bool_()))


def test_columns_of_every_laid_out_type_are_built_without_importing_pandas():
    # In a Spark worker pandas costs 0.26 s of CPU and ~48 MB: pa.array imports it.
    probe = (
        "import datetime as dt\n"
        "from decimal import Decimal\n"
        "import pyarrow as pa\n"
        "from lakehouse_engine.arrowcolumns import column, mask\n"
        "at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)\n"
        "for values, kind in [([1, None], pa.int32()), ([1.5], pa.float64()), ([True], pa.bool_()),\n"
        "        ([Decimal('1.5'), None], pa.decimal128(10, 2)), ([at], pa.timestamp('us', tz='UTC')),\n"
        "        ([at.replace(tzinfo=None)], pa.timestamp('us')), ([at.date()], pa.date32()),\n"
        "        (['x', None], pa.string()), ([b'x'], pa.binary())]:\n"
        "    column(values, kind)\n"
        "pa.RecordBatch.from_arrays([column([1], pa.int64())], names=['a']).filter(mask([True]))\n"
    )
    assert not imports_pandas(probe)


def imports_pandas(probe: str) -> bool:
    """Whether running ``probe`` in a fresh interpreter imports pandas."""
    code = probe + "\nimport sys\nprint('pandas' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"
