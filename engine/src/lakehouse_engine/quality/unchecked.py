"""Spark arithmetic without per-operation overflow checks, for the bucket sums' weighing only.

Spark 4 runs in ANSI mode by default: every ``+`` and ``*`` on longs goes through
``MathUtils.addExact``/``multiplyExact``, which wrap the JDK's exact operation in a closure that
turns its exception into Spark's error. A local driver's JVM compiles with C1 only
(``sink.spark``), which allocates that closure on every call: the fingerprint of an 18-column
row does some 40 such operations. On make bench's 2M-row ``customer`` (2-core VM, warm) the
bucket sums took 7.1-8.6 s with the checks, 2.9-3.8 s with none, and 4.1 s as done here (the
casts checked, the weighing not); cold, as ``dq`` runs them once, 15.5 s against 10.9 s.

The checks cannot fire there: ``fingerprint`` keeps every term under 2**57 and reduces the sum
every 48 terms, so no value exceeds a signed 64-bit long on either side (MariaDB would fail on
an overflow where Spark, unchecked, wraps: the bound is what keeps the two sides equal, and the
tests of ``fingerprint`` pin it). But the setting means more than overflow checks: without it
Spark also casts otherwise (a DECIMAL 0.0000000001 becomes the text ``1E-10``), so only the
weighing of numbers already cast runs under it (``silverpass``). Spark fixes an expression's mode
when it turns the column into its plan, so frames built before the block keep theirs. Spark
Connect turns the whole plan at once, on the server, when it runs it: there the casts would be
caught too, so on Connect the block changes nothing and the checks stay on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

from ..sink.portable import is_connect

ANSI = "spark.sql.ansi.enabled"


@contextmanager
def unchecked_arithmetic(spark: SparkSession) -> Iterator[None]:
    """ANSI mode off while the block builds and runs its frames, the session's own setting back
    after (also when it raises). Nested blocks keep it off until the outermost ends. A Spark
    Connect session is left as it is (see the module docstring)."""
    if is_connect(spark):
        yield
        return
    previous = spark.conf.get(ANSI, None)
    spark.conf.set(ANSI, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(ANSI)
        else:
            spark.conf.set(ANSI, previous)
