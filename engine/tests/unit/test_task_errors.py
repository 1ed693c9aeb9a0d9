"""An error inside a snapshot task reaches the user as the Python exception that caused it, never
as a Java stack frame."""

from __future__ import annotations

from lakehouse_engine import errors
from lakehouse_engine.snapshot.reader import task_error

# As Py4JJavaError prints a task's Python failure: the Java wrapper, the Python traceback, then
# Java frames (one of which names SparkErrorUtils).
SPARK_TEXT = """An error occurred while calling o123.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 4.0 failed 1 times
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/acme_lakehouse/engine/snapshot/reader.py", line 301, in read_chunks
    cursor.execute(sql, params)
pymysql.err.OperationalError: (1054, "Unknown column 'birth_date' in 'field list'")

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:624)
\tat org.apache.spark.util.SparkErrorUtils.tryWithSafeFinally(SparkErrorUtils.scala:64)
Caused by: java.lang.IllegalStateException: task failed
"""


def test_a_task_failure_names_the_python_exception_not_a_java_frame():
    error = task_error(Exception(SPARK_TEXT), "customers")
    assert isinstance(error, errors.SourceUnavailableError)
    assert str(error) == (
        "reading a snapshot chunk of customers failed (pymysql.err.OperationalError: (1054, \"Unknown column "
        "'birth_date' in 'field list'\")): run again, finished chunks are kept")


def test_an_engine_error_inside_a_task_comes_back_as_itself():
    text = SPARK_TEXT.replace(
        "pymysql.err.OperationalError: (1054, \"Unknown column 'birth_date' in 'field list'\")",
        "acme.engine.errors.FatalError: table customers: a row image without every column")
    error = task_error(Exception(text), "customers")
    assert type(error) is errors.FatalError and str(error) == "table customers: a row image without every column"


def test_a_failure_without_a_python_traceback_points_to_the_log():
    error = task_error(Exception("org.apache.spark.SparkException: Job aborted\n\tat org.apache.Foo(Foo.scala:1)"), "t")
    assert "see target/lakehouse.log" in str(error)
